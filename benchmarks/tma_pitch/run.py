"""On the H200: TMA load rate by DRAM access pattern and load, for the wgmma_tma model at M = 64/128
(docs/wgmma-tma.md section 7). tma_pitch.ptx walks 8 KiB boxes [64 bf16, 64 rows] as a GEMM CTA walks its
K-major B tile (64 rows, K/64 boxes along K, then the next row tile), `depth` boxes in flight per SM.

Tensors (bf16, rows x K, 128-byte swizzle; 1-2 MiB per CTA: 128-224 boxes), read cold (a 512 MiB scratch
write before each launch, so every box comes from DRAM):
- "k4096": K = 4096 (row pitch 8 KiB: one 128-byte piece per row and box, a GEMM's K-major B at K = 4096);
- "k7168": K = 7168 (pitch 14 KiB);
- "contig": K = 64 (pitch 128 B: a box is 8 KiB of consecutive bytes; benchmarks/tma_probe's "dram" pattern).
Grids 16, 64, 132; depth 2, 4, 8. Per CTA clock64 cycles and the launch's wall time (median of 5).

    source .devwheels/install.sh >/dev/null 2>&1; export PYTHONPATH=$PWD
    python3 benchmarks/tma_pitch/run.py --out $OUT     # writes $OUT/tma_pitch.json (cluster_bench.py calls it)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

PTX = Path(__file__).with_name("tma_pitch.ptx")
BOX = 8192
REPEATS = 5


def run(torch) -> list[dict]:
    from benchmarks.gpucommon import event_times
    from validation.tensormap import encode_tiled, prepare_cuda_python

    ptx = PTX.read_bytes()
    scratch = torch.empty(512 << 20, device="cuda", dtype=torch.uint8)
    rows = []
    for label, K, n in (("k4096", 4096, 128), ("k7168", 7168, 224), ("contig", 64, 128)):
        ktiles = K // 64
        nrows = 132 * 64 * -(-n // ktiles)  # every box of every CTA inside the tensor at the full grid
        t = torch.zeros(nrows, K, device="cuda", dtype=torch.bfloat16)
        tmap = encode_tiled("bf16", int(t.data_ptr()), (K, nrows), (K * 2,), (64, 64), (1, 1), 128)
        for grid in (16, 64, 132):
            for depth in (2, 4, 8):
                out = torch.zeros(grid, device="cuda", dtype=torch.int64)
                call = prepare_cuda_python(ptx, "tma_pitch", (grid, 1, 1), (32, 1, 1), 8 * BOX,
                                           [("tmap", tmap), ("u64", int(out.data_ptr())), ("u32", n),
                                            ("u32", depth), ("u32", ktiles)])
                cycles: list[float] = []
                times = event_times(call, REPEATS + 1, before=scratch.fill_,
                                    after=lambda r, c=cycles, o=out: c.append(float(np.median(o.cpu().numpy()))))
                times, cycles = times[1:], cycles[1:]  # the first launch loads the module
                ms, cyc = float(np.median(times)), max(1.0, float(np.median(cycles)))
                nbytes = n * BOX
                rows.append({"tensor": label, "K": K, "grid": grid, "depth": depth, "boxes_per_cta": n,
                             "wall_ms": ms, "cycles_per_cta": cyc, "cycles_per_box": cyc / n,
                             "bytes_per_cycle_per_sm": nbytes / cyc,
                             "total_tb_s_wall": grid * nbytes / (ms * 1e-3) / 1e12})
                print(json.dumps(rows[-1]), flush=True)
        del t
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    import torch

    torch.zeros(1, device="cuda")
    rows = run(torch)
    Path(a.out).mkdir(parents=True, exist_ok=True)
    (Path(a.out) / "tma_pitch.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
