"""On the H200: the TMA store's drain rate, what wgmma_tma's TMA-store epilogue model needs (docs/wgmma-tma.md
4d: the model caps it by [l2.write_bandwidth_gbps], a figure measured for st.global epilogues).

tma_store_bw.ptx: thread 0 of each CTA stores a 16 KiB f32 slab (box [32, 128], 128-byte swizzle: the
epilogue's staging slab) `n` times with cp.async.bulk.tensor.2d, up to 8 bulk groups in flight, then waits for
the writes. Two tensors: "dram", 4096 f32 columns (16 KiB rows, 128 rows per CTA: 276 MiB at 132 CTAs, past the
60 MiB L2) and "l2", 256 columns (1 KiB rows, 17 MiB). Grids 1, 33, 66, 132; per CTA clock64 cycles and the
launch's wall time (CUDA events, median of 10).

    source .devwheels/install.sh >/dev/null 2>&1; export PYTHONPATH=$PWD
    python3 benchmarks/tma_store/run.py --out $OUT     # writes $OUT/tma_store.json (cluster_bench.py calls it)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

PTX = Path(__file__).with_name("tma_store_bw.ptx")
ROWS, STORES, REPEATS = 128, 256, 10


def run(torch) -> list[dict]:
    from benchmarks.gpucommon import event_times
    from validation.tensormap import encode_tiled, prepare_cuda_python

    ptx = PTX.read_bytes()
    rows = []
    for label, cols in (("dram", 4096), ("l2", 256)):
        for grid in (1, 33, 66, 132):
            d = torch.zeros(132 * ROWS, cols, device="cuda", dtype=torch.float32)
            out = torch.zeros(grid, device="cuda", dtype=torch.int64)
            tmap = encode_tiled("f32", int(d.data_ptr()), (cols, 132 * ROWS), (cols * 4,), (32, ROWS), (1, 1), 128)
            call = prepare_cuda_python(ptx, "tma_store_bw", (grid, 1, 1), (32, 1, 1), 16384,
                                       [("tmap", tmap), ("u64", int(out.data_ptr())), ("u32", STORES),
                                        ("u32", cols // 32)])
            call()
            torch.cuda.synchronize()
            cycles: list[float] = []
            times = event_times(call, REPEATS,
                                after=lambda r, c=cycles, o=out: c.append(float(np.median(o.cpu().numpy()))))
            ms, cyc = float(np.median(times)), max(1.0, float(np.median(cycles)))
            nbytes = STORES * 16384
            rows.append({"tensor": label, "columns": cols, "grid": grid, "stores_per_cta": STORES,
                         "bytes_per_cta": nbytes, "wall_ms": ms, "cycles_per_cta": cyc,
                         "bytes_per_cycle_per_sm_clock64": nbytes / cyc,
                         "bytes_per_cycle_per_sm_wall": nbytes / (ms * 1e-3 * 1.98e9),  # at clock_mhz 1980
                         "total_gb_s": grid * nbytes / (ms * 1e-3) / 1e9})
            print(json.dumps(rows[-1]), flush=True)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    import torch

    torch.zeros(1, device="cuda")
    rows = run(torch)
    Path(a.out).mkdir(parents=True, exist_ok=True)
    (Path(a.out) / "tma_store.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
