"""Up-front refusal of ``python -m sim run`` launches that cannot finish within the warp-instruction
budget (``--max-instructions``; sim.functional.runner.CLI_MAX_INSTRUCTIONS by default).

Model: the middle CTA of the grid runs functionally on its own (its own copy of the buffers; outputs are
discarded) and its warp instructions times the number of CTAs is the launch's estimate (counted by a
lock-step run where one can stand for it, `lockstep_count`; the warp-by-warp run where not, and for the
message of a launch past the budget). Kernels whose
CTAs do unequal work (ragged edges, data-dependent loops) are estimated from that one CTA only. The
time quoted is that estimate at the rate the one CTA ran, slowed by TIMING_SLOWDOWN for a timing run.
A one-CTA launch is not estimated: the run itself is the measurement.
"""

from __future__ import annotations

import time
import warnings
from typing import TYPE_CHECKING

import numpy as np

from sim.errors import UsageError
from sim.functional.runner import check_budget_covers, cluster_size, make_cluster, prepare, run_cta_functional
from sim.launch import Launch
from sim.ptx.ir import Program

if TYPE_CHECKING:
    from sim.functional.runner import Prepared

# functional-only vs timing warp instructions/s, benchmarks/sim_speed.md (74,000 vs 23,000)
TIMING_SLOWDOWN = 3.2


def refuse_over_budget(prog: Program, launch: Launch, limit: int, timing: bool,
                       sample: int | None = None) -> int | None:
    """The launch's estimated warp instructions (None for one CTA); raise a one-line UsageError when it
    passes `limit`. One CTA alone that passes `limit` raises the runs' own budget error (an endless loop).
    sample: the run simulates about that many CTAs (--sample-ctas)."""
    gx, gy, gz = launch.grid
    grid = gx * gy * gz
    ctas = grid if sample is None else min(grid, sample)
    if sample is None:
        check_budget_covers(launch, limit, prog.file)  # before prepare() lists the blocks of a huge grid
    if grid == 1:
        return None
    with np.errstate(all="ignore"):
        P = prepare(prog, launch)
        n = cluster_size(P)  # a cluster's CTAs run together: time the middle one's whole cluster
        first = grid // 2 // n * n
        if n == 1:
            fast = lockstep_count(P, P.ctas[first], limit)
            if fast is not None and fast * ctas <= limit:
                return fast * ctas
            P = prepare(prog, launch)  # the lock-step run wrote into P's memory: start again from the buffers
        start = time.perf_counter()
        group = make_cluster(P, P.ctas[first: first + n])
        one = run_cta_functional(P, group if n > 1 else group[0], [limit, limit]) // n
        seconds = time.perf_counter() - start
    estimate = one * ctas
    if estimate <= limit:
        return estimate
    rate = one / max(seconds, 1e-9) / (TIMING_SLOWDOWN if timing else 1.0)
    fits = max(1, limit // max(1, one))
    hint = f"--sample-ctas {min(fits, 64)}" if sample is None else f"a smaller --sample-ctas (at most {fits})"
    raise UsageError(f"about {estimate:,} warp instructions ({one:,} in block {P.ctas[grid // 2]} x {ctas:,} "
                     f"blocks), more than the budget of {limit:,}; about {_duration(estimate / rate)} at "
                     f"{rate:,.0f}/s{' with timing' if timing else ''}: give {hint} (an estimate with an "
                     "error bound), a smaller --grid, or raise --max-instructions N", prog.file)


def lockstep_count(P: Prepared, ctaid: tuple[int, int, int], limit: int) -> int | None:
    """The warp instructions of CTA `ctaid` run alone, counted by a lock-step run of its warps
    (sim/functional/lockstep.py: the same count as warp by warp wherever it runs, 5-10x faster), or None
    where lock-step cannot stand for the warp-by-warp run: a kernel it does not model, warps that race,
    past `limit`, or any warning (the warp-by-warp run then shows it, as before)."""
    from sim.cluster import link as link_cluster
    from sim.functional.lockstep import Batch, OverBudget, Refused, _effects, refusal, run_batch
    from sim.functional.warp import CTA

    if refusal(P.L.kernel, P) is not None:
        return None
    cta = CTA(ctaid, P.L.block, P.shared_size, P.layout.local_size)
    link_cluster([cta])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            B = Batch(P, [cta], _effects(P.L.kernel))
            count = run_batch(B, [limit])
            B.finish()
        except (Refused, OverBudget):
            return None
    return None if caught else count


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
