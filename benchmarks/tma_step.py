"""On the H200: what holds a 256x128 t128 stage beyond its K step (issue 14, the large-shape top-4 misses), one
invocation, < 4 minutes:

    source .devwheels/install.sh >/dev/null 2>&1; export PYTHONPATH="$PWD:$PYTHONPATH"
    python3 benchmarks/tma_step.py --out $OUT        # writes $OUT/tma_step.json
    python3 benchmarks/tma_step.py --set cta --out $OUT   # session 11's cases (CTA_CASES): $OUT/tma_step_cta.json
    python3 benchmarks/tma_step.py --set cta2 --out $OUT  # session 11's round 2 (CTA2_CASES): $OUT/tma_step_cta2.json
    python3 benchmarks/tma_step.py --set cta3 --out $OUT  # session 11's round 3 (CTA3_CASES): $OUT/tma_step_cta3.json

Each case is a wgmma_tma kernel (bf16, A row-major, B col-major, D bf16) emitted with `trace=STEPS`
(kernelgen/variants/wgmma_tma.TRACE_SLOTS): per K step g of the CTA's first STEPS, the producer's clock64 once
empty[s] let it refill the stage (P) and after its TMA issues (Q); for each consumer warpgroup c (its thread 0):
full[s] seen (F), its wgmmas issued and committed (I), its `wait_group 1` returned (W: group g - 1 done), its
arrive on empty[] of stage g - 1 (R). The last of 6 back-to-back launches is read (the clock settled).

Variations (what each separates):
- 256x128 t128 (2 consumers x 8 m64n128, two accumulator sets) vs 128x256 t64 (2 x 4 m64n256) at s3 / s4,
  6144^3 and 4096^3 (DRAM-served) and 2048x2048x4096 (one wave, inputs L2-resident);
- 128x128 t64 (2 x 4 m64n128, one set each: N per wgmma) and 128x128 t128 (1 x 8 m64n128, two sets: consumer
  count) at 6144^3;
- `notma`: the producer arrives on full[s] with no TMA load (PTX patched): the ring without memory, so the
  consumer side alone (tensor, shared-memory operand reads, barriers) sets the K step;
- `morder`: 256x128 t128 with each consumer's 8 wgmmas ordered by accumulator set (4 on set 0, then 4 on set 1)
  instead of alternating (chain dependence vs issue order);
- `gtimer` (`--set cta`): every clock64 read of the record and the trace reads %globaltimer instead, so the same
  intervals come out in ns (the reads advanced in 256 ns steps in session 11's runs: use means over many steps);
- `warparrive`: one arrive per consumer warp (lane 0; empty[] counts 4 per warpgroup) instead of every thread's
  (256 arrivals per stage on one mbarrier).

Per case: medians / p10 / p90 / means over the steady K steps (no tile's first K step) of every CTA, and the
raw clocks of 8 CTAs' first 160 steps (relative to each CTA's start), wall time and the SM clock (clock64 span /
%globaltimer span). Derived (c = 0, 1): step_c = F_c[g] - F_c[g-1]; issue_c = I - F; wait_c = W - I (group g-1
still running); arrive_c = R - W; starve_c = F_c[g+1] - R_c[g]; done_c = W_c[g+1] - I_c[g] (a group's commit to
its completion seen); skew_full = F_1 - F_0, skew_rel = R_1 - R_0; reissue = P[g-1+S] - max_c R_c[g] (the
producer's wake after the later release); tma_issue = Q - P; trip = min_c F_c[g] - Q[g]; hold = max_c
R_c[g+1] - min_c F_c[g] (a stage from landing to its release by both).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

STEPS = 320
RAW_CTAS, RAW_STEPS = 8, 160
L6, L4, RES = (6144, 6144, 6144), (4096, 4096, 4096), (2048, 2048, 4096)
T256, T128W, T128N, T128C = (256, 128, 128), (128, 256, 64), (128, 128, 64), (128, 128, 128)
# (name, shape, (bm, bn, tm), stages, patch)
CASES = (
    ("6144_256x128_s3", L6, T256, 3, ""), ("6144_128x256_s3", L6, T128W, 3, ""),
    ("6144_256x128_s3_notma", L6, T256, 3, "notma"), ("6144_128x256_s3_notma", L6, T128W, 3, "notma"),
    ("6144_256x128_s4", L6, T256, 4, ""), ("6144_128x256_s4", L6, T128W, 4, ""),
    ("4096_256x128_s3", L4, T256, 3, ""), ("4096_128x256_s3", L4, T128W, 3, ""), ("4096_128x256_s4", L4, T128W, 4, ""),
    ("res_256x128_s3", RES, T256, 3, ""), ("res_128x256_s3", RES, T128W, 3, ""),
    ("6144_256x128_s3_morder", L6, T256, 3, "morder"), ("6144_256x128_s3_warparrive", L6, T256, 3, "warparrive"),
    ("6144_128x256_s3_warparrive", L6, T128W, 3, "warparrive"),
    ("6144_128x128t64_s4", L6, T128N, 4, ""), ("6144_128x128t128_s4", L6, T128C, 4, ""),
    ("6144_128x128t64_s4_notma", L6, T128N, 4, "notma"), ("6144_128x128t128_s4_notma", L6, T128C, 4, "notma"),
    ("6144_256x128_s3_morder_notma", L6, T256, 3, "morder,notma"), ("4096_256x128_s4", L4, T256, 4, ""),
)

# `--set cta` (session 11, issue 14's last two per-CTA misses): (name, shape, (bm, bn, tm), stages, patch, steps);
# steps 0 = no trace, the per-CTA profile record only (the kernel's own K step, no trace stores in its loops)
L8, M64 = (8192, 8192, 8192), (64, 4096, 4096)
T64, T128Z, T128O = (64, 64, 64), (128, 64, 64), (128, 64, 128)
CTA_CASES = (
    # 64x64 at 64x4096x4096 (inputs L2-resident between launches): s5 measured as s6, predicted 1.15x; is the
    # L2-served trip (920 in the s6 traces) a queue that shrinks with the stages in flight?
    ("m64_64x64_s3", M64, T64, 3, "", STEPS), ("m64_64x64_s4", M64, T64, 4, "", STEPS),
    ("m64_64x64_s5", M64, T64, 5, "", STEPS), ("m64_64x64_s6", M64, T64, 6, "", STEPS),
    ("m64_64x64_s3_prof", M64, T64, 3, "", 0), ("m64_64x64_s4_prof", M64, T64, 4, "", 0),
    ("m64_64x64_s5_prof", M64, T64, 5, "", 0), ("m64_64x64_s6_prof", M64, T64, 6, "", 0),
    ("m64_64x64_s4_ns", M64, T64, 4, "gtimer", STEPS), ("m64_64x64_s6_ns", M64, T64, 6, "gtimer", STEPS),
    # 256x128 t128 s3 at 8192^3 (1.07-1.08x at its own clock, 1,318-1,356 MHz) and its siblings, the whole CTA
    # traced (16 tiles x 128 K steps): the stage trip in cycles at a low SM clock; `_ns` twins trace %globaltimer
    # instead of clock64 (the same trip in ns: is it the clock-independent part?)
    ("8192_256x128_s3", L8, T256, 3, "", 2048), ("8192_256x128_s3_ns", L8, T256, 3, "gtimer", 2048),
    ("8192_128x256_s3", L8, T128W, 3, "", 2048), ("8192_256x128_s4", L8, T256, 4, "", 2048),
    ("8192_256x128_s3_prof", L8, T256, 3, "", 0), ("8192_128x256_s3_prof", L8, T128W, 3, "", 0),
    ("6144_256x128_s3_all", L6, T256, 3, "", 900), ("6144_256x128_s3_ns", L6, T256, 3, "gtimer", 900),
    ("6144_256x128_s3_prof", L6, T256, 3, "", 0),
    ("4096_256x128_s3_all", L4, T256, 3, "", 320), ("4096_256x128_s3_ns", L4, T256, 3, "gtimer", 320),
    # M = 64 from DRAM (one wave): the GEMM's DRAM trip in cycles and ns against the tma_l2res table
    ("m64d_64x64_s6", (64, 7168, 4096), T64, 6, "", STEPS),
    ("m64d_64x64_s6_ns", (64, 7168, 4096), T64, 6, "gtimer", STEPS),
    ("m64d_64x128_s6", (64, 4096, 7168), (64, 128, 64), 6, "", STEPS),
    ("m64d_64x128_s6_ns", (64, 4096, 7168), (64, 128, 64), 6, "gtimer", STEPS),
    # the zero-fill: 128-row A boxes half beyond M = 64 (two consumers, the second's rows all outside; one consumer)
    ("m64_128x64t64_s6", M64, T128Z, 6, "", STEPS), ("m64_128x64t128_s6", M64, T128O, 6, "", STEPS),
    ("m64_128x64t64_s6_prof", M64, T128Z, 6, "", 0),
    # the same at N = 7168 (112 CTAs instead of 64): measured 803-837 cycles per K step against 520-550 at N = 4096
    ("m64w_128x64t64_s6", (64, 7168, 4096), T128Z, 6, "", STEPS),
    ("m64w_128x64t128_s6", (64, 7168, 4096), T128O, 6, "", STEPS),
)

# `--set cta2` (session 11, round 2): (name, shape, (bm, bn, tm), stages, patch, steps, warmup launches)
T64O = (64, 64, 64)
CTA2_CASES = (
    # the zero-fill: is the K step of a ring whose A boxes are partly beyond M set by the device's zero-filled bytes
    # per K step (run 1: 64 CTAs x 8 KiB in 486-525 cycles, 112 CTAs in 843: ~1,070 B/cycle)? 128x64 t128 at
    # M = 64 over 32 / 80 / 96 / 112 CTAs (N = 2048 / 5120 / 6144 / 7168), and a quarter of the box outside
    # (M = 96, 128-row boxes: 4 KiB; M = 32, 64-row boxes: 4 KiB) at 112 CTAs; the in-bounds 64x64 control
    ("z32_128x64t128_s6", (64, 2048, 4096), T128O, 6, "", 0, 2),
    ("z80_128x64t128_s6", (64, 5120, 4096), T128O, 6, "", 0, 2),
    ("z96_128x64t128_s6", (64, 6144, 4096), T128O, 6, "", 0, 2),
    ("z112_128x64t128_s6", (64, 7168, 4096), T128O, 6, "", 0, 2),
    ("q96_128x64t128_s6", (96, 7168, 4096), T128O, 6, "", 0, 2),
    ("q32_64x64_s6", (32, 7168, 4096), T64O, 6, "", 0, 2),
    ("z80_128x64t128_s6_tr", (64, 5120, 4096), T128O, 6, "", STEPS, 2),
    ("c112_64x64_s6", (64, 7168, 4096), T64O, 6, "", 0, 2),
    # the L2-served ring at other shapes, untraced: 64x64 s3 / s4 at 64x4096x3072 (25 MB, L2-resident), the M = 128
    # tiling whose default pick moves (128x64 t64x64 s4 / s5 / s6 at 128x4096x4096)
    ("l2_64x64_s3_k3072", (64, 4096, 3072), T64O, 3, "", 0, 2),
    ("l2_64x64_s4_k3072", (64, 4096, 3072), T64O, 4, "", 0, 2),
    ("l2_128x64t64_s4", (128, 4096, 4096), T128Z, 4, "", 0, 2),
    ("l2_128x64t64_s5", (128, 4096, 4096), T128Z, 5, "", 0, 2),
    ("l2_128x64t64_s6", (128, 4096, 4096), T128Z, 6, "", 0, 2),
    # 256x128 s3 at 8192^3 after 400 back-to-back launches (~0.6 s of load: the power-limited clock of the top4 runs,
    # 1,320-1,450 MHz, instead of run 1's 1,650): the stage trip in cycles and in ns at a low SM clock
    ("8192_256x128_s3_hot", L8, T256, 3, "", 2048, 400),
    ("8192_256x128_s3_hot_ns", L8, T256, 3, "gtimer", 2048, 400),
    ("8192_256x128_s3_hot_prof", L8, T256, 3, "", 0, 400),
    ("8192_128x256_s3_hot_prof", L8, T128W, 3, "", 0, 400),
)

# `--set cta3` (session 11, round 3): the zero fill against the rows of each A box outside the tensor, 112 CTAs
# (N = 7168, K = 4096), untraced: 128-row boxes (128x64 t128) at M = 64 / 96 / 112 / 120 / 127 / 128 (64 / 32 / 16 /
# 8 / 1 / 0 rows outside) and 64-row boxes (64x64) at M = 16 / 32 / 48 / 56 / 63 / 64 (48 / 32 / 16 / 8 / 1 / 0):
# is the cost per zero-filled byte (run 2: a quarter outside costs more than its bytes) or per box with any outside?
Z7 = (7168, 4096)
CTA3_CASES = tuple(
    (f"r{M}_128x64t128_s6", (M,) + Z7, T128O, 6, "", 0, 2) for M in (64, 96, 112, 120, 127, 128)
) + tuple(
    (f"r{M}_64x64_s6", (M,) + Z7, T64O, 6, "", 0, 2) for M in (16, 32, 48, 56, 63, 64)
) + (
    ("r96_128x64t128_s6_tr", (96,) + Z7, T128O, 6, "", STEPS, 2),
    ("r32_64x64_s6_k4096n4096", (32, 4096, 4096), T64O, 6, "", 0, 2),
)


def patch(ptx: str, what: str, consumers: int) -> str:
    """The probe's PTX variations (see the module docstring); each checked to have changed something."""
    for w in filter(None, what.split(",")):
        before = ptx
        if w == "notma":
            ptx = re.sub(r"mbarrier\.arrive\.expect_tx\.shared::cta\.b64 _, \[(%r\d+)\], \d+;",
                         r"mbarrier.arrive.shared::cta.b64 _, [\1];", ptx)
            ptx = "\n".join(x for x in ptx.split("\n")
                            if "cp.async.bulk.tensor.2d.shared::cluster.global" not in x)
        elif w == "morder":
            lines = ptx.split("\n")
            i = next(k for k, x in enumerate(lines) if x.strip() == "wgmma.fence.sync.aligned;")
            j = next(k for k in range(i, len(lines)) if lines[k].strip() == "wgmma.commit_group.sync.aligned;")
            body = lines[i + 1:j]
            mm = [x for x in body if "wgmma.mma_async" in x]
            rest = [x for x in body if "wgmma.mma_async" not in x]
            first = [x.split("{")[1].split(",")[0] for x in mm]
            order = sorted(range(len(mm)), key=lambda k: (first[k], k))
            lines[i + 1:j] = rest + [mm[k] for k in order]
            ptx = "\n".join(lines)
        elif w == "gtimer":  # every clock64 read (the profile record and the trace) reads %globaltimer (ns)
            ptx = ptx.replace("%clock64", "%globaltimer")
        elif w == "warparrive":
            n = 128 * consumers
            ptx = re.sub(rf"(mbarrier\.init\.shared::cta\.b64 \[%r\d+\+?\d*\]), {n};", rf"\1, {4 * consumers};", ptx)

            def one(m: re.Match) -> str:
                pred, bar = m.group(1), m.group(2)
                s = "mov.u32 %qlane, %laneid;\n\t"
                s += (f"setp.eq.and.u32 %qone, %qlane, 0, {pred};\n\t" if pred
                      else "setp.eq.u32 %qone, %qlane, 0;\n\t")
                return s + f"@%qone mbarrier.arrive.shared::cta.b64 _, [{bar}];"
            ptx = re.sub(r"(?:@(%p\d+) )?mbarrier\.arrive\.shared::cta\.b64 _, \[(%r\d+)\];", one, ptx)
            k = ptx.index("\t.reg ")
            ptx = ptx[:k] + "\t.reg .b32 %qlane;\n\t.reg .pred %qone;\n" + ptx[k:]
        if ptx == before:
            raise ValueError(f"patch {w!r} changed nothing")
    return ptx


