"""The timing model's functional execution, replayed from a lock-step run (issue 17): every warp's
`Executed` records (mask, control, next pc, landed cp.async groups, memory access) are produced by a
lock-step run of the whole launch first (sim/functional/lockstep.py), and the timing model's warps step
through them instead of executing (`ReplayWarp` stands in for the functional `Warp`).

The timing model executes warps in the order its schedulers fetch them, CTAs of the whole grid side by
side; the records hold for that order too only when no two warps can tell orders apart. So the lock-step
run must find no conflict anywhere in the launch (shared: two warps of a CTA between two barriers;
global: two warps of a CTA between two barriers, or two CTAs at all), no warp may read a clock (%clock
reads the issue cycle in the timing model), and the kernel must run in lock-step at all (`refusal`).
Otherwise `recorded` answers None and the timing model executes as before.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import numpy as np

from sim.cluster import link as link_cluster
from sim.functional.conflicts import GLOBAL_DOMAIN, Access, conflict
from sim.functional.lockstep import Batch, Refused, _effects, batch_ctas, refusal, run_batch
from sim.functional.ops_mem import BARRIER
from sim.functional.record import Executed
from sim.functional.warp import CTA

if TYPE_CHECKING:
    from sim.functional.runner import Prepared
    from sim.launch import Launch
    from sim.ptx.ir import Instruction, Program

# warp instructions a replay may hold (about 420 bytes each: sgemm 128^3's 339,456 took 143 MB): larger
# launches execute in the timing model as before
REPLAY_LIMIT = 1_000_000


class ReplayWarp:
    """What the timing model reads of a functional Warp: pc, done, step(), the barrier it waits at."""

    def __init__(self, cta: CTA, wid: int, records: list[Executed], body: list[Instruction]):
        self.cta = cta
        self.wid = wid
        self.records = records[::-1]  # popped from the end
        self.body = body
        self.pc = 0 if records else -1
        self.done = not records
        self.bar_id = 0
        self.bar_count = 0  # counted barriers do not run in lock-step (lockstep.refusal)
        self.waiting_on = None

    def step(self, cycle: int | None = None) -> Executed:
        rec = self.records.pop()
        if rec.ctl == BARRIER:
            ops = self.body[self.pc].operands
            self.bar_id = int(ops[0].value) if ops else 0
        self.pc = rec.next_pc
        self.done = rec.next_pc == -1
        return rec


class Replay:
    """A launch run in lock-step with its records: P holds the memories after the run (the outputs)."""

    def __init__(self, P: Prepared, traces: dict[tuple[int, int, int], list[list[Executed]]]):
        self.P = P
        self.traces = traces

    def cta(self, ctaid: tuple[int, int, int]) -> CTA:
        """A CTA whose warps replay their records (runner.make_cta's for the timing model)."""
        P = self.P
        cta = CTA(ctaid, P.L.block, P.shared_size, P.layout.local_size)
        link_cluster([cta])
        cta.warps = [ReplayWarp(cta, w, recs, P.L.body) for w, recs in enumerate(self.traces.pop(ctaid))]  # type: ignore[misc]
        return cta


def reads_clock(P: Prepared) -> bool:
    return any(op.kind == "sreg" and (op.name.startswith("%clock") or op.name == "%globaltimer")
               for ins in P.L.body for op in ins.operands)


def recorded(prog: Program, launch: Launch, max_instructions: int) -> Replay | None:
    """The launch's records for the timing model to replay, or None where they may not stand for its
    own execution (see the module's docstring)."""
    from sim.functional.runner import prepare

    with np.errstate(all="ignore"), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        P = prepare(prog, launch)
        if refusal(P.L.kernel, P) or reads_clock(P):
            return None
        effects = _effects(P.L.kernel)
        n = batch_ctas(P)
        traces: dict[tuple[int, int, int], list[list[Executed]]] = {}
        kept: list[Access] = []
        budget = [min(max_instructions, REPLAY_LIMIT)]
        total = 0
        try:
            for i in range(0, len(P.ctas), n):
                ctas = [_cta(P, c) for c in P.ctas[i: i + n]]
                B = Batch(P, ctas, effects, first=i, trace=traces)
                for c in ctas:
                    traces[c.ctaid] = [[] for _ in range(B.wpc)]
                total += run_batch(B, budget)
                B.finish()
                kept += [e for e in B.log if e[0] == GLOBAL_DOMAIN]
                budget[0] = min(max_instructions, REPLAY_LIMIT) - total
        except Refused:
            return None
        if conflict(kept, -(-P.L.block[0] * P.L.block[1] * P.L.block[2] // 32)):
            return None  # CTAs of two batches meet: the timing model may run them side by side
    for w in caught:  # prepare's warnings, once
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return Replay(P, traces)


def _cta(P: Prepared, ctaid: tuple[int, int, int]) -> CTA:
    cta = CTA(ctaid, P.L.block, P.shared_size, P.layout.local_size)
    link_cluster([cta])
    return cta


__all__ = ["recorded", "Replay", "ReplayWarp", "REPLAY_LIMIT"]
