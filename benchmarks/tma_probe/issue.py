"""On the H200: TMA issue back-pressure (tests/fixtures/hopper_cuda/tma_issue.ptx). 1, 2 or 4 producer warps
of one CTA (one CTA on one SM: nothing else shares the SM's TMA unit) each issue `depth` 2-D box loads (1 KiB
and 8 KiB boxes of an L2-resident 1 MiB bf16 tensor, 128-byte swizzle, as benchmarks/tma_probe/timing.py)
into their own buffers and mbarrier; clock64 per producer gives the issue cycles per load and the cycles per
phase. Producers on different sub-partitions (stride 1) or on the same one (stride 4). If the issue cost
(~63 cycles per load with one producer, docs/tma-timing.md) is the SM's TMA unit accepting the copy, two
producers each see about twice that; if it is the issuing warp's own instruction, each still sees ~63.
Writes tma_issue.json under $OUT. ``--wide``: 1 KiB boxes only, 1 / 8 / 16 / 32 producer warps (stride 1),
written to tma_issue_wide.json: where the shared unit's accept interval shows (2026-12-01's run saw no
back-pressure from 4 producers, benchmarks/data/tma_issue_2026-12-01.json).

    source .devwheels/install.sh >/dev/null 2>&1; export PYTHONPATH=$PWD; python3 benchmarks/tma_probe/issue.py [--wide]
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

PTX = ROOT / "tests" / "fixtures" / "hopper_cuda" / "tma_issue.ptx"
ITERS, WARM = 48, 8
ROWS = 8192  # 1 MiB of 128-byte rows: L2-resident after the warm-up launch


def main() -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wide", action="store_true", help="1 KiB boxes, 1/8/16/32 producers (tma_issue_wide.json)")
    wide = ap.parse_args().wide

    import pycuda.autoinit  # noqa: F401
    import pycuda.driver as cuda
    out_dir = Path(os.environ.get("OUT", "/tmp"))
    dev = cuda.Device(0)
    ptx = PTX.read_bytes()
    host = np.random.default_rng(12).integers(1, 65535, size=(ROWS, 64), dtype=np.uint16)
    dbuf = cuda.to_device(host)
    results = []
    configs = ((1, 1), (8, 1), (16, 1), (32, 1)) if wide else ((1, 1), (2, 1), (2, 4), (4, 1), (4, 4))
    for box_y in (8,) if wide else (8, 64):
        box_bytes = box_y * 128
        tmap = encode_tiled("bf16", int(dbuf), (64, ROWS), (128,), (64, box_y), (1, 1), 128)
        for producers, stride in configs:
            for depth in (1, 2, 4, 8):
                shared = producers * depth * box_bytes + 1024
                if shared > 200 * 1024:
                    continue
                out = np.zeros(32 * 2, dtype=np.uint64)
                dout = cuda.to_device(out)
                args = [("u64", int(dout)), ("tmap", tmap), ("u32", box_bytes), ("u32", box_y), ("u32", ROWS),
                        ("u32", depth), ("u32", ITERS), ("u32", WARM), ("u32", producers), ("u32", stride)]
                block = (32 * (producers - 1) * stride + 32, 1, 1)
                for _ in range(2):  # the first launch warms the L2 with the same rows
                    launch_cuda_python(ptx, "tma_issue", (1, 1, 1), block, shared, args)
                    cuda.Context.synchronize()
                got = cuda.from_device(dout, (32, 2), np.uint64).astype(np.float64)
                n = ITERS - WARM
                warps = [k * stride for k in range(producers)]
                row = {"box_bytes": box_bytes, "producers": producers, "stride": stride, "depth": depth,
                       "issue_cycles_per_load": [float(got[w, 0] / (n * depth)) for w in warps],
                       "phase_cycles": [float(got[w, 1] / n) for w in warps]}
                results.append(row)
                print(json.dumps(row), file=sys.stderr)
    meta = {"device": dev.name(), "iters": ITERS, "warm": WARM, "date": time.strftime("%Y-%m-%d"),
            "ptx": str(PTX.relative_to(ROOT)), "results": results}
    (out_dir / ("tma_issue_wide.json" if wide else "tma_issue.json")).write_text(json.dumps(meta, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
