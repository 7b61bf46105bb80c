"""A core (SM): warp schedulers driven by SimPy's event queue, pipe units, the memory path, resident CTAs.

Each scheduler issues at most Core.issue_width instructions per cycle from its warps
(Core.policy: gto = the last warp that issued first, then oldest; lrr = round robin) and,
when nothing can issue, sleeps straight to the next cycle something can (no idle ticking).
Barrier releases and newly dispatched CTAs wake sleeping schedulers. run_events drives SimPy's queue
with the schedulers' own entries dispatched directly (no Event per wake-up), in SimPy's order.
"""

from __future__ import annotations

from heapq import heappop, heappush
from typing import TYPE_CHECKING, Any, Final
from weakref import WeakKeyDictionary

import simpy

from sim.errors import ExecutionError
from sim.functional.ops_mem import CLUSTER_BAR_ID
from sim.functional.runner import barrier_ready, make_cta
from sim.functional.warp import CTA, Warp
from sim.hw import HwConfig
from sim.timing.cluster import release_latency
from sim.timing.memory import CoreMemory
from sim.timing.pipe import PipeUnit
from sim.timing.tma import tma_engine
from sim.timing.warp import INF, WarpT

if TYPE_CHECKING:
    from sim.timing.engine import Simulation


class CtaT:
    """Timing state of one resident CTA: its warps, how many still run, who waits at a barrier."""

    def __init__(self, cta: CTA, index: int, start: int):
        self.cta = cta
        self.index = index
        self.start = start
        self.warps: list[WarpT] = []
        self.live = 0
        self.waiting: list[Warp] = []
        self.arrivals: dict[int, int] = {}  # id(warp) -> cycle it arrived at the barrier
        self.mbar_waiters: list[WarpT] = []  # warps stopped at an incomplete mbarrier wait (sim/timing/tma.py)
        self.replay = False  # every warp replays records (WarpT.rw): Core._check_barrier's short path


class _Interrupt:
    """An entry of the event queue that wakes a sleeping scheduler early (what SimPy's Interruption did
    for the scheduler as a process)."""

    __slots__ = ("sched",)

    def __init__(self, sched: Scheduler):
        self.sched = sched


class EventIds:
    """SimPy's insertion counter (Environment._eid, an itertools.count) as an object of the compiled core:
    the schedulers take numbers from `n` without a call; SimPy's own `next(env._eid)` still works."""

    __slots__ = ("n",)

    def __init__(self, n: int):
        self.n = n  # the next insertion number

    def __iter__(self) -> EventIds:
        return self

    def __next__(self) -> Any:  # (Any: mypyc's tp_iternext returns an object)
        n = self.n
        self.n = n + 1
        return n


def event_ids(env: simpy.Environment) -> EventIds:
    """env's insertion counter, made an EventIds (from the number it would give next) the first time."""
    ids: Any = env._eid
    if not isinstance(ids, EventIds):
        ids = EventIds(next(ids))
        env._eid = ids
    return ids


# A scheduler's NORMAL entries (the next cycle after it issued, the cycle it sleeps to) as one int each:
# (time << ID_BITS | insertion number) << SCHED_BITS | the scheduler's index in SchedQueue.scheds. Ordered
# as SimPy's (time, priority, insertion) tuples are (all NORMAL, insertion numbers unique), compared as one
# int (no tuple, no boxed fields) while it fits 62 bits (times below 2^22 cycles; beyond, Python's ints keep
# it exact, only slower). An insertion number or index past its bits goes to SimPy's heap as a tuple.
ID_BITS: Final = 28
SCHED_BITS: Final = 12
ID_MASK: Final = (1 << ID_BITS) - 1
SCHED_MASK: Final = (1 << SCHED_BITS) - 1


