"""On the GPU machine: generated kernels against cuBLAS (torch.matmul; for s8, torch._int_mm), plus the
measured side of the three-way table (per-CTA clock64 cycles with `kernelgen compile --profile`, total time).

    source .devwheels/install.sh && python3 benchmarks/gpu_bench.py --out $OUT
    python3 benchmarks/gpu_bench.py --out $OUT --variant wgmma --skip-three-way --dtypes bf16 \
        --shapes 4096x4096x4096,6144x6144x6144
    python3 benchmarks/gpu_bench.py --out $OUT --skip-three-way --dtypes s8,f16 \
        --shapes 4096x4096x4096,8192x8192x8192

s8 kernels are compiled with s32 output (the exact sums, checked exactly against numpy) and timed
against torch._int_mm (int8 x int8 -> int32, A row-major, B col-major as the kernel reads them) in the
same run; their "tflops" fields are tera-operations per second (2 M N K per GEMM).

Writes OUT/gpu_bench.json; `python3 benchmarks/gpu_tables.py` turns it into docs/benchmarks.md and the
measured column of docs/three_way.md. Times are CUDA events after a warm-up, median of the repeats.
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.gpucommon import median_ms, run_kernel  # noqa: E402
from kernelgen.spec import DTYPE_ALIASES  # noqa: E402
from validation.cases import SPEED_SHAPES, THREE_WAY_SHAPES  # noqa: E402 - the one GEMM case table


def compile_kernel(M: int, N: int, K: int, dtype: str, variant: str, out: Path, profile: bool,
                   tiling: list[str] | None = None, out_dtype: str | None = None) -> Path:
    """kernelgen compile of the --gemm shorthand's spec (s8: exact s32 output; else f32 unless `out_dtype`);
    with `tiling` ranges (e.g. "STAGES in [3, 4]") the same spec as a YAML file with those ranges, so the
    planner picks among them."""
    out_dtype = "s32" if dtype == "s8" else (out_dtype or "f32")
    shape = ["--gemm", f"{M}x{N}x{K}", "--dtype", dtype, "--out-dtype", out_dtype]
    if tiling:
        out.mkdir(parents=True, exist_ok=True)
        spec = {"M": M, "N": N, "K": K, "dtype": {"a": dtype, "b": dtype, "out": out_dtype}, "tiling": tiling}
        (out / "spec.yaml").write_text(json.dumps(spec))  # JSON is YAML
        shape = ["--op", str(out / "spec.yaml")]
    pick = [] if variant == "auto" else ["--variant", variant]  # auto: the planner's own pick over every variant
    cmd = [sys.executable, "-m", "kernelgen", "compile", "--hw", "h200", *shape, *pick, "-o", str(out)]
    if profile:
        cmd.append("--profile")
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return out / "kernel.ptx"


BASELINE = {"s8": "torch._int_mm"}  # else torch.matmul (cuBLAS)


def cublas_tflops(M: int, N: int, K: int, dtype: str, repeats: int) -> float | None:
    """The library's throughput on the same GEMM: torch.matmul, or torch._int_mm for s8 (None when torch
    is missing or, for _int_mm, the shape is outside what it takes: M > 16, K and N multiples of 8)."""
    try:
        import torch
    except ImportError:
        return None
    if dtype == "s8":
        a = torch.randint(-128, 128, (M, K), device="cuda", dtype=torch.int8)
        b = torch.randint(-128, 128, (N, K), device="cuda", dtype=torch.int8).t()  # K x N, col-major

        def op() -> object:
            return torch._int_mm(a, b)
        try:
            op()
        except RuntimeError:
            return None
    else:
        dt = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}[dtype]
        torch.backends.cuda.matmul.allow_tf32 = False
        x = torch.randn(M, K, device="cuda", dtype=dt)
        y = torch.randn(K, N, device="cuda", dtype=dt)

        def op() -> object:
            return torch.matmul(x, y)
    ms = median_ms(op, repeats)
    return 2 * M * N * K / (ms * 1e-3) / 1e12


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--variant", default="mma",
                    help="kernelgen variant (mma, wgmma, wgmma_tma, simt), or auto: the planner's pick over all")
    ap.add_argument("--shapes", help="speed shapes MxNxK,MxNxK,... (default: validation.cases.SPEED_SHAPES)")
    ap.add_argument("--dtypes", default="bf16,f16",
                    help="speed dtypes, comma-separated: f16, bf16, f32, s8 (int8) (default bf16,f16)")
    ap.add_argument("--profile", action="store_true", help="compile with --profile (per-CTA cycles)")
    ap.add_argument("--out-dtype", choices=["f32", "same"], default="f32",
                    help="D of the speed kernels: f32 (default) or the input dtype ('same': what torch.matmul "
                         "writes); s8 always s32")
    ap.add_argument("--tiling", action="append", default=[], metavar="RANGE",
                    help='a spec tiling range for the speed kernels, e.g. "STAGES in [3, 4]" (repeatable)')
    ap.add_argument("--skip-speed", action="store_true")
    ap.add_argument("--skip-three-way", action="store_true")
    ap.add_argument("--kernels", help="run the three-way kernels found here (NAME/kernel.ptx, from "
                    "benchmarks/three_way.py compile) instead of compiling them on this machine")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    res: dict = {"date": datetime.date.today().isoformat(), "speed": [], "three_way": []}
    shapes = [tuple(int(x) for x in s.split("x")) for s in a.shapes.split(",")] if a.shapes else SPEED_SHAPES
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        if not a.skip_speed:
            for dtype in (DTYPE_ALIASES.get(d, d) for d in a.dtypes.split(",")):
                for (M, N, K) in shapes:
                    row: dict = {"M": M, "N": N, "K": K, "dtype": dtype, "variant": a.variant, "tiling": a.tiling,
                                 "out_dtype": "s32" if dtype == "s8" else (dtype if a.out_dtype == "same" else "f32"),
                                 "baseline": BASELINE.get(dtype, "torch.matmul")}
                    try:
                        ptx = compile_kernel(M, N, K, dtype, a.variant, Path(tmp) / f"s{M}_{N}_{K}_{dtype}", False,
                                             a.tiling, dtype if a.out_dtype == "same" else None)
                        r = run_kernel(ptx, a.repeats, check=M * N * K <= 4096**3)
                        row.update(r)
                        plan = json.loads((ptx.parent / "plan.json").read_text())
                        row["picked"] = plan.get("tiling")
                        row["predicted_cycles"] = (plan.get("prediction") or {}).get("cycles")
                        row["tflops"] = 2 * M * N * K / (r["time_ms"] * 1e-3) / 1e12
                    except Exception as e:  # noqa: BLE001 - record and go on
                        row["error"] = f"{type(e).__name__}: {e}"[:400]
                    row["cublas_tflops"] = cublas_tflops(M, N, K, dtype, a.repeats)
                    res["speed"].append(row)
                    print(json.dumps(row)[:300], flush=True)
        if not a.skip_three_way and a.kernels:
            for kdir in sorted(Path(a.kernels).iterdir()):
                ptx = kdir / "kernel.ptx"
                if not ptx.exists():
                    continue
                meta_M, meta_N, meta_K = (int(x) for x in kdir.name.split("x"))
                row = {"M": meta_M, "N": meta_N, "K": meta_K, "name": kdir.name, "dtype": "f16"}
                try:
                    row.update(run_kernel(ptx, a.repeats, check=meta_M * meta_N * meta_K <= 1024**3))
                except Exception as e:  # noqa: BLE001
                    row["error"] = f"{type(e).__name__}: {e}"[:400]
                res["three_way"].append(row)
                print(json.dumps({k: v for k, v in row.items() if k != "per_cta_cycles"})[:300], flush=True)
        elif not a.skip_three_way:
            for (M, N, K) in THREE_WAY_SHAPES:
                row = {"M": M, "N": N, "K": K, "dtype": "f16", "variant": a.variant}
                try:
                    ptx = compile_kernel(M, N, K, "f16", a.variant, Path(tmp) / f"t{M}_{N}_{K}", a.profile)
                    row.update(run_kernel(ptx, a.repeats, check=M * N * K <= 1024**3))
                except Exception as e:  # noqa: BLE001
                    row["error"] = f"{type(e).__name__}: {e}"[:400]
                res["three_way"].append(row)
                print(json.dumps({k: v for k, v in row.items() if k != "per_cta_cycles"})[:300], flush=True)
    res["seconds"] = time.time() - t0
    (out / "gpu_bench.json").write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
