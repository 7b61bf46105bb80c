"""H200 pass for the block-scaled fp8 GEMM (kernelgen --variant wgmma_fp8, DeepGEMM's method): numpy checks,
then times at 4096^3 and 8192^3 against torch's fp8 GEMMs. One invocation, JSON under OUT:

    source .devwheels/install.sh && python3 benchmarks/fp8_check.py --out $OUT
    ... python3 benchmarks/fp8_check.py --out $OUT --skip-checks --ab e4m3,e5m2   # the speed part, mixed operands

1. checks: each (shape, tiling, out dtype, epilogue) kernel is compiled here (kernelgen compile from a YAML
   spec), then run by ``python -m validation gpu KERNEL.ptx --json`` in its own process under a timeout (a
   hung mbarrier wait costs one case): random e4m3 A and B, random f32 scales, the float64 block-scaled
   numpy reference (sim/reference.py) of the header's check.
2. speed: at 4096^3 and 8192^3 (bf16 out) the planner's pick and the SPEED_TILINGS forced beside it (the
   128x128 tile of the 2026-12-01 run, TILE_N 256 at 4 stages), median of --repeats launches (CUDA events
   around cuLaunchKernel, validation.gpu.run_on_gpu), with the prediction; each 4096^3 kernel numpy-checked
   (8192^3 is not: its float64 block-scaled reference takes minutes on the host): relative Frobenius norm
   against the float64 reference of the block-scaled product (sim/reference.py) and DeepGEMM's tolerance
   (tests/test_core.py: calc_diff = 1 - 2<x,y>/(|x|^2+|y|^2) < 1e-3; calc_diff <= rel_err^2, recorded as
   its bound). Then torch on the same shape: torch._scaled_mm e4m3 -> bf16
   with per-tensor scales (cuBLAS's fp8 GEMM), row-wise scales, and 1x128 / 128x128 block scales when this
   torch takes them (the error is recorded when not; a block-scaled result is compared with its dequantised
   f32 product), and bf16 torch.matmul; each kernel row carries its ratio to the per-tensor and block forms.

Writes OUT/fp8_check.json: {"device", "torch", "checks": [...], "speed": [...]}.
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

from benchmarks.gpucommon import compile_spec, gpu_case, median_ms, nvidia_smi, timed_case  # noqa: E402

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
    # TILE_N 256 (two n128 halves, one scale_b each; a half past N), the TMA-store epilogue with every slab
    # buffered (bf16, 3 stages) and rolling (f32: 5 of 8 slabs; bf16 at 4 stages: 2 of 4), registers -> global
    (200, 264, 272, ["TILE_N in [256, 256]"], "bf16", {}),
    (200, 136, 272, ["TILE_N in [256, 256]"], "f32", {}),
    (1000, 520, 784, ["TILE_N in [256, 256]", "STAGES in [4, 4]"], "bf16", {}),
    (200, 264, 272, ["TILE_N in [256, 256]"], "bf16", {"beta": -1.0, "epilogue": ["bias", "gelu"]}),
    (4096, 4096, 4096, ["TILE_N in [256, 256]", "STAGES in [4, 4]"], "bf16", {}),
    # e5m2 A and B, and e4m3 x e5m2 either way round ("ab": A's and B's types; wgmma .f32.<a>.<b>)
    (200, 136, 272, [], "bf16", {"ab": ("e5m2", "e5m2")}),
    (1000, 520, 784, ["TILE_N in [256, 256]", "STAGES in [4, 4]"], "bf16", {"ab": ("e4m3", "e5m2")}),
    (200, 264, 272, ["TILE_N in [256, 256]"], "f32", {"ab": ("e5m2", "e4m3"), "beta": -1.0,
                                                       "epilogue": ["bias", "gelu"]}),
    (4096, 4096, 4096, [], "bf16", {"ab": ("e5m2", "e5m2")}),
]
SPEED = [(4096, 4096, 4096), (8192, 8192, 8192)]
# forced beside the planner's pick at every SPEED shape (a duplicate of the pick is skipped)
SPEED_TILINGS = [["TILE_M in [128, 128]", "TILE_N in [128, 128]", "STAGES in [3, 3]"],
                 ["TILE_M in [128, 128]", "TILE_N in [256, 256]", "STAGES in [3, 3]"],
                 ["TILE_M in [128, 128]", "TILE_N in [256, 256]", "STAGES in [4, 4]"]]
DEEPGEMM_TOL = 1e-3  # deepseek-ai/DeepGEMM tests/test_core.py: assert calc_diff(out, ref_out) < 0.001


def compile_case(M: int, N: int, K: int, tiling: list[str], out: str, extra: dict, d: Path) -> Path:
    """The kernel of one CHECKS row into d (extra: spec keys, and "ab": A's and B's types, e4m3 by default)."""
    a, b = extra.get("ab", ("e4m3", "e4m3"))
    spec: dict = {"M": M, "N": N, "K": K, "dtype": {"a": a, "b": b, "out": out}, "scale": "block128",
                  **{k: v for k, v in extra.items() if k != "ab"}}
    if tiling:
        spec["tiling"] = tiling
    return compile_spec(spec, "wgmma_fp8", d)


def _tag(tiling: list[str]) -> str:
    return "".join(f"_{r.split()[0]}{r.split('[')[1].split(',')[0]}" for r in tiling)


def run_checks(out: Path, timeout: int) -> list[dict]:
    rows = []
    for M, N, K, tiling, dout, extra in CHECKS:
        name = (f"fp8_{M}x{N}x{K}_{dout}{_tag(tiling)}" + ("_epi" if set(extra) - {"ab"} else "")
                + ("_{}x{}".format(*extra["ab"]) if "ab" in extra else ""))
        row: dict = {"case": name, "M": M, "N": N, "K": K, "out": dout, "tiling_ranges": tiling, "extra": extra}
        rows.append(gpu_case(row, partial(compile_case, M, N, K, tiling, dout, extra, out / "k" / name), timeout))
    return rows


def torch_baselines(M: int, N: int, K: int, repeats: int, ab: tuple[str, str] = ("e4m3", "e4m3")) -> dict:
    """torch._scaled_mm A x B -> bf16 (A row-major, B column-major; fp8 types `ab`, e4m3 = float8_e4m3fn) with
    per-tensor, row-wise and block scales, and bf16 torch.matmul: TFLOP/s each, or the error this torch gives
    (cuBLAS refuses e5m2 x e5m2)."""
    try:
        import torch
    except ImportError as e:
        return {"error": f"no torch: {e}"}
    out: dict = {"torch": torch.__version__}
    flop = 2 * M * N * K
    fp8 = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
    out["ab"] = list(ab)
    a = (torch.randn(M, K, device="cuda") * 0.5).to(fp8[ab[0]])
    b = (torch.randn(N, K, device="cuda") * 0.5).to(fp8[ab[1]])
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
            ms = median_ms(op, repeats)
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
    ms = median_ms(lambda: torch.matmul(x, y), repeats)
    out["bf16_matmul"] = {"time_ms": ms, "tflops": flop / (ms * 1e-3) / 1e12}
    return out


def run_speed(out: Path, repeats: int, timeout: int, ab: tuple[str, str] = ("e4m3", "e4m3")) -> list[dict]:
    """Per SPEED shape: the planner's pick and each SPEED_TILINGS kernel (skipped when it is the pick), A and B
    of fp8 types `ab`, then torch's forms once on the same types; every kernel row gets its ratios to torch's
    per-tensor and block-scaled forms."""
    from sim.hw import load_hw

    clock = load_hw("h200").clock_mhz
    rows = []
    for M, N, K in SPEED:
        kernels: list[dict] = []
        for tiling in [[]] + SPEED_TILINGS:
            make = partial(compile_case, M, N, K, tiling, "bf16", {"ab": ab},
                           out / "k" / f"speed_{M}x{N}x{K}{_tag(tiling)}")
            row = timed_case({"M": M, "N": N, "K": K, "ab": list(ab), "tiling_ranges": tiling, "pick": not tiling},
                             make, repeats, M * N * K <= 4096**3, timeout, clock,
                             kernels[0].get("tiling") if tiling else None)
            if row is None:
                continue  # the pick itself
            err = (row.get("check") or {}).get("max_rel_err")
            if err is not None:  # calc_diff = |x-y|^2 / (|x|^2 + |y|^2) <= |x-y|^2 / |y|^2 = rel_err^2
                row["deepgemm_calc_diff_bound"] = err * err
                row["deepgemm_tolerance_met"] = err * err < DEEPGEMM_TOL
            kernels.append(row)
            print(json.dumps(row), flush=True)
        base = torch_baselines(M, N, K, repeats, ab)
        print(json.dumps({"M": M, "N": N, "K": K, "torch": base}), flush=True)
        for row in kernels:
            row["torch"] = base
            for form in ("per_tensor", "block_1x128_128x128"):
                if "tflops" in row and "tflops" in base.get(form, {}):
                    row[f"vs_{form}"] = row["tflops"] / base[form]["tflops"]
        rows += kernels
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--timeout", type=int, default=90, help="seconds per kernel process (default 90)")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--skip-checks", action="store_true")
    ap.add_argument("--ab", default="e4m3,e4m3", help="A's and B's fp8 types of the timed kernels and of torch's "
                    "(default e4m3,e4m3; the checks cover every pair)")
    a = ap.parse_args()
    ab = tuple(a.ab.split(","))
    if len(ab) != 2 or set(ab) - {"e4m3", "e5m2"}:
        ap.error(f"--ab expects two of e4m3, e5m2 joined by a comma, got {a.ab!r}")
    if not a.out:
        ap.error("--out is required")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    res: dict = {"date": time.strftime("%Y-%m-%d", time.gmtime())}
    res["device"] = nvidia_smi("name,driver_version,clocks.max.sm")
    kernels = Path(tempfile.mkdtemp(prefix="fp8_check_"))  # the PTX stays off OUT (few files come back)
    res["checks"] = [] if a.skip_checks else run_checks(kernels, a.timeout)
    res["speed"] = run_speed(kernels, a.repeats, 300, ab)
    res["seconds"] = time.time() - t0
    (out / "fp8_check.json").write_text(json.dumps(res, indent=1))
    bad = [r["case"] for r in res["checks"] if not r.get("passed")]
    print(f"{len(res['checks']) - len(bad)}/{len(res['checks'])} checks passed"
          + (f"; not passed: {', '.join(bad)}" if bad else "") + f"; {res['seconds']:.0f} s")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
