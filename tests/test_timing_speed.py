"""Guards for the timing model's speed work (benchmarks/sim_speed.md): results that must not move
when the hot path changes, determinism across interpreter processes, and a budget of Python
function calls per simulated warp instruction (deterministic, unlike wall time on a shared machine)."""

from __future__ import annotations

import cProfile
import json
import os
import pstats
import subprocess
import sys

import numpy as np

from sim.hw import load_hw
from sim.ptx.parser import parse_file
from sim.timing import simulate

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _sgemm(size: int | None = None):
    from tests.fixtures.cases import by_name
    from validation.calibrate import to_launch

    c = by_name("sgemm_tiled")
    s = c.sizes if size is None else {"M": size, "N": size, "K": size}
    args = c.make_args(np.random.default_rng(0), s)
    L = to_launch(c, args)
    L.grid, L.block = c.grid(s), c.block(s)
    return parse_file(str(c.ptx_path)), L


def test_sgemm_64_pinned():
    """The benchmark kernel at 64^3 on h200.yaml: an optimisation of the hot path must not change these
    figures. They moved on purpose with fidelity fixes, each checked against the H200: DRAM busy once
    when the bandwidth became shared by the cores the launch keeps busy (units.Dram); then (2026-11-30)
    the 16 CTAs spread one per core (docs/placement.md), the sectored L2 with misses in flight
    (docs/timing.md) and residency from ptxas' 32 registers: 5,714 -> 7,734 cycles, every CTA alike; then
    the core's own L2 port (core.fill_bytes_per_cycle, docs/micro-fill.md): 7,741; then (2026-12-01) the
    L2's near/far partitions and 64 B fills (docs/first-touch.md): 7,834, CTAs no longer alike (7,462 to
    7,834 by how many of their lines are homed in the other partition); then the sectored L1, the cold constant
    line, far copies in flight and the partition crossbar (docs/const-cold.md): 8,974 (8,602 to 8,974); then
    (session 10) the device-wide DRAM (sim/timing/dram.py: the 16 cores' misses share 192 channels of 16 banks, an
    access holding its bank dram.row_cycle; DRAM busy counts channel cycles now): 9,194 (8,602 to 9,194)."""
    prog, L = _sgemm(64)
    r = simulate(prog, L, load_hw("h200"))
    assert (r.cycles, r.warp_instructions) == (9194, 45952)
    assert r.busy == {"fma": 8448, "alu": 29696, "fp64": 0, "sfu": 0, "tensor": 0, "lsu": 39424, "branch": 1920,
                      "sync": 1024, "shared": 17408, "dram": 4018}
    assert sum(r.stalls.values()) == 530576
    assert r.cycles_per_cta == [8602, 9084, 8602, 9084, 9084, 9084, 9084, 9084, 9084, 9084, 9084, 9084, 8898, 9194,
                                8898, 9194]


_CHILD = """
import hashlib, json, os, sys
sys.path.insert(0, {root!r})
from tests.test_timing_speed import _sgemm
from sim.hw import load_hw
from sim.timing import simulate
prog, L = _sgemm()
hw = load_hw("h200")
res = simulate(prog, L, hw).to_json()
# what this process ran: the sources it imported from the tree and the hwconfig it read
files = sorted({{m.__file__ for m in list(sys.modules.values()) if getattr(m, "__file__", None)
                and os.path.abspath(m.__file__).startswith({root!r})}} | {{hw.path}})
h = hashlib.sha256()
for f in files:
    h.update(f.encode() + open(f, "rb").read())
print(json.dumps({{"result": res, "sources": h.hexdigest()}}, sort_keys=True))
"""


def test_same_result_under_any_hash_seed():
    """Stall reasons of same-cycle ties once followed frozenset order (PYTHONHASHSEED). Each child also
    reports a digest of the sources and hwconfig it read: a tree edited or rebased while the test runs
    (children started seconds apart import what is on disk then) is named as such, not as a timing
    difference (a session-8 run saw 5,830 instead of 6,377 cycles in one child once; 60 seeds at load 11
    and ptxas failing (the occupancy query: 6 CTAs, any register count gives 6,377) do not reproduce it)."""
    outs = []
    for seed in ("1", "2", "3"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        p = subprocess.run([sys.executable, "-c", _CHILD.format(root=ROOT)], env=env, capture_output=True,
                           text=True, check=True, cwd=ROOT)
        outs.append(json.loads(p.stdout))
    assert len({o["sources"] for o in outs}) == 1, "the sources or hwconfig changed on disk while the test ran: rerun"
    res = [o["result"] for o in outs]
    diff = sorted(k for k in res[0] if any(r.get(k) != res[0][k] for r in res[1:]))
    assert res[0] == res[1] == res[2], (diff, [(r["cycles"], r["occupancy"], r["busy"]) for r in res])


def test_python_calls_per_warp_instruction():
    """~190 calls per warp instruction before the speed work, ~90-95 after (timing + functional)."""
    prog, L = _sgemm()
    prof = cProfile.Profile()
    prof.enable()
    r = simulate(prog, L, load_hw("h200"))
    prof.disable()
    per = pstats.Stats(prof).total_calls / r.warp_instructions
    assert per < 120, per
