"""``python -m validation compare OUT/ --hw HW [--json] [--report]``: predicted vs simulated (vs measured),
with the cycle gap traced to the simulator's stall causes and PTX lines.

Flow: read ``OUT/plan.json`` (the planner's prediction) and ``OUT/kernel.ptx``; simulate the kernel with
``sim.timing.simulate`` (or read a saved ``python -m sim run --json`` result with ``--sim-json``);
build one plain report dict (:func:`build_report`, the input of ``reports.render``); print the
metric table and the gap attribution, whose largest cause becomes one sentence such as
``MAC idle 3.1% of cycles: 412 pipeline flushes at kernel.ptx:57 'bra LOOP_K', the loop exit mispredicted``.

Conventions: error = (predicted - simulated) / simulated for counts; fractions (utilization, hit
rates) differ in percentage points. A stall reason's share of the gap is (simulated - predicted)
cycles split in proportion to its stall cycles.

``benchmarks/accuracy.py`` runs this over the kernelgen case table on both hardware models and
writes ``docs/accuracy.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from sim.errors import UsageError, WorkbenchError
from sim.result import jsonable

REASON_LABEL = {
    "scoreboard": "register dependence (scoreboard)", "pipe_busy": "pipe busy (structural)",
    "bank_conflict": "shared-memory bank conflicts", "memory": "memory latency", "barrier": "barrier wait",
    "flush": "pipeline flushes (branch mispredictions)", "no_eligible": "no eligible warp",
    "branch": "branch resolution", "frontend": "front end (fetch/decode refill)",
}


# ------------------------------------------------------------------------------------------------
# inputs

def read_out_dir(out_dir: str | Path) -> tuple[Path, dict[str, Any]]:
    """(kernel.ptx path, plan.json object) of a kernelgen output folder; errors name the file."""
    out = Path(out_dir)
    if not out.is_dir():
        raise UsageError(f"{out} is not a directory: pass the -o folder of 'python -m kernelgen compile'")
    ptx, plan_path = out / "kernel.ptx", out / "plan.json"
    for p in (ptx, plan_path):
        if not p.is_file():
            raise UsageError(f"{p.name} missing; regenerate with 'python -m kernelgen compile ... -o {out}'",
                             file=str(p))
    try:
        plan = json.loads(plan_path.read_text())
    except json.JSONDecodeError as e:
        raise UsageError(f"malformed JSON ({e.msg}); regenerate the plan", file=str(plan_path), line=e.lineno) from None
    if not isinstance(plan, dict) or not isinstance(plan.get("prediction"), dict):
        raise UsageError("no 'prediction' object; regenerate with kernelgen", file=str(plan_path))
    return ptx, plan


def program_facts(prog: Any, kernel: str | None = None, hw: Any = None) -> dict[str, Any]:
    """What the explanations need of the PTX, keyed by source line:
    ``text`` {"57": "bra LOOP_K"}, ``branches`` {57: {label, target_line, backward, guarded}},
    ``pipe`` {"57": hw pipe name (or ISA class without hw)}."""
    k = prog.kernel(kernel) if kernel else next(iter(prog.kernels.values()))
    texts = {str(ins.line): " ".join(ins.text.rstrip(";").split()) for ins in k.body}
    pipes: dict[str, str] = {}
    for ins in k.body:
        name = ins.pipe
        if hw is not None and ins.pipe:
            try:
                name = hw.pipe_for(ins.pipe).name
            except KeyError:
                pass
        pipes[str(ins.line)] = name
    branches: dict[int, dict[str, Any]] = {}
    for ins in k.body:
        if ins.info["flow"] != "branch":
            continue
        label = next((o.name for o in ins.operands if o.kind == "label"), None)
        if label is None or label not in k.labels:
            continue
        tgt = k.labels[label]
        tline = k.body[tgt].line if tgt < len(k.body) else ins.line + 1
        branches[ins.line] = {"label": label, "target_line": tline, "backward": tgt <= ins.index,
                              "guarded": ins.guard is not None}
    return {"text": texts, "branches": branches, "pipe": pipes}


def hw_summary(hw: Any, variant: str = "mma") -> dict[str, Any]:
    """Plain facts of a HwConfig for reports: clock, cores, roofline peaks (FLOP/s, B/s), branch model."""
    from kernelgen.variants import get

    cls = get(variant).compute_class
    try:
        p = hw.pipe_for("tensor" if cls == "wgmma" else cls)
    except KeyError:
        p = hw.pipe_for("fma")
    macs_per_cycle = p.lanes * p.count * hw.core.count  # [pipes[].lanes] x [pipes[].count] x [core.count]
    if cls == "wgmma" and hw.wgmma is not None:  # [wgmma.f16_macs] per tensor unit (the variant's f16/bf16)
        macs_per_cycle = hw.wgmma.f16_macs * p.count * hw.core.count
    clock = hw.clock_mhz * 1e6  # [clock_mhz]
    return {
        "name": hw.name, "clock_mhz": hw.clock_mhz, "cores": hw.core.count,
        "schedulers": hw.core.schedulers * hw.core.count,
        "compute_pipe": p.name, "peak_flops": 2.0 * macs_per_cycle * clock,
        "dram_bandwidth": hw.dram.bandwidth_gbps * 1e9,  # [dram.bandwidth_gbps]
        "dram_bytes_per_cycle": hw.dram_bytes_per_cycle,
        "predictor": hw.branch.predictor, "flush_penalty": hw.branch.flush_penalty,
        "shared_banks": hw.shared.banks, "pipes": [q.name for q in hw.pipes],
        "max_threads": hw.core.max_threads, "warp_size": hw.warp_size,
        "schedulers_per_core": hw.core.schedulers,
    }


def simulate_kernel(ptx: Path, hw: Any, seed: int = 0, max_instructions: int = 20_000_000,
                    prog: Any = None, warm_l2: bool = False) -> dict[str, Any]:
    """Run the timing simulator on a kernelgen kernel (launch from its header); the result as JSON dict.
    warm_l2: the inputs start in the L2, as after their upload (sim.timing.memory.warm_l2)."""
    from sim.launch import launch_from_metadata, read_metadata
    from sim.ptx.parser import parse_file
    from sim.reference import check_from_metadata
    from sim.timing import simulate

    prog = prog or parse_file(str(ptx))
    meta = read_metadata(prog.text, str(ptx))
    if not meta:
        raise UsageError("no '// @workbench {...}' header: compare needs a kernelgen kernel", file=str(ptx), line=1)
    launch = launch_from_metadata(meta, np.random.default_rng(seed))
    before = launch.copy()
    res = simulate(prog, launch, hw, trace=False, max_instructions=max_instructions, warm_l2=warm_l2)
    out = dict(res.to_json())
    chk = check_from_metadata(meta, before, res.outputs) if hasattr(res, "outputs") else None
    if chk is not None:
        out["check"] = chk
    return out


def predicted_bank_passes(plan: dict[str, Any], hw: Any) -> tuple[float | None, str]:
    """Extra shared-memory passes the planner's cycle model charges for the whole launch.

    Counted as the simulator counts them (every pass beyond the first of a warp's shared access, so
    a conflict-free 16-byte ldmatrix.x4 has 3): kernelgen's passes per warp per K tile
    (kernelgen.models.schedule.shared_passes) x K tiles x warps x CTAs. Returns (None, why) when the
    plan cannot be rebuilt.
    """
    try:
        from kernelgen.models.schedule import shared_passes
        from kernelgen.spec import parse_spec
        from kernelgen.tiling import Tiling
        from kernelgen.variants import get

        t = plan["tiling"]
        tm, tn = t[get(t["variant"]).tile_label]
        til = Tiling(t["variant"], t["TILE_M"], t["TILE_N"], t["TILE_K"], tm, tn, t["stages"], t["pad"][0],
                     t["pad"][1], t["vector"][0], t["vector"][1], t.get("unroll_k", 0), t.get("mma_k", 16))
        spec = parse_spec(plan["spec"], "plan.json")
        sp = shared_passes(spec, til, hw)
        M, N, K = plan.get("shape") or spec.nominal()
        ktiles = -(-K // til.bk)
        ctas = -(-M // til.bm) * -(-N // til.bn)
        warps = -(-til.threads // hw.warp_size)
        return (float((sp.comp_extra + sp.copy_extra) * ktiles * warps * ctas),
                "kernelgen's shared passes beyond the first per access x K tiles x warps x CTAs")
    except Exception as e:  # noqa: BLE001 - a plan from another version: report the metric as unknown
        return None, f"cannot rebuild the bank model ({type(e).__name__})"


# ------------------------------------------------------------------------------------------------
# comparison

def _rel(p: Any, s: Any) -> float | None:
    if not isinstance(p, int | float) or not isinstance(s, int | float):
        return None
    if s == 0:
        return 0.0 if p == 0 else None
    return (p - s) / s


def _pp(p: Any, s: Any) -> float | None:
    if not isinstance(p, int | float) or not isinstance(s, int | float):
        return None
    return float(p) - float(s)


def _scalar(v: Any) -> float | None:
    """A number from a scalar, a list (mean) or a {mean|max} dict."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int | float):
        return float(v)
    if isinstance(v, list) and v and all(isinstance(x, int | float) for x in v):
        return float(sum(v) / len(v))
    if isinstance(v, dict):
        for k in ("mean", "avg", "max"):
            if isinstance(v.get(k), int | float):
                return float(v[k])
    return None


