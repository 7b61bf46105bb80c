"""The up-front estimate (sim/estimate.py) counts its CTA's warp instructions with a lock-step run where one can
stand for the warp-by-warp run (`lockstep_count`): the same count, and None (the warp-by-warp run then counts)
past the budget or where the kernel does not run in lock-step."""

from __future__ import annotations

import numpy as np
import pytest

from sim.estimate import lockstep_count, refuse_over_budget
from sim.functional.runner import make_cta, prepare, run_cta_functional


def _mid_counts(name: str, limit: int = 10**7) -> tuple[int | None, int, int]:
    from tests.recorded_sim import ENTRIES, build

    prog, launch = build(*ENTRIES[name])
    with np.errstate(all="ignore"):
        P = prepare(prog, launch)
        mid = P.ctas[len(P.ctas) // 2]
        fast = lockstep_count(P, mid, limit)
        Q = prepare(prog, launch)
        slow = run_cta_functional(Q, make_cta(Q, mid), [limit, limit])
    return fast, slow, len(P.ctas)


@pytest.mark.parametrize("name", ["sgemm_tiled.h200", "block_reduce.h200", "divergent_loop.npu7nm",
                                  "cp_async_v4.h200", "saxpy64.h200"])
def test_lockstep_count_is_the_warp_by_warp_count(name):
    fast, slow, _ = _mid_counts(name)
    assert fast == slow


def test_past_the_budget_gives_none_and_the_estimate_is_unchanged():
    from tests.recorded_sim import ENTRIES, build

    prog, launch = build(*ENTRIES["sgemm_tiled.h200"])
    with np.errstate(all="ignore"):
        P = prepare(prog, launch)
        assert lockstep_count(P, P.ctas[len(P.ctas) // 2], 100) is None
    _, slow, ctas = _mid_counts("sgemm_tiled.h200")
    assert refuse_over_budget(prog, launch, 10**7, timing=True) == slow * ctas
