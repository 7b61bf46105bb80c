"""The nvcc fixtures and the kernelgen kernels on the real GPU: same PTX, numpy reference, and the
simulator's values beside the GPU's (``-m gpu``; skipped without pycuda or a GPU)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from sim.functional.runner import run_functional
from sim.launch import launch_from_metadata, read_metadata
from sim.ptx.parser import parse_file, parse_ptx
from tests.fixtures.cases import CASES, check, reference_for
from tests.simhelp import case_launch
from validation.cases import SMOKE_SHAPES, VARIANTS
from validation.gpu import gpu_available

_OK, _WHY = gpu_available()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not _OK, reason=f"no GPU: {_WHY}")]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_fixture_on_gpu_matches_numpy_and_simulator(case):
    from validation.gpu import run_on_gpu

    rng = np.random.default_rng()
    args = case.make_args(rng, case.sizes)
    ref = reference_for(case, args)
    launch = case_launch(case, args)
    m = run_on_gpu(case.ptx_path.read_text(), launch, warmup=0, repeats=1)
    after = list(args)
    for i, o in m.outputs.items():
        after[i] = o.reshape(np.asarray(args[i]).shape)
    r = check(case, after, ref)
    assert r.passed, r.messages
    sim = run_functional(parse_file(case.ptx_path), case_launch(case, args))
    for i in ref:
        g, s = np.asarray(after[i], np.float64), np.asarray(sim.outputs[i], np.float64)
        if case.rtol == 0:
            assert np.array_equal(g, s), f"arg{i}: simulator and GPU differ"
        else:
            assert np.linalg.norm(g - s) <= 1e-5 * max(np.linalg.norm(g), 1e-30), f"arg{i}"


@pytest.mark.parametrize("variant,dtype", VARIANTS)
@pytest.mark.parametrize("shape", SMOKE_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_kernelgen_kernel_on_gpu(tmp_path, shape, variant, dtype):
    from validation.gpu import run_on_gpu

    M, N, K = shape
    out = tmp_path / "k"
    subprocess.run([sys.executable, "-m", "kernelgen", "compile", "--hw", "h200", "--gemm", f"{M}x{N}x{K}",
                    "--dtype", dtype, "--variant", variant, "-o", str(out)], check=True, capture_output=True)
    text = (out / "kernel.ptx").read_text()
    parse_ptx(text, "kernel.ptx")
    meta = read_metadata(text)
    launch = launch_from_metadata(meta, np.random.default_rng())
    m = run_on_gpu(text, launch, warmup=0, repeats=1, check=meta["check"])
    assert m.check is not None and m.check["passed"], m.check
