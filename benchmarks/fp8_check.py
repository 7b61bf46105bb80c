"""H200 pass for the block-scaled fp8 GEMM (kernelgen --variant wgmma_fp8, DeepGEMM's method): numpy checks,
then times at 4096^3 and 8192^3 against torch's fp8 GEMMs. One invocation, JSON under OUT:

    source .devwheels/install.sh && python3 benchmarks/fp8_check.py --out $OUT

1. checks: each (shape, tiling, out dtype, epilogue) kernel is compiled here (kernelgen compile from a YAML
   spec), then run by ``python -m validation gpu KERNEL.ptx --json`` in its own process under a timeout (a
   hung mbarrier wait costs one case): random e4m3 A and B, random f32 scales, the float64 block-scaled
   numpy reference (sim/reference.py) of the header's check.
2. speed: the planner's pick at 4096^3 and 8192^3 (bf16 out), median of --repeats launches (CUDA events
   around cuLaunchKernel, validation.gpu.run_on_gpu; 4096^3 also numpy-checked), with the prediction; then
   torch on the same shape: torch._scaled_mm e4m3 -> bf16 with per-tensor scales (cuBLAS's fp8 GEMM),
   row-wise scales, and 1x128 / 128x128 block scales when this torch takes them (the error is recorded
   when not; a block-scaled result is compared with its dequantised f32 product), and bf16 torch.matmul.

Writes OUT/fp8_check.json: {"device", "torch", "checks": [...], "speed": [...]}.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# (M, N, K, tiling ranges, out dtype, extra spec keys): odd edges, a partial last K block (K % 128 != 0),
# every tiling shape the variant has, both out dtypes, the epilogue, several persistent tiles per CTA
CHECKS = [
    (200, 136, 272, [], "bf16", {}),
    (200, 136, 272, ["TILE_M in [64, 64]", "TILE_N in [64, 64]"], "bf16", {}),
    (200, 136, 272, ["TILE_M in [64, 64]", "TILE_N in [128, 128]"], "f32", {}),
    (200, 136, 272, ["TILE_M in [128, 128]", "TILE_N in [64, 64]", "STAGES in [6, 6]"], "bf16", {}),
    (200, 136, 272, ["TILE_M in [256, 256]"], "bf16", {"beta": -1.0, "epilogue": ["bias", "gelu"]}),
    (1000, 520, 784, [], "bf16", {}),
    (1000, 520, 784, ["TILE_M in [128, 128]", "TILE_N in [128, 128]"], "f32", {}),
    (64, 7168, 4096, [], "bf16", {}),
    (4096, 7168, 2048, [], "bf16", {}),
    (4096, 4096, 4096, [], "bf16", {}),
]
SPEED = [(4096, 4096, 4096), (8192, 8192, 8192)]


def compile_case(M: int, N: int, K: int, tiling: list[str], out: str, extra: dict, d: Path) -> Path:
    spec: dict = {"M": M, "N": N, "K": K, "dtype": {"a": "e4m3", "b": "e4m3", "out": out}, "scale": "block128",
                  **extra}
    if tiling:
        spec["tiling"] = tiling
    d.mkdir(parents=True, exist_ok=True)
    (d / "spec.yaml").write_text(json.dumps(spec))
    subprocess.run([sys.executable, "-m", "kernelgen", "compile", "--hw", "h200", "--op", str(d / "spec.yaml"),
                    "--variant", "wgmma_fp8", "-o", str(d)], check=True, capture_output=True, text=True, cwd=ROOT)
    return d / "kernel.ptx"


def run_checks(out: Path, timeout: int) -> list[dict]:
    rows = []
    for M, N, K, tiling, dout, extra in CHECKS:
        name = f"fp8_{M}x{N}x{K}_{dout}" + "".join(f"_{r.split()[0]}{r.split('[')[1].split(',')[0]}" for r in tiling) \
            + ("_epi" if extra else "")
        row: dict = {"case": name, "M": M, "N": N, "K": K, "out": dout, "tiling_ranges": tiling, "extra": extra}
        try:
            ptx = compile_case(M, N, K, tiling, dout, extra, out / "k" / name)
            plan = json.loads((ptx.parent / "plan.json").read_text())
            row["tiling"] = plan["tiling"]["key"]
            r = subprocess.run([sys.executable, "-m", "validation", "gpu", str(ptx), "--json", "--repeats", "5"],
                               capture_output=True, text=True, timeout=timeout, cwd=ROOT)
            if r.returncode in (0, 1) and r.stdout.strip():
                d = json.loads(r.stdout.strip().splitlines()[-1])
                row.update(passed=bool(d["check"] and d["check"]["passed"]), time_ms=d["time_ms"],
                           rel_err=d["check"] and d["check"].get("max_rel_err"), grid=d["grid"], block=d["block"])
            else:
                row["error"] = (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1][:300]
        except subprocess.TimeoutExpired:
            row["error"] = f"timeout after {timeout} s (hang?)"
        except subprocess.CalledProcessError as e:
            row["error"] = f"compile: {(e.stderr or '').strip()[-300:]}"
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def time_kernel(ptx: Path, repeats: int, check: bool) -> dict:
    """In a child process (``--time``): one checked run (if asked), warm-up, timed runs."""
    from sim.launch import launch_from_metadata, read_metadata
    from validation.gpu import run_on_gpu
    from validation.gpu_tma import without_tensormaps

    text = ptx.read_text()
    meta = read_metadata(text)
    launch = launch_from_metadata(without_tensormaps(meta), np.random.default_rng(1))
    m = run_on_gpu(text, launch, warmup=3, repeats=repeats, check=meta.get("check") if check else None)
    return {"time_ms": m.wall_ms_median, "check": m.check, "grid": list(launch.grid), "block": list(launch.block),
            "registers": m.extra.get("num_regs"), "device": m.device}


def _median_ms(op, repeats: int) -> float:
    import torch

    for _ in range(3):
        op()
    times = []
    for _ in range(repeats):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        op()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e))
    return float(np.median(times))


def torch_baselines(M: int, N: int, K: int, repeats: int) -> dict:
    """torch._scaled_mm e4m3 x e4m3 -> bf16 (A row-major, B column-major) with per-tensor, row-wise and block
    scales, and bf16 torch.matmul: TFLOP/s each, or the error this torch gives."""
    try:
        import torch
    except ImportError as e:
        return {"error": f"no torch: {e}"}
    out: dict = {"torch": torch.__version__}
    flop = 2 * M * N * K
    a = (torch.randn(M, K, device="cuda") * 0.5).to(torch.float8_e4m3fn)
    b = (torch.randn(N, K, device="cuda") * 0.5).to(torch.float8_e4m3fn)
    kb, nb = -(-K // 128), -(-N // 128)
    one = torch.tensor(1.0, device="cuda")
    forms = {
        "per_tensor": (one, one),
        "rowwise": (torch.rand(M, 1, device="cuda") + 0.5, torch.rand(1, N, device="cuda") + 0.5),
        # 1 x 128 of A (M x K/128, M-major as cuBLAS wants it) and 128 x 128 of B (K/128 x N/128)
        "block_1x128_128x128": ((torch.rand(kb, M, device="cuda") + 0.5).t(),
                                (torch.rand(nb, kb, device="cuda") + 0.5).t()),
    }
    for name, (sa, sb) in forms.items():
        try:
            def op(sa=sa, sb=sb):
                return torch._scaled_mm(a, b.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
            d = op()
            ms = _median_ms(op, repeats)
            out[name] = {"time_ms": ms, "tflops": flop / (ms * 1e-3) / 1e12}
            if name.startswith("block"):  # does it compute the block-scaled product?
                A = a.float() * sa.repeat_interleave(128, dim=1)[:, :K]
                B = b.float() * sb.t().repeat_interleave(128, dim=0).repeat_interleave(128, dim=1)[:N, :K]
                ref = A @ B.t()
                out[name]["rel_err_vs_dequantised"] = float((d.float() - ref).norm() / ref.norm())
        except Exception as e:  # noqa: BLE001 - record what this torch does not take
            out[name] = {"error": f"{type(e).__name__}: {e}"[:300]}
    x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    y = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
    ms = _median_ms(lambda: torch.matmul(x, y), repeats)
    out["bf16_matmul"] = {"time_ms": ms, "tflops": flop / (ms * 1e-3) / 1e12}
    return out


def run_speed(out: Path, repeats: int, timeout: int) -> list[dict]:
    from sim.hw import load_hw

    clock = load_hw("h200").clock_mhz
    rows = []
    for M, N, K in SPEED:
        row: dict = {"M": M, "N": N, "K": K}
        try:
            ptx = compile_case(M, N, K, [], "bf16", {}, out / "k" / f"speed_{M}x{N}x{K}")
            plan = json.loads((ptx.parent / "plan.json").read_text())
            row["tiling"] = plan["tiling"]["key"]
            row["predicted_cycles"] = plan["prediction"]["cycles"]
            r = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--time", str(ptx), "--repeats",
                                str(repeats)] + (["--check"] if M * N * K <= 4096**3 else []),
                               capture_output=True, text=True, timeout=timeout, cwd=ROOT)
            if r.returncode == 0 and r.stdout.strip():
                row.update(json.loads(r.stdout.strip().splitlines()[-1]))
                row["tflops"] = 2 * M * N * K / (row["time_ms"] * 1e-3) / 1e12
                row["predicted_over_measured"] = row["predicted_cycles"] / (row["time_ms"] * 1e3 * clock)
            else:
                row["error"] = (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1][:300]
        except subprocess.TimeoutExpired:
            row["error"] = f"timeout after {timeout} s (hang?)"
        except subprocess.CalledProcessError as e:
            row["error"] = f"compile: {(e.stderr or '').strip()[-300:]}"
        row["torch"] = torch_baselines(M, N, K, repeats)
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--timeout", type=int, default=90, help="seconds per kernel process (default 90)")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--skip-checks", action="store_true")
    ap.add_argument("--time", help=argparse.SUPPRESS)  # child: time one PTX, print JSON
    ap.add_argument("--check", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.time:
        print(json.dumps(time_kernel(Path(a.time), a.repeats, a.check)))
        return 0
    if not a.out:
        ap.error("--out is required")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    res: dict = {"date": time.strftime("%Y-%m-%d", time.gmtime())}
    try:
        res["device"] = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm",
                                        "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
    except OSError:
        res["device"] = None
    kernels = Path(tempfile.mkdtemp(prefix="fp8_check_"))  # the PTX stays off OUT (few files come back)
    res["checks"] = [] if a.skip_checks else run_checks(kernels, a.timeout)
    res["speed"] = run_speed(kernels, a.repeats, 300)
    res["seconds"] = time.time() - t0
    (out / "fp8_check.json").write_text(json.dumps(res, indent=1))
    bad = [r["case"] for r in res["checks"] if not r.get("passed")]
    print(f"{len(res['checks']) - len(bad)}/{len(res['checks'])} checks passed"
          + (f"; not passed: {', '.join(bad)}" if bad else "") + f"; {res['seconds']:.0f} s")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
