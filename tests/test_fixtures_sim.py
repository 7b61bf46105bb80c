"""Every nvcc fixture kernel runs in the simulator on both hardware models and matches numpy."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from sim.functional.runner import run_functional
from sim.ptx.parser import parse_file, parse_ptx
from tests.fixtures.cases import ALL_CASES, CASES, check, reference_for
from tests.simhelp import case_launch


@pytest.mark.parametrize("hw", ["npu7nm.yaml", "h200"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_fixture_matches_numpy(case, hw):
    from sim.hw import load_hw

    load_hw(hw)  # the model must load; values do not depend on it in the functional model
    seed = int(np.random.SeedSequence().entropy % (2**32))  # fresh inputs, reproducible from the log
    rng = np.random.default_rng(seed)
    args = case.make_args(rng, case.sizes)
    ref = reference_for(case, args)
    res = run_functional(parse_file(case.ptx_path), case_launch(case, args))
    after = list(args)
    for i, o in res.outputs.items():
        after[i] = o
    r = check(case, after, ref)
    assert r.passed, f"seed {seed}: {r.messages}"


@pytest.mark.parametrize("case", ALL_CASES, ids=lambda c: c.name)
def test_poisoned_output_fails_the_check(case):
    """The comparison can fail: the untouched (poisoned) outputs do not pass."""
    rng = np.random.default_rng(7)
    args = case.make_args(rng, case.sizes)
    ref = reference_for(case, args)
    if not ref and not case.nonneg_outputs:
        pytest.skip("no checked output")
    after = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    for i in list(ref) + list(case.nonneg_outputs):
        a = after[i]
        a[...] = np.nan if a.dtype.kind == "f" else (a.dtype.type(-1) if a.dtype.kind == "i" else a.dtype.type(7))
    assert not check(case, after, ref).passed


FIXTURE_FILES = sorted({c.cu_path for c in ALL_CASES})


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
@pytest.mark.parametrize("cu", FIXTURE_FILES, ids=lambda p: p.name)
def test_regenerated_ptx_parses(cu, tmp_path):
    """nvcc -O3 -ptx -arch=sm_90a output of each fixture parses unchanged (and equals the committed one)."""
    out = tmp_path / (cu.stem + ".ptx")
    subprocess.run(["nvcc", "-O3", "-ptx", "-arch=sm_90a", str(cu), "-o", str(out)], check=True,
                   capture_output=True)
    text = out.read_text()
    prog = parse_ptx(text, str(out))
    assert prog.kernels
    committed = cu.with_suffix(".ptx").read_text()
    assert committed == text, f"{cu.with_suffix('.ptx')} is stale: run tests/fixtures/cuda/regen.sh"
