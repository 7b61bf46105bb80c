"""The planner's speed-ups keep every result bit for bit: the L1 line walk shared by several sharer
settings (kernelgen.models.l1lines) gives each the result of its own walk, on the shared path and on
the path where warp orders part; and two whole plans (every survivor's repr with cycles and terms, the
pruning, candidates.csv) hash to what they did before the speed-ups (commit 00e8f8c). A change that
moves a prediction on purpose updates the digests here (and says why); benchmarks/plan_compare.py
compares 16 cases the same way."""

from __future__ import annotations

import csv
import hashlib
import io

import pytest

import kernelgen.models.l1lines as l1lines
from kernelgen.planner import Plan, enumerate_tilings, plan
from kernelgen.report import candidates_csv
from kernelgen.spec import shorthand
from kernelgen.tiling import operand_tiles
from sim.hw import load_hw


def test_shared_walk_equals_own_walks(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = shorthand("1000x520x264", "f16")
    ext = {"m": 1000, "n": 520, "k": 264}
    walk, alone = l1lines._walk, [0]

    def counted(*a: object) -> list:
        alone[0] += len(a[-1]) == 1  # type: ignore[arg-type]
        return walk(*a)  # type: ignore[arg-type]

    monkeypatch.setattr(l1lines, "_walk", counted)
    l1lines.copy_line_latencies.cache_clear()
    settings = (((1, 1), (1, 1)), ((1, 64), (1, 2)), ((64, 1), (8, 1)), ((1 << 20, 1 << 20), (1 << 20, 1 << 20)))
    checked = parted = 0
    for variant in ("simt", "mma"):
        for t in enumerate_tilings(spec, variant)[::9]:
            tiles = operand_tiles(spec, t)
            geo = tuple((x.rows, x.cols, x.vec, x.chunks_per_row, x.elem_global, x.col_dim == "k") for x in tiles)
            lims = tuple((ext[x.col_dim], ext[x.row_dim], ext[x.col_dim]) for x in tiles)
            args = (geo, t.threads, 32, lims, t.bk, 9, 128, 64, 4, 682.0, 278.0, 33.0)
            before = alone[0]
            both = l1lines.copy_line_latencies(*args, settings)
            parted += alone[0] - before
            own = tuple(l1lines.copy_line_latencies(*args, (s,))[0] for s in settings)
            assert both == own, t.key()
            checked += 1
    assert checked > 50
    assert parted, "no walk parted: the split path is not exercised"


# sha256 of the plan dump below: 00e8f8c's plans (before the speed-ups) as the merged tree of 2026-12-01
# prints them (Tiling gained mma_k, the s8 mma K step; wgmma tilings count one fence.proxy.async more).
# h200 re-recorded on purpose (epi branch): wgmma_tma joined the default search, so its survivors join the
# dump (its movement smem includes the TMA-store staging); with wgmma_tma opt-in again the dump still hashes
# to the previous 052b9918...de42fa
# h200 re-recorded on purpose (hopper branch): wgmma_tma's model takes the DRAM side of its TMA loads as measured
# with every SM loading (tma.dram_round_trip, tma.dram_bandwidth_gbps) and drains its TMA-store epilogue at the
# measured TMA-store rates (tma.store_*), docs/wgmma-tma.md section 7; before them it hashed to 3735a60b...ba35
# h200 re-recorded on purpose (hopper branch, session 8): wgmma_tma's ring keeps stages - 1 stages loading and a
# stage waits for its slowest box (docs/wgmma-tma.md section 8); before that it hashed to 85b15cb8...7f11
# Both re-recorded on purpose (main 46e2f14): the L2 read floor (l2 term); before: a2a2094c...6cd3, 8685b09b...5adc
# Both re-recorded on purpose (planfid2 branch, session 8, on main 46e2f14): the shared cycle model answers to the
# H200 (docs/fidelity.md: inputs resident in the L2 up to l2.size / 2, the prologue's fill rate, the measured store
# buffer core.store_buffer_bytes, arch-only register banks, ptxas's load order; the DRAM share keeps its burst/line
# fraction); the chosen kernels are main's (h200 1000x520x264 wgmma_tma s6 5,668 cycles; npu7nm 128x64x32 bf16
# mma_64x64x16 6,560 -> 6,388); before: 633970a3...4752, 1cecbec0...819e
# Both re-recorded on purpose (s9-cpasync branch, session 9): the shared model's cp.async pipeline by Little's law
# (tiles in flight per the emitted pipeline, a tile's slowest line, its misses queued behind those in flight at the
# measured stream rate, the L2's measured hold between launches; docs/fidelity.md session 9); the chosen kernels are
# unchanged (h200 1000x520x264 wgmma_tma s6 5,668; npu7nm 128x64x32 bf16 mma_64x64x16 s2 6,388); before:
# b6111952...26be, 89878dee...e8f3
# h200 re-recorded on purpose (s9-tma branch, session 9): wgmma_tma's ring from the H200's measured L2 hold between
# launches, DRAM trip against bytes in flight, producer stage loop, consumer step and lone-warpgroup wgmma spacing
# (docs/wgmma-tma.md section 10); the pick stays wgmma_tma 128x64 s6 (5,668 -> 5,506 cycles); before: 1a38b2f4...7303
# h200 re-recorded on purpose (s10-top4 branch, session 10): the planner counts cycles at the measured
# planner_clock_mhz 1550 (the simulator keeps clock_mhz 1980) and wgmma_tma's ring waits for the tensor pipe's
# queue (wgmma.queue 4; docs/wgmma-tma.md sections 11-12); the pick stays wgmma_tma 128x64 s6 (5,506 -> 4,895
# cycles at 1550 MHz); before: be44c662...7db5
# h200 re-recorded on purpose (s11-cta branch, session 11): tma.l2_round_trip null (the 920-cycle L2-served trip was
# the ring's queue) and the zero fill as a device-wide rate (tma.oob_fill_gbps for oob_trip; docs/wgmma-tma.md
# section 13); the pick wgmma_tma 128x64 s6 (4,895 cycles) -> 128x64 s5 (4,856: s5 and s6 tie on the K loop, s5's
# prologue is shorter); before: 0289db1b...e366
# h200 re-recorded on purpose (s12-l2 branch, session 12): one-wave wgmma_tma stages take the L2's measured TMA rate by
# SMs reading each line at once (tma.l2_read_*, benchmarks/tma_l2rate; docs/wgmma-tma.md section 14) instead of
# l2.bandwidth_gbps for every byte; the pick stays wgmma_tma 128x64 s5 (4,856 -> 4,682 cycles); before: a6148d78...20c9
DIGESTS = {
    ("h200", "1000x520x264", "f16"): "721c993ffc27d88c63f76ddf35fb7cfc6eb79e6ec0ff2433b43aff0a665a238c",
    ("npu7nm", "128x64x32", "bf16"): "a40206afa130b4850c0959cb95a3c04657aa1946cc0abc2bb7ae3ab2bd71d4e3",
}


def pareto_csv(p: Plan) -> str:
    """candidates.csv as it was when the digests were recorded: the Pareto rows without the status column
    (candidates.csv lists every candidate since 2026-12-01, with a status)."""
    rows = list(csv.reader(io.StringIO(candidates_csv(p))))
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerows([rows[0][:-1]] + [r[:-1] for r in rows[1:] if r[-1] == "pareto"])
    return buf.getvalue()


@pytest.mark.parametrize(("hwname", "shape", "dtype"), list(DIGESTS))
def test_plan_bit_identical(hwname: str, shape: str, dtype: str) -> None:
    p = plan(shorthand(shape, dtype), load_hw(hwname))
    dump = "\n".join([repr(p.pruned)] + [repr(ev) for ev in p.survivors] + [pareto_csv(p)])
    assert hashlib.sha256(dump.encode()).hexdigest() == DIGESTS[hwname, shape, dtype], \
        f"{hwname} {shape} {dtype}: the plan moved; compare with benchmarks/plan_compare.py against 00e8f8c"


def test_critical_whole_latencies_sum_as_listed() -> None:
    """_critical's shortcut for whole-number latencies (per-warp sums from parts) picks the warp and
    averages the copies the listed sums do, on the walks of several geometries; and the shortcut is
    taken for integer latencies only."""
    spec = shorthand("1000x520x264", "f16")
    ext = {"m": 1000, "n": 520, "k": 264}
    checked = 0
    for t in enumerate_tilings(spec, "simt")[::23]:
        tiles = operand_tiles(spec, t)
        geo = tuple((x.rows, x.cols, x.vec, x.chunks_per_row, x.elem_global, x.col_dim == "k") for x in tiles)
        lims = tuple((ext[x.col_dim], ext[x.row_dim], ext[x.col_dim]) for x in tiles)
        walks = l1lines._walk(geo, t.threads, 32, lims, t.bk, 3, 128, 64, 4, 682.0, 278.0, 33.0, ((0.5, 0.25),))
        for rec in walks[0]:
            for sharers, near in (((1, 1), (1, 1)), ((4, 2), (2, 2)), ((64, 1), (8, 1))):
                fast = l1lines._critical(rec, sharers, near, 682.0, True)
                assert fast == l1lines._critical(rec, sharers, near, 682.0, False), t.key()
                checked += 1
    assert checked > 20
    l1lines.copy_line_latencies.cache_clear()
    seen: list[bool] = []
    crit = l1lines._critical

    def spy(*a: object) -> tuple[float, ...]:
        seen.append(bool(a[-1]))
        return crit(*a)  # type: ignore[arg-type]

    l1lines._critical = spy  # type: ignore[assignment]
    try:
        args = (geo, t.threads, 32, lims, t.bk, 9, 128, 64, 4)
        l1lines.copy_line_latencies(*args, 682.0, 278.0, 33.0)
        l1lines.copy_line_latencies(*args, 682.5, 278.0, 33.0)
    finally:
        l1lines._critical = crit  # type: ignore[assignment]
    assert True in seen and seen[-1] is False


def test_cached_hashes_are_the_dataclass_hashes() -> None:
    """Tiling and GemmSpec keep their hash (the dataclass's, of the fields' tuple: sets of them iterate
    as before) and do not carry it through pickle (a string's hash differs between processes)."""
    import dataclasses
    import pickle

    spec = shorthand("1000x520x264", "f16")
    t = enumerate_tilings(spec, "mma")[5]
    assert hash(t) == hash(tuple(getattr(t, f.name) for f in dataclasses.fields(t)))
    assert hash(spec) == hash(tuple(getattr(spec, f.name) for f in dataclasses.fields(spec)))
    for obj in (t, spec):
        back = pickle.loads(pickle.dumps(obj))
        assert back == obj and "_hash" not in back.__dict__ and hash(back) == hash(obj)


@pytest.mark.slow
def test_cold_plan_process_time_bound() -> None:
    """A bounded plan (the default of `kernelgen compile`) of h200 4096^3 in a fresh process times at most
    400 of its 3,233 candidates (301 on 2026-12-01: a count, the same on any machine), uses under 0.7
    of the process time of the exhaustive plan in another fresh process (0.3-0.5 at load 9-14,
    benchmarks/plan_speed.md; single runs are noisy), and under 3 s of it (about 0.5 s on an idle
    machine). Process time, not
    wall clock: a loaded machine stretches the wall clock many times over, the process time by a third."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    code = ("import sys, time; from kernelgen.planner import plan; from kernelgen.spec import shorthand; "
            "from sim.hw import load_hw; hw = load_hw('h200'); t = time.process_time(); "
            "p = plan(shorthand('4096x4096x4096'), hw, exhaustive=sys.argv[1] == 'yes'); "
            "print(time.process_time() - t, len(p.survivors), len(p.bounded), p.best.tiling.key())")

    def cold(exhaustive: str) -> list[str]:
        return subprocess.run([sys.executable, "-c", code, exhaustive], capture_output=True, text=True, check=True,
                              cwd=root, env={**os.environ, "PYTHONPATH": str(root)}).stdout.split()

    bd, ex = cold("no"), cold("yes")
    assert bd[3] == ex[3] == "wgmma_tma_128x256x64_t64x256_s3_p0.0_v8.8"
    assert int(bd[1]) <= 400 and int(bd[1]) + int(bd[2]) == int(ex[1]) == 3233, (bd, ex)
    assert float(bd[0]) < 3.0 and float(bd[0]) < 0.7 * float(ex[0]), (bd, ex)
