"""Run store.ptx on the GPU: kernelgen's mma epilogue store pattern alone (see store.cu).

    (device) source .devwheels/install.sh && python3 benchmarks/micro_store/run.py --out $OUT

Writes OUT/micro_store.json: per configuration the median over CTAs of the store span (cycles), the
warp store instructions per CTA, and a check that D holds r * 3 + c everywhere the grid wrote.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent

# (name, warp tile wm x wn, warps along N, warps along M, n (row stride = N), grid x, grid y)
CONFIGS = [
    ("128x256 (8 warps 64x64)", 64, 64, 4, 2, 4096, 1, 1),
    ("128x256 (8 warps 64x64)", 64, 64, 4, 2, 4096, 16, 8),
    ("128x256 (8 warps 64x64)", 64, 64, 4, 2, 4096, 16, 32),
    ("64x128 (4 warps 64x32)", 64, 32, 4, 1, 1024, 1, 1),
    ("64x128 (4 warps 64x32)", 64, 32, 4, 1, 1024, 8, 16),
    ("64x64 (4 warps 32x32)", 32, 32, 2, 2, 4096, 1, 1),
    ("64x64 (4 warps 32x32)", 32, 32, 2, 2, 4096, 64, 2),
    ("32x32 (4 warps 32x16)", 32, 16, 2, 2, 512, 16, 16),
]


def main() -> int:
    out = Path(sys.argv[sys.argv.index("--out") + 1])
    sys.path.insert(0, str(HERE.parents[1]))
    from benchmarks.gpucommon import pycuda_context, write_probe

    rows = []
    with pycuda_context() as (cuda, dev, ctx):
        fn = cuda.module_from_buffer((HERE / "store.ptx").read_bytes()).get_function("frag_store")
        for name, wm, wn, wcols, wrows, n, gx, gy in CONFIGS:
            for vec in (1, 2):
                tm, tn = wm * wrows, wn * wcols
                m = tm * gy
                assert tn * gx <= n
                d = cuda.mem_alloc(m * n * 4)
                times = cuda.mem_alloc(gx * gy * 8)
                spans = []
                for _ in range(5):  # D poisoned before each launch, as the runner poisons outputs
                    cuda.memset_d32(d, 0x7FC00000, m * n)
                    fn(d, np.int32(n), np.int32(wcols), np.int32(wm), np.int32(wn), np.int32(vec), times,
                       block=(32 * wcols * wrows, 1, 1), grid=(gx, gy, 1))
                    ctx.synchronize()
                    t = np.empty(gx * gy, np.int64)
                    cuda.memcpy_dtoh(t, times)
                    spans.append(float(np.median(t)))
                host = np.empty((m, n), np.float32)
                cuda.memcpy_dtoh(host, d)
                r, c = np.meshgrid(np.arange(m), np.arange(tn * gx), indexing="ij")
                ok = bool(np.array_equal(host[:, :tn * gx], (r * 3 + c).astype(np.float32)))
                warp_stores = (tm * tn // 32) // vec
                rows.append({"tile": name, "n": n, "grid": [gx, gy], "ctas": gx * gy, "vec": vec,
                             "warp_stores_per_cta": warp_stores, "cycles_first": spans[0],
                             "cycles_median": float(np.median(spans[1:])), "check": ok})
                print(json.dumps(rows[-1]), flush=True)
                d.free()
                times.free()
        write_probe(out, "micro_store", dev, "benchmarks/micro_store/store.cu", rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