def _row(metric: str, unit: str, pred: Any, sim: Any, kind: str = "rel", note: str = "",
         measured: Any = None) -> dict[str, Any]:
    err = _pp(pred, sim) if kind == "pp" else _rel(pred, sim)
    return {"metric": metric, "unit": unit, "predicted": pred, "simulated": sim, "measured": measured,
            "error": err, "error_kind": kind, "note": note}


def metric_rows(pred: dict[str, Any], sim: dict[str, Any], hw: dict[str, Any],
                measured: dict[str, Any] | None = None, bank_pred: float | None = None,
                bank_note: str = "") -> list[dict[str, Any]]:
    """Per metric: predicted, simulated (measured), error; each pair on the same definition."""
    rows = []
    mcyc = None
    if measured and isinstance(measured.get("time_ms"), int | float):
        mcyc = measured["time_ms"] * 1e-3 * hw["clock_mhz"] * 1e6
    rows.append(_row("cycles", "cycles", pred.get("cycles"), sim.get("cycles"), measured=mcyc,
                     note="total, all CTAs"))
    cta_meas = _scalar((measured or {}).get("per_cta_cycles"))
    rows.append(_row("cycles per CTA", "cycles", pred.get("cycles_per_cta"), _scalar(sim.get("cycles_per_cta")),
                     measured=cta_meas, note="simulated: mean over CTAs"))
    # The planner divides by all cores ([core.count]); sim.timing by the cores it ran CTAs on.
    used = cores_in_use(sim, hw)
    scale = hw.get("cores", 1) / used
    note = f"prediction rescaled to the {used} of {hw.get('cores')} cores in use" if scale != 1 else ""
    pu, su = pred.get("utilization") or {}, sim.get("utilization") or {}
    units = [u for u in hw.get("pipes", []) if u in pu or u in su]
    for u in units:
        pv = pu.get(u)
        pv = min(1.0, pv * scale) if isinstance(pv, int | float) else pv
        rows.append(_row(f"{u} utilization", "fraction", pv, su.get(u), "pp", note))
    bw_sim = None
    if isinstance(sim.get("dram_bytes"), int | float) and sim.get("cycles"):
        bw_sim = sim["dram_bytes"] / (sim["cycles"] * hw["dram_bytes_per_cycle"])
    rows.append(_row("DRAM bandwidth utilization", "fraction", pred.get("bandwidth_utilization", pu.get("dram")),
                     bw_sim, "pp", note="DRAM bytes / (cycles x dram.bandwidth_gbps / clock_mhz)"))
    rows.append(_row("DRAM bytes", "bytes", pred.get("dram_bytes"), sim.get("dram_bytes")))
    cache = sim.get("cache") or {}
    rows.append(_row("L2 hit rate", "fraction", pred.get("l2_hit_rate"), cache.get("l2_hit_rate"), "pp"))
    conf = sim.get("bank_conflicts_by_line")
    sim_conf = float(sum(conf.values())) if isinstance(conf, dict) else None
    rows.append(_row("bank-conflict extra passes", "passes", bank_pred, sim_conf,
                     note=bank_note + (f"; planner score {pred['bank_conflict_score']:g}"
                                       if isinstance(pred.get("bank_conflict_score"), int | float) else "")))
    regs_meas = (measured or {}).get("registers") or (measured or {}).get("registers_per_thread")
    rows.append(_row("registers per thread", "registers", pred.get("registers_per_thread"), None,
                     measured=regs_meas,
                     note="the simulator runs PTX virtual registers; ptxas on the GPU side allocates them"))
    occ = sim.get("occupancy")
    sim_occ = _scalar(occ)
    if isinstance(occ, dict) and isinstance(occ.get("warps_per_core"), int | float):
        sim_occ = min(1.0, occ["warps_per_core"] * hw.get("warp_size", 32) / max(1, hw.get("max_threads", 1)))
    # the planner's own occupancy uses its ptxas register estimate (what the GPU runs); the simulator
    # sizes residency from the PTX-declared registers, and so does the prediction it is held against
    pred_occ = pred.get("occupancy_simulator", pred.get("occupancy"))
    if pred_occ is not None or sim_occ is not None:
        lim = f"simulator: limited by {occ.get('limiter')}" if isinstance(occ, dict) and occ.get("limiter") else ""
        if "occupancy_simulator" in pred and pred.get("occupancy") is not None:
            lim = (lim + "; " if lim else "") + f"on the GPU (ptxas registers): {100 * pred['occupancy']:.1f}%"
        rows.append(_row("occupancy", "fraction", pred_occ, sim_occ, "pp", lim))
    return rows


