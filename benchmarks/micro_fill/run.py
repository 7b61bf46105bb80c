"""Run fill.ptx on the GPU: tile arrival time vs batch bytes, L2 / DRAM, unloaded / loaded.

    (device) source .devwheels/install.sh && python3 benchmarks/micro_fill/run.py --out $OUT

Writes OUT/micro_fill.json: for each (source, grid, bytes) the median over CTAs of each CTA's median
cycles per batch (the first batch of each CTA dropped: it warms the L2 / TLB). Every batch is
followed by a check that shared memory holds what was copied (the float sum of thread 0's word).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def main() -> int:
    out = Path(sys.argv[sys.argv.index("--out") + 1])
    sys.path.insert(0, str(HERE.parents[1]))
    from benchmarks.gpucommon import pycuda_context, write_probe

    with pycuda_context() as (cuda, dev, ctx):
        mod = cuda.module_from_buffer((HERE / "fill.ptx").read_bytes())
        fn = mod.get_function("fill")
        fn.set_attribute(cuda.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, 65536)
        sms = dev.get_attribute(cuda.device_attribute.MULTIPROCESSOR_COUNT)
        threads, iters = 128, 33
        big = 512 << 20
        src_host = np.random.default_rng().standard_normal(big // 4).astype(np.float32)
        src = cuda.mem_alloc(big)
        cuda.memcpy_htod(src, src_host)
        scratch = cuda.mem_alloc(256 << 20)  # written before each DRAM run: evicts the L2
        rows = []
        for source in ("l2", "dram"):
            for grid in (1, sms):
                for per_thread in (1, 2, 4, 8, 16, 32):
                    batch = per_thread * threads * 16
                    window = batch if source == "l2" else batch * iters
                    if grid * window > big:
                        continue
                    times = cuda.mem_alloc(grid * iters * 8)
                    sink = cuda.mem_alloc(grid * threads * 4)
                    cuda.memset_d32(sink, 0x7FC00000, grid * threads)  # NaN poison
                    if source == "dram":
                        cuda.memset_d32(scratch, 0, (256 << 20) // 4)
                    ctx.synchronize()
                    fn(src, np.int64(window), np.int32(per_thread), np.int32(iters), times, sink,
                       block=(threads, 1, 1), grid=(grid, 1, 1), shared=batch)
                    ctx.synchronize()
                    t = np.empty(grid * iters, np.int64)
                    cuda.memcpy_dtoh(t, times)
                    s = np.empty(grid * threads, np.float32)
                    cuda.memcpy_dtoh(s, sink)
                    # thread tid sums word tid of every batch it saw: recompute on the host
                    ok = True
                    for cta in (0, grid - 1):
                        base = cta * window // 4
                        offs = [(i * batch) % window // 4 if source == "dram" else 0 for i in range(iters)]
                        ref = sum(float(src_host[base + o + 5]) for o in offs)
                        ok &= abs(float(s[cta * threads + 5]) - ref) <= 1e-3 * max(1.0, abs(ref))
                    per_cta = np.median(t.reshape(grid, iters)[:, 1:], axis=1)
                    rows.append({"source": source, "grid": grid, "bytes": batch, "per_thread": per_thread,
                                 "cycles_median": float(np.median(per_cta)),
                                 "cycles_p10": float(np.percentile(per_cta, 10)),
                                 "cycles_p90": float(np.percentile(per_cta, 90)), "check": bool(ok)})
                    print(json.dumps(rows[-1]), flush=True)
                    times.free()
                    sink.free()
        write_probe(out, "micro_fill", dev, "benchmarks/micro_fill/fill.cu", rows, sms=sms, threads=threads,
                    iters=iters)
    return 0


if __name__ == "__main__":
    t0 = time.time()
    rc = main()
    print(f"{time.time() - t0:.1f} s")
    raise SystemExit(rc)
