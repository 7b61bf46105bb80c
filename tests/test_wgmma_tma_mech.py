"""The wgmma_tma ring's memory side (kernelgen/models/tma_cycles.py, docs/wgmma-tma.md section 10): the L2's hold on
the inputs between back-to-back launches (l2.held_*) and the DRAM trip under load (tma.dram_idle_trip /
dram_peak_gbps), unit checks of the two functions."""

from __future__ import annotations

import dataclasses

from kernelgen.models.tma_cycles import l2_held
from sim.hw import load_hw


def test_l2_held_interpolates_measured_points():
    hw = load_hw("h200")
    l2 = dataclasses.replace(hw.l2, held_footprints=(10, 20, 40), held_fractions=(1.0, 0.5, 0.1))
    h = dataclasses.replace(hw, l2=l2)
    assert l2_held(h, 5) == 1.0 and l2_held(h, 10) == 1.0
    assert abs(l2_held(h, 15) - 0.75) < 1e-9 and abs(l2_held(h, 30) - 0.3) < 1e-9
    assert l2_held(h, 100) == 0.1
    assert l2_held(dataclasses.replace(hw, l2=dataclasses.replace(hw.l2, held_footprints=(), held_fractions=())),
                   10) == 0.0
