"""The timing model's functional execution, replayed from a lock-step run (issue 17): every warp's
`Executed` records (mask, control, next pc, landed cp.async groups, memory access) are produced by a
lock-step run (sim/functional/lockstep.py), and the timing model's warps step through them instead of
executing (`ReplayWarp` stands in for the functional `Warp`).

Two ways to produce them:
- `recorded`: the whole launch first, when it fits REPLAY_LIMIT warp instructions (what the timing
  model of a small launch has always replayed);
- `Stream`: on demand, for launches past that limit and for the sampled waves of sim/timing/sampling.py.
  The CTAs run in the same lock-step batches, each batch a generator (lockstep.steps) that runs on only
  when a warp of the timing model has consumed its records; so the records held are those of the
  batches the timing model has started, as far as their fastest warp, and no more: memory stays bounded
  by the skew between warps, not by the launch (docs/sampling.md, "Memory").

The timing model executes warps in the order its schedulers fetch them, CTAs of the whole grid side by
side; the records hold for that order too only when no two warps can tell orders apart. So the lock-step
run must find no conflict anywhere in the launch (shared: two warps of a CTA between two barriers;
global: two warps of a CTA between two barriers, or two CTAs at all), no warp may read a clock (%clock
reads the issue cycle in the timing model), and the kernel must run in lock-step at all (`refusal`).
Otherwise `recorded` answers None and the timing model executes as before. A `Stream` finds a conflict
only as its batches run, after the timing model has used some of their records: it raises `Abandon`,
and the caller runs the launch again, executing (sim.timing.engine.simulate).
Between batches, `Touched` keeps the words earlier batches read and wrote as merged intervals (a GEMM's
come to a few hundred), instead of every access.
"""

from __future__ import annotations

import warnings
from collections import deque
from collections.abc import Generator
from typing import TYPE_CHECKING

import numpy as np

from sim.cluster import link as link_cluster
from sim.functional.conflicts import GLOBAL_DOMAIN, Access, Intervals, conflict, meets, union
from sim.functional.lockstep import Batch, OverBudget, Refused, _effects, batch_ctas, refusal, run_batch, steps
from sim.functional.ops_mem import BARRIER
from sim.functional.record import Executed
from sim.functional.warp import CTA

if TYPE_CHECKING:
    from sim.functional.runner import Prepared
    from sim.launch import Launch
    from sim.ptx.ir import Instruction, Program

# warp instructions `recorded` may hold (about 420 bytes each: sgemm 128^3's 339,456 took 143 MB): larger
# launches replay a `Stream`
REPLAY_LIMIT = 1_000_000

Records = deque[Executed]


class Abandon(Exception):
    """A streamed launch turned out not to run in lock-step (a conflict, a fault): run it executing."""


class ReplayWarp:
    """What the timing model reads of a functional Warp: pc, done, step(), the barrier it waits at."""

    def __init__(self, cta: CTA, wid: int, records: Records, body: list[Instruction],
                 more: _Live | None = None, done: bool | None = None):
        self.cta = cta
        self.wid = wid
        self.records = records
        self.body = body
        self.more = more  # the streamed batch that produces further records, None when all are here
        self.done = not records if done is None else done
        self.pc = -1 if self.done else 0
        self.bar_id = 0
        self.bar_count = 0  # counted barriers do not run in lock-step (lockstep.refusal)
        self.waiting_on = None

    def step(self, cycle: int | None = None) -> Executed:
        recs = self.records
        while not recs and self.more is not None:
            self.more.advance()
        rec = recs.popleft()
        if rec.ctl == BARRIER:
            ops = self.body[self.pc].operands
            self.bar_id = int(ops[0].value) if ops else 0
        self.pc = rec.next_pc
        self.done = rec.next_pc == -1
        return rec


class Replay:
    """A launch run in lock-step with its records: P holds the memories after the run (the outputs)."""

    def __init__(self, P: Prepared, traces: dict[tuple[int, int, int], list[Records]]):
        self.P = P
        self.traces = traces

    def cta(self, ctaid: tuple[int, int, int]) -> CTA:
        """A CTA whose warps replay their records (runner.make_cta's for the timing model)."""
        P = self.P
        cta = _cta(P, ctaid)
        cta.warps = [ReplayWarp(cta, w, recs, P.L.body) for w, recs in enumerate(self.traces.pop(ctaid))]  # type: ignore[misc]
        return cta

    def close(self) -> None:
        """Nothing left to run (a Stream's batches finish here)."""


def reads_clock(P: Prepared) -> bool:
    return any(op.kind == "sreg" and (op.name.startswith("%clock") or op.name == "%globaltimer")
               for ins in P.L.body for op in ins.operands)


def replay_for(prog: Program, launch: Launch, max_instructions: int) -> Replay | None:
    """What the timing model replays: the whole launch's records where it fits REPLAY_LIMIT warp
    instructions (no batch past its share of it), else a Stream over a freshly prepared launch; None
    where it may not replay."""
    from sim.functional.runner import prepare

    try:
        return recorded(prog, launch, max_instructions, over=True)
    except OverBudget:  # past the budget too: the timing model reports it (the stream runs as far as asked)
        return Stream(prepare(prog, launch))


