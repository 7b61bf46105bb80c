"""H200 pass for int8 x int8 -> int32 on the wgmma path (kernelgen --variant wgmma_tma with s8 A and B, issue 16):
exact numpy checks, then throughput against torch._int_mm. One invocation, JSON under OUT:

    source .devwheels/install.sh && python3 benchmarks/s8_check.py --out $OUT

1. checks: each (shape, tiling, out dtype, epilogue) kernel is compiled here and checked by ``python -m validation
   gpu`` in its own process (benchmarks/gpucommon.gpu_case): random s8 A and B; an s32 D must equal numpy's
   integer sums exactly (rtol 0), a dequantising f32 / bf16 D (alpha) is within its tolerance.
2. speed: the planner's pick (s32 D) at 4096^3 and 8192^3, median of --repeats launches, 4096^3 checked
   exactly, with its prediction; torch._int_mm (A row-major, B col-major, int32 out) on the same shape in the
   same run (gpu_bench.cublas_tflops), and the mma variant's s8 kernel beside it. "tflops" are 10^12 int ops/s.

Writes OUT/s8_check.json: {"device", "checks": [...], "speed": [...]}.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.gpu_bench import cublas_tflops  # noqa: E402
from benchmarks.gpucommon import compile_spec, gpu_case, timed_case  # noqa: E402

# odd edges (TMA zero fill past M, N, K), a partial last K tile (K % 128), one and two consumer warpgroups,
# TILE_N 256 with rolling s32 staging slabs, dequantising epilogues, several persistent tiles per CTA
CHECKS = [
    (200, 136, 272, [], "s32", {}),
    (200, 136, 272, ["TILE_M in [64, 64]", "TILE_N in [64, 64]"], "s32", {}),
    (200, 264, 272, ["TILE_M in [128, 128]", "TILE_N in [256, 256]"], "s32", {}),
    (1000, 520, 784, ["TILE_M in [256, 256]"], "s32", {}),
    (1000, 520, 784, [], "f32", {"alpha": 0.5, "epilogue": ["relu"]}),
    (200, 136, 272, [], "bf16", {"alpha": 0.25}),
    (64, 7168, 4096, [], "s32", {}),
    (4096, 4096, 4096, [], "s32", {}),
]
SPEED = [(4096, 4096, 4096), (8192, 8192, 8192)]


def compile_case(M: int, N: int, K: int, tiling: list[str], out: str, extra: dict, d: Path,
                 variant: str = "wgmma_tma") -> Path:
    spec: dict = {"M": M, "N": N, "K": K, "dtype": {"a": "s8", "b": "s8", "out": out}, **extra}
    if tiling:
        spec["tiling"] = tiling
    return compile_spec(spec, variant, d)


def run_speed(out: Path, repeats: int, timeout: int) -> list[dict]:
    from sim.hw import load_hw

    clock = load_hw("h200").clock_mhz
    rows = []
    for M, N, K in SPEED:
        lib = cublas_tflops(M, N, K, "s8", repeats)
        for variant in ("wgmma_tma", "mma"):
            make = partial(compile_case, M, N, K, [], "s32", {}, out / f"speed_{M}_{variant}", variant)
            row = timed_case({"M": M, "N": N, "K": K, "variant": variant, "int_mm_tops": lib}, make, repeats,
                             M * N * K <= 4096**3, timeout, clock)
            assert row is not None
            if lib and "tflops" in row:
                row["vs_int_mm"] = row["tflops"] / lib
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--timeout", type=int, default=90, help="seconds per kernel process (default 90)")
    ap.add_argument("--repeats", type=int, default=20)
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    kernels = Path(tempfile.mkdtemp(prefix="s8_check_"))  # the PTX stays off OUT
    rows = []
    for M, N, K, tiling, dout, extra in CHECKS:
        name = f"s8_{M}x{N}x{K}_{dout}" + "".join(f"_{r.split()[0]}{r.split('[')[1].split(',')[0]}" for r in tiling)
        row: dict = {"case": name, "out": dout, "extra": extra}
        rows.append(gpu_case(row, partial(compile_case, M, N, K, tiling, dout, extra, kernels / name), a.timeout))
    res = {"date": time.strftime("%Y-%m-%d", time.gmtime()), "checks": rows,
           "speed": run_speed(kernels, a.repeats, 300), "seconds": time.time() - t0}
    (out / "s8_check.json").write_text(json.dumps(res, indent=1))
    bad = [r["case"] for r in rows if not r.get("passed")]
    print(f"{len(rows) - len(bad)}/{len(rows)} checks passed" + (f"; not passed: {', '.join(bad)}" if bad else "")
          + f"; {res['seconds']:.0f} s")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
