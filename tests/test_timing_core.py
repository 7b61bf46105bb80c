"""The timing core's shortcuts give what the long way gives: CoreMemory._lines (a memo of access patterns)
against the sectors computed from the addresses, and run_events against SimPy's own Environment.run."""

from __future__ import annotations

import numpy as np
import simpy

from sim.hw import load_hw
from sim.timing.core import run_events
from sim.timing.memory import CoreMemory, DeviceMemory


def _direct(addrs: np.ndarray, size: int, line: int, sector: int) -> list[tuple[int, int]]:
    per: dict[int, int] = {}
    secs = sorted({int(x) // sector for x in addrs} | {(int(x) + size - 1) // sector for x in addrs})
    spl = line // sector
    for s in secs:
        per[s // spl] = per.get(s // spl, 0) | 1 << (s % spl)
    return list(per.items())


def test_lines_memo_matches_the_addresses() -> None:
    hw = load_hw("h200")
    mem = CoreMemory(hw, DeviceMemory(hw))
    rng = np.random.default_rng(1)
    line, sector = hw.l2.line, hw.l2.sector
    for _ in range(40):
        size = int(rng.choice([1, 2, 4, 8, 16]))
        rel = rng.integers(-600, 600, 32) * int(rng.choice([1, size]))
        for base in (1 << 20, (1 << 20) + 4, (1 << 20) + 100, 1 << 33):  # the same pattern elsewhere: memo hits
            addrs = (base + rel).astype(np.uint64)
            assert mem._lines(addrs, size) == _direct(addrs, size, line, sector)
    assert mem._lines(np.zeros(0, np.uint64), 4) == []


def _order(run) -> list[tuple[float, str]]:  # noqa: ANN001
    env = simpy.Environment()
    seen: list[tuple[float, str]] = []

    def proc(name: str, delays: list[int]):  # noqa: ANN202
        for d in delays:
            yield env.timeout(d)
            seen.append((env.now, name))
            if d == 2:
                env.timeout(0).callbacks.append(lambda _e, n=name: seen.append((env.now, n + "+cb")))

    for i, delays in enumerate(([1, 2, 3], [3, 0, 2, 1], [2, 2, 2], [0, 0, 5])):
        env.process(proc(f"p{i}", delays))
    run(env)
    return seen


def test_run_events_keeps_simpys_order() -> None:
    assert _order(run_events) == _order(lambda env: env.run())


def test_scheduler_queue_keys_sort_as_simpys_entries() -> None:
    """run_events compares a scheduler's NORMAL entry as one int (sim/timing/core.py SchedQueue): sorting the
    keys must give SimPy's (time, insertion) order, and the key must give back time, insertion and scheduler."""
    import random

    from sim.timing.core import ID_BITS, ID_MASK, SCHED_BITS, SCHED_MASK

    rng = random.Random(3)
    entries = [(rng.randrange(1 << 24), eid, rng.randrange(1 << SCHED_BITS))  # times past 62 bits too
               for eid in rng.sample(range(1 << ID_BITS), 400)]
    entries += [(t, eid + 1, i) for t, eid, i in entries[:50] if eid < ID_MASK]  # same cycle, later insertion
    keys = sorted(((t << ID_BITS) | eid) << SCHED_BITS | i for t, eid, i in entries)
    assert [(k >> (ID_BITS + SCHED_BITS), (k >> SCHED_BITS) & ID_MASK, k & SCHED_MASK) for k in keys] == sorted(entries)


def test_event_ids_continue_simpys_counter() -> None:
    from sim.timing.core import event_ids

    env = simpy.Environment()
    env.timeout(1)
    ids = event_ids(env)
    assert event_ids(env) is ids
    n = ids.n
    env.timeout(2)  # SimPy's own schedule() takes the next number from it
    assert ids.n == n + 1
    assert [e[2] for e in sorted(env._queue)] == [n - 1, n]


def test_parameter_reads_memo_gives_the_unmemoised_cycle() -> None:
    from sim.timing.constant import ConstantCache
    from sim.timing.memory import PARAM_BANK

    hw = load_hw("h200")
    assert hw.constant is not None
    dev = DeviceMemory(hw)
    addrs = np.full(32, 8, np.uint64)
    first = CoreMemory(hw, dev).access(5, "param", addrs, 8, "read", "")
    again = CoreMemory(hw, dev).access(5, "param", addrs.copy(), 8, "read", "")  # another cold core: a memo hit
    assert len(dev.const_offsets) == 1
    cold = ConstantCache(hw.constant).read(5, PARAM_BANK, [8 + hw.constant.param_base])
    assert first == again == (max(5 + hw.pipe_for("lsu").latency, cold), 0)


def test_clock_fed_store_lane_by_lane_matches_the_numpy_store() -> None:
    """ClockWarp._store (Python ints on the typed view) leaves global memory as _store_numpy (GlobalMemory's
    store / load) does: st, red.add / min / max, 32- and 64-bit, signed and unsigned, repeated addresses."""
    from types import SimpleNamespace

    from sim.functional.memory import GlobalMemory
    from sim.functional.replay import ClockWarp

    rng = np.random.default_rng(7)
    for op in ("st", "add", "min", "max"):
        for dt in (np.dtype("u4"), np.dtype("u8"), np.dtype("i4"), np.dtype("i8")):
            mems = []
            init = rng.integers(0, 255, 64, dtype=np.uint8).tobytes()
            for _ in range(2):
                g = GlobalMemory()
                g.alloc(64, "a", init)
                base = g.alloc(256, "b", np.arange(256, dtype=np.uint8))
                mems.append(g)
            cycles = {0: 0, 1: 5, 2: (1 << 63) + 12345, 3: (1 << 32) - 3, 4: 7}
            for trial in range(6):
                lanes = int(rng.integers(1, 6))
                addrs = (base + dt.itemsize * rng.integers(0, 256 // dt.itemsize, lanes)).astype(np.uint64)
                if trial == 0:
                    addrs[:] = addrs[0]  # every lane one word: the later lanes win (st) / add up (red)
                tags = rng.integers(0, 5, lanes)
                for g, how in zip(mems, (ClockWarp._store, ClockWarp._store_numpy)):
                    how(SimpleNamespace(cycles=cycles, gmem=g), (op, dt), addrs.copy(), tags.copy())  # type: ignore[arg-type]
            assert [a.data.tobytes() for a in mems[0].allocs] == [a.data.tobytes() for a in mems[1].allocs], (op, dt)


def test_sleep_calendar_pops_in_key_order() -> None:
    """SchedQueue's sleeps (lists by cycle, a heap of cycles) come out in the order a heap of their keys
    gives, with pushes between pops (each to a later cycle than the last popped, as the clock allows)."""
    import heapq
    import random

    from sim.timing.core import ID_BITS, SCHED_BITS, SchedQueue

    rng = random.Random(5)
    sq = SchedQueue()
    ref: list[int] = []
    eid, clock = 0, 0
    got, want = [], []
    for _ in range(3000):
        if ref and rng.random() < 0.45:
            assert sq.top == ref[0]
            got.append(sq.top)
            want.append(heapq.heappop(ref))
            sq.pop_sleep()
            clock = got[-1] >> (ID_BITS + SCHED_BITS)
        else:
            t = clock + 1 + (rng.randrange(6000) if rng.random() < 0.05 else rng.randrange(40))
            key = ((t << ID_BITS) | eid) << SCHED_BITS | rng.randrange(8)
            eid += 1
            sq.push_sleep(key, t)
            heapq.heappush(ref, key)
        assert sq.top == (ref[0] if ref else -1)
    assert got == want and len(got) > 1000


def test_stall_accumulator_gives_the_dictionaries_of_direct_increments() -> None:
    """StallAcc (Scheduler._resume's stall cycles) leaves Stats.stalls / by_line with the same values and the
    same key order as `+=` on them at every wake-up, other writers (Stats.conflict) in between."""
    import random
    from collections import defaultdict

    from sim.timing.core import StallAcc

    def dicts():  # noqa: ANN202
        return defaultdict(int), defaultdict(lambda: defaultdict(int))

    rng = random.Random(11)
    reasons = ["memory", "scoreboard", "pipe_busy", "barrier", "no_eligible", "bank_conflict"]
    (s1, b1), (s2, b2) = dicts(), dicts()
    acc = StallAcc(s2, b2)
    for _ in range(4000):
        line, reason, n = rng.choice([0, 0, 3, 17, 40, 41, 900]), rng.choice(reasons), rng.randrange(1, 50)
        if rng.random() < 0.1:  # Stats.conflict's own writes
            for s, b in ((s1, b1), (s2, b2)):
                s["bank_conflict"] += n
                b[line]["bank_conflict"] += n
            continue
        s1[reason] += n
        if line:
            b1[line][reason] += n
        acc.add(line, reason, n)
    acc.flush()
    assert list(s1.items()) == list(s2.items())
    assert [(k, list(v.items())) for k, v in b1.items()] == [(k, list(v.items())) for k, v in b2.items()]
