"""``--sample-ctas N`` (sim.timing.sampling, docs/sampling.md): sampling every CTA is the full run; the
per-wave simulation of a whole wave equals the full run's cycles; the bound of a sampled estimate
contains the full run's cycles; bad N is refused in one line."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sim.cli import main
from sim.functional.runner import prepare
from sim.hw import load_hw
from sim.launch import bind_launch, read_metadata
from sim.ptx.parser import parse_file
from sim.timing import simulate
from sim.timing.footprint import Footprints
from sim.timing.sampling import layout_of, pick, simulate_sampled, simulate_waves

ROOT = Path(__file__).resolve().parent.parent
SGEMM = ROOT / "examples" / "sgemm_tiled.ptx"


def _kernel(tmp_path: Path, hw: str, gemm: str, dtype: str, variant: str) -> Path:
    out = tmp_path / "k"
    subprocess.run([sys.executable, "-m", "kernelgen", "compile", "--hw", hw, "--gemm", gemm, "--dtype", dtype,
                    "--variant", variant, "-o", str(out)], check=True, capture_output=True)
    return out / "kernel.ptx"


def _launch(path: Path):
    prog = parse_file(str(path))
    meta = read_metadata(prog.text, str(path))
    k = prog.kernel(meta["kernel"])
    launch = bind_launch(k.name, [(p.name, p.type) for p in k.params], meta, [], None, None, None,
                         np.random.default_rng(7), prog.file, [], {})
    return prog, launch


def _small_h200(cores: int, max_ctas: int):
    hw = load_hw("h200")
    return dataclasses.replace(hw, core=dataclasses.replace(hw.core, count=cores, max_ctas=max_ctas))


def test_pick_spreads_over_rows_and_stretches():
    assert pick(256, 16, 16) == [17 * j for j in range(16)]  # every column of a 16-wide grid, one per row
    assert pick(4, 2, 2) == [0, 3]
    assert pick(5, 9, 5) == [0, 1, 2, 3, 4]


def test_every_cta_sampled_is_the_full_run(tmp_path):
    hw = load_hw("npu7nm.yaml")
    prog, launch = _launch(SGEMM)
    full = simulate(prog, launch.copy(), hw, max_instructions=10**6)
    s = simulate_sampled(prog, launch.copy(), hw, 6, 10**6)
    assert (s.cycles, s.bound) == (full.cycles, 0)
    assert s.group_cycles == full.cycles_per_cta


def test_one_whole_wave_simulated_by_waves_equals_the_full_run(tmp_path):
    """The per-wave path (own Simulation, L2 from footprints, the deal per core) with every group of a
    one-wave launch: nothing is warmed, and the cycles are the full run's."""
    ptx = _kernel(tmp_path, "h200.yaml", "64x64x32", "f16", "mma")
    hw = _small_h200(16, 2)
    prog, launch = _launch(ptx)
    full = simulate(prog, launch.copy(), hw, max_instructions=10**6)
    lay_launch = launch.copy()
    P = prepare(prog, lay_launch)
    regs = full.occupancy["regs_per_thread"]
    lay = layout_of(P, lay_launch, hw, regs)
    assert lay.waves == 1
    fp = Footprints(prog, launch.copy(), hw.l2.sector, 10**6)
    r = simulate_waves(prog, lay_launch, hw, P, lay, lay.groups, fp, regs, 10**6)
    assert r.cycles == {0: full.cycles}
    assert r.count == full.warp_instructions
    replayed = simulate_waves(prog, launch.copy(), hw, prepare(prog, launch.copy()), lay, lay.groups, fp, regs,
                              10**6, replay=True)
    assert (replayed.cycles, replayed.count) == (r.cycles, r.count)


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="since the L2 near/far partitions (docs/first-touch.md) CTAs alternate "
                   "1,249 / 1,435 cycles by the parity of their lines' home; the sampled CTAs (one core of four) "
                   "land on the far ones: estimate 44,732 vs full 34,164 cycles, bound 2,184 (measured 2026-12-01); "
                   "the sampler's bound does not model a per-CTA latency class")
def test_the_bound_contains_the_full_run(tmp_path):
    """128 CTAs over 4 cores, one at a time: 32 waves, 8 sampled in part (one core of four each). (Two
    CTAs per core overlap their waves in the full run and the estimate is high: docs/sampling.md.)"""
    ptx = _kernel(tmp_path, "h200.yaml", "128x128x32", "f16", "mma")
    hw = _small_h200(4, 1)
    prog, launch = _launch(ptx)
    full = simulate(prog, launch.copy(), hw, max_instructions=10**7)
    s = simulate_sampled(prog, launch.copy(), hw, 8, 10**7)
    assert s.waves == 32 and len(s.ctas_simulated) == 8
    assert s.footprint.startswith("affine")
    assert 0 < s.bound < 0.2 * full.cycles
    assert abs(s.cycles - full.cycles) <= s.bound, (s.cycles, s.bound, full.cycles)


def test_the_check_covers_the_sampled_tiles(capsys):
    assert main(["run", str(SGEMM), "--hw", "h200", "--seed", "1", "--quiet", "--json", "--sample-ctas", "1"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["check"]["passed"] and r["check"]["covered"] == "the D elements the sampled CTAs wrote"
    assert 0 < r["check"]["elements"] < r["check"]["of"] == 800
    assert r["sampled"]["estimate"] == r["cycles"] and r["ctas_simulated"] < r["ctas_total"] == 6


@pytest.mark.parametrize("bad", [["--sample-ctas", "0"], ["--sample-ctas", "-3"],
                                 ["--sample-ctas", "4", "--functional"], ["--sample-ctas", "x"]])
def test_bad_n_is_one_line_exit_2(bad):
    r = subprocess.run([sys.executable, "-m", "sim", "run", str(SGEMM), "--hw", "npu7nm.yaml", "--quiet", *bad],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "--sample-ctas" in lines[0] and "Traceback" not in r.stderr, r.stderr


def test_refusal_names_sample_ctas(capsys):
    assert main(["run", str(SGEMM), "--hw", "npu7nm.yaml", "--quiet", "--max-instructions", "10000"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "give --sample-ctas 4 " in err[0], err


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("WORKBENCH_LONG") != "1",
                    reason="a full 256^3 simulation (minutes on 2 cores): WORKBENCH_LONG=1 python -m pytest -m slow")
def test_sampled_within_its_bound_at_256(tmp_path):
    """npu7nm SIMT 256^3: 4 CTAs of 1024 threads, one per wave on the one core; 2 sampled."""
    ptx = _kernel(tmp_path, "npu7nm.yaml", "256x256x256", "f32", "simt")
    hw = load_hw("npu7nm.yaml")
    prog, launch = _launch(ptx)
    full = simulate(prog, launch.copy(), hw, max_instructions=10**8)
    s = simulate_sampled(prog, launch.copy(), hw, 2, 10**8)
    assert abs(s.cycles - full.cycles) <= max(s.bound, 0.01 * full.cycles), (s.cycles, s.bound, full.cycles)
