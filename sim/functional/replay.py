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
reads the issue cycle in the timing model) unless its values only reach the data of global stores
(`ClockStores`, below), and the kernel must run in lock-step at all (`refusal`).
Otherwise `recorded` answers None and the timing model executes as before. A `Stream` finds a conflict
only as its batches run, after the timing model has used some of their records: it raises `Abandon`,
and the caller runs the launch again, executing (sim.timing.engine.simulate).
Between batches, `Touched` keeps the words earlier batches read and wrote as merged intervals (a GEMM's
come to a few hundred), instead of every access.

Clock-fed stores (`ClockStores`: a profiling wrapper's `mov.u64 %rd, %clock64` ... `st.global.u64 [a], %rd`,
`red.global.max.u64`): where the registers that %clock / %clock64 set are read only as the data of global
st / red.{add,min,max}, the launch still replays (`recorded`). The lock-step run's clock reads give each warp's
instruction count (Warp.clock), so the value a lane stores names the read that set it; the run keeps those
values per store (Batch.clock_tags), and the words these stores wrote are put back as they were before the
run. The replayed warps (`ClockWarp`) note the issue cycle of each clock read and, when a clock-fed store is
replayed (in the timing model's order, at its fetch, as an executing warp stores), write the cycles in place
of the counts. Refused (executed as before) when any other access touches those words.
"""

from __future__ import annotations

import warnings
from collections import deque
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import numpy as np

from sim import isa
from sim.cluster import link as link_cluster
from sim.functional.conflicts import GLOBAL_DOMAIN, Access, Intervals, conflict, meets, union
from sim.functional.lockstep import Batch, OverBudget, Refused, _effects, batch_ctas, refusal, run_batch, steps
from sim.functional.ops_mem import _ATOM, BARRIER
from sim.functional.record import Executed
from sim.functional.warp import CTA
from sim.ptx.types import type_mods

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


class ClockWarp(ReplayWarp):
    """A ReplayWarp of a kernel with clock-fed stores (ClockStores): the issue cycle of each clock read,
    by the warp's instruction count at it (what the lock-step run stored in its place), and the stores
    made again with those cycles."""

    def __init__(self, cta: CTA, wid: int, records: Records, body: list[Instruction], clocks: ClockStores,
                 tags: deque[np.ndarray], P: Prepared):
        super().__init__(cta, wid, records, body)
        self.clocks = clocks
        self.tags = tags
        self.gmem = P.L.gmem
        self.count = 0  # warp instructions so far (the lock-step %clock value)
        self.cycles: dict[int, int] = {0: 0}  # that count at a clock read -> the value read (0: never read)

    def step(self, cycle: int | None = None) -> Executed:
        pc = self.pc
        rec = ReplayWarp.step(self, cycle)
        self.count += 1
        width = self.clocks.reads.get(pc)
        if width is not None:
            self.cycles[self.count] = (self.count if cycle is None else cycle) & width
        store = self.clocks.stores.get(pc)
        if store is not None and rec.addrs is not None:
            self._store(store, rec.addrs, self.tags.popleft())
        return rec

    def _store(self, store: tuple[str, np.dtype], addrs: np.ndarray, tags: np.ndarray) -> None:
        """The store (st, or red.add / min / max) of the cycles read, lane by lane in lane order (a later
        lane wins an address, as GlobalMemory.store; atomics serialize): Python ints on the allocation's
        typed view, no array per store. The lock-step run made this very access (so it is inside one
        allocation and aligned: no Fault to raise); `_store_numpy` is the same through GlobalMemory."""
        op, dt = store
        size = dt.itemsize
        bits = 8 * size
        mask = (1 << bits) - 1
        half = 1 << (bits - 1) if dt.kind == "i" else 0  # signed: values >= half stand for v - 2^bits
        cycles = self.cycles
        allocs = self.gmem.allocs
        for a, t in zip(addrs.tolist(), tags.tolist()):
            v = cycles[t] & mask
            if half and v >= half:
                v -= 1 << bits
            al = allocs[0]
            for x in allocs:  # the last allocation at or below the address (GlobalMemory._spans' search)
                if x.base <= a:
                    al = x
            view = al.view(dt)
            i = (a - al.base) // size
            if op != "st":
                old = int(view[i])
                if op == "add":  # wraps, as the typed arrays' sum
                    v = (old + v) & mask
                    if half and v >= half:
                        v -= 1 << bits
                elif op == "min":
                    v = min(old, v)
                else:  # max
                    v = max(old, v)
            view[i] = v

    def _store_numpy(self, store: tuple[str, np.dtype], addrs: np.ndarray, tags: np.ndarray) -> None:
        """`_store` through GlobalMemory's vectorised store / load (what it replaced; tests compare them)."""
        op, dt = store
        mask = (1 << (8 * dt.itemsize)) - 1
        vals = np.array([self.cycles[t] & mask for t in tags.tolist()], dtype=np.uint64)
        vals = vals.astype(np.dtype(f"u{dt.itemsize}")).view(dt)
        if op == "st":
            self.gmem.store(addrs, vals.reshape(-1, 1), dt)
            return
        fn = _ATOM[op]
        for i in range(addrs.size):  # one lane at a time, as atomics serialize
            a = addrs[i: i + 1]
            old = self.gmem.load(a, dt)[:, 0]
            self.gmem.store(a, np.asarray(fn(old, vals[i: i + 1], vals[i: i + 1]), dtype=dt).reshape(1, 1), dt)


class ClockStores:
    """A kernel whose %clock / %clock64 values reach nothing but the data of global stores: `reads`, pc of
    each clock read -> the mask of its value (32 or 64 bits); `stores`, pc of each store of such a value ->
    (st, add, min or max; its type); `data`, that pc -> the stored register (`of` finds them)."""

    def __init__(self, reads: dict[int, int], stores: dict[int, tuple[str, np.dtype]], data: dict[int, str]):
        self.reads, self.stores, self.data = reads, stores, data

    @staticmethod
    def of(P: Prepared) -> ClockStores | None:
        body = P.L.body
        reads: dict[int, int] = {}
        fed: set[str] = set()
        for ins in body:
            names = [op.name for op in ins.operands if op.kind == "sreg"]
            if any(n == "%globaltimer" for n in names):
                return None
            clock = [n for n in names if n in ("%clock", "%clock64")]
            if not clock:
                continue
            ops, tys = ins.operands, type_mods(ins.mods)
            width = 64 if clock[0] == "%clock64" else 32
            if isa.op_of(ins) is not isa.ISA["mov"] or len(ops) != 2 or ops[0].kind != "reg" or \
                    not tys or _bits(tys[-1]) != width:
                return None
            reads[ins.index] = (1 << width) - 1
            fed.add(ops[0].name)
        if not reads:
            return None
        stores: dict[int, tuple[str, np.dtype]] = {}
        data: dict[int, str] = {}
        for ins in body:
            if ins.index in reads:
                continue
            if fed & set(ins.dst_regs):
                return None  # a clock-fed register written by something else
            used = fed & {*ins.src_regs, *([ins.guard] if ins.guard else [])}
            if not used:
                continue
            ops, tys = ins.operands, type_mods(ins.mods)
            red = isa.op_of(ins) is isa.ISA["red"]
            op = "st" if isa.op_of(ins) is isa.ISA["st"] else \
                next((m for m in ins.mods if m in ("add", "min", "max")), "") if red else ""
            if not op or isa.mem_space(ins) != "global" or len(ops) != 2 or ops[1].kind != "reg" or \
                    used != {ops[1].name} or ins.guard in fed or not tys or tys[-1][0] not in "usb" or \
                    _bits(tys[-1]) not in (32, 64) or (ops[0].base is not None and ops[0].base.name in fed):
                return None
            kind = "i" if tys[-1][0] == "s" else "u"
            stores[ins.index] = (op, np.dtype(f"{kind}{_bits(tys[-1]) // 8}"))
            data[ins.index] = ops[1].name
        return ClockStores(reads, stores, data)

    def restore(self, P: Prepared, before: list[np.ndarray], traces: dict[tuple[int, int, int], list[Records]],
                ) -> bool:
        """Put the words the clock-fed stores wrote back as `before` (the allocations' bytes before the
        lock-step run) held them; False when another access touched them (the launch then executes)."""
        # each record's global addresses by (a clock-fed store's or not, bytes per lane), made words once per
        # group (the words' order does not matter below)
        by: tuple[dict[int, list[np.ndarray]], dict[int, list[np.ndarray]]] = ({}, {})
        stores = self.stores
        for recs in (r for warps in traces.values() for r in warps):
            pc = 0
            for rec in recs:
                if rec.addrs is not None and rec.space == "global":
                    by[pc in stores].setdefault(rec.size, []).append(rec.addrs)
                pc = rec.next_pc
        others, mine = ([_words(np.concatenate(a), size) for size, a in d.items()] for d in by)
        if not mine:
            return True
        w = _sorted_distinct(np.concatenate(mine))
        if others and np.isin(np.concatenate(others), w).any():
            return False
        allocs = P.L.gmem.allocs
        bases = np.array([a.base for a in allocs], dtype=np.int64)
        k = np.searchsorted(bases, w * 4, side="right") - 1
        for i in _sorted_distinct(k).tolist():
            off = w[k == i] * 4 - bases[i]
            for b in range(4):
                allocs[i].data[off + b] = before[i][off + b]
        return True


def _bits(ty: str) -> int:
    digits = "".join(c for c in ty if c.isdigit())
    return int(digits) if digits else 0


def _sorted_distinct(a: np.ndarray) -> np.ndarray:
    """np.unique(a) of a 1-D integer array, by sorting (numpy's unique imports numpy.ma at its first call,
    ~15 ms of a cold run, and builds a hash table)."""
    s = np.sort(a)
    return s[np.concatenate(([True], s[1:] != s[:-1]))] if s.size > 1 else s


def _words(addrs: np.ndarray, size: int) -> np.ndarray:
    """The 4-byte words the accesses of `size` bytes at `addrs` touch."""
    a = addrs.astype(np.int64) // 4
    return (a[:, None] + np.arange(max(1, size // 4))[None, :]).ravel()


class Replay:
    """A launch run in lock-step with its records: P holds the memories after the run (the outputs)."""

    def __init__(self, P: Prepared, traces: dict[tuple[int, int, int], list[Records]],
                 clocks: ClockStores | None = None, tags: dict[tuple[int, int, int], list[Any]] | None = None):
        self.P = P
        self.traces = traces
        self.clocks = clocks
        self.tags = tags or {}

    def cta(self, ctaid: tuple[int, int, int]) -> CTA:
        """A CTA whose warps replay their records (runner.make_cta's for the timing model)."""
        P = self.P
        cta = _cta(P, ctaid)
        if self.clocks is not None:
            tags = self.tags.pop(ctaid)
            cta.warps = [ClockWarp(cta, w, recs, P.L.body, self.clocks, tags[w], P)  # type: ignore[misc]
                         for w, recs in enumerate(self.traces.pop(ctaid))]
            return cta
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
        clocks = None
        if reads_clock(P):
            clocks = ClockStores.of(P)
            if clocks is None or refusal(P.L.kernel, P):
                return None
            before = [a.data.copy() for a in P.L.gmem.allocs]
        elif not replayable(P):
            return None
        effects = _effects(P.L.kernel)
        tags: dict[tuple[int, int, int], list[Any]] = {}
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
                if clocks is not None:
                    B.clock_data, B.clock_tags = clocks.data, tags
                    for c in ctas:
                        tags[c.ctaid] = [deque() for _ in range(B.wpc)]
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
        if clocks is not None and not clocks.restore(P, before, traces):
            return None
    for w in caught:  # prepare's warnings, once
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return Replay(P, traces, clocks, tags)


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


__all__ = ["recorded", "Replay", "ReplayWarp", "ClockWarp", "ClockStores",
           "Stream", "Abandon", "Touched", "REPLAY_LIMIT", "replayable",
           "replay_for"]
