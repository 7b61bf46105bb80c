"""Run buffer.ptx on the GPU: the bytes of global stores an SM accepts before its warps' store issue waits
for the drain (see buffer.cu; docs/fidelity.md, the planner's epilogue).

    (device) source .devwheels/install.sh >/dev/null 2>&1; export PYTHONPATH="$PWD:$PYTHONPATH"
             python3 benchmarks/store_buffer/run.py --out $OUT

Writes OUT/store_buffer.json: per (threads, stores per thread, CTAs, fence) the median over CTAs and launches
of the latest warp's accept span and of thread 0's span to the barrier (after a membar.gl with fence 1), and
a check of what d holds. About 1 minute.
"""

from __future__ import annotations

import datetime
import json
import os
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
# (threads per CTA, float4 stores per thread): 512 B .. 128 KiB per CTA
SIZES = [(32, 1), (32, 2), (32, 4), (128, 1), (128, 2), (128, 3), (128, 4), (128, 5), (128, 6), (128, 8),
         (128, 10), (128, 12), (128, 16), (128, 24), (128, 32), (128, 48), (128, 64), (256, 32)]
GRIDS = [1, 132]
REPEATS = 7


def main() -> int:
    out = Path(sys.argv[sys.argv.index("--out") + 1])
    import pycuda.driver as cuda

    cuda.init()
    dev = cuda.Device(0)
    ctx = dev.make_context()
    rows = []
    try:
        fn = cuda.module_from_buffer((HERE / "buffer.ptx").read_bytes()).get_function("store_buffer")
        cap = max(th * n for th, n in SIZES) * max(GRIDS)
        d = cuda.mem_alloc(cap * 16)
        times = cuda.mem_alloc(max(GRIDS) * 16)
        for fence in (0, 1):
            for grid in GRIDS:
                for th, n in SIZES:
                    acc, span = [], []
                    for _ in range(REPEATS):
                        cuda.memset_d32(d, 0x7FC00000, cap * 4)
                        fn(d, np.int32(n), np.int32(fence), times, block=(th, 1, 1), grid=(grid, 1, 1))
                        ctx.synchronize()
                        t = np.empty(2 * grid, np.int64)
                        cuda.memcpy_dtoh(t, times)
                        acc.append(float(np.median(t[0::2])))
                        span.append(float(np.median(t[1::2])))
                    host = np.empty((grid, n, th, 4), np.float32)
                    cuda.memcpy_dtoh(host, d)
                    i, x, b = np.meshgrid(np.arange(n), np.arange(th), np.arange(grid), indexing="ij")
                    ok = bool(np.array_equal(host[..., 0], i.transpose(2, 0, 1).astype(np.float32))
                              and np.array_equal(host[..., 2], b.transpose(2, 0, 1).astype(np.float32)))
                    rows.append({"threads": th, "stores_per_thread": n, "bytes_per_cta": th * n * 16, "ctas": grid,
                                 "fence": fence, "accept_first": acc[0], "accept": float(np.median(acc[1:])),
                                 "span_first": span[0], "span": float(np.median(span[1:])), "check": ok})
                    print(json.dumps(rows[-1]), flush=True)
        res = {"date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"), "device": dev.name(),
               "load_average": os.getloadavg()[0], "source_file": "benchmarks/store_buffer/buffer.cu", "rows": rows}
        out.mkdir(parents=True, exist_ok=True)
        (out / "store_buffer.json").write_text(json.dumps(res, indent=1))
    finally:
        ctx.pop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
