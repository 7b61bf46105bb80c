"""Does the planner pick the fastest of its own top 4? (issue "Silicon fidelity", item 4; issue 14)

    python3 benchmarks/top4.py compile [--dir .top4]             # here: plan, emit the 4 best (--profile)
    (device) python3 benchmarks/top4.py gpu --dir .top4 --out $OUT  # time each on the H200 + per-CTA cycles
    python3 benchmarks/top4.py table --measured benchmarks/data/top4_<date>.json   # -> docs/top4.md
    (device) python3 benchmarks/top4.py run --table bench --out $OUT   # compile + gpu in one go (issue 14's table)

For each shape of validation.cases.TOP4_SHAPES (f16, h200.yaml, the whole candidate space of every
variant) the four survivors the planner ranks best are emitted with per-CTA clock64 slots. On the GPU
each runs from the same PTX: one checked launch right after the inputs' upload (its per-CTA cycles),
3 warm-up launches, then the median of 30 timed launches (CUDA events); cuBLAS (torch.matmul) in the
same run. The pick "holds" when its measured time is within 5% of the fastest of the four.

--table bench: issue 14's table (validation.cases.BENCH_SHAPES), bf16 and f16 with D of the input type, the
pick of the default search (wgmma_tma there); a persistent wgmma_tma kernel's profile is one record per CTA
(start, tile walk start, after its last K loop, end) and its CTAs walk different numbers of tiles, so its
measured per-CTA cycles are the mean over the CTAs that walk the most tiles (the ones the prediction is for).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from validation.cases import TOP4_SHAPES  # noqa: E402 - the one GEMM case table

if TYPE_CHECKING:
    from kernelgen.planner import Evaluated
    from kernelgen.spec import GemmSpec

TOP = 4


TABLES = {"top4": (("f16", "f32"),), "bench": (("bf16", "bf16"), ("f16", "f16"))}


def cases(table: str) -> list[tuple[str, str, tuple[int, ...]]]:
    """(dtype, D dtype, shape) of a table: top4 (f16 -> f32 over TOP4_SHAPES) or bench (BENCH_SHAPES, bf16 and
    f16 with D of the input type, M <= 128 first: the shapes whose prediction is in question)."""
    from validation.cases import BENCH_SHAPES

    if table == "top4":
        return [("f16", "f32", s) for s in TOP4_SHAPES]
    shapes = sorted(BENCH_SHAPES, key=lambda s: (s[0] > 128, s))
    return [(dt, out, s) for s in shapes for dt, out in TABLES["bench"]]


def case_dir(d: Path, dtype: str, out: str, shape: tuple[int, ...]) -> Path:
    name = "x".join(map(str, shape))
    return d / name if (dtype, out) == ("f16", "f32") else d / f"{dtype}_{out}_{name}"


def parse_case(name: str) -> tuple[str, str, tuple[int, ...]]:
    """case_dir's inverse: (dtype, D dtype, shape) of a directory name."""
    parts = name.split("_")
    dtype, out = (parts[0], parts[1]) if len(parts) == 3 else ("f16", "f32")
    return dtype, out, tuple(int(x) for x in parts[-1].split("x"))


def compile_case(d: Path, dtype: str, out_dtype: str, shape: tuple[int, ...]) -> list[str]:
    """Plan one case and emit its TOP survivors with --profile into case_dir/rank/{kernel.ptx, meta.json}."""
    from kernelgen.planner import plan, prediction_dict
    from kernelgen.spec import shorthand
    from kernelgen.variants import get
    from sim.hw import load_hw

    hw = load_hw("h200")
    spec = shorthand("x".join(map(str, shape)), dtype, out_dtype)
    p = plan(spec, hw)
    for rank, ev in enumerate(p.survivors[:TOP]):
        q = dataclasses.replace(p, best=ev)
        pred = prediction_dict(q)
        out = case_dir(d, dtype, out_dtype, shape) / str(rank)
        out.mkdir(parents=True, exist_ok=True)
        (out / "kernel.ptx").write_text(get(ev.tiling.variant).emit(spec, ev.tiling, pred, profile=True))
        (out / "meta.json").write_text(json.dumps({"shape": list(shape), "dtype": dtype, "out_dtype": out_dtype,
                                                   "rank": rank, "tiling": ev.tiling.key(),
                                                   "predicted_cycles": ev.cycles,
                                                   "predicted_cycles_per_cta": ev.cycles_per_cta,
                                                   **_phases(ev, shape)}))
    return [ev.tiling.key() for ev in p.survivors[:TOP]]