def recorded(prog: Program, launch: Launch, max_instructions: int, over: bool = False) -> Replay | None:
    """The launch's records for the timing model to replay, or None where they may not stand for its
    own execution (see the module's docstring). Past REPLAY_LIMIT warp instructions: None, or OverBudget
    raised when `over`."""
    from sim.functional.runner import prepare

    with np.errstate(all="ignore"), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        P = prepare(prog, launch)
        if not replayable(P):
            return None
        effects = _effects(P.L.kernel)
        n = batch_ctas(P)
        traces: dict[tuple[int, int, int], list[Records]] = {}
        kept: list[Access] = []
        budget = [min(max_instructions, REPLAY_LIMIT)]
        total = 0
        try:
            for i in range(0, len(P.ctas), n):
                ctas = [_cta(P, c) for c in P.ctas[i: i + n]]
                B = Batch(P, ctas, effects, first=i, trace=traces)
                for c in ctas:
                    traces[c.ctaid] = [deque() for _ in range(B.wpc)]
                if over:  # no batch past its share of REPLAY_LIMIT: a large launch streams at once
                    budget[0] = min(budget[0], REPLAY_LIMIT * (i + len(ctas)) // len(P.ctas) - total)
                total += run_batch(B, budget)
                B.finish()
                kept += [e for e in B.log if e[0] == GLOBAL_DOMAIN]
                budget[0] = min(max_instructions, REPLAY_LIMIT) - total
        except OverBudget:
            if over:
                raise
            return None
        except Refused:
            return None
        if conflict(kept, -(-P.L.block[0] * P.L.block[1] * P.L.block[2] // 32)):
            return None  # CTAs of two batches meet: the timing model may run them side by side
    for w in caught:  # prepare's warnings, once
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return Replay(P, traces)


def replayable(P: Prepared) -> bool:
    """Whether the kernel may replay at all: it runs in lock-step and reads no clock."""
    return not refusal(P.L.kernel, P) and not reads_clock(P)


# -- streamed records ------------------------------------------------------------------------------------

class Touched:
    """The global words read and written so far, by batches that may run side by side in the timing
    model: a batch that writes a word another read or wrote, or reads a word another wrote, conflicts."""

    def __init__(self) -> None:
        e = np.zeros(0, dtype=np.int64)
        self.reads: Intervals = (e, e)
        self.writes: Intervals = (e, e)

    def add(self, r: Intervals, w: Intervals) -> str:
        """Add a finished batch's words read and written; the conflict with the earlier batches ("" when
        none)."""
        if meets(self.writes, w) or meets(self.reads, w) or meets(self.writes, r):
            return "CTAs of two lock-step batches meet at a global word, one writing it"
        self.reads, self.writes = union(self.reads, r), union(self.writes, w)
        return ""


class _Live:
    """One streamed batch: its generator, run on as its warps need records."""

    def __init__(self, stream: Stream, B: Batch, gen: Generator[int, None, None]):
        self.stream = stream
        self.B = B
        self.gen = gen
        self.finished = False

    def advance(self) -> None:
        if self.finished:
            raise Abandon("a replayed warp ran past its batch's records")
        try:
            with np.errstate(all="ignore"):
                n = next(self.gen)
        except StopIteration:
            self.stream.finish(self)
            return
        except Refused as e:
            raise Abandon(str(e)) from e
        self.stream.instructions += n


class Stream(Replay):
    """Records produced as the timing model asks for them: the CTAs `order` (launch indices, in the
    order given) in lock-step batches of batch_ctas(P), each started when the timing model launches its
    first CTA and run on as its warps consume their records."""

    def __init__(self, P: Prepared, order: list[int] | None = None):
        super().__init__(P, {})
        self.order = list(range(len(P.ctas))) if order is None else order
        self.effects = _effects(P.L.kernel)
        self.n = batch_ctas(P)
        self.next = 0  # next position in `order` to batch
        self.live: dict[tuple[int, int, int], _Live] = {}
        self.running: list[_Live] = []
        self.seen = Touched()
        self.instructions = 0  # warp instructions the lock-step batches ran

    def cta(self, ctaid: tuple[int, int, int]) -> CTA:
        while ctaid not in self.live:
            if self.next >= len(self.order):
                raise Abandon(f"block {ctaid} is not in the streamed CTAs")
            self._start()
        live = self.live.pop(ctaid)
        cta = _cta(self.P, ctaid)
        cta.warps = [ReplayWarp(cta, w, recs, self.P.L.body, live, done=False)  # type: ignore[misc]
                     for w, recs in enumerate(self.traces[ctaid])]  # the batch appends to them until it ends
        return cta

    def _start(self) -> None:
        P = self.P
        idx = self.order[self.next: self.next + self.n]
        ctas = [_cta(P, P.ctas[i]) for i in idx]
        # owners (warp indices in the batch's log) are relative to the batch: `first` only offsets them
        B = Batch(P, ctas, self.effects, first=0, trace=self.traces, compact=True)
        for c in ctas:
            self.traces[c.ctaid] = [deque() for _ in range(B.wpc)]
        live = _Live(self, B, steps(B))
        for c in ctas:
            self.live[c.ctaid] = live
        self.running.append(live)
        self.next += len(idx)

    def finish(self, live: _Live) -> None:
        live.finished = True
        self.running.remove(live)
        try:
            live.B.finish()
        except Refused as e:
            raise Abandon(str(e)) from e
        found = self.seen.add(*live.B.touched())
        for c in live.B.ctas:
            del self.traces[c.ctaid]
        if found:
            raise Abandon(found)

    def close(self) -> None:
        """Run every started batch to its end and check it (the timing model consumed all records, but a
        generator ends, and its batch is checked, only when asked once more)."""
        while self.running:
            live = self.running[0]
            while not live.finished:
                live.advance()
        if self.live or self.next < len(self.order):
            return  # CTAs never launched (an error ended the run)


def _cta(P: Prepared, ctaid: tuple[int, int, int]) -> CTA:
    cta = CTA(ctaid, P.L.block, P.shared_size, P.layout.local_size)
    link_cluster([cta])
    return cta


__all__ = ["recorded", "Replay", "ReplayWarp", "Stream", "Abandon", "Touched", "REPLAY_LIMIT", "replayable",
           "replay_for"]
