"""kernelgen's s8 GEMM on the mma path (mma.sync m16n8k32, s32 accumulators) on both hardware models:
full-range random s8 inputs, outputs poisoned before the run, exact against numpy's int64 product for
s32 output, relative norm against float64 for the dequantising epilogues; ptxas -arch=sm_90a accepts
every kernel with no spills; the planner's counts equal the parsed PTX's."""

from __future__ import annotations

import functools
import random
import shutil
import subprocess

import numpy as np
import pytest

from kernelgen.planner import plan
from kernelgen.spec import parse_spec
from kernelgen.variants import get
from sim.errors import UsageError
from sim.functional.runner import run_functional
from sim.hw import load_hw
from sim.launch import launch_from_metadata, read_metadata
from sim.ptx.parser import parse_ptx


def _ptxas_no_spills(ptx: str, tmp_path) -> None:
    exe = shutil.which("ptxas")
    if exe is None:
        return
    f = tmp_path / "k.ptx"
    f.write_text(ptx)
    r = subprocess.run([exe, "-arch=sm_90a", "-v", str(f), "-o", str(tmp_path / "k.cubin")], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "0 bytes spill stores, 0 bytes spill loads" in r.stderr, r.stderr


def _run(spec, tiling, tmp_path) -> tuple[np.ndarray, np.ndarray, str]:
    """(D as float64 M x N, the float64 reference, out dtype) with A, B in the full s8 range."""
    ptx = get("mma").emit(spec, tiling, {})
    assert "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32" in ptx
    _ptxas_no_spills(ptx, tmp_path)
    meta = read_metadata(ptx)
    rng = np.random.default_rng()
    launch = launch_from_metadata(meta, rng)
    roles = {a.role: i for i, a in enumerate(launch.args)}
    M, N, K = spec.nominal()
    A = rng.integers(-128, 128, (M, K)).astype(np.int8)
    A[A == 0] = 1
    B = rng.integers(-128, 128, (K, N)).astype(np.int8)  # col-major storage: B.T row by row
    B[B == 0] = -1
    launch.args[roles["A"]].array = A.reshape(-1).copy()
    launch.args[roles["B"]].array = np.ascontiguousarray(B.T).reshape(-1)
    ref = A.astype(np.int64) @ B.astype(np.int64)
    bias = launch.args[roles["bias"]].array.astype(np.float64) if "bias" in roles else np.zeros(N)
    scale = launch.args[roles["scale"]].array.astype(np.float64) if "scale" in roles else np.ones(N)
    assert launch.args[roles["D"]].init == "poison"
    res = run_functional(parse_ptx(ptx, "k.ptx"), launch)
    out = res.outputs[roles["D"]].reshape(M, N)
    if spec.dtype_out == "bf16":
        from sim.launch import bf16_bits_to_f32
        got = bf16_bits_to_f32(out).astype(np.float64)
    else:
        got = out.astype(np.float64)
    want = ref.astype(np.float64) * spec.alpha * scale[None, :] + bias[None, :]
    if spec.dtype_out == "s32":
        assert np.array_equal(out.astype(np.int64), ref)
    return got, want, spec.dtype_out


# each shape on one hwconfig in the default tier (planning is 1-3 s of CPU a case), the other three with the slow set
@pytest.mark.parametrize("shape,hw_name", [
    pytest.param(s, h, marks=() if (i + j) % 2 else pytest.mark.slow, id=f"shape{i}-{h}")
    for i, s in enumerate([(37, 29, 75), (50, 24, 136), (33, 40, 36)]) for j, h in enumerate(["npu7nm", "h200"])])
def test_s8_gemm_exact(hw_name, shape, tmp_path):
    M, N, K = shape
    spec = parse_spec({"M": M, "N": N, "K": K, "dtype": {"a": "int8", "out": "s32"}})
    p = plan(spec, load_hw(hw_name), "mma")
    assert p.best.tiling.mma_k == 32
    _run(spec, p.best.tiling, tmp_path)


@functools.cache
def _epilogue_tiling():
    """The planner's h200 pick for the 45x27x100 s8 GEMM with an f32 D and a bias, which the epilogue cases below
    share (planning took 1.9 s of CPU per case, the run 0.3 s; test_s8_gemm_exact checks the planner's picks)."""
    spec = parse_spec({"M": 45, "N": 27, "K": 100, "dtype": {"a": "s8", "b": "s8", "out": "f32"},
                       "alpha": 0.0009765625 * 3, "epilogue": ["bias"]})
    return plan(spec, load_hw("h200"), "mma").best.tiling


@pytest.mark.parametrize("out,tol,ep", [("f32", 1e-6, ["bias"]), ("f16", 2e-3, ["scale", "bias"]),
                                       ("bf16", 1e-2, ["bias"]), ("f32", 1e-6, ["scale"])])
def test_s8_gemm_dequantising_epilogue(out, tol, ep, tmp_path):
    """D = scale[n] * alpha * (A @ B) + bias[n] (per-column scale: per-channel int8 weights)."""
    spec = parse_spec({"M": 45, "N": 27, "K": 100, "dtype": {"a": "s8", "b": "s8", "out": out},
                       "alpha": 0.0009765625 * 3, "epilogue": ep})
    t = _epilogue_tiling()
    assert t in get("mma").tilings(spec)
    got, want, _ = _run(spec, t, tmp_path)
    assert np.isfinite(got).all()
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < tol


@pytest.mark.slow
def test_s8_tilings_sampled_exact(tmp_path):
    """Other tilings than the planner's best: rolled inner loops, 4/8/16-byte and 1-byte copies."""
    random.seed(5)
    for K in (72, 44, 61):
        spec = parse_spec({"M": 40, "N": 24, "K": K, "dtype": {"a": "s8", "out": "s32"},
                           "tiling": ["UNROLL_K in [1, 4]"]})
        for t in random.sample(get("mma").tilings(spec), 2):
            _run(spec, t, tmp_path)


def test_s8_counts_match_parsed_ptx():
    from tests.test_kernelgen import _regions

    spec = parse_spec({"M": 40, "N": 24, "K": 80, "dtype": {"a": "s8", "out": "f16"}, "epilogue": ["scale", "relu"]})
    random.seed(3)
    v = get("mma")
    for t in random.sample(v.tilings(spec), 5):
        got, regs = _regions(v.emit(spec, t, {}))
        c = v.counts(spec, t)
        for r in ("pre", "iter", "post"):
            assert got[r] == {k: n for k, n in getattr(c, r).items() if n}, (t.key(), r)
        assert regs == c.ptx_regs, t.key()


@pytest.mark.parametrize("data,match", [
    ({"dtype": {"a": "s8", "out": "s32"}, "alpha": 2.0}, "s32 output stores the exact"),
    ({"dtype": {"a": "f16", "out": "s32"}}, "s32 output needs s8"),
    ({"dtype": {"a": "s8", "acc": "f32"}}, "dtype.acc"),
    ({"dtype": {"a": "s8", "out": "f16"}, "epilogue": ["bias", "scale"]}, "scale must come first"),
])
def test_s8_spec_errors(data, match):
    with pytest.raises(UsageError, match=match):
        parse_spec({"M": 16, "N": 16, "K": 32, **data})


def test_s8_layout_and_variant_errors():
    spec = parse_spec({"M": 16, "N": 16, "K": 32, "dtype": "s8", "layout": {"a": "col"}})
    assert "row-major" in get("mma").unavailable(spec, load_hw("h200"))
    assert "tensor-core path only" in get("simt").unavailable(spec, load_hw("h200"))


def test_int8_tensor_rate_from_hwconfig():
    """pipes[].int8_lanes: an s8 m16n8k32 (4096 MACs) costs 4096 * lanes / int8_lanes lane-ops."""
    h200 = next(p for p in load_hw("h200").pipes if "tensor" in p.classes)
    npu = next(p for p in load_hw("npu7nm").pipes if "tensor" in p.classes)
    assert h200.tensor_ops(4096, "s8") == 2048 and h200.tensor_ops(2048, "f16") == 2048
    assert npu.tensor_ops(4096, "s8") == 4096


def _gpu_ok() -> tuple[bool, str]:
    from validation.gpu import gpu_available

    return gpu_available()


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(37, 29, 75), (512, 384, 1024)])
def test_s8_gemm_on_gpu_exact_and_vs_torch_int_mm(shape, tmp_path):
    """The H200 runs the generated s8 kernel on full-range inputs: D equals numpy's int64 product exactly
    and torch._int_mm's result on the same matrices (when torch takes the shape)."""
    ok, why = _gpu_ok()
    if not ok:
        pytest.skip(f"no GPU: {why}")
    from validation.gpu import run_on_gpu

    M, N, K = shape
    spec = parse_spec({"M": M, "N": N, "K": K, "dtype": {"a": "int8", "out": "s32"}})
    ptx = get("mma").emit(spec, plan(spec, load_hw("h200"), "mma").best.tiling, {})
    launch = launch_from_metadata(read_metadata(ptx), np.random.default_rng())
    roles = {a.role: i for i, a in enumerate(launch.args)}
    rng = np.random.default_rng()
    A = rng.integers(-128, 128, (M, K)).astype(np.int8)
    Bt = rng.integers(-128, 128, (N, K)).astype(np.int8)  # B col-major: row n of B.T is column n
    launch.args[roles["A"]].array = A.reshape(-1)
    launch.args[roles["B"]].array = Bt.reshape(-1)
    m = run_on_gpu(ptx, launch, warmup=1, repeats=3)
    got = m.outputs[roles["D"]].reshape(M, N).astype(np.int64)
    ref = A.astype(np.int64) @ Bt.astype(np.int64).T
    assert np.array_equal(got, ref)
    try:
        import torch
    except ImportError:
        return
    if M > 16 and K % 8 == 0 and N % 8 == 0:
        t = torch._int_mm(torch.from_numpy(A).cuda(), torch.from_numpy(Bt).cuda().t())
        assert np.array_equal(t.cpu().numpy().astype(np.int64), got)