def _where(kernel_file: str, line: Any, text: str) -> str:
    return f"{kernel_file}:{line} '{text}'" if line is not None else "(no line recorded)"


def _top_lines(sim: dict[str, Any], reason: str, texts: dict[str, str], n: int = 3) -> list[dict[str, Any]]:
    by_line = sim.get("stalls_by_line") or {}
    rows = [(ln, float((d or {}).get(reason, 0))) for ln, d in by_line.items()]
    if reason == "bank_conflict" and not any(v for _, v in rows):
        rows = [(ln, float(v)) for ln, v in (sim.get("bank_conflicts_by_line") or {}).items()]
    rows = sorted((r for r in rows if r[1] > 0), key=lambda r: -r[1])[:n]
    return [{"line": int(ln), "text": texts.get(str(ln), ""), "cycles": v} for ln, v in rows]


def explain(reason: str, cyc: float, sim: dict[str, Any], facts: dict[str, Any], hw: dict[str, Any],
            kernel_file: str = "kernel.ptx") -> dict[str, Any]:
    """One cause: its top PTX line and a sentence that says what happened there and why."""
    texts, branches = facts.get("text", {}), facts.get("branches", {})
    pipes = facts.get("pipe", {})
    top = _top_lines(sim, reason, texts)
    line = top[0]["line"] if top else None
    text = top[0]["text"] if top else ""
    count = None
    if reason == "flush":
        fl = [f for f in (sim.get("flushes") or []) if isinstance(f, dict)]
        line = None
        if fl:
            f0 = max(fl, key=lambda f: f.get("count", 0))
            line, count = int(f0["line"]), int(f0.get("count", 0))
            text = texts.get(str(line)) or " ".join(str(f0.get("text", "")).rstrip(";").split())
        br = branches.get(line or -1)
        pred = hw.get("predictor")
        n = f"{count:,} pipeline flushes" if count is not None else f"{cyc:,.0f} flush cycles"
        if br and br["backward"] and pred == "backward_taken":
            why = (f"the loop exit mispredicted (the backward-taken predictor guesses another iteration; "
                   f"each exit refills the front end, {hw.get('flush_penalty')} cycles)")
        elif br and not br["backward"] and pred in ("backward_taken", "not_taken"):
            why = "a taken forward branch mispredicted (the static predictor guesses fall-through)"
        elif pred == "none":
            why = "the warp waits for each branch to resolve (no predictor)"
        else:
            why = "a mispredicted branch"
        lost = sum(int(f.get("cycles", 0)) for f in fl if f.get("line") == line)
        # the stall cycles are counted for all branches together: this line's share of them
        shown = cyc * lost / max(1, sum(int(f.get("cycles", 0)) for f in fl))
        hidden = f"; {lost:,} warp-cycles lost, {shown:,.0f} of them not hidden by other warps" if lost else ""
        detail = f"{n} at {_where(kernel_file, line, text)}, {why}{hidden}"
    elif reason == "bank_conflict":
        conf = sim.get("bank_conflicts_by_line") or {}
        extra = conf.get(str(line), conf.get(line)) if line is not None else None
        n = f"{float(extra):,.0f} extra shared-memory passes" if extra is not None else f"{cyc:,.0f} cycles"
        detail = (f"{n} at {_where(kernel_file, line, text)}: several lanes of one access hit the same bank "
                  f"(the shared tile's row stride is a multiple of {hw.get('shared_banks', 32)} banks); "
                  "pad or swizzle the layout")
    elif reason == "memory":
        cache = sim.get("cache") or {}
        l2 = cache.get("l2_hit_rate")
        detail = (f"{cyc:,.0f} cycles waiting on memory at {_where(kernel_file, line, text)}"
                  + (f" (L2 hit rate {100 * l2:.0f}%)" if isinstance(l2, int | float) else "")
                  + ", latency the pipeline did not hide")
    elif reason in ("branch", "frontend"):
        what = "waiting for a branch to resolve" if reason == "branch" else "refilling the fetch/decode front end"
        detail = f"{cyc:,.0f} cycles {what}" + (f" at {_where(kernel_file, line, text)}" if line else "")
    elif reason == "scoreboard":
        detail = f"{cyc:,.0f} cycles waiting on a register result at {_where(kernel_file, line, text)} (RAW dependence)"
    elif reason == "pipe_busy":
        pipe = pipes.get(str(line), "its")
        detail = (f"{cyc:,.0f} cycles in which {_where(kernel_file, line, text)} was ready but the {pipe} pipe "
                  "was still busy (structural hazard: the pipe is the bottleneck here)")
    elif reason == "barrier":
        detail = f"{cyc:,.0f} cycles of warps waiting at {_where(kernel_file, line, text)} for the slowest warp"
    elif reason == "no_eligible":
        detail = f"{cyc:,.0f} cycles with no warp eligible to issue (too few resident warps to hide latency)"
    else:
        detail = f"{cyc:,.0f} cycles of {reason} at {_where(kernel_file, line, text)}"
    return {"reason": reason, "label": REASON_LABEL.get(reason, reason), "line": line, "text": text,
            "count": count, "detail": detail, "top_lines": top, "pipe": pipes.get(str(line))}