def planned(spec, variant: str, t) -> tuple[dict, dict | None]:
    """h200.yaml's plan of `spec` with `variant`: the prediction of tiling `t` as the kernel's header takes it and
    its model (cycles per CTA, K tile, bound, terms), or ({}, None) when `t` is not among the plan's survivors."""
    import dataclasses

    from kernelgen.planner import plan, prediction_dict
    from sim.hw import load_hw

    p = plan(spec, load_hw("h200"), variant)
    ev = next((e for e in p.survivors if e.tiling.key() == t.key()), None)
    if ev is None:
        return {}, None
    return prediction_dict(dataclasses.replace(p, best=ev)), {
        "cycles_per_cta": ev.cycles_per_cta, "k_tile": ev.model.iter_cycles, "bound": ev.model.bound,
        "terms": {k: float(v) for k, v in ev.model.terms.items()}}


def emit(shape: tuple[int, int, int], tile: tuple[int, int, int], stages: int, what: str,
         steps: int = STEPS) -> tuple[str, dict]:
    from kernelgen.spec import shorthand
    from kernelgen.tiling import Tiling
    from kernelgen.variants import wgmma_tma

    M, N, K = shape
    bm, bn, tm = tile
    spec = shorthand(f"{M}x{N}x{K}", "bf16", "bf16")
    t = Tiling("wgmma_tma", bm, bn, 64, tm, bn, stages, 0, 0, 8, 8, 0)
    pred, model = planned(spec, "wgmma_tma", t)
    ptx = wgmma_tma.emit(spec, t, pred, trace=steps) if steps else wgmma_tma.emit(spec, t, pred, profile=True)
    return patch(ptx, what, bm // tm), {"tiling": t.key(), "model": model, "ktiles": -(-K // 64),
                                        "consumers": bm // tm}


def _stats(x: np.ndarray) -> dict:
    x = x[np.isfinite(x)]
    if not x.size:
        return {}
    return {"med": float(np.median(x)), "p10": float(np.percentile(x, 10)), "p90": float(np.percentile(x, 90)),
            "mean": float(x.mean()), "n": int(x.size)}


def read_records(buf: np.ndarray, timer: np.ndarray, grid: int, out: dict) -> tuple[np.ndarray, np.ndarray,
                                                                                     np.ndarray]:
    """The profile buffer as int64 values, its per-CTA records (PROFILE_SLOTS clock64 values each) and the
    %globaltimer pairs; out["clock_mhz"] = the median clock64 span / ns span of the CTAs whose both rose."""
    from kernelgen.emit_common import PROFILE_SLOTS

    v = np.asarray(buf).view(np.uint64).astype(np.int64)
    rec = v[:grid * PROFILE_SLOTS].reshape(grid, PROFILE_SLOTS)
    tm = np.asarray(timer).view(np.uint64).astype(np.int64)[:2 * grid].reshape(grid, 2)
    ok = (tm[:, 1] > tm[:, 0]) & (rec[:, 3] > rec[:, 0])
    if ok.any():
        out["clock_mhz"] = float(np.median((rec[ok, 3] - rec[ok, 0]) / (tm[ok, 1] - tm[ok, 0]) * 1e3))
    return v, rec, tm


def read_trace(v: np.ndarray, rec: np.ndarray, grid: int, ns: int, steps: int, out: dict,
               raw_shape: tuple[int, int] = (RAW_CTAS, RAW_STEPS)) -> tuple[np.ndarray, int]:
    """The trace after the records (`ns` slots per K step, `steps` per CTA), kept for the CTAs that recorded the
    most steps (slot 2, the first consumer's full, non-zero); out += steps, ctas and the raw clocks of the first
    raw_shape CTAs x steps relative to each CTA's start (-1: not recorded). Returns (trace, steps recorded)."""
    from kernelgen.emit_common import PROFILE_SLOTS

    tr = v[grid * PROFILE_SLOTS:grid * PROFILE_SLOTS + grid * ns * steps].reshape(grid, steps, ns)
    counts = (tr[:, :, 2] != 0).sum(axis=1)
    sel = counts == counts.max()
    tr, rec = tr[sel], rec[sel]
    n = int(counts.max())
    out["steps"], out["ctas"] = n, int(sel.sum())
    c, k = raw_shape
    raw = tr[:c, :k] - rec[:c, 0][:, None, None]
    raw[tr[:c, :k] == 0] = -1
    out["raw"] = raw.tolist()
    return tr, n


def analyse(buf: np.ndarray, timer: np.ndarray, grid: int, stages: int, ktiles: int, consumers: int,
            steps: int = STEPS) -> dict:
    from kernelgen.variants.wgmma_tma import TRACE_SLOTS

    ns = len(TRACE_SLOTS)
    out: dict = {}
    v, rec, tm = read_records(buf, timer, grid, out)
    out["span"] = _stats((rec[:, 3] - rec[:, 0]).astype(float))
    # per CTA: the profile record's phases (start, walk start, last K loop done, end) and its %globaltimer span
    out["per_cta"] = {"span": (rec[:, 3] - rec[:, 0]).tolist(), "walk": (rec[:, 2] - rec[:, 1]).tolist(),
                      "ns": (tm[:, 1] - tm[:, 0]).tolist()}
    if not steps:
        return out
    tr, n = read_trace(v, rec, grid, ns, steps, out)
    if n < stages + 4:
        return out
    f = tr.astype(float)
    f[tr == 0] = np.nan
    P, Q = f[:, :, 0], f[:, :, 1]
    C = [f[:, :, 2 + 4 * c:6 + 4 * c] for c in range(consumers)]  # F, I, W, R
    g = np.arange(stages + 1, n - stages - 1)
    g = g[g % ktiles != 0]  # no tile's first K step (its interval holds the epilogue)
    m: dict = {}
    for c, X in enumerate(C):
        F, I, W, R = (X[:, :, k] for k in range(4))
        m[f"step{c}"] = F[:, g] - F[:, g - 1]
        m[f"issue{c}"] = I[:, g] - F[:, g]
        m[f"wait{c}"] = W[:, g] - I[:, g]
        m[f"arrive{c}"] = R[:, g] - W[:, g]
        m[f"starve{c}"] = F[:, g + 1] - R[:, g]
        m[f"done{c}"] = W[:, g + 1] - I[:, g]
    Fmin = np.nanmin(np.stack([X[:, :, 0] for X in C]), axis=0)
    Rmax = np.nanmax(np.stack([X[:, :, 3] for X in C]), axis=0)
    if consumers == 2:
        m["skew_full"] = C[1][:, g, 0] - C[0][:, g, 0]
        m["skew_rel"] = C[1][:, g, 3] - C[0][:, g, 3]
    m["reissue"] = P[:, g - 1 + stages] - Rmax[:, g]
    m["tma_issue"] = Q[:, g] - P[:, g]
    m["producer_wait"] = P[:, g] - Q[:, g - 1]
    m["trip"] = Fmin[:, g] - Q[:, g]
    m["hold"] = Rmax[:, g + 1] - Fmin[:, g]
    m["trip_p"] = Fmin[:, g] - P[:, g]  # from the empty wait's end (the TMA issue included)
    out["stats"] = {k: _stats(x.ravel()) for k, x in m.items()}
    out["first_trip"] = _stats((Fmin[:, 0] - Q[:, 0]).ravel())
    # per tile of the CTA's walk (g // ktiles): the K step and the trip as the kernel goes on (the clock falls)
    tiles = max(1, n // ktiles)
    if tiles > 1:
        by: dict = {"step0": [], "trip": []}
        for j in range(tiles):
            gj = g[(g // ktiles) == j]
            if gj.size:
                by["step0"].append(float(np.nanmean(C[0][:, gj, 0] - C[0][:, gj - 1, 0])))
                by["trip"].append(float(np.nanmean(Fmin[:, gj] - Q[:, gj])))
        out["by_tile"] = by
    return out


def fifo_step(parts: int, mac_cycles: float, stages: int, lead: float, queue: int, consumers: int = 2,
              issue: float = 23.7, latency: float = 42.0, wait: float = 28.0, arrive: float = 28.0,
              steps: int = 240) -> float:
    """The mean K step of a wgmma_tma ring whose tensor pipe is a FIFO that accepts a wgmma while at most `queue`
    accepted ones of the SM wait to start (docs/wgmma-tma.md section 12): each K step's `parts` wgmmas (the SM's,
    `consumers` warpgroups issuing their share in turn, `issue` cycles apart, each `mac_cycles` on the pipe after
    `latency`); a consumer's wait_group 1 returns when its previous group is done and its issue returned, then
    `wait` + `arrive` cycles to its release; a stage is refilled when both released it and lands `lead` cycles
    later (the producer's wake, TMA issue and the trip, measured). The model's closed form
    (tma_cycles.consumer_step) is this ring's lag when the pipe starves."""
    n = parts // consumers
    ends: list[float] = []  # completion times of the accepted wgmmas, in pipe order
    full: dict[int, float] = {}
    release: dict[int, float] = {}
    ready = [0.0] * consumers  # each consumer's release of its previous stage
    done: dict[tuple[int, int], float] = {}
    for g in range(steps):
        full[g] = (release[g - stages + 1] if g >= stages else 0.0) + lead
        at = [max(full[g], ready[c]) for c in range(consumers)]
        k, last = [0] * consumers, [0.0] * consumers
        while any(x < n for x in k):
            c = min((c for c in range(consumers) if k[c] < n), key=lambda c: at[c])
            now = at[c]
            waiting = sorted(e - mac_cycles for e in ends if e - mac_cycles > now)
            if len(waiting) >= queue:
                now = waiting[len(waiting) - queue]  # a place frees when one of them starts
            end = max(now + latency, ends[-1] if ends else 0.0) + mac_cycles
            ends = (ends + [end])[-64:]
            k[c] += 1
            at[c], last[c] = now + issue, now
            if k[c] == n:
                done[c, g] = end
        for c in range(consumers):
            ready[c] = max(last[c] + issue, done.get((c, g - 1), 0.0)) + wait + arrive
        release[g] = max(ready)
    a, b = steps // 2, steps - 10
    return (full[b] - full[a]) / (b - a)


def measure(text: str, launch, shape: tuple[int, int, int], warm: int, repeats: int,
            row: dict) -> tuple[np.ndarray, np.ndarray] | None:
    """`warm` + `repeats` launches of a profiled kernel on the GPU (validation.gpu.run_on_gpu, no check); row +=
    the median time, TFLOP/s and the device; returns the last launch's profile and timer buffers (None if not
    read back)."""
    from validation.gpu import run_on_gpu

    roles = [x.role for x in launch.args]
    i, j = roles.index("profile"), roles.index("timer")
    m = run_on_gpu(text, launch, warmup=warm, repeats=repeats, check=None, read_after=("profile", "timer"))
    after = m.extra.get("after") or {}
    M, N, K = shape
    row["time_ms"] = m.wall_ms_median
    row["tflops"] = 2 * M * N * K / (m.wall_ms_median * 1e-3) / 1e12
    row["device"] = m.device
    return (after[i], after[j]) if i in after and j in after else None


def case_rows(table, only: str, budget: float, res: dict):
    """The rows of a probe's case table (name, shape, tile, stages, patch, trace steps, warm-up launches), those
    named in `only` (comma-separated; empty: all); a case started after `budget` seconds is recorded as skipped
    into res["rows"] and not yielded. Yields (row, case); the caller appends the row when done."""
    names = set(filter(None, only.split(",")))
    t0 = time.time()
    for case in table:
        name, shape, tile, stages, what, steps, warm = case
        if names and name not in names:
            continue
        row: dict = {"case": name, "shape": list(shape), "tile": list(tile), "stages": stages, "patch": what,
                     "trace_steps": steps, "warmup": warm}
        if time.time() - t0 > budget:
            row["error"] = "skipped: budget spent"
            res["rows"].append(row)
            continue
        yield row, case


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget", type=float, default=200.0, help="seconds after which no case is started")
    ap.add_argument("--only", default="", help="comma-separated case names")
    ap.add_argument("--set", default="top4", choices=("top4", "cta", "cta2", "cta3"),
                    help="the case table: session 10's (top4) or session 11's (cta, cta2, cta3: CTA_CASES, CTA2_CASES,"
                    " CTA3_CASES)")
    a = ap.parse_args()
    from sim.launch import launch_from_metadata, read_metadata
    from validation.gpu_tma import without_tensormaps

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    res: dict = {"date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                 "load_average": os.getloadavg()[0], "steps": STEPS, "rows": []}
    table = (CTA2_CASES if a.set == "cta2" else CTA3_CASES if a.set == "cta3"
             else tuple(c + (2,) for c in CTA_CASES) if a.set == "cta"
             else tuple(c + (STEPS, 2) for c in CASES))
    for row, (_, shape, tile, stages, what, steps, warm) in case_rows(table, a.only, a.budget, res):
        try:
            text, info = emit(shape, tile, stages, what, steps)
            row.update(info)
            meta = read_metadata(text) or {}
            launch = launch_from_metadata(without_tensormaps(meta), np.random.default_rng(1))
            got = measure(text, launch, shape, warm, 6, row)
            if got is not None:
                row.update(analyse(*got, meta["grid"][0], stages, info["ktiles"], info["consumers"], steps))
        except Exception as e:  # noqa: BLE001 - record and go on
            row["error"] = f"{type(e).__name__}: {e}"[:400]
        res["rows"].append(row)
        brief = {k: v for k, v in row.items() if k not in ("raw", "model", "per_cta", "by_tile")}
        if "stats" in brief:
            brief["stats"] = {k: round(v["med"]) for k, v in brief["stats"].items() if v}
        print(json.dumps(brief, default=float)[:1500], flush=True)
        res["seconds"] = time.time() - t0
        (out / {"cta": "tma_step_cta.json", "cta2": "tma_step_cta2.json", "cta3": "tma_step_cta3.json"}.get(
            a.set, "tma_step.json")).write_text(
            json.dumps(res, default=float))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