class SchedQueue:
    """The schedulers' NORMAL queue entries of one environment, merged with SimPy's heap by run_events:
    `fifo` the next-cycle ones (made while the cycle before was processed, so in (time, insertion)
    order: a FIFO, read from `head`), and the sleeps by cycle: `slots[t - base]` the keys of cycle t,
    appended in insertion order (so each list is sorted), `times` a heap of the cycles that have keys, `top`
    the least key (-1 when none), the `pos`-th of `cur`, the list of cycle `ttop`. A heap push / pop per
    cycle that has sleeps, not per sleep; a list index, not a dictionary, per sleep. A sleep is always to a
    later cycle than the clock's, which never passes a cycle still here: `slots` drops the cycles before the
    one popped last from time to time."""

    __slots__ = ("fifo", "head", "scheds", "slots", "base", "times", "top", "ttop", "pos", "cur", "acc")

    def __init__(self) -> None:
        self.fifo: list[int] = []
        self.head = 0
        self.scheds: list[Scheduler] = []  # by index (the key's low bits)
        self.slots: list[list[int] | None] = []
        self.base = 0
        self.times: list[int] = []
        self.top = -1
        self.ttop = 0
        self.pos = 0
        self.cur: list[int] = []
        self.acc: StallAcc | None = None  # the schedulers' stall cycles (one Stats per environment)

    def push_sleep(self, key: int, t: int) -> None:
        """Add a sleep's key (cycle t, not before the clock's; its insertion number above every key's here)."""
        i = t - self.base
        assert i >= 0, "a sleep before the clock"
        slots = self.slots
        n = len(slots)
        if i >= n:
            slots.extend([None] * (i + 256 - n))
        lst = slots[i]
        if lst is None:
            lst = [key]
            slots[i] = lst
            heappush(self.times, t)
            if self.top < 0 or t < self.ttop:  # (no key of cycle t yet: the new least)
                self.top = key
                self.ttop = t
                self.pos = 0
                self.cur = lst
        else:
            lst.append(key)  # later than the keys there: the least stays

    def pop_sleep(self) -> None:
        """Remove the least sleep key (`top`; the clock is at its cycle)."""
        pos = self.pos + 1
        cur = self.cur
        if pos < len(cur):
            self.pos = pos
            self.top = cur[pos]
            return
        t = self.ttop
        i = t - self.base
        slots = self.slots
        slots[i] = None
        times = self.times
        heappop(times)  # t
        if i >= 4096:  # every cycle before t is empty and will stay so (later sleeps are to later cycles)
            del slots[:i]
            self.base = t
        if times:
            t = times[0]
            lst = slots[t - self.base]
            assert lst is not None
            self.ttop = t
            self.pos = 0
            self.cur = lst
            self.top = lst[0]
        else:
            self.top = -1
            self.cur = []


class StallAcc:
    """The stall cycles the schedulers count as they wake (Scheduler._resume), for Stats.stalls and
    Stats.by_line: a (PTX line, reason) pair's first cycles go to those dictionaries at once, as before (so
    their keys are made in the same order), later ones add up here (`vals`, a list by line and reason code:
    no dictionary per wake-up) until `flush` (run_events' end) adds them there: the same integer sums."""

    __slots__ = ("stalls", "by_line", "reasons", "vals")

    def __init__(self, stalls: dict[str, int], by_line: dict[int, dict[str, int]]):
        self.stalls = stalls
        self.by_line = by_line
        self.reasons: list[str] = []  # code -> reason
        self.vals: list[int] = []  # line << 5 | code -> cycles not yet added (-1: the pair never seen)

    def add(self, line: int, reason: str, cycles: int) -> None:
        """`cycles` of stall `reason` at PTX `line` (0: none; only Stats.stalls counts it)."""
        reasons = self.reasons
        code = -1
        for i in range(len(reasons)):
            r = reasons[i]
            if r is reason or r == reason:
                code = i
                break
        if code < 0 and len(reasons) < 32:
            code = len(reasons)
            reasons.append(reason)
        if code < 0 or line < 0 or line >= 1 << 20:
            self._add(line, reason, cycles)
            return
        k = line << 5 | code
        vals = self.vals
        if k >= len(vals):
            vals.extend([-1] * ((line + 1) * 32 - len(vals)))
        v = vals[k]
        if v < 0:  # the pair's first stall: into the dictionaries now (their keys' order)
            self._add(line, reason, cycles)
            vals[k] = 0
        else:
            vals[k] = v + cycles

    def _add(self, line: int, reason: str, cycles: int) -> None:
        self.stalls[reason] += cycles
        if line:
            self.by_line[line][reason] += cycles

    def flush(self) -> None:
        """Add the cycles held here to the dictionaries (whose keys exist: no new key, no order change)."""
        vals = self.vals
        reasons = self.reasons
        for k in range(len(vals)):
            v = vals[k]
            if v > 0:
                self._add(k >> 5, reasons[k & 31], v)
                vals[k] = 0


_QUEUES: WeakKeyDictionary[simpy.Environment, SchedQueue] = WeakKeyDictionary()


def scheduler_queue(env: simpy.Environment) -> SchedQueue:
    sq = _QUEUES.get(env)
    if sq is None:
        sq = _QUEUES[env] = SchedQueue()
    return sq


