"""On the H200: TMA latency, issue cost and bandwidth (tests/fixtures/hopper_cuda/tma_time.ptx). Thread 0
of each CTA issues `depth` 2-D box loads (inner dimension 64 bf16 = 128 bytes, 128-byte swizzle, box rows
8/64/128 = 1/8/16 KiB) that signal one mbarrier, waits for the phase and repeats; clock64 per CTA gives
the issue cycles per load and the cycles per phase. Tensors of 1 MiB (L2-resident: the measured launch
follows a warm-up launch over the same rows) and 512 MiB (DRAM: the warm-up launch reads the other
half), grids of 1 CTA and one CTA per SM. Writes tma_timing.json under $OUT.

    source .devwheels/install.sh && python3 benchmarks/tma_probe/timing.py
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from validation.tensormap import encode_tiled, launch_cuda_python  # noqa: E402

PTX = ROOT / "tests" / "fixtures" / "hopper_cuda" / "tma_time.ptx"
ITERS, WARM = 48, 8


def main() -> int:
    import argparse

    import pycuda.autoinit  # noqa: F401
    import pycuda.driver as cuda

    ap = argparse.ArgumentParser()
    ap.add_argument("--l2-rows", type=int, default=8192, help="rows of 128 B of the L2 tensor (default 1 MiB)")
    ap.add_argument("--name", default="tma_timing", help="output file stem under $OUT")
    a = ap.parse_args()
    out_dir = Path(os.environ.get("OUT", "/tmp"))
    dev = cuda.Device(0)
    sms = dev.get_attribute(cuda.device_attribute.MULTIPROCESSOR_COUNT)
    clock_khz = dev.get_attribute(cuda.device_attribute.CLOCK_RATE)
    ptx = PTX.read_bytes()
    rng = np.random.default_rng(11)
    tensors = {}
    for label, rows in (("l2", a.l2_rows), ("dram", 1 << 22)):
        host = rng.integers(1, 65535, size=(rows, 64), dtype=np.uint16)
        tensors[label] = (rows, cuda.to_device(host))
    results = []
    for label, (rows, dbuf) in tensors.items():
        for box_y in (8, 64, 128):
            box_bytes = box_y * 128
            # the measured launch reads what the warm-up launch left in L2 (l2) or the buffer's other half (dram)
            half = rows // 2 if label == "dram" else 0
            warm_map = encode_tiled("bf16", int(dbuf), (64, rows - half), (128,), (64, box_y), (1, 1), 128)
            tmap = encode_tiled("bf16", int(dbuf) + half * 128, (64, rows - half), (128,), (64, box_y), (1, 1), 128)
            for depth in (1, 2, 4, 8):
                if depth * box_bytes > 128 * 1024:
                    continue
                for grid in (1, sms):
                    out = np.full(grid * 2, 0, dtype=np.uint64)
                    dout = cuda.to_device(out)
                    args = [("u64", int(dout)), ("tmap", tmap), ("u32", box_bytes), ("u32", box_y),
                            ("u32", rows - half), ("u32", depth), ("u32", ITERS), ("u32", WARM)]
                    launch_cuda_python(ptx, "tma_time", (grid, 1, 1), (32, 1, 1), depth * box_bytes + 1024,
                                       [args[0], ("tmap", warm_map), *args[2:]])
                    cuda.Context.synchronize()
                    t0 = time.perf_counter()
                    launch_cuda_python(ptx, "tma_time", (grid, 1, 1), (32, 1, 1), depth * box_bytes + 1024, args)
                    cuda.Context.synchronize()
                    wall = time.perf_counter() - t0
                    got = cuda.from_device(dout, (grid, 2), np.uint64).astype(np.float64)
                    n = ITERS - WARM
                    issue = got[:, 0] / (n * depth)
                    phase = got[:, 1] / n
                    row = {"tensor": label, "rows": rows, "box_rows": box_y, "box_bytes": box_bytes, "depth": depth,
                           "grid": grid, "issue_cycles_per_load_median": float(np.median(issue)),
                           "phase_cycles_median": float(np.median(phase)), "phase_cycles_max": float(phase.max()),
                           "bytes_per_cycle_per_sm": float(depth * box_bytes / np.median(phase)),
                           "wall_s_incl_launch": wall}
                    results.append(row)
                    print(json.dumps(row), file=sys.stderr)
    meta = {"device": dev.name(), "sms": sms, "clock_khz": clock_khz, "iters": ITERS, "warm": WARM,
            "date": time.strftime("%Y-%m-%d"), "ptx": str(PTX.relative_to(ROOT)), "results": results}
    meta["l2_rows"] = a.l2_rows
    (out_dir / f"{a.name}.json").write_text(json.dumps(meta, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