def test_gpu_bench_compiles_s8_with_exact_output(tmp_path):
    """benchmarks/gpu_bench.py --dtypes s8 (or int8) compiles an s32-output kernel (checked exactly on the GPU)."""
    from benchmarks.gpu_bench import BASELINE, compile_kernel

    ptx = compile_kernel(64, 48, 96, "s8", "mma", tmp_path / "k", False)
    meta = read_metadata(ptx.read_text())
    assert meta["check"]["out_dtype"] == "s32" and meta["check"]["rtol"] == 0.0
    assert BASELINE["s8"] == "torch._int_mm"


@pytest.mark.parametrize("hw_name", ["npu7nm", "h200"])
def test_s8_example_plans(hw_name):
    from pathlib import Path

    from kernelgen.spec import load_spec

    spec = load_spec(Path(__file__).parent.parent / "examples" / "gemm_s8.yaml")
    assert (spec.dtype_a, spec.dtype_acc, spec.dtype_out) == ("s8", "s32", "f16")
    p = plan(spec, load_hw(hw_name))
    assert p.best.tiling.variant == "mma" and p.best.cycles > 0


def test_scale_epilogue_checked_by_the_metadata_reference():
    """The per-column scale on a float GEMM, checked by sim.reference (the metadata check the CLI and the
    GPU runner use), and a wrong scale fails it."""
    from sim.reference import check_gemm

    spec = parse_spec({"M": 33, "N": 24, "K": 40, "dtype": {"a": "f16", "out": "f32"},
                       "epilogue": ["scale", "bias", "relu"]})
    ptx = get("mma").emit(spec, plan(spec, load_hw("npu7nm"), "mma").best.tiling, {})
    meta = read_metadata(ptx)
    launch = launch_from_metadata(meta, np.random.default_rng())
    roles = [a.role for a in launch.args]
    res = run_functional(parse_ptx(ptx, "k.ptx"), launch)
    assert check_gemm(meta["check"], launch.args, res.outputs, roles)["passed"]
    launch.args[roles.index("scale")].array = launch.args[roles.index("scale")].array * 2
    assert not check_gemm(meta["check"], launch.args, res.outputs, roles)["passed"]
