"""On the H200: mma.sync m16n8k16 throughput on one SM (benchmarks/micro_hmma/hmma_rate.cu) for 1-32 warps
per CTA and 1, 2, 4, 8 independent accumulators per warp. Decides whether hmma_indep's cost is a limit per
sub-partition (cycles per HMMA per sub-partition constant over warp counts) or per warp (scales with
the warps). Writes hmma_rate.json under $OUT.

    source .devwheels/install.sh && python3 benchmarks/micro_hmma/run.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ITERS = 512


def main() -> int:
    import pycuda.autoinit  # noqa: F401
    import pycuda.driver as cuda

    out_dir = Path(os.environ.get("OUT", "/tmp"))
    cubin = out_dir / "hmma_rate.cubin"
    subprocess.run(["nvcc", "-arch=sm_90a", "-cubin", "-O3", "-o", str(cubin), str(HERE / "hmma_rate.cu")], check=True)
    mod = cuda.module_from_file(str(cubin))
    names = {n: f"_Z9hmma_rateILi{n}EEvPKjPfPyi" for n in (1, 2, 4, 8)}
    rng = np.random.default_rng(1)
    din = cuda.to_device(rng.integers(1, 2**15, 256, dtype=np.uint32) & np.uint32(0x3BFF3BFF))
    rows = []
    for nacc, sym in names.items():
        fn = mod.get_function(sym)
        for warps in (1, 2, 4, 8, 16, 32):
            threads = 32 * warps
            dout = cuda.mem_alloc(threads * 4)
            cyc = np.zeros(warps, np.uint64)
            dcyc = cuda.to_device(cyc)
            for _ in range(2):  # warm-up, then measured
                fn(din, dout, dcyc, np.int32(ITERS), block=(threads, 1, 1), grid=(1, 1))
                cuda.Context.synchronize()
            got = cuda.from_device(dcyc, (warps,), np.uint64).astype(np.float64)
            per_warp = float(np.median(got)) / (ITERS * nacc)  # cycles between one warp's HMMAs
            span = float(got.max())
            sub = -(-warps // 4)  # warps per sub-partition (4 per SM)
            rows.append({"nacc": nacc, "warps": warps, "cycles_per_hmma_per_warp": per_warp,
                         "cycles_per_hmma_per_subpartition": span / (ITERS * nacc * sub),
                         "loop_cycles_max": span})
            print(json.dumps(rows[-1]), file=sys.stderr)
    meta = {"device": cuda.Device(0).name(), "date": time.strftime("%Y-%m-%d"), "iters": ITERS,
            "kernel": "benchmarks/micro_hmma/hmma_rate.cu", "results": rows}
    (out_dir / "hmma_rate.json").write_text(json.dumps(meta, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
