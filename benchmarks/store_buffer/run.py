"""Two H200 probes for the planner's cycle model (docs/fidelity.md), one run:
1. buffer.ptx: the bytes of global stores an SM accepts before its warps' store issue waits for the drain
   (see buffer.cu; the planner's epilogue, core.store_buffer_bytes);
2. cold code: a straight line of N dependent IMADs (cold_code_ptx), thread 0's clock64 span on the first
   launch of a freshly loaded module and on the launch after it (what the first pass over a kernel's code
   costs per 128-byte line of SASS: the first K-loop iteration of a freshly loaded GEMM).

    (device) source .devwheels/install.sh >/dev/null 2>&1; export PYTHONPATH="$PWD:$PYTHONPATH"
             python3 benchmarks/store_buffer/run.py --out $OUT

Writes OUT/store_buffer.json: "rows": per (threads, stores per thread, CTAs, fence) the median over CTAs and
launches of the latest warp's accept span and of thread 0's span to the barrier (after a membar.gl with
fence 1), and a check of what d holds; "cold_code": per (N, CTAs, repeat) the median over CTAs of the span
on the fresh module's first and second launch. About 1-2 minutes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
# (threads per CTA, float4 stores per thread): 512 B .. 128 KiB per CTA
SIZES = [(32, 1), (32, 2), (32, 4), (128, 1), (128, 2), (128, 3), (128, 4), (128, 5), (128, 6), (128, 8),
         (128, 10), (128, 12), (128, 16), (128, 24), (128, 32), (128, 48), (128, 64), (256, 32)]
GRIDS = [1, 132]
REPEATS = 7
CODE_SIZES = [128, 256, 512, 1024, 2048, 4096]  # IMADs (16 B of SASS each)


def cold_code_ptx(n: int) -> str:
    """A kernel of n dependent mad.lo.u32 on a run-time multiplier (ptxas 13.0 keeps all n IMADs: checked
    with nvdisasm for n = 1024); thread 0 of each CTA writes its clock64 span around them."""
    body = [f"  mad.lo.u32 %r0, %r0, %r1, {(i * 2654435761) & 0x7fffffff};" for i in range(n)]
    return "\n".join([
        ".version 8.0", ".target sm_90a", ".address_size 64", "",
        ".visible .entry cold_code(.param .u64 out, .param .u32 x)", "{",
        "  .reg .u32 %r<5>;", "  .reg .u64 %rd<8>;", "  .reg .pred %p;",
        "  mov.u64 %rd1, %clock64;", "  ld.param.u32 %r1, [x];", "  mov.u32 %r2, %tid.x;", "  add.u32 %r0, %r2, %r1;",
        *body,
        "  mov.u64 %rd2, %clock64;", "  sub.s64 %rd3, %rd2, %rd1;", "  ld.param.u64 %rd4, [out];",
        "  mov.u32 %r3, %ctaid.x;", "  mul.wide.u32 %rd5, %r3, 16;", "  add.s64 %rd4, %rd4, %rd5;",
        "  setp.ne.u32 %p, %r2, 0;", "  @%p bra DONE;", "  st.global.u64 [%rd4], %rd3;",
        "  st.global.u32 [%rd4+8], %r0;",
        "DONE:", "  ret;", "}", ""])


def cold_code(cuda, ctx) -> list[dict]:
    rows = []
    out = cuda.mem_alloc(max(GRIDS) * 16)
    for n in CODE_SIZES:
        text = cold_code_ptx(n).encode()
        for grid in GRIDS:
            for rep in range(5):
                mod = cuda.module_from_buffer(text)
                fn = mod.get_function("cold_code")
                spans = []
                for _ in range(2):  # the fresh module's first launch, then the next one
                    fn(out, np.int32(3), block=(128, 1, 1), grid=(grid, 1, 1))
                    ctx.synchronize()
                    t = np.empty(2 * grid, np.int64)
                    cuda.memcpy_dtoh(t, out)
                    spans.append(float(np.median(t[0::2])))
                rows.append({"imads": n, "sass_bytes": 16 * n, "ctas": grid, "repeat": rep, "first": spans[0],
                             "second": spans[1]})
                print(json.dumps(rows[-1]), flush=True)
                del fn, mod
    out.free()
    return rows


def main() -> int:
    out = Path(sys.argv[sys.argv.index("--out") + 1])
    sys.path.insert(0, str(HERE.parents[1]))
    from benchmarks.gpucommon import pycuda_context, write_probe

    rows = []
    with pycuda_context() as (cuda, dev, ctx):
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
        d.free()
        times.free()
        code = cold_code(cuda, ctx)
        write_probe(out, "store_buffer", dev, "benchmarks/store_buffer/buffer.cu", rows, cold_code=code)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
