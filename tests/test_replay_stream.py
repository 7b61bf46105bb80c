"""Streamed lock-step records (sim/functional/replay.Stream, issue 17): the timing model replays records
produced as it consumes them, batch by batch, with the same SimResult as executing; conflicts found late
rerun the launch executing; the records held stay bounded; waves in processes merge to the one-process
result (sim/timing/sampling.py)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

import sim.functional.lockstep as lockstep
import sim.functional.replay as replay
import sim.timing.engine as engine
from sim.cli import main
from sim.functional.conflicts import meets, merged, touched
from sim.functional.replay import Touched
from sim.hw import load_hw
from sim.launch import Arg, Launch
from sim.ptx.parser import parse_file, parse_ptx
from sim.timing import simulate
from tests.test_lockstep import _ACCUMULATE, _EXCHANGE, _kernel

ROOT = Path(__file__).resolve().parent.parent
SGEMM = ROOT / "examples" / "sgemm_tiled.ptx"


def _stream_everything(monkeypatch, chunk: int = 64, lanes: int | None = None) -> list[replay.Stream]:
    """Every launch streams (REPLAY_LIMIT 1), pausing every `chunk` warp instructions; the streams made."""
    made: list[replay.Stream] = []
    orig = replay.Stream.__init__

    def init(self, *a, **k):
        orig(self, *a, **k)
        made.append(self)

    monkeypatch.setattr(replay, "REPLAY_LIMIT", 1)
    monkeypatch.setattr(lockstep, "STREAM_CHUNK", chunk)
    monkeypatch.setattr(replay.Stream, "__init__", init)
    if lanes is not None:
        monkeypatch.setattr(lockstep, "BATCH_LANES", lanes)
    return made


def _sgemm():
    from sim.launch import bind_launch, read_metadata

    prog = parse_file(str(SGEMM))
    meta = read_metadata(prog.text, str(SGEMM))
    k = prog.kernel(meta["kernel"])
    launch = bind_launch(k.name, [(p.name, p.type) for p in k.params], meta, [], None, None, None,
                         np.random.default_rng(3), prog.file, [], {})
    return prog, launch


def test_intervals_merge_and_meet():
    s, e = merged(np.array([10, 0, 4, 20]), np.array([12, 3, 5, 20]))
    assert s.tolist() == [0, 10, 20] and e.tolist() == [5, 12, 20]  # [0,3] and [4,5] are adjacent: joined
    assert meets((s, e), (np.array([13, 5]), np.array([19, 5])))
    assert not meets((s, e), (np.array([6, 13]), np.array([9, 19])))
    log = [(1, 0, np.array([0, 8], dtype=np.uint64), 4, np.array([0, 2]), False),  # words 0 (warp 0), 2 (warp 2)
           (1, 1, np.array([16], dtype=np.uint64), 8, np.array([3]), True)]  # words 4, 5 by warp 3
    assert {c: (s.tolist(), e.tolist()) for c, (s, e) in touched(log, False, 2).items()} == {0: ([0], [0]),
                                                                                             1: ([2], [2])}
    assert {c: (s.tolist(), e.tolist()) for c, (s, e) in touched(log, True, 2).items()} == {1: ([4], [5])}
    none = (np.zeros(0, dtype=np.int64),) * 2
    t = Touched()
    assert t.add((np.array([0]), np.array([0])), none) == ""
    assert t.add(none, (np.array([1]), np.array([1]))) == ""  # the next word
    assert t.add(none, (np.array([0]), np.array([1]))) != ""  # words 0 and 1


@pytest.mark.slow
def test_streamed_replay_equals_executing(monkeypatch):
    """sgemm on npu7nm (6 CTAs, several batches of one CTA, pausing every 64 warp instructions): the
    streamed SimResult equals the executed one, outputs included, and every batch was checked."""
    hw = load_hw("npu7nm.yaml")
    executed = simulate(*_sgemm(), hw)
    made = _stream_everything(monkeypatch, lanes=64)
    streamed = simulate(*_sgemm(), hw)
    assert len(made) == 1 and made[0].next == 6 and not made[0].running and not made[0].traces
    assert streamed.to_json() == executed.to_json()
    assert all(np.array_equal(streamed.outputs[i], executed.outputs[i]) for i in executed.outputs)


@pytest.mark.slow
def test_records_held_stay_bounded(monkeypatch):
    """The records waiting in a stream never come near the launch's: at most the started batches' skew."""
    hw = load_hw("npu7nm.yaml")
    made = _stream_everything(monkeypatch, lanes=64)
    peak = [0]
    orig = replay.ReplayWarp.step

    def step(self, cycle=None):
        rec = orig(self, cycle)
        if made:
            peak[0] = max(peak[0], sum(len(d) for ws in made[0].traces.values() for d in ws))
        return rec

    monkeypatch.setattr(replay.ReplayWarp, "step", step)
    r = simulate(*_sgemm(), hw)
    assert 0 < peak[0] < r.warp_instructions // 4, (peak[0], r.warp_instructions)


@pytest.mark.parametrize("lanes", [64, None])
def test_a_late_conflict_reruns_executing(monkeypatch, lanes):
    """CTAs that meet in global memory, in batches of one (the stream finds it when the second batch
    ends: Touched) or in one batch (its per-CTA words, Batch.compact): the stream abandons, and the
    launch runs executing: the executed result."""
    ptx = _kernel(_ACCUMULATE)

    def run():
        return simulate(parse_ptx(ptx, "k.ptx"), Launch("k", (4, 1, 1), (64, 1, 1),
                        [Arg("buffer", "uint32", array=np.zeros(1, dtype=np.uint32))]), load_hw("h200"))

    executed = run()
    made = _stream_everything(monkeypatch, lanes=lanes)
    abandoned = []
    orig = engine._run

    def spy(*a):
        abandoned.append(a[-1] is None)
        return orig(*a)

    monkeypatch.setattr(engine, "_run", spy)
    again = run()
    assert made and abandoned == [False, True]
    assert again.to_json() == executed.to_json() and again.outputs[0].tolist() == executed.outputs[0].tolist()


def _exchange(grid: int = 4):
    """_EXCHANGE with each CTA writing its own 64 words (out[64 * ctaid + t])."""
    body = _EXCHANGE.format(barrier="bar.sync 0;").replace(
        "mul.wide.u32 %rd2, %r0, 4;", "mad.lo.u32 %r7, %r1, 64, %r0;\n    mul.wide.u32 %rd2, %r7, 4;")
    out = Arg("buffer", "uint32", array=np.zeros(64 * grid, dtype=np.uint32))
    return parse_ptx(_kernel(body), "k.ptx"), Launch("k", (grid, 1, 1), (64, 1, 1), [out])


def test_exchange_streams_in_batches(monkeypatch):
    """A barrier-separated exchange, 4 CTAs in batches of one, pausing every 16 warp instructions: the
    executed SimResult; every batch ran to its end and was checked."""
    executed = simulate(*_exchange(), load_hw("h200"))
    made = _stream_everything(monkeypatch, chunk=16, lanes=64)
    streamed = simulate(*_exchange(), load_hw("h200"))
    assert len(made) == 1 and made[0].next == 4 and not made[0].running and not made[0].traces
    assert made[0].seen.writes[0].size == 1  # out[0..255]: one interval of words
    assert streamed.to_json() == executed.to_json()


def test_folded_busy_cycles_give_the_same_series(monkeypatch):
    """Simulation.fold every 4 warp instructions (busy_at dicts into arrays): the same SimResult,
    utilization series included."""
    whole = simulate(*_exchange(), load_hw("h200"))
    monkeypatch.setattr(engine, "FOLD_EVERY", 4)
    folded = simulate(*_exchange(), load_hw("h200"))
    assert folded.to_json() == whole.to_json()


def test_waves_in_two_processes_equal_one():
    """The exchange on one core, one CTA at a time (4 waves): --by-waves in two processes gives the
    durations, instructions and outputs of one process."""
    from sim.timing import native
    from sim.timing.sampling import core_name, simulate_by_waves

    hw = load_hw("h200")
    hw = dataclasses.replace(hw, core=dataclasses.replace(hw.core, count=1, max_ctas=1))
    one = simulate_by_waves(*_exchange(), hw, 10**6)
    two = simulate_by_waves(*_exchange(), hw, 10**6, jobs=2)
    assert (one.execution, two.execution) == ("replayed", "replayed, 2 processes")
    assert one.core == two.core == core_name() == ("compiled" if native.active() else "python")  # the forks' core
    assert two.to_json()["sampled"]["core"] == two.core
    assert one.waves == 4 and one.wave_cycles == two.wave_cycles and one.cycles == two.cycles
    assert one.warp_instructions == two.warp_instructions
    assert one.outputs[0].tolist() == two.outputs[0].tolist() == [(t + 32) % 64 + 1 for t in range(64)] * 4


_MARKS: Path | None = None  # where _failing_first_wave's slow waves leave a mark when they finish


def _failing_first_wave(w: int):
    """A wave job (sampling._wave_job's place): wave 0 fails at once, the others take 30 s and leave a mark."""
    import time

    from sim.errors import ExecutionError

    if w == 0:
        raise ExecutionError("wave 0 ran past its budget", "k.ptx", 1)
    time.sleep(30)
    assert _MARKS is not None
    (_MARKS / str(w)).touch()


def test_a_failing_wave_stops_the_others(monkeypatch, tmp_path):
    """A wave's error (its budget) ends a run in processes at once: the waves running or queued are
    stopped, not run to their own budgets first (benchmarks/sim_waves.py --stop-per-wave counted on it)."""
    import time

    import sim.timing.sampling as sampling
    from sim.errors import ExecutionError
    from sim.timing.sampling import simulate_by_waves

    monkeypatch.setattr(sampling, "_wave_job", _failing_first_wave)
    monkeypatch.setitem(globals(), "_MARKS", tmp_path)
    hw = load_hw("h200")
    hw = dataclasses.replace(hw, core=dataclasses.replace(hw.core, count=1, max_ctas=1))
    t = time.perf_counter()
    with pytest.raises(ExecutionError, match="wave 0"):
        simulate_by_waves(*_exchange(), hw, 10**6, jobs=2)
    # well under the other waves' 30 s, with room for starting processes on a loaded machine (2.5 s against a
    # 3 s wave failed once at load 13: 4.8 s)
    assert time.perf_counter() - t < 15 and not list(tmp_path.iterdir())


@pytest.mark.slow
@pytest.mark.parametrize("jobs", [1, 2])
def test_by_waves_in_processes_equals_one_process(capsys, jobs):
    """--by-waves on npu7nm (sgemm: 6 waves of one CTA): two processes give the cycles, instructions and
    outputs of one (the numpy check passes over every element)."""
    args = ["run", str(SGEMM), "--hw", "npu7nm.yaml", "--seed", "1", "--quiet", "--json", "--by-waves"]
    assert main(args) == 0
    one = json.loads(capsys.readouterr().out)
    assert main([*args, "--jobs", str(jobs)]) == 0
    two = json.loads(capsys.readouterr().out)
    assert one["sampled"]["execution"] == "replayed"
    assert two["sampled"]["execution"] == ("replayed" if jobs == 1 else "replayed, 2 processes")
    assert one["check"]["passed"] and two["check"]["passed"] and "covered" not in two["check"]
    for k in ("cycles", "warp_instructions"):
        assert one[k] == two[k]
    assert one["sampled"]["wave_cycles"] == two["sampled"]["wave_cycles"]


def test_touch_is_lookup_line_by_line():
    """sampling._touch (one loop over a footprint's lines) leaves the L2 as SetAssocCache.lookup does."""
    from sim.timing.sampling import _touch
    from sim.timing.units import SetAssocCache

    hw = load_hw("h200")
    c = dataclasses.replace(hw.l2, size=hw.l2.line * hw.l2.assoc * 4)  # 4 sets: evictions
    spl = c.line // c.sector
    rng = np.random.default_rng(0)
    fast, slow = SetAssocCache(c), SetAssocCache(c)
    for _ in range(6):
        sectors = np.unique(rng.integers(0, 40 * spl * c.assoc, 300))
        got = _touch(fast, sectors, spl)
        want = {}
        lines = sectors // spl
        for ln in np.unique(lines).tolist():
            mask = 0
            for sec in sectors[lines == ln].tolist():
                mask |= 1 << (sec % spl)
            missing = slow.lookup(ln, mask)
            if missing:
                want[ln] = bin(missing).count("1")
        assert got == want and fast.lines == slow.lines and fast.victim == slow.victim


@pytest.mark.parametrize("bad, word", [(["--jobs", "0"], "--jobs 0"),
                                       (["--by-waves", "--sample-ctas", "2"], "--by-waves"),
                                       (["--by-waves", "--functional"], "--functional")])
def test_bad_jobs_and_by_waves_are_one_line(capsys, bad, word):
    assert main(["run", str(SGEMM), "--hw", "npu7nm.yaml", "--quiet", *bad]) == 2
    out = capsys.readouterr()
    lines = out.err.strip().splitlines()
    assert out.out == "" and len(lines) == 1 and word in lines[0], out.err


def test_by_waves_chains_each_cores_groups():
    """A core takes its next group as its last one ends: the launch ends with the longest chain, not
    the sum of the waves' slowest groups (12 here)."""
    from sim.timing.sampling import chained

    assert chained({0: [5, 7], 1: [4, 1], 2: [3]}) == 12  # core 0: 5 + 4 + 3; core 1: 7 + 1
    assert chained({0: [5, 7], 1: [4, 1]}) == 9


def test_shared_conflict_is_the_general_check():
    """lockstep.shared_conflict (one epoch's shared accesses, checked through an array of writers) answers
    as conflicts.conflict does, on random logs of one epoch: sizes 1-16 bytes, aligned or not, a few
    warps of two CTAs, sparse and dense words."""
    from sim.functional.conflicts import conflict
    from sim.functional.lockstep import shared_conflict

    rng = np.random.default_rng(7)
    seen = set()
    for trial in range(300):
        span = int(rng.choice([64, 4096]))
        log = []
        for _ in range(int(rng.integers(1, 6))):
            size = int(rng.choice([1, 2, 4, 8, 16]))
            n = int(rng.integers(1, 12))
            addrs = rng.integers(0, span, n).astype(np.uint64)
            if trial % 2:
                addrs -= addrs % np.uint64(size)
            owners = rng.integers(0, 8, n).astype(np.int64) if rng.random() < 0.5 else \
                np.full(n, int(rng.integers(0, 8)), dtype=np.int64)
            log.append((0, 3, addrs, size, owners, bool(rng.random() < 0.4)))
        want = conflict(log, 4) != ""
        assert shared_conflict(log) == want, log
        seen.add(want)
    assert seen == {True, False}
