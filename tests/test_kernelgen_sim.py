"""Issue 4's matrix: every generated kernel runs in the simulator with the automatic numpy check
passing, on both hardware models (functional model: the values; the timing model runs the same
PTX in docs/accuracy.md and tests/test_compare.py)."""

from __future__ import annotations

import numpy as np
import pytest

from sim.functional.runner import run_functional
from sim.launch import launch_from_metadata, read_metadata
from sim.ptx.parser import parse_ptx
from sim.reference import check_from_metadata
from validation.cases import HWS, SHAPES, SMOKE_SHAPES, VARIANTS, supported

SIM_SHAPES = [s if s in SMOKE_SHAPES else pytest.param(s, marks=pytest.mark.slow) for s in SHAPES]


@pytest.mark.parametrize("hw", HWS)
@pytest.mark.parametrize("variant,dtype", VARIANTS)
@pytest.mark.parametrize("shape", SIM_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_generated_kernel_passes_numpy_check_in_simulator(tmp_path, shape, variant, dtype, hw):
    if not supported(hw, variant):
        pytest.skip(f"{hw} has no {variant}")
    from kernelgen.cli import compile_kernel

    M, N, K = shape
    # in process (what `python -m kernelgen compile --hw HW --gemm MxNxK --dtype D --variant V` writes; the command
    # line is tested in tests/test_kernelgen.py): a cold interpreter per case was a third of this file's CPU time
    text = compile_kernel(hw, None, f"{M}x{N}x{K}", dtype, "f32", variant)["kernel.ptx"]
    meta = read_metadata(text)
    launch = launch_from_metadata(meta, np.random.default_rng())
    before = launch.copy()
    res = run_functional(parse_ptx(text, str(tmp_path / "kernel.ptx")), launch)
    chk = check_from_metadata(meta, before, res.outputs)
    assert chk is not None and chk["passed"], chk
    # the check can fail: a perturbed output does not pass
    d = next(i for i, p in enumerate(meta["params"]) if p.get("role") == "D")
    bad = {**res.outputs, d: res.outputs[d].copy()}
    bad[d].view(np.uint8)[::7] ^= 0x40
    with np.errstate(invalid="ignore"):  # flipped bits may make signalling NaNs
        assert not check_from_metadata(meta, before, bad)["passed"]
