"""On the H200: how much of a GEMM's inputs stays in the L2 between back-to-back launches, and a TMA box's round
trip against the bytes in flight (issue 14: the wgmma_tma model at M = 64/128, docs/wgmma-tma.md section 10).

tma_l2res.ptx is benchmarks/tma_pitch's walk (thread 0 of each CTA loads `n` 8 KiB boxes [64 bf16, 64 rows] of a
K-major tensor, K = 4096, the way a GEMM CTA walks its B tile; every box is read by one CTA, once per launch) with
up to 16 boxes in flight and %globaltimer beside clock64 (the SM clock of each CTA).

- "residency": footprints of 8..88 MiB (grid x n x 8 KiB) at grids 64 and 132, 8 boxes in flight: one launch
  after a 512 MiB scratch read (cold: every box from DRAM, no dirty line in the L2), then 8 launches back to back
  (what top4.py --last and the timed launches see). Per launch the median clock64 span over the CTAs, the SM
  clock and the wall time. The back-to-back span against the cold one and the small-footprint one gives the
  fraction of boxes the L2 still held from the previous launch.
- "depth": a box's round trip and the per-SM rate against boxes in flight (1..16) at grids 64, 112 and 132, cold
  (128 boxes per CTA, 64-138 MiB, after a 512 MiB scratch read: every box from DRAM) and warm (16 boxes per CTA
  read back to back: every box from the L2).

    source .devwheels/install.sh >/dev/null 2>&1; export PYTHONPATH="$PWD:$PYTHONPATH"
    python3 benchmarks/tma_l2res/run.py --out $OUT        # writes $OUT/tma_l2res.json (~20 s)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

PTX = Path(__file__).with_name("tma_l2res.ptx")
BOX = 8192
K = 4096
KTILES = K // 64
FLUSH = 512 << 20
SIZES_MIB = tuple(range(8, 92, 4))
WARM_LAUNCHES = 8


def _stats(out: np.ndarray, grid: int, n: int) -> dict:
    """Median clock64 span over the CTAs, its max, the SM clock (span / %globaltimer span, median) and the rate."""
    v = out.astype(np.int64)
    cyc = v[:grid]
    ns = v[grid:grid + 2 * grid].reshape(grid, 2)
    dt = ns[:, 1] - ns[:, 0]
    ok = (dt > 0) & (cyc > 0)
    mhz = float(np.median(cyc[ok] / dt[ok] * 1e3)) if ok.any() else None
    span_ns = float(ns[:, 1].max() - ns[:, 0].min()) if ok.any() else None
    med = float(np.median(cyc))
    return {"cycles": med, "cycles_max": int(cyc.max()), "clock_mhz": mhz, "cycles_per_box": med / n,
            "bytes_per_cycle_per_sm": n * BOX / med,
            "gb_s": grid * n * BOX / span_ns if span_ns else None}


def run(torch, budget: float = 60.0) -> dict:
    from benchmarks.gpucommon import event_times
    from validation.tensormap import encode_tiled, prepare_cuda_python

    ptx = PTX.read_bytes()
    scratch = torch.ones(FLUSH // 4, device="cuda", dtype=torch.float32)
    scratch.sum()
    torch.cuda.synchronize()

    def evict() -> None:
        # a read of 512 MiB of clean lines: the L2 then holds none of the tensor and no dirty line whose
        # write-back would share DRAM with the timed launch (a scratch *write* leaves 60 MiB of them)
        scratch.sum()
    nrows = 132 * 64 * 3
    t = torch.zeros(nrows, K, device="cuda", dtype=torch.bfloat16)
    tmap = encode_tiled("bf16", int(t.data_ptr()), (K, nrows), (K * 2,), (64, 64), (1, 1), 128)
    t0 = time.time()

    def launcher(grid: int, n: int, depth: int):
        out = torch.zeros(3 * grid, device="cuda", dtype=torch.int64)
        call = prepare_cuda_python(ptx, "tma_l2res", (grid, 1, 1), (32, 1, 1), 16 * BOX,
                                   [("tmap", tmap), ("u64", int(out.data_ptr())), ("u32", n),
                                    ("u32", depth), ("u32", KTILES)])
        return call, out

    def launches(call, out, grid: int, n: int, count: int, flush: bool) -> list[dict]:
        got: list[dict] = []
        times = event_times(call, count, before=(lambda r: evict()) if flush else None,
                            after=lambda r: got.append(_stats(out.cpu().numpy(), grid, n)))
        for g, ms in zip(got, times):
            g["wall_ms"] = ms
        return got

    res: dict = {"box_bytes": BOX, "K": K, "flush_bytes": FLUSH, "residency": [], "depth": []}
    warm_call, warm_out = launcher(132, 8, 8)
    launches(warm_call, warm_out, 132, 8, 2, False)  # loads the module, wakes the clock
    for grid in (132, 64):
        for mib in SIZES_MIB:
            if time.time() - t0 > budget:
                res["residency"].append({"grid": grid, "footprint_mib": mib, "error": "skipped: budget"})
                continue
            n = max(1, round(mib * (1 << 20) / (grid * BOX)))
            call, out = launcher(grid, n, 8)
            cold = launches(call, out, grid, n, 2, True)
            warm = launches(call, out, grid, n, WARM_LAUNCHES, False)
            steady = warm[WARM_LAUNCHES // 2:]
            row = {"grid": grid, "n": n, "depth": 8, "footprint_bytes": grid * n * BOX, "footprint_mib": mib,
                   "cold": cold[-1], "warm": warm,
                   "warm_cycles": float(np.median([w["cycles"] for w in steady])),
                   "warm_clock_mhz": float(np.median([w["clock_mhz"] or 0 for w in steady]))}
            res["residency"].append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "warm"}), flush=True)
    for grid in (132, 112, 64):
        for depth in (1, 2, 3, 4, 5, 6, 8, 10, 12, 16):
            if time.time() - t0 > budget:
                res["depth"].append({"grid": grid, "depth": depth, "error": "skipped: budget"})
                continue
            row = {"grid": grid, "depth": depth}
            for mode, n, flush in (("cold", 128, True), ("warm", 16, False)):
                call, out = launcher(grid, n, depth)
                got = launches(call, out, grid, n, 4, flush)[1:]
                c = float(np.median([g["cycles"] for g in got]))
                row[mode] = {"n": n, "cycles": c, "clock_mhz": float(np.median([g["clock_mhz"] or 0 for g in got])),
                             "round_trip": c * min(depth, n) / n, "bytes_per_cycle_per_sm": n * BOX / c,
                             "gb_s": float(np.median([g["gb_s"] or 0 for g in got])),
                             "wall_ms": float(np.median([g["wall_ms"] for g in got]))}
            res["depth"].append(row)
            print(json.dumps(row), flush=True)
    res["seconds"] = time.time() - t0
    return res


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget", type=float, default=60.0)
    a = ap.parse_args()
    import torch

    torch.zeros(1, device="cuda")
    res = run(torch, a.budget)
    Path(a.out).mkdir(parents=True, exist_ok=True)
    (Path(a.out) / "tma_l2res.json").write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