def run_events(env: simpy.Environment) -> None:
    """`env.run()` (_run_events), the schedulers' stall cycles added to Stats at the end (StallAcc)."""
    try:
        _run_events(env)
    finally:
        acc = scheduler_queue(env).acc
        if acc is not None:
            acc.flush()


def _run_events(env: simpy.Environment) -> None:
    """`env.run()` with no `until`: SimPy's Environment.step in a loop, in the same (time, priority,
    insertion) order, except that a scheduler's own entries are dispatched directly: no Event object,
    callback list or generator per scheduler wake-up (benchmarks/sim_profile.md: the SimPy queue was 8-15%
    of the timing model), and its NORMAL entries wait as ints in a SchedQueue (a FIFO for the next cycle,
    sleeps by cycle) merged with SimPy's heap by the same order. Every other event (a CTA launch process,
    a TMA landing, a scheduler's start or wake-up in SimPy's heap: the Scheduler itself or an _Interrupt)
    is processed as Environment.step does, failures included. The clock (env._now) is written only when it
    moves: most entries share their cycle with the one before."""
    q = env._queue
    sq = scheduler_queue(env)
    fifo = sq.fifo
    scheds = sq.scheds
    pop = heappop
    sched_cls = Scheduler
    ev: Any  # a Scheduler, an _Interrupt or a SimPy Event
    now: Any  # its time (an int: every delay in the model is)
    qh: Any = None  # SimPy's first entry, as last read (held: its identity stands for its contents) ...
    e: Any
    qt: int = 0  # ... and its time, priority, insertion number
    qp: int = 0
    qe: int = 0
    clock: int = int(env._now)
    last: Any = env._now  # the time of the last entry taken (env._now at the end, as Environment.step leaves it)
    while True:
        k = sq.top  # the schedulers' first entry (FIFO head or least sleep), -1 when none
        h = sq.head
        if h < len(fifo):
            f = fifo[h]
            if k < 0 or f < k:
                k = f
        if q:
            e = q[0]
            if e is not qh:
                qh = e
                qt, qp, qe = e[0], e[1], e[2]
            if k >= 0:
                kt = k >> (ID_BITS + SCHED_BITS)
                first = qt < kt or (qt == kt and (qp < NORMAL or (qp == NORMAL and qe < ((k >> SCHED_BITS) & ID_MASK))))
            else:
                first = True
        elif k >= 0:
            first = False
        else:
            if len(fifo):
                fifo.clear()
                sq.head = 0
            env._now = last
            return
        if not first:  # a scheduler's NORMAL entry
            if h < len(fifo) and fifo[h] == k:
                h += 1
                if h == len(fifo):
                    fifo.clear()
                    h = 0
                sq.head = h
            else:
                sq.pop_sleep()
            t: int = k >> (ID_BITS + SCHED_BITS)
            last = t
            s: Scheduler = scheds[k & SCHED_MASK]
            if (k >> SCHED_BITS) & ID_MASK == s.pending:  # else an entry left behind by a wake-up: ignored, as
                s.pending = -1  # SimPy ignores a process' old target
                if t != clock:
                    env._now = clock = t
                if s.state == NEXT_CYCLE:  # the common case, Scheduler._resume inlined: no stall to count
                    s.state = RUNNING
                    s._cycle(t)
                else:
                    s._resume(t)
            continue
        now, _, eid, ev = pop(q)
        last = now
        cls = ev.__class__
        if cls is sched_cls:  # a start or a wake-up from waiting (Scheduler._at)
            s = ev
            if eid == s.pending:
                s.pending = -1
                tt: int = now
                if tt != clock:
                    env._now = clock = tt
                if s.state == NEXT_CYCLE:
                    s.state = RUNNING
                    s._cycle(tt)
                else:
                    s._resume(tt)
            continue
        if now != clock:
            env._now = now
            clock = int(now)
        if cls is _Interrupt:
            i: _Interrupt = ev
            i.sched.interrupt()
            continue
        callbacks, ev.callbacks = ev.callbacks, None
        for callback in callbacks:
            callback(ev)
        if not ev._ok and not hasattr(ev, "_defused"):  # a failed event crashes the run (Environment.step)
            exc = type(ev._value)(*ev._value.args)
            exc.__cause__ = ev._value
            raise exc


