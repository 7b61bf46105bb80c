"""benchmarks/micro_wgmma: every kernel is accepted by ptxas (sm_90a) and by the simulator's parser,
and a latency case times to the h200 model's issue + MACs + fixed latency plus the loop's instructions."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.micro_wgmma import run as micro
from benchmarks.micro_wgmma.kernels import cases, ptx
from sim.hw import load_hw
from sim.ptx.parser import parse_ptx
from sim.timing import simulate
from tests.simhelp import ptxas_ok


@pytest.mark.parametrize("case", cases(), ids=lambda c: c.name)
def test_kernel_assembles_and_parses(case, tmp_path):
    text = ptx(case)
    ptxas_ok(text, tmp_path)
    parse_ptx(text, f"{case.name}.ptx").kernel(f"wgmma_{case.name}")


def test_latency_case_times_to_the_model():
    case = next(c for c in cases() if c.name == "lat_f16_n8")
    hw = load_hw("h200")
    assert hw.wgmma is not None
    res = simulate(parse_ptx(ptx(case), "k.ptx"), micro.launch(case), hw)
    per = micro.per_wgmma(res.outputs[0], case)
    model = hw.wgmma.issue + 16 * 8 * 16 / hw.wgmma.f16_macs + hw.wgmma.latency
    assert model <= per <= model + 20, per  # the loop adds its few ordered instructions
    assert np.all(res.outputs[0][: case.threads] > 0)