def cmd_compile(d: Path, table: str = "top4", jobs: int = 1) -> None:
    from concurrent.futures import ProcessPoolExecutor

    todo = cases(table)
    if jobs <= 1:
        done = [compile_case(d, *c) for c in todo]
    else:
        with ProcessPoolExecutor(jobs) as ex:
            done = list(ex.map(compile_case, [d] * len(todo), *zip(*todo)))
    for (dt, out, shape), keys in zip(todo, done):
        print("compiled", dt, out, "x".join(map(str, shape)), keys, flush=True)


def _phases(ev, shape: tuple[int, ...]) -> dict:
    """The planner's per-CTA prologue, K loop (K tiles x one iteration) and epilogue cycles. A persistent CTA
    (wgmma_tma: terms per_tile, fill) as its profile slots split it: setup (the prologue less the first stage's
    fill), the tile walk up to the last K loop's end (fill, tiles x per tile, less the last epilogue), the last
    epilogue and the store tail; and per_tile / base for a CTA of n tiles: base + n x per_tile."""
    cm = ev.model
    ktiles = -(-shape[2] // ev.tiling.bk)
    terms = getattr(cm, "terms", None) or {}
    if "per_tile" in terms and "fill" in terms:
        n = terms["tiles_per_cta"]
        tail = terms.get("store_tail", 0.0)
        setup = cm.pre_cycles - terms["fill"]
        walk = terms["fill"] + n * terms["per_tile"] - cm.post_cycles
        return {"predicted_phases": [round(setup), round(walk), round(cm.post_cycles + tail)],
                "predicted_per_tile": round(terms["per_tile"]), "predicted_base": round(cm.pre_cycles + tail),
                "predicted_k_tile": round(cm.iter_cycles), "predicted_tiles_per_cta": int(n)}
    return {"predicted_phases": [round(cm.pre_cycles), round(ktiles * cm.iter_cycles), round(cm.post_cycles)]}


def at_clock(row: dict, clock_mhz: float) -> int | None:
    """The row's kernel (same tiling key) predicted per CTA with the SM at `clock_mhz` (h200.yaml's clock_mhz
    replaced): the model's bandwidths are bytes per second, its latencies and per-SM rates cycles, so the cycles
    a bandwidth-bound phase takes follow the clock the run had (clock64 / %globaltimer)."""
    from kernelgen.spec import shorthand
    from kernelgen.variants import MODULES

    spec = shorthand("x".join(map(str, row["shape"])), row.get("dtype", "f16"), row.get("out_dtype", "f32"))
    variant = max((v for v in MODULES if row["tiling"].startswith(v + "_")), key=len, default=None)
    if variant is None:
        return None
    ev = plan_at_clock(spec, variant, row["tiling"], clock_mhz)
    return None if ev is None else ev.cycles_per_cta


def plan_at_clock(spec: GemmSpec, variant: str, key: str, clock_mhz: float) -> Evaluated | None:
    """The planner's evaluation of `variant`'s tiling `key` for `spec` with h200.yaml's SM clock replaced by
    `clock_mhz` and no planner clock (at_clock; benchmarks/fp8_cta.py), or None where the variant has no such
    tiling."""
    from kernelgen.planner import plan
    from kernelgen.variants import get
    from sim.hw import load_hw

    hw = dataclasses.replace(load_hw("h200"), clock_mhz=float(clock_mhz), planner_clock_mhz=None)
    ts = [t for t in get(variant).tilings(spec) if t.key() == key]
    return plan(spec, hw, variant, only=ts).best if ts else None


def per_cta_measured(row: dict, cta: list[int], tiles: list[int] | None, ns: list[int] | None = None) -> None:
    """measured_cycles_per_cta into `row`: the mean clock64 span over the CTAs, or (a persistent kernel, whose
    header gives each CTA's tile count) over the CTAs that walk the most tiles; with their count and the mean of
    all CTAs beside it."""
    if not cta:
        row.update(measured_cycles_per_cta=None, measured_cycles_per_cta_max=None)
        return
    sel = cta
    if tiles and len(tiles) == len(cta):
        top = max(tiles)
        sel = [c for c, n in zip(cta, tiles) if n == top]
        row.update(measured_tiles_per_cta=top, measured_ctas_at_top=len(sel),
                   measured_cycles_per_cta_all=float(np.mean(cta)),
                   measured_cycles_per_cta_min=int(min(sel)))
        if ns and len(ns) == len(cta):  # the SM clock: clock64 span / %globaltimer span of each busiest CTA
            mhz = [c / t * 1e3 for c, t, n in zip(cta, ns, tiles) if n == top and t > 0]
            if mhz:
                row["measured_clock_mhz"] = float(np.median(mhz))
    row.update(measured_cycles_per_cta=float(np.mean(sel)), measured_cycles_per_cta_max=int(max(sel)))


def cmd_gpu(d: Path, out: Path, repeats: int, check_limit: float = 4096**3, budget: float = 0.0,
            last: bool = False) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from gpu_bench import cublas_tflops, run_kernel  # noqa: E402

    from sim.launch import read_metadata

    rows = []
    t0 = time.time()
    order = {c: i for i, c in enumerate(cases("bench") + cases("top4"))}
    sdirs = sorted((p for p in d.iterdir() if p.is_dir()), key=lambda p: order.get(parse_case(p.name), -1))
    for sdir in sdirs:
        dtype, out_dtype, shape = parse_case(sdir.name)
        M, N, K = shape
        inputs: dict = {}  # the case's random A and B (and C), drawn once for its four kernels
        for kdir in sorted(p for p in sdir.iterdir() if p.is_dir()):
            meta = json.loads((kdir / "meta.json").read_text())
            row = dict(meta)
            if budget and time.time() - t0 > budget:
                row["error"] = f"skipped: the run's {budget:.0f} s budget was spent"
                rows.append(row)
                continue
            try:
                ptx = kdir / "kernel.ptx"
                r = run_kernel(ptx, repeats, check=M * N * K <= check_limit, inputs=inputs, last=last)
                cta = r.pop("per_cta_cycles") or []
                ns = r.pop("per_cta_ns", None)
                prof = (read_metadata(ptx.read_text()) or {}).get("profile") or {}
                row.update(r)
                per_cta_measured(row, cta, prof.get("tiles_per_cta"), ns)
                row["per_cta_ns"] = ns
                row["per_cta_cycles"] = cta
            except Exception as e:  # noqa: BLE001 - record and go on
                row["error"] = f"{type(e).__name__}: {e}"[:400]
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if k not in ("prediction", "per_cta_cycles", "per_cta_ns")})
                  [:400],
                  flush=True)
        rows.append({"shape": list(shape), "dtype": dtype,
                     "cublas_tflops": cublas_tflops(M, N, K, dtype, repeats)
                     if not (budget and time.time() - t0 > budget) else None})
    for row in rows:  # the prediction at the clock the run had (cheap: one tiling each)
        if row.get("measured_clock_mhz"):
            try:
                row["predicted_at_clock"] = at_clock(row, row["measured_clock_mhz"])
            except Exception as e:  # noqa: BLE001 - informative only
                row["predicted_at_clock_error"] = f"{type(e).__name__}: {e}"[:200]
    res = {"date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
           "load_average": os.getloadavg()[0], "repeats": repeats, "seconds": time.time() - t0, "rows": rows}
    out.mkdir(parents=True, exist_ok=True)
    (out / "top4.json").write_text(json.dumps(res, indent=1))
    print(summary(rows), flush=True)


