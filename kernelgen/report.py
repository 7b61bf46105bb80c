"""plan.json, analysis.md and candidates.csv from a Plan (plain text rendering only)."""

from __future__ import annotations

import csv
import io
import math
from typing import Any

from kernelgen.analysis import (
    candidate_lines,
    hotspot_lines,
    movement_lines,
    prediction_lines,
    register_lines,
    schedule_lines,
    sync_lines,
)
from kernelgen.models.schedule import launch_ctas
from kernelgen.planner import Plan, prediction_dict, tiling_json
from kernelgen.tiling import Tiling


def plan_json(p: Plan, ptx_path: str = "kernel.ptx") -> dict[str, Any]:
    e = p.best
    m, r, s, y = e.movement, e.registers, e.schedule, e.sync
    return {
        "version": 1,
        "kernel": ptx_path,
        "hw": {"name": p.hw.name, "path": p.hw.path},
        "spec": p.spec.to_json(),
        "shape": list(p.shape),
        "tiling": tiling_json(e.tiling, p.spec),
        "prediction": {**prediction_dict(p), "phases": phases(p)},
        "layers": {
            "movement": {"smem_bytes": m.smem_bytes, "global_bytes_per_cta": m.global_bytes_per_cta,
                         "global_bytes": m.global_bytes, "dram_bytes": m.dram_bytes,
                         "l2_hit_rate": m.l2_hit_rate, "shared_bytes_per_cta": m.shared_bytes_per_cta,
                         "register_bytes_per_cta": m.register_bytes_per_cta, "dram_cycles": m.dram_cycles,
                         "burst_efficiency": m.burst_efficiency, "bank_conflict_score": m.bank_conflict_score,
                         "bank_passes_per_tile": m.bank_passes_per_tile,
                         "bank_accesses_per_tile": m.bank_accesses_per_tile},
            "registers": {"accumulators": r.accumulators, "fragments": r.fragments,
                          "addressing": r.addressing, "params": r.params, "analytic": r.analytic,
                          "calibration_factor": r.factor, "calibrated": r.calibrated,
                          "per_thread": r.per_thread, "limit": r.limit, "spill": r.spill},
            "schedule": {"work_lane_ops_per_cta": s.work, "min_cycles_per_cta": s.min_cycles_per_cta,
                         "bound_pipe": s.bound_pipe, "ctas_per_core": s.ctas_per_core,
                         "ctas_limited_by": s.ctas_limited_by, "occupancy": s.occupancy,
                         "waves": launch_ctas(s, e.model)[1], "ctas": launch_ctas(s, e.model)[0], "tiles": s.ctas},
            "sync": {"barriers_per_tile": y.barriers_per_tile, "waits_per_tile": y.waits_per_tile,
                     "wait_depth": y.wait_depth, "barrier_cycles": y.barrier_cycles,
                     "exposed_latency_per_tile": y.exposed_latency_per_tile,
                     "deadlock_free": y.deadlock_free, "reason": y.reason},
        },
        "pruned": p.pruned,
        "search": {"seconds": round(p.seconds, 4), "candidates": p.candidates, "survivors": len(p.survivors),
                   "pareto": sum(1 for x in p.survivors if x.pareto), "exhaustive": p.exhaustive,
                   "bounded": len(p.bounded)},
        "log": p.log,
    }


CSV_FIELDS = ["key", "variant", "TILE_M", "TILE_N", "TILE_K", "tm", "tn", "threads", "stages", "pad", "vec",
              "cycles", "score", "registers_per_thread", "smem_bytes", "occupancy", "bank_conflict_score",
              "bound", "pareto", "status"]


