"""Triton 3.6 PTX (tests/fixtures/triton/, written on the H200 by benchmarks/triton_fixtures/make.py)
runs unchanged: the softmax and layernorm kernels functional and timed on h200, outputs against a
float64 numpy reference; the wgmma matmuls functional and timed, the two outputs equal.

Triton specialises unit strides away and appends two global scratch pointers to every entry, so
softmax is (x, y, n_cols, row_stride, scratch, scratch), layernorm (x, w, b, y, n_cols, row_stride,
eps, scratch, scratch) and matmul (a, b, c, M, N, K, stride_am, stride_bk, stride_cm, scratch,
scratch). Fewer rows than the fixture's launch keep each test short; the kernels take one row per CTA.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from sim.functional.runner import run_functional
from sim.functional.types import f32_to_bf16
from sim.hw import load_hw
from sim.launch import Arg, Launch
from sim.ptx.parser import parse_file
from sim.timing import simulate

FIXTURES = Path(__file__).parent / "fixtures" / "triton"
ROWS = 6


def _fixture(name: str) -> tuple[Path, dict]:
    return FIXTURES / f"{name}.ptx", json.loads((FIXTURES / f"{name}.json").read_text())


def _scratch() -> list[Arg]:
    return [Arg("buffer", "u8", array=np.zeros(64, dtype=np.uint8)) for _ in range(2)]


def _rel(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.linalg.norm(got.astype(np.float64) - want) / np.linalg.norm(want))


def _run_both(path: Path, launch: Launch, out: int) -> tuple[np.ndarray, np.ndarray]:
    """The output buffer from the functional model and from the timed h200 run (asserted equal)."""
    prog = parse_file(path)
    functional = run_functional(prog, launch.copy()).outputs[out]
    timed = simulate(parse_file(path), launch.copy(), load_hw("h200")).outputs[out]
    assert np.array_equal(functional, timed, equal_nan=True)
    assert not np.isnan(functional).any()
    return functional, timed


def test_softmax_f32_functional_and_timed():
    path, meta = _fixture("triton_softmax_f32")
    cols = meta["cols"]
    x = np.random.default_rng(3).standard_normal((ROWS, cols)).astype(np.float32)
    y = np.full(ROWS * cols, np.nan, dtype=np.float32)
    args = [Arg("buffer", "f32", array=x.ravel()), Arg("buffer", "f32", array=y),
            Arg("scalar", "u32", value=cols), Arg("scalar", "u32", value=cols), *_scratch()]
    launch = Launch("softmax_kernel", (ROWS, 1, 1), tuple(meta["block"]), args, meta["shared"])
    got, _ = _run_both(path, launch, 1)
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=1, keepdims=True))
    assert _rel(got.reshape(ROWS, cols), e / e.sum(axis=1, keepdims=True)) < 1e-6


def test_layernorm_f16_functional_and_timed():
    path, meta = _fixture("triton_layernorm_f16")
    cols, eps = meta["cols"], 1e-5
    rng = np.random.default_rng(4)
    x = rng.standard_normal((ROWS, cols)).astype(np.float16)
    w, b = rng.standard_normal(cols).astype(np.float16), rng.standard_normal(cols).astype(np.float16)
    y = np.full(ROWS * cols, np.nan, dtype=np.float16)
    args = [Arg("buffer", "f16", array=x.ravel()), Arg("buffer", "f16", array=w), Arg("buffer", "f16", array=b),
            Arg("buffer", "f16", array=y), Arg("scalar", "u32", value=cols), Arg("scalar", "u32", value=cols),
            Arg("scalar", "f32", value=eps), *_scratch()]
    launch = Launch("layernorm_kernel", (ROWS, 1, 1), tuple(meta["block"]), args, meta["shared"])
    got, _ = _run_both(path, launch, 3)
    x64 = x.astype(np.float64)
    mu = x64.mean(axis=1, keepdims=True)
    var = ((x64 - mu) ** 2).mean(axis=1, keepdims=True)
    want = (x64 - mu) / np.sqrt(var + eps) * w.astype(np.float64) + b.astype(np.float64)
    assert _rel(got.reshape(ROWS, cols), want) < 1e-3  # f16 output: the H200 measured 2.1e-4


MATMULS = ["triton_matmul_f16_64x64x32", "triton_matmul_f16_128x128x64", "triton_matmul_bf16_128x256x64",
           "triton_matmul_fp8_128x128x128"]


def _matmul_launch(meta: dict) -> Launch:
    m, n, k = meta["M"], meta["N"], meta["K"]
    rng = np.random.default_rng(5)
    dtype = meta["dtype"].split(".")[-1]
    if dtype == "float8_e4m3fn":
        ab = [Arg("buffer", "u8", array=rng.integers(0, 0x7F, size=s).astype(np.uint8)) for s in (m * k, k * n)]
        out = "f16"
    elif dtype == "bfloat16":
        ab = [Arg("buffer", "bf16", array=f32_to_bf16(rng.standard_normal(s).astype(np.float32)))
              for s in (m * k, k * n)]
        out = "bf16"
    else:
        ab = [Arg("buffer", "f16", array=rng.standard_normal(s).astype(np.float16)) for s in (m * k, k * n)]
        out = "f16"
    c = Arg("buffer", out, array=np.full(m * n, 0x7E00 if out == "f16" else 0x7FC0, dtype=np.uint16))
    scalars = [Arg("scalar", "u32", value=v) for v in (m, n, k, k, n, n)]
    grid = (*meta["grid"], 1, 1)[:3]
    return Launch("matmul_kernel", grid, tuple(meta["block"]), [*ab, c, *scalars, *_scratch()], meta["shared"])


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if "64x64" not in n else n
                                  for n in MATMULS])
def test_matmul_functional_and_timed(name):
    """The wgmma matmuls timed on h200 give the functional model's output bit for bit, and that output
    is as close to float64 as the H200's was for f16 (tests/test_wgmma_triton.py checks bf16 and fp8
    against float64 with inputs drawn as make.py drew them)."""
    path, meta = _fixture(name)
    launch = _matmul_launch(meta)
    got, _ = _run_both(path, launch, 2)
    if meta["dtype"] == "torch.float16":
        m, n = meta["M"], meta["N"]
        a = launch.args[0].array.astype(np.float64).reshape(m, meta["K"])
        b = launch.args[1].array.astype(np.float64).reshape(meta["K"], n)
        assert _rel(got.view(np.float16).reshape(m, n), a @ b) < 2 * meta["rel_err_vs_f64"]