def summary(rows: list[dict]) -> str:
    """One line per (dtype, shape): does the pick hold (within 5% of the fastest of the four) and each rank's
    predicted / measured per-CTA cycles."""
    lines = []
    for dt, shape in dict.fromkeys((r.get("dtype", "f16"), tuple(r["shape"])) for r in rows if "rank" in r):
        grp = sorted((r for r in rows if "rank" in r and r.get("time_ms") and r.get("dtype", "f16") == dt
                      and tuple(r["shape"]) == shape), key=lambda r: r["rank"])
        name = f"{dt} {'x'.join(map(str, shape))}"
        if not grp or grp[0]["rank"] != 0:
            lines.append(f"{name}: pick not timed")
            continue
        best = min(r["time_ms"] for r in grp)
        ratio = []
        for r in grp:
            mc = r.get("measured_cycles_per_cta")
            at = (f" ({r['predicted_at_clock'] / mc:.2f} at {r['measured_clock_mhz']:.0f} MHz)"
                  if mc and r.get("predicted_at_clock") else "")
            ratio.append(f"{r['predicted_cycles_per_cta'] / mc:.2f}{at}" if mc else "-")
        held = "holds" if grp[0]["time_ms"] <= 1.05 * best else "MISSES"
        lines.append(f"{name}: pick {held} ({grp[0]['time_ms'] / best:.3f} x best); pred/meas per CTA by rank "
                     f"{', '.join(ratio)}")
    return "\n".join(lines)