def cores_in_use(sim: dict[str, Any], hw: dict[str, Any]) -> int:
    """Cores the simulator ran CTAs on: min(cores, ceil(CTAs / CTAs per core)), as sim.timing places them."""
    occ_raw = sim.get("occupancy")
    occ = occ_raw if isinstance(occ_raw, dict) else {}
    per = max(1, int(occ.get("ctas_per_core") or 1))
    ctas = int(sim.get("ctas_simulated") or sim.get("ctas_total") or len(sim.get("cycles_per_cta") or []) or 1)
    return max(1, min(int(hw.get("cores", 1)), -(-ctas // per)))


def stall_slots(sim: dict[str, Any], hw: dict[str, Any]) -> float:
    """Denominator of '% of cycles': stalls are scheduler cycles without an issue, so
    simulated cycles x schedulers per core x cores in use ([core.schedulers], [core.count])."""
    cyc = float(sim.get("cycles") or 0)
    return max(1.0, cyc * int(hw.get("schedulers_per_core", 1)) * cores_in_use(sim, hw))


def attribute_gap(pred: dict[str, Any], sim: dict[str, Any], facts: dict[str, Any], hw: dict[str, Any],
                  kernel_file: str = "kernel.ptx") -> tuple[list[dict[str, Any]], str, dict[str, Any]]:
    """Split the cycle gap into stall causes (largest first); returns (causes, headline, gap).

    The headline names the largest cause the model does not already predict: stalls on the busy
    pipe the planner said bounds the kernel (``prediction.bound``) are the prediction itself."""
    p, s = pred.get("cycles"), sim.get("cycles")
    gap_cycles = (s - p) if isinstance(p, int | float) and isinstance(s, int | float) else 0
    gap = {"predicted": p, "simulated": s, "cycles": gap_cycles, "relative": _rel(p, s) or 0.0}
    stalls = {k: float(v) for k, v in (sim.get("stalls") or {}).items()
              if isinstance(v, int | float) and v > 0}
    total = sum(stalls.values())
    denom = stall_slots(sim, hw)
    causes = []
    for reason in sorted(stalls, key=lambda r: -stalls[r]):
        c = explain(reason, stalls[reason], sim, facts, hw, kernel_file)
        c["cycles"] = stalls[reason]
        c["fraction_of_cycles"] = stalls[reason] / denom
        c["share_of_gap"] = gap_cycles * stalls[reason] / total if total else 0.0
        causes.append(c)
    bound = str(pred.get("bound") or hw.get("compute_pipe") or "core")
    unit = bound.upper()
    for c in causes:  # the bound pipe being busy is the prediction itself, not a gap
        c["modelled"] = c["reason"] == "pipe_busy" and c.get("pipe") == bound
    if causes:
        c = next((c for c in causes if not c["modelled"]), causes[0])
        pct = f"{100 * c['fraction_of_cycles']:.1f}% of cycles"
        bank = next((b for b in causes if b["reason"] == "bank_conflict"), None)
        conf = sim.get("bank_conflicts_by_line") or {}
        busy_line_conflicts = c.get("line") is not None and (str(c["line"]) in conf or c["line"] in conf)
        if c["reason"] == "pipe_busy" and bank and bank.get("pipe") == c.get("pipe") \
                and (bank["cycles"] >= 0.5 * c["cycles"] or busy_line_conflicts):
            # the pipe is busy replaying conflicting shared-memory passes (its busiest line conflicts)
            c["root_cause"] = "bank_conflict"
            headline = f"{str(c['pipe']).upper()} saturated, issue blocked {pct} by bank conflicts: {bank['detail']}"
        elif c["reason"] == "pipe_busy" and c.get("pipe"):
            headline = f"{str(c['pipe']).upper()} saturated, issue blocked {pct}: {c['detail']}"
        else:
            headline = f"{unit} idle {pct}: {c['detail']}"
    else:
        headline = "the simulator recorded no stall cycles"
    return causes, headline, gap


def build_report(plan: dict[str, Any], sim: dict[str, Any], hw: dict[str, Any], facts: dict[str, Any],
                 measured: dict[str, Any] | None = None,
                 bank_pred: float | None = None, bank_note: str = "",
                 kernel_file: str = "kernel.ptx") -> dict[str, Any]:
    """The plain report dict (``reports.render``'s input, ``--json``'s output)."""
    pred = plan.get("prediction") or {}
    shape = plan.get("shape") or [0, 0, 0]
    rows = metric_rows(pred, sim, hw, measured, bank_pred, bank_note)
    causes, headline, gap = attribute_gap(pred, sim, facts, hw, kernel_file)
    flops = 2.0 * shape[0] * shape[1] * shape[2]
    clock = hw["clock_mhz"] * 1e6
    pts = []
    for label, cyc, dram in (("predicted", pred.get("cycles"), pred.get("dram_bytes")),
                             ("simulated", sim.get("cycles"), sim.get("dram_bytes"))):
        if cyc and dram:
            pts.append({"label": label, "intensity": flops / dram, "flops_per_s": flops / (cyc / clock)})
    if measured and measured.get("time_ms") and (sim.get("dram_bytes") or pred.get("dram_bytes")):
        dram = sim.get("dram_bytes") or pred.get("dram_bytes")
        pts.append({"label": "measured", "intensity": flops / dram,
                    "flops_per_s": flops / (measured["time_ms"] * 1e-3)})
    branch_note = ""
    if sim.get("flushes"):
        fc = next((c for c in causes if c["reason"] == "flush"), None) or \
            explain("flush", 0.0, sim, facts, hw, kernel_file)
        branch_note = fc["detail"]
    tiling = (plan.get("tiling") or {}).get("key", "")
    title = f"{'x'.join(map(str, shape))} {tiling} on {hw['name']}"
    used = {str(c["line"]) for c in causes if c.get("line") is not None}
    used |= {str(ln) for ln in (sim.get("stalls_by_line") or {})}
    return {"title": title, "kernel_file": kernel_file, "tiling": tiling, "shape": shape, "flops": flops,
            "hw": hw, "prediction": pred, "simulated": sim, "measured": measured, "metrics": rows,
            "gap": gap, "causes": causes, "headline": headline, "branch_note": branch_note, "check": sim.get("check"),
            "line_text": {k: v for k, v in facts.get("text", {}).items() if k in used}, "roofline_points": pts}


def format_text(rep: dict[str, Any]) -> str:
    from reports.text import fmt_error, fmt_value

    has_meas = any(r.get("measured") is not None for r in rep["metrics"])
    out = [f"{rep['kernel_file']} on {rep['hw']['name']}: GEMM {'x'.join(map(str, rep['shape']))}, {rep['tiling']}"]
    hdr = f"{'metric':<30} {'predicted':>14} {'simulated':>14}" + (f" {'measured':>14}" if has_meas else "")
    out.append(hdr + f" {'error':>10}")
    for r in rep["metrics"]:
        u = r.get("unit", "")
        line = f"{r['metric']:<30} {fmt_value(r['predicted'], u):>14} {fmt_value(r['simulated'], u):>14}"
        if has_meas:
            line += f" {fmt_value(r.get('measured'), u):>14}"
        out.append(line + f" {fmt_error(r):>10}")
    g = rep["gap"]
    out.append("")
    out.append(f"cycle gap: simulated - predicted = {g['cycles']:+,} cycles "
               f"(prediction error {100 * g['relative']:+.1f}%)")
    if rep["causes"]:
        out.append(f"{'cause':<44} {'stall cycles':>13} {'% cycles':>9} {'gap share':>10}  top line")
        for c in rep["causes"]:
            text = c["text"] if len(c["text"]) <= 60 else c["text"][:57] + "..."
            where = f"{rep['kernel_file']}:{c['line']} '{text}'" if c.get("line") is not None else ""
            out.append(f"{c['label']:<44} {c['cycles']:>13,.0f} {100 * c['fraction_of_cycles']:>8.1f}% "
                       f"{c['share_of_gap']:>+10,.0f}  {where}")
    out.append("")
    out.append(f"largest: {rep['headline']}")
    if rep.get("branch_note"):
        out.append(f"branches: {rep['branch_note']}")
    chk = rep.get("check")
    if chk:
        out.append(f"numerical check: {'passed' if chk.get('passed') else 'FAILED'} "
                   f"(max rel err {chk.get('max_rel_err', float('nan')):.2e})")
    return "\n".join(out)


def compare_dir(out_dir: str | Path, hw_name: str | None, sim_json: str | None = None, measured_json: str | None = None,
                seed: int = 0, max_instructions: int = 20_000_000, warm_l2: bool = False) -> dict[str, Any]:
    """Everything ``compare OUT/`` does except printing and rendering (warm_l2: simulate_kernel's)."""
    from sim.hw import load_hw
    from sim.launch import read_metadata
    from sim.ptx.parser import parse_file

    ptx, plan = read_out_dir(out_dir)
    plan_hw = (plan.get("hw") or {}).get("name")
    hw_ref = hw_name or plan_hw
    if not hw_ref:
        raise UsageError("plan.json names no hardware: pass --hw (e.g. npu7nm.yaml)", file=str(Path(out_dir)))
    hw = load_hw(hw_ref)
    if plan_hw and plan_hw != hw.name:
        raise UsageError(f"the plan was made for {plan_hw}, not {hw.name}: pass --hw {plan_hw} or recompile",
                         file=str(Path(out_dir) / "plan.json"))
    prog = parse_file(str(ptx))
    meta = read_metadata(prog.text, str(ptx)) or {}
    facts = program_facts(prog, meta.get("kernel"), hw)
    if sim_json:
        sim = _read_json(sim_json, "simulator result")
        if not isinstance(sim.get("cycles"), int | float):
            raise UsageError("no 'cycles': this is not a timing result (was it run with --functional?)",
                             file=sim_json)
    else:
        sim = simulate_kernel(ptx, hw, seed, max_instructions, prog, warm_l2)
    measured = _read_json(measured_json, "measured result") if measured_json else None
    variant = (plan.get("tiling") or {}).get("variant", "mma")
    hs = hw_summary(hw, variant)
    bank_pred, note = predicted_bank_passes(plan, hw)
    return build_report(plan, sim, hs, facts, measured, bank_pred, note, ptx.name)


def _read_json(path: str, what: str) -> dict[str, Any]:
    try:
        d = json.loads(Path(path).read_text())
    except OSError as e:
        raise UsageError(f"cannot read {what}: {e.strerror}", file=path) from None
    except json.JSONDecodeError as e:
        raise UsageError(f"malformed JSON ({e.msg})", file=path, line=e.lineno) from None
    if not isinstance(d, dict):
        raise UsageError(f"{what} must be one JSON object", file=path)
    return d


# ------------------------------------------------------------------------------------------------
# command line

def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("out", help="a 'python -m kernelgen compile -o' folder (kernel.ptx + plan.json)")
    p.add_argument("--hw", help="hardware YAML: a path or a bundled name (default: the one in plan.json)")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    p.add_argument("--report", action="store_true", help="write OUT/report.md, OUT/report.html and OUT/*.png")
    p.add_argument("--sim-json", help="use a saved 'python -m sim run --json' result instead of simulating")
    p.add_argument("--measured", help="a 'python -m validation gpu --json' result to add as a third column")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    p.add_argument("--max-instructions", type=int, default=20_000_000, help="simulator endless-loop guard")


def cli_main(args: argparse.Namespace) -> int:
    rep = compare_dir(args.out, args.hw, args.sim_json, args.measured, args.seed, args.max_instructions)
    if args.report:
        from reports import render

        paths = render(args.out, rep)
        rep["files"] = {k: str(v) for k, v in paths.items()}
    if args.json:
        print(json.dumps(rep, default=jsonable))
    else:
        print(format_text(rep))
        if args.report:
            print(f"wrote {', '.join(sorted(Path(v).name for v in rep['files'].values()))} in {args.out}",
                  file=sys.stderr)
    return 0




__all__ = ["build_report", "attribute_gap", "metric_rows", "compare_dir", "hw_summary", "program_facts",
           "format_text", "explain", "WorkbenchError"]