# Scheduler.state: where the scheduler waits (the yield points of the SimPy process it replaces). Final: the
# compiled core (sim/timing/native.py) reads them as constants, not from the module's dictionary
START: Final = 0
NEXT_CYCLE: Final = 1
SLEEP: Final = 2
WAIT: Final = 3
WOKEN: Final = 4
RUNNING: Final = 5
URGENT: Final[int] = simpy.events.URGENT
NORMAL: Final[int] = simpy.events.NORMAL
_CLUSTER_BAR_ID: Final[int] = CLUSTER_BAR_ID


class Scheduler:
    """One warp scheduler, driven by SimPy's event queue as a process would be: it runs at its start
    (urgent, as a process' initialisation), the cycle after one it issued in, at the earliest cycle a warp
    can issue when none can now, and when woken (a CTA launch, a barrier release: urgent, as an
    interrupt; or, with no cycle to sleep to, a normal event). Its queue entries are the scheduler itself
    (`pending` holds the insertion number of the one that resumes it: others are left behind by a
    wake-up and ignored, as SimPy ignores a process' old target) and _Interrupt; run_events dispatches
    them."""

    __slots__ = ("core", "warps", "last", "rr", "sleep_until", "units", "env", "alive", "state", "pending", "gws",
                 "slept_at", "best_reason", "best_line", "width", "gto", "queue", "eid", "sq", "qi", "stalls",
                 "by_line", "acc")

    def __init__(self, core: Core, index: int):
        self.core = core
        self.warps: list[WarpT] = []
        self.last: WarpT | None = None
        self.gws: list[WarpT] | None = None  # warps in GTO order for `last` (None: to be rebuilt)
        self.rr = 0
        self.sleep_until: int = 0
        # PTX index -> the pipe unit this scheduler's warps use for it (the scheduler index picks
        # one of Pipe.count units)
        pick = {name: us[index % len(us)] for name, us in core.units.items()}
        self.units: list[PipeUnit] = [pick[p] for p in core.static_pipes]
        env = core.env
        self.env = env
        self.alive = True
        self.state = START
        self.pending = -1  # insertion number of the queue entry that resumes it (-1: none, or waiting for wake())
        self.slept_at = 0  # the cycle it went to sleep in, and the stall it then saw
        self.best_reason = "no_eligible"
        self.best_line = 0
        self.stalls = core.stats.stalls  # Stats' dictionaries, read here without the Stats object
        self.by_line = core.stats.by_line
        width = core.hw.core.issue_width  # core.issue_width instructions per scheduler per cycle
        self.width = width
        self.gto = core.hw.core.policy == "gto"
        self.queue = env._queue  # SimPy's event heap and insertion counter (Environment.schedule)
        self.eid = event_ids(env)
        sq = self.sq = scheduler_queue(env)
        if sq.acc is None:  # one per environment, as Stats is one per Simulation
            sq.acc = StallAcc(self.stalls, self.by_line)
        self.acc: StallAcc = sq.acc
        self.qi = len(sq.scheds)  # its index in the queue's keys
        sq.scheds.append(self)
        self._at(URGENT, 0)

    def _at(self, priority: int, delay: int) -> None:
        ids = self.eid
        eid = self.pending = ids.n
        ids.n = eid + 1
        heappush(self.queue, (self.env._now + delay, priority, eid, self))  # type: ignore[misc]

    def wake(self, at: int) -> None:
        if self.state == WAIT:
            self.state = WOKEN
            self._at(NORMAL, 0)
        elif self.sleep_until > at and self.alive and self.state != RUNNING:
            self.sleep_until = at
            ids = self.eid
            eid = ids.n
            ids.n = eid + 1
            heappush(self.queue, (self.env._now, URGENT, eid, _Interrupt(self)))  # type: ignore[misc]

    def order(self) -> list[WarpT]:
        """The warps in the order the policy considers them this cycle."""
        ws = self.warps
        if self.core.hw.core.policy == "gto":
            last = self.last
            if last is not None and ws and last is not ws[0] and last in ws:
                return [last] + [w for w in ws if w is not last]
            return ws
        n = len(ws)
        k = self.rr % n if n else 0
        return ws[k:] + ws[:k] if k else ws

    def interrupt(self) -> None:
        if not self.alive:
            return
        self.pending = -1  # what it waited for no longer resumes it
        if self.state == START or self.state == NEXT_CYCLE:  # a process interrupted outside its sleep fails
            raise simpy.Interrupt(None)
        self._resume(int(self.env._now))

    def _resume(self, now: int) -> None:
        """Run at `now` (= env.now) after sleeping or waiting."""
        slept = SLEEP <= self.state <= WOKEN
        self.state = RUNNING
        if slept:  # the cycles slept are a stall of the reason seen going to sleep
            elapsed = now - self.slept_at
            core = self.core
            if elapsed > 0 and core.live_ctas:
                acc = self.acc  # stalls[reason] (and by_line[line][reason]) += elapsed, in effect
                if self.warps:
                    acc.add(self.best_line, self.best_reason, elapsed)
                else:
                    acc.add(0, "no_eligible", elapsed)
        self._cycle(now)

    def _cycle(self, now: int) -> None:
        """One cycle (`now` = env.now): issue up to `width` instructions, then wait for the next cycle, or
        sleep to the earliest cycle something can issue."""
        issued = 0
        best_t: int = INF
        best_reason = "no_eligible"
        best_line = 0
        finished = False
        gto = self.gto
        if gto:  # the last warp that issued first, then oldest (self.order(), kept until either changes)
            ws = self.gws
            if ws is None:
                ws = self.warps
                last = self.last
                if last is not None and ws and last is not ws[0] and last in ws:
                    i = ws.index(last)
                    ws = [last] + ws[:i] + ws[i + 1:]
                self.gws = ws
        else:
            ws = self.warps
            if self.rr % len(ws) if ws else 0:
                ws = self.order()
        for wt in ws:
            if wt.finished:
                continue
            if wt.dirty:
                t = wt.recompute(now)
            else:
                t = wt.ct
                vu = wt.valid_until
                cu = wt.cunit  # (set whenever ct == valid_until == now: recompute found an entry)
                # due now, its unit still free and nothing to fetch: recompute() would pick the same
                # entry (the older ones were later, and units only get busier), so skip it
                if vu <= now and (t != now or vu != now or cu is None or cu.free > now or (
                        wt.fetch_at <= now and len(wt.wst) < wt.lim and not wt.wdone)):
                    t = wt.recompute(now)
            if t <= now:
                wt.issue(wt.cj, now)
                issued += 1
                if wt is not self.last:
                    self.last = wt
                    self.gws = None
                if not gto:
                    self.rr = self.warps.index(wt) + 1
                if wt.finished:
                    finished = True
                if issued >= self.width:
                    break
            elif t < best_t:
                best_t, best_reason, best_line = t, wt.creason, wt.cline
        if finished:
            self.warps = [w for w in self.warps if not w.finished]
            self.gws = None
        if issued:
            # runs again next cycle anyway: no wake-up interrupt meanwhile (one already on its way lands
            # here and ends the simulation with simpy.Interrupt, as it did the process)
            self.sleep_until = now
            self.state = NEXT_CYCLE
            ids = self.eid
            eid = self.pending = ids.n
            ids.n = eid + 1
            # = env.schedule(.., NORMAL, 1), as a SchedQueue key
            if eid <= ID_MASK and self.qi <= SCHED_MASK:
                self.sq.fifo.append((((now + 1) << ID_BITS) | eid) << SCHED_BITS | self.qi)
            else:
                heappush(self.queue, (now + 1, NORMAL, eid, self))  # type: ignore[misc]
            return
        if not self.warps and not self.core.pending_work():
            self.alive = False
            return
        self.slept_at = now
        self.best_reason, self.best_line = best_reason, best_line
        if best_t == INF:
            self.state = WAIT
            self.sleep_until = INF
        else:
            self.state = SLEEP
            self.sleep_until = best_t
            ids = self.eid
            eid = self.pending = ids.n
            ids.n = eid + 1
            if eid <= ID_MASK and self.qi <= SCHED_MASK:
                self.sq.push_sleep(((best_t << ID_BITS) | eid) << SCHED_BITS | self.qi, best_t)
            else:
                heappush(self.queue, (best_t, NORMAL, eid, self))  # type: ignore[misc]