def repredict(rows: list[dict]) -> str:
    """Replace each measured candidate's prediction with the current planner's (same tiling key, same
    emitted PTX), and its rank with the current ranking's; returns the planner's commit for the doc."""
    import subprocess

    from kernelgen.planner import plan
    from kernelgen.spec import shorthand
    from sim.hw import load_hw

    hw = load_hw("h200")
    for dt, out, shape in dict.fromkeys((r.get("dtype", "f16"), r.get("out_dtype", "f32"), tuple(r["shape"]))
                                        for r in rows):
        p = plan(shorthand("x".join(map(str, shape)), dt, out), hw)
        by_key = {ev.tiling.key(): (i, ev) for i, ev in enumerate(p.survivors)}
        for r in rows:
            if tuple(r["shape"]) == shape and r.get("dtype", "f16") == dt:
                if r["tiling"] not in by_key:  # no longer a survivor: its stored prediction, ranked last
                    r["rank"] = len(by_key)
                    continue
                i, ev = by_key[r["tiling"]]
                r.update(rank=i, predicted_cycles=ev.cycles, predicted_cycles_per_cta=ev.cycles_per_cta,
                         **_phases(ev, shape))
    return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()


def cmd_table(measured: Path, doc: Path, again: bool = False) -> None:
    data = json.loads(measured.read_text())
    rows = [r for r in data["rows"] if "rank" in r]
    commit = repredict(rows) if again else ""
    clocked = any(r.get("measured_clock_mhz") for r in rows)
    if again and clocked:
        for r in rows:
            if r.get("measured_clock_mhz"):
                r["predicted_at_clock"] = at_clock(r, r["measured_clock_mhz"])
    last = any(r.get("per_cta_from") == "last" for r in rows)
    cublas = {(r.get("dtype", "f16"), tuple(r["shape"])): r.get("cublas_tflops") for r in data["rows"]
              if "cublas_tflops" in r}
    bench = any("dtype" in r for r in rows)
    device = next((r.get("device") for r in rows if r.get("device")), "?")
    lines = ["# The planner's top 4 on the H200", "",
             f"Measured {data['date']} on {device} by `benchmarks/top4.py` (data: `{measured.relative_to(ROOT)}`, "
             f"load average {data.get('load_average', 0):.1f} on the GPU machine); generated by `top4.py table`, "
             "do not edit by hand.", "",
             *[x for p in __doc__.split("\n\n")[2:4 if bench else 3] for x in (p.strip().replace("\n", " "), "")],
             "Per-CTA error = (predicted - measured) / measured, measured = mean clock64 span over the CTAs of "
             + ("the last timed launch (the clock settled)" if last else "the checked launch") + "."
             + (" The SM clock is each kernel's own (clock64 span / %globaltimer span of its busiest CTAs), and the "
                "prediction is the model's at that clock (`top4.at_clock`: h200.yaml's clock replaced)."
                if clocked else ""), "",
             *([f"**Re-predicted** by the planner at commit {commit} for the same tilings (same PTX): `rank` is "
                "that planner's ranking among all its candidates (0 = its pick), so a shape whose measured four "
                "no longer hold its pick says nothing about the pick (run `compile` and `gpu` again).", ""]
               if again else []),
             "| M x N x K | rank | tiling | " + ("SM MHz | predicted cycles/CTA at it | " if clocked else
                                               "predicted cycles/CTA | ")
             + "measured cycles/CTA | error | time (us) | TFLOP/s | measured rank | check |",
             "|---|---|---|---|---|---|---|---|---|---|" + ("---|" if clocked else "")]
    holds, shapes, errs, by_cycles = 0, 0, [], 0
    for dt, shape in dict.fromkeys((r.get("dtype", "f16"), tuple(r["shape"])) for r in rows):
        grp = [r for r in rows if tuple(r["shape"]) == shape and r.get("dtype", "f16") == dt and r.get("time_ms")]
        if not grp:
            continue
        order = sorted(grp, key=lambda r: r["time_ms"])
        M, N, K = shape
        label = f"{dt} {M}x{N}x{K}" if bench else f"{M}x{N}x{K}"
        for r in grp:
            pc, mc = r.get("predicted_at_clock") or r["predicted_cycles_per_cta"], r.get("measured_cycles_per_cta")
            err = (pc - mc) / mc if mc else None
            if err is not None:
                errs.append(abs(err))
            chk = r.get("check") or {}
            ok = {True: "passed", False: "FAILED"}.get(chk.get("passed")) if isinstance(chk, dict) else None
            mhz = f"{r['measured_clock_mhz']:.0f} | " if r.get("measured_clock_mhz") else ("- | " if clocked else "")
            lines.append(f"| {label} | {r['rank']} | {r['tiling']} | {mhz}{pc:,} | "
                         f"{mc:,.0f} | {100 * err:+.1f}% | {1000 * r['time_ms']:.1f} | "
                         f"{2 * M * N * K / (r['time_ms'] * 1e-3) / 1e12:.1f} | {order.index(r)} | {ok or 'n/a'} |"
                         if mc else f"| {label} | {r['rank']} | {r['tiling']} | {mhz}{pc:,} | - | - | "
                         f"{1000 * r['time_ms']:.1f} | - | {order.index(r)} | {ok or 'n/a'} |")
        pick = min(grp, key=lambda r: r["rank"]) if grp and min(r["rank"] for r in grp) == 0 else None
        if pick is not None:
            shapes += 1
            holds += pick["time_ms"] <= 1.05 * order[0]["time_ms"]
            cyc = [r["measured_cycles_per_cta"] for r in grp if r.get("measured_cycles_per_cta")]
            if cyc and pick.get("measured_cycles_per_cta"):  # the clock differs between kernels: cycles as well
                by_cycles += pick["measured_cycles_per_cta"] <= 1.05 * min(cyc)
        if cublas.get((dt, shape)):
            lines.append(f"| {label} | cuBLAS | torch.matmul | | | | | {'| ' if clocked else ''}"
                         f"{cublas[dt, shape]:.1f} | | |")
    errs.sort()
    lines += ["", f"The pick is within 5% of the measured fastest of the four for **{holds} of {shapes}** shapes "
              + (f"(per-CTA clock64 cycles, the clock left out: {by_cycles} of {shapes}) " if clocked else "")
              +
              f"(target: {'every shape, issue 14' if bench else '80%'}). "
              f"Predicted per-CTA cycles against measured over all {len(errs)} candidates: "
              f"MAPE **{100 * sum(errs) / max(1, len(errs)):.1f}%**, median {100 * errs[len(errs) // 2]:.1f}%, "
              f"worst {100 * errs[-1]:.1f}%." if errs else "", ""]
    picks = [r for r in rows if r["rank"] == 0 and r.get("phase_cycles") and r.get("predicted_phases")]
    if picks:
        lines += ["## Where the time goes (the picks)", "",
                  "Measured: thread 0's clock64 between the profile slots (CTA start, before the K loop, after it, "
                  "after the final barrier), mean over the CTAs; predicted: the cycle model's prologue, K tiles x "
                  "iteration, epilogue (per CTA). A persistent wgmma_tma CTA: setup, the tile walk to its last K "
                  "loop's end, the last epilogue and store drain (predicted at h200.yaml's clock_mhz).", "",
                  "| M x N x K | tiling | prologue meas / pred | K loop meas / pred | epilogue meas / pred |",
                  "|---|---|---|---|---|"]
        for r in picks:
            m, p = r["phase_cycles"], r["predicted_phases"]
            cells = " | ".join(f"{a:,.0f} / {b:,} ({100 * (b - a) / a:+.0f}%)" for a, b in zip(m, p))
            lines.append(f"| {(r['dtype'] + ' ') if bench else ''}{'x'.join(map(str, r['shape']))} | {r['tiling']} | "
                         f"{cells} |")
        lines.append("")
    # candidates that differ only in their pipeline depth: does the model see what the GPU does?
    pairs = []
    for r in rows:
        if "_s2_" not in r["tiling"] or not r.get("time_ms"):
            continue
        for q in rows:
            if q is not r and q.get("time_ms") and q["shape"] == r["shape"] and \
                    q["tiling"].replace("_s3_", "_s2_").replace("_s4_", "_s2_") == r["tiling"]:
                pairs.append((r, q))
    if pairs:
        same = sum(1 for r, q in pairs if r["predicted_cycles"] == q["predicted_cycles"])
        gain = sorted(r["time_ms"] / q["time_ms"] - 1 for r, q in pairs)
        lines += [f"Pipeline depth: {len(pairs)} pairs of candidates differ only in their stages (2 vs 3 or 4); "
                  f"the planner predicts the same cycles for {same} of them, while on the GPU the 2-stage one "
                  f"takes {100 * gain[len(gain) // 2]:+.1f}% (median) longer, from {100 * gain[0]:+.1f}% to "
                  f"{100 * gain[-1]:+.1f}%.", ""]
    doc.write_text("\n".join(lines))
    print("\n".join(lines))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compile")
    c.add_argument("--dir", default=str(ROOT / ".top4"))
    g = sub.add_parser("gpu")
    g.add_argument("--dir", default=str(ROOT / ".top4"))
    r = sub.add_parser("run", help="compile into --dir (default: a temporary directory), then gpu")
    r.add_argument("--dir")
    for x in (c, r):
        x.add_argument("--table", choices=sorted(TABLES), default="top4")
        x.add_argument("--jobs", type=int, default=1, help="planner processes")
    for x in (g, r):
        x.add_argument("--out", required=True)
        x.add_argument("--repeats", type=int, default=30)
        x.add_argument("--check-limit", type=float, default=4096**3,
                       help="numpy-check the kernels of M*N*K up to this (float64 reference on the CPU)")
        x.add_argument("--budget", type=float, default=0.0, help="seconds after which no kernel is started (0: none)")
        x.add_argument("--last", action="store_true",
                       help="per-CTA cycles of the last timed launch (the clock settled), not the checked first one")
    t = sub.add_parser("table")
    t.add_argument("--measured", required=True)
    t.add_argument("--doc", default=str(ROOT / "docs/top4.md"))
    t.add_argument("--repredict", action="store_true", help="predictions of the current planner, not the stored ones")
    a = ap.parse_args()
    if a.cmd == "compile":
        cmd_compile(Path(a.dir), a.table, a.jobs)
    elif a.cmd == "gpu":
        cmd_gpu(Path(a.dir), Path(a.out), a.repeats, a.check_limit, a.budget, a.last)
    elif a.cmd == "run":
        import tempfile

        t0 = time.time()
        d = Path(a.dir or tempfile.mkdtemp(prefix="top4_"))
        cmd_compile(d, a.table, a.jobs)
        print(f"compiled in {time.time() - t0:.1f} s", flush=True)
        cmd_gpu(d, Path(a.out), a.repeats, a.check_limit, max(1.0, a.budget - (time.time() - t0)) if a.budget else 0,
                a.last)
    else:
        cmd_table(Path(a.measured).resolve(), Path(a.doc), a.repredict)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
