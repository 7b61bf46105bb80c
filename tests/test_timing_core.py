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