class Core:
    def __init__(self, sim: Simulation, index: int):
        hw: HwConfig = sim.hw
        self.sim = sim
        self.hw = hw
        self.env = sim.env
        self.index = index
        self.stats = sim.stats
        self.statics = sim.statics
        self.lookahead = sim.lookahead
        self.units = {p.name: [PipeUnit(p) for _ in range(p.count)] for p in hw.pipes}
        self.static_pipes = [st.pipe for st in self.statics]  # PTX index -> pipe name (Scheduler.units)
        self.mem = CoreMemory(hw, sim.devmem)
        self.tma = tma_engine(hw, self.mem)
        self.scheds = [Scheduler(self, i) for i in range(hw.core.schedulers)]
        self.live_ctas: list[CtaT] = []
        self.next_sched = 0
        self.plan_gen = 0  # WarpT.recompute's plan number (PipeUnit.mgen)
        self.sync_latency = -1  # the sync pipe's latency (a bar.sync's release), once asked

    @property
    def now(self) -> int:
        return int(self.env.now)

    def pending_work(self) -> bool:
        return bool(self.live_ctas) or self.sim.has_pending()

    def launch(self, ctaid: tuple[int, int, int], index: int) -> CtaT:
        cta = make_cta(self.sim.P, ctaid) if self.sim.replay is None else self.sim.replay.cta(ctaid)
        cta.defer_tx = True  # TMA loads complete their mbarrier transactions when timed (sim/timing/tma.py)
        ct = CtaT(cta, index, self.now)
        for w in cta.warps:
            s = self.scheds[self.next_sched % len(self.scheds)]
            self.next_sched += 1
            wt = WarpT(w, ct, s, self, self.sim.next_warp_id())
            ct.warps.append(wt)
            if w.done:
                wt.finished = True
                continue
            ct.live += 1
            s.warps.append(wt)
            s.gws = None
            s.wake(self.now)
        ct.replay = all(wt.rw is not None for wt in ct.warps)
        self.live_ctas.append(ct)
        if ct.live == 0:
            self._cta_done(ct, self.now)
        return ct

    def barrier_arrive(self, wt: WarpT, t: int) -> None:
        """bar.sync per CTA: released when the last warp arrives; the sync pipe's latency later."""
        ct = wt.cta
        ct.waiting.append(wt.w)
        ct.arrivals[id(wt.w)] = t
        self._check_barrier(ct, t)

    def _check_barrier(self, ct: CtaT, t: int) -> None:
        waiting = ct.waiting
        if ct.replay and waiting:  # replayed warps (bar_count 0) at one bar.sync id: barrier_ready's answer
            bid = waiting[0].bar_id
            for w in waiting:
                if w.bar_id != bid:
                    bid = -1
                    break
            if bid >= 0 and bid != _CLUSTER_BAR_ID:
                live = 0  # warps not done (WarpT.wdone mirrors w.done)
                for wt in ct.warps:
                    if not wt.wdone:
                        live += 1
                if len(waiting) < live:
                    return
                # all released, at the sync pipe's latency (release_latency of a bar.sync)
                last = t
                arrivals = ct.arrivals
                for w in waiting:
                    a = arrivals.pop(id(w), t)
                    if a > last:
                        last = a
                ct.waiting = []
                lat = self.sync_latency
                if lat < 0:
                    lat = self.sync_latency = self.hw.pipe_for("sync").latency
                at = last + lat
                ids = {id(w) for w in waiting}
                for wt in ct.warps:
                    if id(wt.w) in ids:
                        wt.fetch_at = at
                        wt.dirty = True
                        wt.sched.wake(at)
                return
        rel = barrier_ready(ct.cta, waiting)
        if not rel:
            return
        last = max(ct.arrivals.pop(id(w), t) for w in rel)
        ids = {id(w) for w in rel}
        ct.waiting = [w for w in ct.waiting if id(w) not in ids]
        for wt in ct.warps:
            if id(wt.w) in ids:
                at = max(last, t) + release_latency(self.hw, wt.w)
                wt.fetch_at = at
                wt.dirty = True
                wt.sched.wake(at)

    def warp_finished(self, wt: WarpT) -> None:
        ct = wt.cta
        ct.live -= 1
        if ct.waiting:  # an exited warp no longer counts at the barrier
            self._check_barrier(ct, self.now)
        if ct.cta.cluster is not None and ct.cta.cluster.hooks is not None:  # nor at the cluster's
            ct.cta.cluster.hooks.barrier_arrived(wt.w)
        if ct.live == 0:
            end = max(w.last_done for w in ct.warps)
            self._cta_done(ct, end)

    def _cta_done(self, ct: CtaT, end: int) -> None:
        if ct.waiting:
            w = ct.waiting[0]
            ins = self.sim.P.L.body[w.pc - 1]
            raise ExecutionError(f"deadlock: block {ct.cta.ctaid} waits at '{ins.text}' but the other warps "
                                 "exited or wait elsewhere", self.sim.P.L.file, ins.line)
        self.live_ctas.remove(ct)
        self.sim.cta_done(self, ct, end)
