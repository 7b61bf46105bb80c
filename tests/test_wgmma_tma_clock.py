"""The planner's clock (issue 14): hwconfig planner_clock_mhz, the SM clock measured under load, at which the planner
counts cycles (kernelgen/models/schedule.py planner_hw); the simulator keeps clock_mhz."""

from __future__ import annotations

import dataclasses

import pytest

from kernelgen.models.schedule import planner_hw
from sim.hw import HwConfigError, load_hw


def test_planner_clock_is_a_measured_field_and_the_simulator_keeps_clock_mhz():
    """h200.yaml: clock_mhz stays the 1980 MHz maximum (the simulator's), planner_clock_mhz the measured 1550;
    planner_hw gives the same HwConfig at 1550 MHz, one object per hw (the models memoise by identity), and is
    the identity where the field is absent (npu7nm) or equal to clock_mhz."""
    hw = load_hw("h200")
    assert hw.clock_mhz == 1980 and hw.planner_clock_mhz == 1550
    p = planner_hw(hw)
    assert p.clock_mhz == 1550 and p is planner_hw(hw) and planner_hw(p) is p
    assert dataclasses.replace(p, clock_mhz=hw.clock_mhz) == hw
    assert p.l2_bytes_per_cycle == pytest.approx(hw.l2_bytes_per_cycle * 1980 / 1550)
    npu = load_hw("npu7nm")
    assert npu.planner_clock_mhz is None and planner_hw(npu) is npu
    same = dataclasses.replace(hw, planner_clock_mhz=1980.0)
    assert planner_hw(same) is same


def test_planner_clock_above_clock_mhz_is_refused(tmp_path):
    """A planner clock above the maximum: one line naming the file:line and the fix."""
    from pathlib import Path

    src = Path(load_hw("h200").path).read_text().replace("planner_clock_mhz: 1550 ", "planner_clock_mhz: 2500 ")
    f = tmp_path / "h.yaml"
    f.write_text(src)
    with pytest.raises(HwConfigError) as e:
        load_hw(str(f))
    msg = str(e.value)
    assert "planner_clock_mhz" in msg and "must be <= clock_mhz" in msg and "\n" not in msg.strip()


def test_plan_counts_cycles_at_the_planner_clock():
    """plan() ranks at planner_clock_mhz: its hw is planner_hw's, and a bandwidth-bound prediction (the L2 share,
    bytes per second) is fewer cycles than at clock_mhz; the tensor-bound term is not."""
    from kernelgen.planner import plan
    from kernelgen.spec import shorthand
    from kernelgen.variants import get

    hw = load_hw("h200")
    spec = shorthand("128x4096x4096", "bf16", "bf16")
    ts = [t for t in get("wgmma_tma").tilings(spec) if t.key() == "wgmma_tma_128x64x64_t128x64_s5_p0.0_v8.8"]
    at = plan(spec, hw, "wgmma_tma", only=ts)
    top = plan(spec, dataclasses.replace(hw, planner_clock_mhz=None), "wgmma_tma", only=ts)
    assert at.hw.clock_mhz == 1550 and top.hw.clock_mhz == 1980
    assert at.best.model.terms["tensor"] == top.best.model.terms["tensor"]
    assert at.best.model.terms["tma_transfer"] < top.best.model.terms["tma_transfer"]
    assert at.best.cycles_per_cta < top.best.cycles_per_cta
