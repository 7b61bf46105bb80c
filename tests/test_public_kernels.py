"""The public CUDA kernels of the silicon suite (CUDA samples, llm.c; sources named in each .cu under
benchmarks/silicon/public/), compiled by nvcc 13 and run unchanged: the simulator's outputs equal the
suite's numpy references (benchmarks/silicon/refs.py), functionally and with timing. The H200 runs the
same files through benchmarks/silicon/run_gpu.py (benchmarks/data/silicon_gpu.json records its checks)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from benchmarks.silicon.common import check, load, make_launch
from benchmarks.silicon.suite import ROOT, SUITE, Kernel
from sim.hw import load_hw

PUBLIC = [k for k in SUITE if k.group == "public"]
# llm.c's softmax_forward_kernel4 races on shared[0]: after the second __syncthreads every warp reads the
# row maximum from shared[0] while warp 0's lane 0 may already store its partial sum there (no barrier in
# between). On the GPU warp 0 is rarely that far ahead; the functional model runs warp 0 to the next
# barrier first, so its outputs are wrong there, as the program allows. The verifier names the race.
RACY = {"softmax_forward"}


def test_at_least_15_public_kernels():
    assert len(PUBLIC) >= 15


def _run(k: Kernel, timed: bool) -> dict:
    from sim.functional.runner import run_functional
    from sim.ptx.parser import parse_ptx
    from sim.timing import simulate

    ld = load(k)
    launch = make_launch(ld)
    before = launch.copy()
    prog = parse_ptx(ld.text, str(k.ptx))
    if timed:
        r = simulate(prog, launch, load_hw("h200.yaml"), warm_l2=True)
        assert r.cycles > 0
        outputs = r.outputs
    else:
        outputs = run_functional(prog, launch).outputs
    got = check(k, ld, before, outputs, None)
    assert got is not None and got["passed"], (k.name, got)
    return got


@pytest.mark.slow
@pytest.mark.parametrize("k", [k for k in PUBLIC if k.name not in RACY], ids=lambda k: k.name)
def test_public_kernel_functional(k: Kernel):
    _run(k, timed=False)


def test_racy_softmax_is_wrong_in_warp_order():
    with pytest.raises(AssertionError, match="softmax_forward"):
        _run(next(k for k in PUBLIC if k.name == "softmax_forward"), timed=False)


def test_verifier_names_the_softmax_race():
    k = next(k for k in PUBLIC if k.name == "softmax_forward")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-m", "validation", "verify", str(ROOT / k.source), "--kernel", k.entry,
                        "--block", ",".join(map(str, k.block)), "--json"], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 1, r.stderr
    race = {p["name"]: p for p in json.loads(r.stdout)["properties"]}["shared_race"]
    assert race["status"] == "violated"
    assert {race["witness"]["access"], race["witness"]["other_access"]} == {
        "ld.shared.f32 \t%f13, [shared];", "st.shared.f32 \t[%r102], %f17;"}


@pytest.mark.slow
@pytest.mark.parametrize("k", [k for k in PUBLIC if k.name not in RACY], ids=lambda k: k.name)
def test_public_kernel_timed(k: Kernel):
    _run(k, timed=True)
