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
