"""On the H200: what sets the K block of the block-scaled fp8 kernels (issue 14: the 128x256 kernels at 8192^3
take 11-15% more cycles per CTA than the model, whose K block there is the TMA transfer / ring, 1,024-1,197
cycles, against ~1,260-1,300 measured). One invocation, < 4 minutes, one JSON:

    source .devwheels/install.sh >/dev/null 2>&1; export PYTHONPATH="$PWD:$PYTHONPATH"
    python3 benchmarks/fp8_step.py --out $OUT        # writes $OUT/fp8_step.json

Each case is a wgmma_fp8 kernel (e4m3, block128 scales, bf16 D) emitted with `trace=STEPS`
(kernelgen/variants/wgmma_fp8.TRACE_SLOTS): per K block g of the CTA's first STEPS, the producer's clock64 once
empty[s] let it refill the stage (P) and after its TMA issues (Q); for each consumer warpgroup c (its thread 0):
full[s] seen (F), N half 0's wgmmas committed (I0), its wait_group 0 returned (W0), N half 1's committed (I1)
and waited (W1; TILE_N 256 only), the last promotion done (E). Or with --profile only (`_prof`: the kernel's
own K block, no trace stores in its loop). The last of WARM + 10 back-to-back launches is read.

Derived per consumer c over the steady K blocks (no tile's first): step = F[g] - F[g-1]; busy = E - F;
starve = F[g+1] - E[g] (waiting for the next stage); group0 = W0 - I0, group1 = W1 - I1 (a half's wgmmas from
their commit to wait_group 0's return: the pipe's time for them plus the other consumer's wgmmas interleaved
with them, plus the drain); prom0 = I1 - W0 (half 0's promotion and half 1's wgmma issue), prom1 = E - W1;
skew_W0 = W0_1 - W0_0 (do the two consumers' groups finish together: a convoy, or half a K block apart: the
overlap the model assumes), skew_F = F_1 - F_0. Producer: trip = min_c F - Q, hold = max_c E[g+1]... as
benchmarks/tma_step.py.

Variations (PTX patches, each checked to change something):
- `notma`: the producer arrives on full[s] with no TMA load: the consumers alone;
- `noscale`: the scale loads (ld.shared from the stage's scale slots) replaced by 1.0;
- `nopromote`: one promotion FMA per N half kept (the block accumulators stay live), the other 63 / 127 gone;
- `stagger`: consumer warpgroup 1 spins DELAY cycles before its tile walk, so the two consumers' wgmma groups
  start one group apart (the DeepGEMM overlap: one's promotion under the other's wgmmas) instead of together.
- `--set 3` (which part of the scales costs): `noscale_a` / `noscale_b` (only scale_a's or scale_b's loads, both
  ld.shared from the stage's scale slots, replaced by 1.0). Session 13's set 3 ran on the kernel that read
  both by ld.global (scale_a 8 rows' lines per warp load) with more cases (`scale_ca` / `scale_cg`: .ca / .cg
  loads; `scale_smem`: the same loads from shared memory; `scale_a_line`: scale_a's loads on one line):
  benchmarks/data/fp8_step_3*_h200_2026-12-02.json.
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

L8, L4 = (8192, 8192, 8192), (4096, 4096, 4096)
W256, W128 = (128, 256, 64), (128, 128, 64)
SCALE_LOADS = re.compile(r"// scale_(a|b) of each [^\n]*\n(?:\s*ld\.shared\.f32 [^\n]*\n)+")
DELAY = 300  # cycles: about one N half's wgmma group of a consumer (4 x m64n128k32 e4m3 = 256 MAC cycles)
RAW_CTAS, RAW_STEPS = 8, 256
# (name, shape, (bm, bn, tm), stages, patch, trace steps (0: --profile only), warm-up launches)
CASES = (
    ("8192_w256_s4", L8, W256, 4, "", 1024, 40),
    ("8192_w256_s4_prof", L8, W256, 4, "", 0, 40),
    ("8192_w256_s3", L8, W256, 3, "", 1024, 40),
    ("8192_w256_s3_prof", L8, W256, 3, "", 0, 40),
    ("8192_w128_s3", L8, W128, 3, "", 2048, 40),
    ("8192_w128_s3_prof", L8, W128, 3, "", 0, 40),
    ("8192_w256_s4_notma", L8, W256, 4, "notma", 1024, 40),
    ("8192_w256_s4_notma_prof", L8, W256, 4, "notma", 0, 40),
    ("8192_w256_s4_notma_nopromote_prof", L8, W256, 4, "notma,nopromote", 0, 40),
    ("8192_w256_s4_notma_noscale_nopromote_prof", L8, W256, 4, "notma,noscale,nopromote", 0, 40),
    ("8192_w256_s4_noscale_prof", L8, W256, 4, "noscale", 0, 40),
    ("8192_w256_s4_stagger", L8, W256, 4, "stagger", 1024, 40),
    ("8192_w256_s4_stagger_prof", L8, W256, 4, "stagger", 0, 40),
    ("8192_w256_s4_notma_stagger_prof", L8, W256, 4, "notma,stagger", 0, 40),
    ("8192_w256_s3_stagger_prof", L8, W256, 3, "stagger", 0, 40),
    ("8192_w128_s3_stagger_prof", L8, W128, 3, "stagger", 0, 40),
    ("8192_w128_s3_notma_prof", L8, W128, 3, "notma", 0, 40),
    ("4096_w256_s4", L4, W256, 4, "", 128, 40),
    ("4096_w256_s4_prof", L4, W256, 4, "", 0, 40),
)

# `--set 2`: the consumer side alone, per consumer count. C1 = one consumer warpgroup (64 x N tiles, t64): its K
# block is its own chain (issue, the two N halves' wgmma groups, waits, promotion) with the tensor pipe to itself;
# beside the same ladder for the two-consumer 128x256 (is T2 = max(tensor, chain) or more?)
C1W, C1N = (64, 256, 64), (64, 128, 64)
CASES2 = (
    ("8192_w256_s4_prof", L8, W256, 4, "", 0, 40),
    ("8192_w256_s4", L8, W256, 4, "", 1024, 40),
    ("8192_w256_s3_prof", L8, W256, 3, "", 0, 40),
    ("8192_w128_s3_prof", L8, W128, 3, "", 0, 40),
    ("8192_w256_s4_notma_prof", L8, W256, 4, "notma", 0, 40),
    ("8192_w256_s4_notma_nopromote_prof", L8, W256, 4, "notma,nopromote", 0, 40),
    ("8192_w256_s4_notma_noscale_prof", L8, W256, 4, "notma,noscale", 0, 40),
    ("8192_w256_s4_notma_noscale_nopromote_prof", L8, W256, 4, "notma,noscale,nopromote", 0, 40),
    ("8192_c1w256_s4_prof", L8, C1W, 4, "", 0, 20),
    ("8192_c1w256_s4_notma_prof", L8, C1W, 4, "notma", 0, 20),
    ("8192_c1w256_s4_notma_nopromote_prof", L8, C1W, 4, "notma,nopromote", 0, 20),
    ("8192_c1w256_s4_notma_noscale_prof", L8, C1W, 4, "notma,noscale", 0, 20),
    ("8192_c1w256_s4_notma_noscale_nopromote_prof", L8, C1W, 4, "notma,noscale,nopromote", 0, 20),
    ("8192_c1w256_s4_notma", L8, C1W, 4, "notma", 1024, 20),
    ("8192_c1w128_s4_prof", L8, C1N, 4, "", 0, 20),
    ("8192_c1w128_s4_notma_prof", L8, C1N, 4, "notma", 0, 20),
    ("4096_w256_s4_prof", L4, W256, 4, "", 0, 40),
    ("4096_w256_s3_prof", L4, W256, 3, "", 0, 40),
    ("4096_w128_s3_prof", L4, W128, 3, "", 0, 40),
)

# `--set 3`: what of the scales costs the K block (main's kernel, 8192^3 128x256 s4, profiled, with and without TMA)
CASES3 = tuple((f"8192_w256_s4_{p.replace(',', '_') or 'base'}_prof", L8, W256, 4, p, 0, 40) for p in (
    "", "noscale", "noscale_a", "noscale_b", "notma", "notma,noscale", "notma,noscale_a", "notma,noscale_b")) + (
    ("8192_w128_s3_base_prof", L8, W128, 3, "", 0, 40), ("8192_w128_s3_noscale_prof", L8, W128, 3, "noscale", 0, 40),
    ("8192_w128_s3_notma_noscale_prof", L8, W128, 3, "notma,noscale", 0, 40))

# `--set 4`: one CTA (one 128 x 256 or 128 x 128 tile, K 16384: 128 K blocks, all traced), on the H200 and, with
# --sim, in the simulator (the same trace read the same way): where does the H200's K block (1,119 cycles for the
# 128x256 pick's tile, benchmarks/hopper_sim.py) spend what the simulator's (1,024) does not?
O256, O128 = (128, 256, 16384), (128, 128, 16384)
CASES4 = (
    ("one_w256_s4", O256, W256, 4, "", 128, 5),
    ("one_w256_s4_prof", O256, W256, 4, "", 0, 5),
    ("one_w256_s4_notma", O256, W256, 4, "notma", 128, 5),
    ("one_w256_s4_notma_prof", O256, W256, 4, "notma", 0, 5),
    ("one_w256_s4_notma_noscale_nopromote_prof", O256, W256, 4, "notma,noscale,nopromote", 0, 5),
    ("one_w128_s3", O128, W128, 3, "", 128, 5),
    ("one_w128_s3_prof", O128, W128, 3, "", 0, 5),
)

STAGGER = """\t{{
\t.reg .pred %sg_p;
\t.reg .u64 %sg_t0, %sg_t1;
\t.reg .u32 %sg_w;
\tmov.u32 %sg_w, %tid.x;
\tsetp.lt.u32 %sg_p, %sg_w, 256;
\t@%sg_p bra $L_sg_done;
\tmov.u64 %sg_t0, %clock64;
$L_sg_loop:
\tmov.u64 %sg_t1, %clock64;
\tsub.u64 %sg_t1, %sg_t1, %sg_t0;
\tsetp.lt.u64 %sg_p, %sg_t1, {delay};
\t@%sg_p bra $L_sg_loop;
$L_sg_done:
\t}}
"""


def patch(ptx: str, what: str) -> str:
    """The probe's PTX variations (the module docstring); each checked to have changed something."""
    from benchmarks.tma_step import patch as tma_patch

    for w in filter(None, what.split(",")):
        before = ptx
        if w == "notma":
            ptx = tma_patch(ptx, "notma", 2)
        elif w in ("noscale", "noscale_a", "noscale_b"):  # scale loads (the ld.shared.f32 after the kernel's
            # "// scale_a of each row" / "// scale_b of each N half" comments) -> 1.0
            arrays = {"noscale": "ab", "noscale_a": "a", "noscale_b": "b"}[w]
            ptx = SCALE_LOADS.sub(lambda m, arrays=arrays: m.group(0) if m.group(1) not in arrays else re.sub(
                r"ld\.shared\.f32 (%f\d+), \[[^\]]+\];", r"mov.f32 \1, 0f3F800000;", m.group(0)), ptx)
        elif w == "nopromote":  # keep the first promotion FMA after each "Promotion" comment
            out, keep = [], False
            for line in ptx.split("\n"):
                if "// Promotion" in line:
                    keep = True
                elif re.match(r"\s*fma\.rn\.f32 (%f\d+), %f\d+, %f\d+, \1;", line):
                    if not keep:
                        continue
                    keep = False
                out.append(line)
            ptx = "\n".join(out)
        elif w == "stagger":
            k = ptx.index("setmaxnreg.inc.sync.aligned.u32")
            k = ptx.index("\n", k) + 1
            ptx = ptx[:k] + STAGGER.format(delay=DELAY) + ptx[k:]
        if ptx == before:
            raise ValueError(f"patch {w!r} changed nothing")
    return ptx