def candidates_csv(p: Plan) -> str:
    """Every candidate, one row each: the Pareto frontier first (ranked; status "pareto"), then the other
    timed survivors (ranked; "timed"), the candidates the bounded search left untimed (by bound;
    "untimed: cycles >= B > score S of KEY", cycles and score empty), the layers' rejections (in order;
    "rejected: LAYER: CONSTRAINT (value)", only the tiling's columns; the bounded search's rejections on an
    upper bound of the value: "rejected on its upper bound, untimed: LAYER: CONSTRAINT (<=bound)")."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(CSV_FIELDS)

    def tiling(t: Tiling) -> list[Any]:
        return [t.key(), t.variant, t.bm, t.bn, t.bk, t.tm, t.tn, t.threads, t.stages, t.pad_a, t.vec_a]

    for front in (True, False):
        for e in p.survivors:
            if e.pareto == front:
                w.writerow(tiling(e.tiling) + [
                    e.cycles, round(e.score, 1), e.registers.per_thread, e.movement.smem_bytes,
                    round(e.schedule.occupancy, 4), e.movement.bank_conflict_score, e.schedule.bound_pipe,
                    int(e.pareto), "pareto" if front else "timed"])
    for b in sorted(p.bounded, key=lambda b: b.bound):
        w.writerow(tiling(b.tiling) + [
            "", "", b.registers.per_thread, b.movement.smem_bytes, round(b.schedule.occupancy, 4),
            b.movement.bank_conflict_score, b.schedule.bound_pipe, 0,
            f"untimed: cycles >= {b.bound} > score {round(b.by.score, 1):g} of {b.by.tiling.key()}"])
    for r in p.rejected:
        if r.on_bound:  # an upper bound of the value (rounded up), the candidate never timed
            up = math.ceil(r.metric * 1e4) / 1e4
            status = f"rejected on its upper bound, untimed: {r.layer}: {r.constraint} (<={up:g})"
        else:
            status = f"rejected: {r.layer}: {r.constraint} ({r.metric:g})"
        w.writerow(tiling(r.tiling) + ["", "", "", "", "", "", "", 0, status])
    return buf.getvalue()


def phases(p: Plan) -> dict[str, int]:
    """Predicted cycles of a CTA's stages as the --profile slots split them: prologue (to the K loop),
    K loop, epilogue (cycle model pre, K tiles x iteration, post)."""
    m = p.best.model
    ktiles = -(-p.shape[2] // p.best.tiling.bk)
    if "per_tile" in m.terms and "fill" in m.terms:
        # persistent (wgmma_tma): its record's slots are CTA start, the tile walk's start, the last K loop's end and
        # the CTA's end, so: setup (the prologue less the first stage's fill), the walk (fill, every tile but the
        # last one's epilogue), the last epilogue and the stores' tail
        tiles = m.terms["tiles_per_cta"]
        return {"prologue": round(m.pre_cycles - m.terms["fill"]),
                "k_loop": round(m.terms["fill"] + tiles * m.terms["per_tile"] - m.post_cycles),
                "epilogue": round(m.post_cycles + m.terms.get("store_tail", 0.0))}
    return {"prologue": round(m.pre_cycles), "k_loop": round(ktiles * m.iter_cycles), "epilogue": round(m.post_cycles)}


def analysis_md(p: Plan, ptx: str | None = None) -> str:
    """``ptx``: the emitted kernel, for the live-range peak (sim.liveness) in the registers layer."""
    e = p.best
    live = None
    if ptx is not None:
        from sim.liveness import liveness
        from sim.ptx.parser import parse_ptx

        live = liveness(next(iter(parse_ptx(ptx, "kernel.ptx").kernels.values())))
    M, N, K = p.shape
    L = [f"# Kernel analysis: {e.tiling.key()}", "",
         "## Assumptions",
         f"- hardware: {p.hw.name} ({p.hw.path or 'in memory'}), clock {p.hw.clock_mhz} MHz, "
         f"{p.hw.core.count} cores",
         f"- GEMM {M}x{N}x{K} (nominal shape: upper end of each range), A {p.spec.dtype_a} {p.spec.layout_a}, "
         f"B {p.spec.dtype_b} {p.spec.layout_b}, D {p.spec.dtype_out} {p.spec.layout_c}, alpha {p.spec.alpha}, "
         f"beta {p.spec.beta}, epilogue {list(p.spec.epilogue) or 'none'}",
         "- L2 reuse: re-reads hit L2 with probability min(1, l2.size / footprint); DRAM at "
         f"{p.hw.dram_bytes_per_cycle:.1f} B/cycle (dram.bandwidth_gbps / clock_mhz)",
         "- registers: analytic live ranges x a ptxas-calibrated factor per shape family", "",
         "## The four layers for the chosen plan (formula = numbers = result)", ""]
    L += movement_lines(p) + [""] + register_lines(e, live) + [""] + schedule_lines(p) + [""] + sync_lines(e) + [""]
    L += prediction_lines(p) + [""]
    L += ["## What bounds the kernel",
          f"- {_bound(p)}", ""]
    L += hotspot_lines(p) + [""] + candidate_lines(p)
    L += ["", "## Search", f"- {p.candidates} candidates in {p.seconds:.3f} s"] + [f"- {x}" for x in p.log]
    return "\n".join(L) + "\n"


def _bound(p: Plan) -> str:
    e = p.best
    cyc = e.cycles
    if e.movement.dram_cycles >= 0.8 * cyc:
        return f"DRAM bandwidth: {e.movement.dram_cycles:.0f} of {cyc} cycles moving {e.movement.dram_bytes} B"
    ctas, waves = launch_ctas(e.schedule, e.model)
    if waves <= 1 and ctas < p.hw.core.count:
        return (f"parallelism: {ctas} CTAs for {p.hw.core.count} cores (one partial wave); "
                f"latency of the K loop dominates")
    return f"the {e.schedule.bound_pipe} pipe ({e.schedule.min_cycles_per_cta} cycles/CTA minimum)"
