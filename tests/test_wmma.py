"""wmma.load / wmma.mma / wmma.store (issue 12 item 2) on nvcc's own output: a global-memory GEMM with f32
accumulators, row A / col B, a fragment scaled element by element, and a shared-memory one with f16
accumulators, col A / row B and a col-major store; numpy-checked functional and timed; the verifier
models a fragment access as any element of the warp's tile (tests/test_verify_wmma.py)."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sim.functional.runner import run_functional
from sim.hw import load_hw
from sim.launch import Arg, Launch
from sim.ptx.parser import parse_ptx
from sim.timing import simulate

PTX = Path(__file__).parent / "fixtures" / "cuda" / "wmma_gemm.ptx"


@pytest.fixture(scope="module")
def prog():
    return parse_ptx(PTX.read_text(), str(PTX))


@pytest.mark.parametrize("timed", [False, True])
def test_global_wmma_gemm(prog, timed):
    rng = np.random.default_rng()
    M, N, K = 32, 48, 64
    A = rng.standard_normal((M, K)).astype(np.float16)
    Bt = rng.standard_normal((N, K)).astype(np.float16)  # B col-major: column n is row n of Bt
    args = [Arg("buffer", "f16", array=A.ravel().copy()), Arg("buffer", "f16", array=Bt.ravel().copy()),
            Arg("buffer", "f32", array=np.full(M * N, np.nan, np.float32)),
            Arg("scalar", "u32", value=M), Arg("scalar", "u32", value=N), Arg("scalar", "u32", value=K)]
    launch = Launch("wmma_gemm", (2, M // 16, 1), (64, 1, 1), args, 0)
    res = simulate(prog, launch, load_hw("h200")) if timed else run_functional(prog, launch)
    ref = 0.5 * (A.astype(np.float64) @ Bt.astype(np.float64).T)
    got = res.outputs[2].reshape(M, N).astype(np.float64)
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 1e-6
    if timed:
        assert res.cycles > 0


def test_shared_wmma_f16_accumulate_col_store(prog):
    rng = np.random.default_rng()
    K = 48
    A = rng.standard_normal((K // 16, 16, 16)).astype(np.float16)  # each K step's A tile, stored col-major
    B = rng.standard_normal((K // 16, 16, 16)).astype(np.float16)  # each K step's B tile, row-major
    args = [Arg("buffer", "f16", array=A.ravel().copy()), Arg("buffer", "f16", array=B.ravel().copy()),
            Arg("buffer", "f16", array=np.full(256, np.nan, np.float16)), Arg("scalar", "u32", value=K)]
    out = run_functional(prog, Launch("wmma_smem", (1, 1, 1), (32, 1, 1), args, 0)).outputs[2]
    ref = sum(A[s].astype(np.float64).T @ B[s].astype(np.float64) for s in range(K // 16))
    got = out.reshape(16, 16).T.astype(np.float64)  # stored col-major
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 2e-3


def test_verifier_asks_for_the_extent_a_wmma_load_reads():
    # the wmma.load of A (line 85) is a global access of the tile: its bounds need p0's extent
    r = subprocess.run([sys.executable, "-m", "validation", "verify", str(PTX), "--kernel", "wmma_gemm",
                        "--timeout", "30"], capture_output=True, text=True)
    line = next(ln for ln in r.stdout.splitlines() if ln.strip().startswith("bounds"))
    assert "unknown" in line and "wmma_gemm.ptx:85" in line and "no extent for p0" in line, line


def test_s8_and_tf32_wmma():
    path = PTX.parent / "wmma_more.ptx"
    prog = parse_ptx(path.read_text(), str(path))
    rng = np.random.default_rng()
    A = rng.integers(-128, 128, (16, 16)).astype(np.int8)
    Bt = rng.integers(-128, 128, (16, 16)).astype(np.int8)
    args = [Arg("buffer", "s8", array=A.ravel().copy()), Arg("buffer", "s8", array=Bt.ravel().copy()),
            Arg("buffer", "s32", array=np.full(256, -1, np.int32))]
    out = run_functional(prog, Launch("wmma_s8", (1, 1, 1), (32, 1, 1), args, 0)).outputs[2]
    assert np.array_equal(out.reshape(16, 16), A.astype(np.int64) @ Bt.astype(np.int64).T)

    def tf32(x):  # cvt.rna.tf32.f32: 10 mantissa bits, ties away from zero
        b = x.astype(np.float32).view(np.uint32)
        return ((b + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
    A = rng.standard_normal((16, 8)).astype(np.float32)
    B = rng.standard_normal((8, 16)).astype(np.float32)
    C = rng.standard_normal((16, 16)).astype(np.float32)
    args = [Arg("buffer", "f32", array=A.ravel().copy()), Arg("buffer", "f32", array=B.ravel().copy()),
            Arg("buffer", "f32", array=C.ravel().copy())]
    out = run_functional(prog, Launch("wmma_tf32", (1, 1, 1), (32, 1, 1), args, 0)).outputs[2].reshape(16, 16)
    ref = tf32(A) @ tf32(B) + C  # the kernel rounds its fragments to tf32 before the mma
    assert np.linalg.norm(out - ref) / np.linalg.norm(ref) < 1e-6


@pytest.mark.gpu
def test_wmma_kernels_on_the_gpu_equal_the_simulator():
    """The same nvcc PTX on the H200: the global f16 GEMM and the s8 kernel, outputs against numpy and
    against the simulator's."""
    from validation.gpu import gpu_available, run_on_gpu

    ok, why = gpu_available()
    if not ok:
        pytest.skip(f"no GPU: {why}")
    rng = np.random.default_rng()
    M, N, K = 32, 48, 64
    A = rng.standard_normal((M, K)).astype(np.float16)
    Bt = rng.standard_normal((N, K)).astype(np.float16)
    args = [Arg("buffer", "f16", array=A.ravel().copy()), Arg("buffer", "f16", array=Bt.ravel().copy()),
            Arg("buffer", "f32", array=np.full(M * N, np.nan, np.float32)),
            Arg("scalar", "u32", value=M), Arg("scalar", "u32", value=N), Arg("scalar", "u32", value=K)]
    launch = Launch("wmma_gemm", (2, M // 16, 1), (64, 1, 1), args, 0)
    gpu = run_on_gpu(PTX.read_text(), launch, warmup=0, repeats=1).outputs[2].reshape(M, N).astype(np.float64)
    sim = run_functional(parse_ptx(PTX.read_text(), str(PTX)), launch).outputs[2].reshape(M, N).astype(np.float64)
    ref = 0.5 * (A.astype(np.float64) @ Bt.astype(np.float64).T)
    assert np.linalg.norm(gpu - ref) / np.linalg.norm(ref) < 1e-3
    assert np.linalg.norm(gpu - sim) / np.linalg.norm(ref) < 1e-3
    path = PTX.parent / "wmma_more.ptx"
    A8 = rng.integers(-128, 128, (16, 16)).astype(np.int8)
    B8 = rng.integers(-128, 128, (16, 16)).astype(np.int8)
    args = [Arg("buffer", "s8", array=A8.ravel().copy()), Arg("buffer", "s8", array=B8.ravel().copy()),
            Arg("buffer", "s32", array=np.full(256, -1, np.int32))]
    got = run_on_gpu(path.read_text(), Launch("wmma_s8", (1, 1, 1), (32, 1, 1), args, 0), warmup=0,
                     repeats=1).outputs[2]
    assert np.array_equal(got.reshape(16, 16), A8.astype(np.int64) @ B8.astype(np.int64).T)
