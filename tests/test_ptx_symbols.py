"""Module-scope .global / .const variables live in simulated memory; `--symbol NAME=@file.npy` (or
NAME=LITERAL) fills one before the launch; an unfilled __constant__ without initialiser reads zeros
with one warning line naming it."""

from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pytest

from sim.errors import UsageError, WorkbenchWarning
from sim.functional.runner import run_functional
from sim.launch import Arg, Launch, bind_symbols
from sim.ptx.parser import parse_ptx
from tests.simhelp import HEADER
from validation.gpu import ptx_variables

# out[i] = coef[i % 8] * scale + bias[0]; coef is __constant__ (no initialiser), scale a .global
# with an initialiser, bias a .global without one.
SYMBOLS = HEADER + """
.const .align 4 .b8 coef[32];
.global .align 4 .f32 scale = 0f40000000;
.global .align 4 .f32 bias[1];
.visible .entry k(.param .u64 k_out)
{
	.reg .b32 	%r<6>;
	.reg .f32 	%f<6>;
	.reg .b64 	%rd<8>;
	ld.param.u64 	%rd1, [k_out];
	mov.u32 	%r1, %tid.x;
	and.b32 	%r2, %r1, 7;
	mul.wide.u32 	%rd2, %r2, 4;
	mov.u64 	%rd3, coef;
	add.s64 	%rd4, %rd3, %rd2;
	ld.const.f32 	%f1, [%rd4];
	ld.global.f32 	%f2, [scale];
	mov.u64 	%rd5, bias;
	ld.global.f32 	%f3, [%rd5];
	fma.rn.f32 	%f4, %f1, %f2, %f3;
	mul.wide.u32 	%rd6, %r1, 4;
	add.s64 	%rd7, %rd1, %rd6;
	st.global.f32 	[%rd7], %f4;
	ret;
}
"""


def _variables() -> dict[str, tuple[str, int]]:
    prog = parse_ptx(SYMBOLS, "sym.ptx")
    return {v.name: (v.type, v.size) for v in prog.variables.values()}


def _run(symbols: dict[str, bytes]) -> np.ndarray:
    out = np.full(32, np.nan, dtype=np.float32)
    launch = Launch("k", (1, 1, 1), (32, 1, 1), [Arg("buffer", "f32", array=out)], symbols=symbols)
    return run_functional(parse_ptx(SYMBOLS, "sym.ptx"), launch).outputs[0]


def test_symbols_fill_const_and_global(tmp_path):
    rng = np.random.default_rng(1)
    coef = rng.standard_normal(8).astype(np.float32)
    np.save(tmp_path / "coef.npy", coef)
    symbols = bind_symbols([f"coef=@{tmp_path / 'coef.npy'}", "bias=0.5", "scale=-3"], _variables())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = _run(symbols)
    want = np.tile(coef.astype(np.float64), 4) * -3.0 + 0.5
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < 1e-6


def test_initialiser_and_unfilled_const_warns():
    with pytest.warns(WorkbenchWarning, match=r"sym\.ptx:\d+: __constant__ 'coef' is read but was never filled"):
        got = _run({})
    assert np.array_equal(got, np.zeros(32, dtype=np.float32))  # 0 * 2 + 0


@pytest.mark.parametrize("spec, message", [
    ("nope=1", "NAME a module .global/.const variable"),
    ("coef", "NAME a module .global/.const variable"),
    ("bias=zeros:f32:1", "starts as zeros already"),
    ("scale=1.5x", "not a number"),
])
def test_bad_symbol_specs(spec, message):
    with pytest.raises(UsageError, match=message):
        bind_symbols([spec], _variables())


def test_too_large_file_is_rejected(tmp_path):
    np.save(tmp_path / "big.npy", np.zeros(9, dtype=np.float32))
    with pytest.raises(UsageError, match="36 bytes do not fit 'coef' \\(32 bytes\\)"):
        bind_symbols([f"coef=@{tmp_path / 'big.npy'}"], _variables())


def test_gpu_runner_reads_the_same_variables():
    assert ptx_variables(SYMBOLS) == _variables()


def test_cli_symbol_and_one_line_warning(tmp_path):
    f = tmp_path / "sym.ptx"
    f.write_text(SYMBOLS)
    base = [sys.executable, "-m", "sim", "run", str(f), "--hw", "h200", "--functional", "--grid", "1",
            "--block", "32", "--arg", "zeros:f32:32", "--out", str(tmp_path)]
    r = subprocess.run(base + ["--symbol", "bias=1.25"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stderr.startswith("warning: ") and r.stderr.count("\n") == 1 and "'coef'" in r.stderr
    assert np.array_equal(np.load(tmp_path / "arg0.npy"), np.full(32, 1.25, dtype=np.float32))
    r = subprocess.run(base + ["--symbol", "coef=7"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stderr == ""
    r = subprocess.run(base + ["--symbol", "cof=7"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "coef" in r.stderr


@pytest.mark.gpu
def test_gpu_fills_the_same_symbols_and_agrees_with_the_simulator(tmp_path):
    """The same PTX and --symbol fills on the GPU (module.get_global) and in the simulator: equal outputs."""
    from validation.gpu import gpu_available, run_on_gpu

    ok, why = gpu_available()
    if not ok:
        pytest.skip(f"no GPU: {why}")
    rng = np.random.default_rng()
    coef = rng.standard_normal(8).astype(np.float32)
    np.save(tmp_path / "coef.npy", coef)
    symbols = bind_symbols([f"coef=@{tmp_path / 'coef.npy'}", "bias=0.25", "scale=1.5"], _variables())
    sim_out = _run(symbols)
    out = np.full(32, np.nan, dtype=np.float32)
    launch = Launch("k", (1, 1, 1), (32, 1, 1), [Arg("buffer", "f32", array=out, role="out")], symbols=symbols)
    m = run_on_gpu(SYMBOLS, launch, warmup=0, repeats=1)
    gpu_out = np.asarray(m.outputs[0]).view(np.float32)
    want = np.tile(coef.astype(np.float64), 4) * 1.5 + 0.25
    assert np.linalg.norm(gpu_out - want) / np.linalg.norm(want) < 1e-6
    assert np.array_equal(gpu_out, sim_out)
