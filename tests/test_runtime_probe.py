"""Issue 16's done-when: the YAML `deepgemm probe` wrote on the H200 (benchmarks/data/, 2026-12-01) still loads
with this loader and drives the timing simulator (tests/test_probe.py -m gpu writes a fresh one on a GPU)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from sim.hw import load_hw
from sim.launch import launch_from_metadata, read_metadata
from sim.ptx.parser import parse_ptx
from sim.reference import check_gemm
from sim.timing import simulate

ROOT = Path(__file__).resolve().parent.parent
PROBED = ROOT / "benchmarks" / "data" / "probe_h200_2026-12-01.yaml"


def test_recorded_h200_probe_loads_and_simulates():
    hw = load_hw(PROBED)
    assert (hw.name, hw.arch, hw.core.count, hw.clock_mhz) == ("probe_nvidia_h200", "sm_90a", 132, 1980)
    assert "# source: probe (" in PROBED.read_text()
    text = (ROOT / "examples" / "sgemm_tiled.ptx").read_text()
    meta = read_metadata(text)
    launch = launch_from_metadata(meta, np.random.default_rng(0))
    launch = dataclasses.replace(launch, grid=(1, 1, 1))  # one 16 x 16 tile of D: M = N = 16
    for a in launch.args:
        if a.role in ("M", "N"):
            a.value = 16
    r = simulate(parse_ptx(text, "sgemm_tiled.ptx"), launch, hw)
    assert r.cycles > 0
    check = check_gemm({**meta["check"], "M": 16, "N": 16}, launch.args, r.outputs, launch.roles)
    assert check["passed"], check
