"""The lock-step run's records (sim/functional/lockstep.py Group._record: one shared record for the warps of an
unsplit group that made no memory access, one per warp, straight from the rows of the group's mask and
addresses, where every lane of every warp accessed memory) replay to the SimResult that executing gives."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("name", ["block_reduce.h200", "cp_async_v4.h200", "saxpy64.h200"])
def test_replayed_records_give_the_executed_result(name, monkeypatch):
    import sim.timing.engine as engine
    from sim.functional.replay import recorded
    from sim.hw import load_hw
    from sim.timing import simulate
    from tests.recorded_sim import ENTRIES, build

    source, hw_name = ENTRIES[name]
    hw = load_hw(hw_name)
    rep = recorded(*build(source, hw_name), 10**6)
    assert rep is not None  # the launch does replay
    # every warp's records: the shared ones (no memory access) are one object for many warps
    recs = [r for warps in rep.traces.values() for w in warps for r in w]
    assert len({id(r) for r in recs if r.addrs is None}) < sum(r.addrs is None for r in recs)
    replayed = simulate(*build(source, hw_name), hw)
    monkeypatch.setattr(engine, "replay_for", lambda *a: None)
    executed = simulate(*build(source, hw_name), hw)
    assert replayed.to_json() == executed.to_json()
    assert sorted(replayed.outputs) == sorted(executed.outputs)
    for i in replayed.outputs:
        assert replayed.outputs[i].tobytes() == executed.outputs[i].tobytes()


def test_distinct_helpers_are_numpy_unique():
    import numpy as np

    from sim.functional.lockstep import _all_distinct, _distinct

    rng = np.random.default_rng(0)
    for v in (np.full(64, 16), np.array([], dtype=np.int64), rng.integers(0, 4, 50), np.arange(4096) * 16,
              np.r_[np.arange(100), 7]):
        assert _distinct(v).tolist() == np.unique(v).tolist()
        assert _all_distinct(v) == (len(np.unique(v)) == len(v))