def emit(shape: tuple[int, int, int], tile: tuple[int, int, int], stages: int, what: str,
         steps: int) -> tuple[str, dict]:
    """The tiling's kernel (planned with h200.yaml for its prediction and model terms), traced or profiled, patched."""
    from benchmarks.fp8_cta import spec_of
    from benchmarks.tma_step import planned
    from kernelgen.variants import wgmma_fp8

    bm, bn, tm = tile
    spec = spec_of(shape, [])
    t = wgmma_fp8.fp8_tiling(bm, bn, tm, stages)
    pred, model = planned(spec, "wgmma_fp8", t)
    ptx = wgmma_fp8.emit(spec, t, pred, trace=steps) if steps else wgmma_fp8.emit(spec, t, pred, profile=True)
    return patch(ptx, what), {"tiling": t.key(), "model": model, "ktiles": -(-shape[2] // 128),
                              "halves": wgmma_fp8.halves_of(t)}


def analyse(buf: np.ndarray, timer: np.ndarray, grid: int, stages: int, ktiles: int, halves: int,
            tiles_per_cta: list[int], steps: int) -> dict:
    from benchmarks.tma_step import _stats, read_records, read_trace
    from kernelgen.variants.wgmma_fp8 import CONSUMER_SLOTS, TRACE_SLOTS

    ns = len(TRACE_SLOTS)
    out: dict = {}
    v, rec, _ = read_records(buf, timer, grid, out)
    span = (rec[:, 3] - rec[:, 0]).astype(float)
    tiles = np.asarray(tiles_per_cta[:grid])
    top = tiles == tiles.max()
    out["cycles_per_cta_busiest"] = float(span[top].mean())
    out["tiles_busiest"] = int(tiles.max())
    out["k_block_per_cta"] = float(span[top].mean() / (tiles.max() * ktiles))  # epilogues included
    out["span"] = _stats(span)
    if not steps:
        return out
    tr, n = read_trace(v, rec, grid, ns, steps, out, (RAW_CTAS, RAW_STEPS))
    if n < stages + 4:
        return out
    f = tr.astype(float)
    f[tr == 0] = np.nan
    P, Q = f[:, :, 0], f[:, :, 1]
    C = [f[:, :, 2 + CONSUMER_SLOTS * c:2 + CONSUMER_SLOTS * (c + 1)] for c in range(2)]  # F I0 W0 I1 W1 E
    g = np.arange(stages + 1, n - stages - 1)
    g = g[(g % ktiles != 0) & ((g + 1) % ktiles != 0)]  # no tile's first or last K block (epilogue, tail)
    m: dict = {}
    for c, X in enumerate(C):
        F, I0, W0, I1, W1, E = (X[:, :, k] for k in range(CONSUMER_SLOTS))
        m[f"step{c}"] = F[:, g] - F[:, g - 1]
        m[f"busy{c}"] = E[:, g] - F[:, g]
        m[f"starve{c}"] = F[:, g + 1] - E[:, g]
        m[f"issue0_{c}"] = I0[:, g] - F[:, g]
        m[f"group0_{c}"] = W0[:, g] - I0[:, g]
        if halves == 2:
            m[f"prom0_{c}"] = I1[:, g] - W0[:, g]
            m[f"group1_{c}"] = W1[:, g] - I1[:, g]
            m[f"prom1_{c}"] = E[:, g] - W1[:, g]
        else:
            m[f"prom0_{c}"] = E[:, g] - W0[:, g]
    m["skew_F"] = C[1][:, g, 0] - C[0][:, g, 0]
    m["skew_W0"] = C[1][:, g, 2] - C[0][:, g, 2]
    if halves == 2:
        m["skew_W1"] = C[1][:, g, 4] - C[0][:, g, 4]
    Fmin = np.nanmin(np.stack([X[:, :, 0] for X in C]), axis=0)
    rel = 4 if halves == 2 else 2  # the release follows the last half's wait_group 0
    Rmax = np.nanmax(np.stack([X[:, :, rel] for X in C]), axis=0)
    m["reissue"] = P[:, g - 1 + stages] - Rmax[:, g]
    m["tma_issue"] = Q[:, g] - P[:, g]
    m["trip"] = Fmin[:, g] - Q[:, g]
    m["hold"] = Rmax[:, g] - Fmin[:, g]
    m["ahead"] = Fmin[:, g] - P[:, g]
    out["stats"] = {k: _stats(x.ravel()) for k, x in m.items()}
    return out


def simulated(text: str, launch, isa: str, row: dict) -> tuple[np.ndarray, np.ndarray]:
    """One run of the kernel in the simulator (h200.yaml, `isa` ptx or sass, inputs warm in the L2 as after their
    upload): its profile and timer buffers, as measure() returns the GPU's."""
    from benchmarks.gpucommon import simulate_isa
    from sim.launch import launch_from_metadata, read_metadata

    full = launch_from_metadata(read_metadata(text), np.random.default_rng(1))  # with the tensor maps
    given = {x.role: x.array for x in launch.args if x.kind == "buffer" and x.role in ("A", "B")}
    for x in full.args:
        if x.role in given:
            x.array = given[x.role]
    launch = full
    roles = [x.role for x in launch.args]
    t0 = time.time()
    r = simulate_isa(text, launch, isa, row["case"], warm_l2=True)
    row["sim_seconds"] = round(time.time() - t0, 1)
    return np.asarray(r.outputs[roles.index("profile")]), np.asarray(r.outputs[roles.index("timer")])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget", type=float, default=200.0, help="seconds after which no case is started")
    ap.add_argument("--only", default="", help="comma-separated case names")
    ap.add_argument("--compile-only", action="store_true", help="emit, patch and ptxas-check every case, no GPU")
    ap.add_argument("--set", default="1", choices=("1", "2", "3", "4"),
                    help="the case table: CASES (run 1), CASES2, CASES3, CASES4 (one CTA)")
    ap.add_argument("--sim", choices=("ptx", "sass"), help="here: run the cases in the simulator (h200.yaml) instead")
    a = ap.parse_args()
    from benchmarks.fp8_cta import fast_e4m3
    from benchmarks.gpucommon import nvidia_smi
    from sim.launch import launch_from_metadata, read_metadata

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    res: dict = {"date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                 "load_average": os.getloadavg()[0], "delay": DELAY, "rows": []}
    res["device"] = nvidia_smi("name,driver_version,clocks.max.sm")
    inputs: dict = {}
    from benchmarks.tma_step import case_rows

    table = {"1": CASES, "2": CASES2, "3": CASES3, "4": CASES4}[a.set]
    if a.sim:
        res["device"] = f"simulator ({a.sim} mode, h200.yaml)"
    for row, (_, shape, tile, stages, what, steps, warm) in case_rows(table, a.only, a.budget, res):
        try:
            text, info = emit(shape, tile, stages, what, steps)
            row.update(info)
            if a.compile_only:
                from sim.sass.tools import compile_ptx

                log = compile_ptx(text).ptxas_log
                row["ptxas"] = re.findall(r"Used \d+ registers|\d+ bytes spill stores", log)
                res["rows"].append(row)
                print(json.dumps({k: row[k] for k in ("case", "tiling", "ptxas")}), flush=True)
                continue
            from benchmarks.tma_step import measure
            from validation.gpu_tma import without_tensormaps

            meta = read_metadata(text) or {}
            m0 = without_tensormaps(meta)
            m0 = {**m0, "params": [{**p, "init": "zeros"} if p.get("role") in ("A", "B") else p
                                   for p in m0["params"]]}
            launch = launch_from_metadata(m0, np.random.default_rng(1))
            rng = np.random.default_rng(2)
            for x in launch.args:
                arr = x.array
                if x.role in ("A", "B") and x.kind == "buffer" and arr is not None:
                    key = (x.role, arr.shape)
                    if key not in inputs:
                        inputs[key] = fast_e4m3(arr.size, rng).reshape(arr.shape).astype(arr.dtype)
                    x.array = inputs[key]
            got = simulated(text, launch, a.sim, row) if a.sim else measure(text, launch, shape, warm, 10, row)
            if got is not None:
                row.update(analyse(*got, meta["grid"][0], stages, info["ktiles"], info["halves"],
                                   meta["profile"]["tiles_per_cta"], steps))
        except Exception as e:  # noqa: BLE001 - record and go on
            row["error"] = f"{type(e).__name__}: {e}"[:400]
        res["rows"].append(row)
        brief = {k: v for k, v in row.items() if k not in ("raw", "model", "span")}
        if "stats" in brief:
            brief["stats"] = {k: round(v["med"]) for k, v in brief["stats"].items() if v}
        print(json.dumps(brief, default=float)[:1600], flush=True)
        res["seconds"] = time.time() - t0
        (out / f"fp8_step{'' if a.set == '1' else '_' + a.set}{'_sim_' + a.sim if a.sim else ''}.json").write_text(
            json.dumps(res, default=float))
    if a.compile_only:
        (out / f"fp8_step{'' if a.set == '1' else '_' + a.set}.json").write_text(json.dumps(res, default=float))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
