"""A core (SM): warp schedulers as SimPy processes, pipe units, the memory path, resident CTAs.

Each scheduler process issues at most Core.issue_width instructions per cycle from its warps
(Core.policy: gto = the last warp that issued first, then oldest; lrr = round robin) and,
when nothing can issue, sleeps straight to the next cycle something can (no idle ticking).
Barrier releases and newly dispatched CTAs wake sleeping schedulers.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING

import simpy

from sim.errors import ExecutionError
from sim.functional.runner import barrier_ready, make_cta
from sim.functional.warp import CTA, Warp
from sim.hw import HwConfig
from sim.timing.memory import CoreMemory
from sim.timing.tma import tma_engine
from sim.timing.units import PipeUnit
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


class Scheduler:
    def __init__(self, core: Core, index: int):
        self.core = core
        self.warps: list[WarpT] = []
        self.last: WarpT | None = None
        self.rr = 0
        self.sleep_until: float = 0
        self.wake_ev: simpy.Event | None = None
        # PTX index -> the pipe unit this scheduler's warps use for it (the scheduler index picks
        # one of Pipe.count units)
        self.units: list[PipeUnit] = [core.units[st.pipe][index % len(core.units[st.pipe])] for st in core.statics]
        self.proc = core.env.process(self.run())

    def wake(self, at: float) -> None:
        if self.wake_ev is not None and not self.wake_ev.triggered:
            self.wake_ev.succeed()
        elif self.sleep_until > at and self.proc.is_alive and self.core.env.active_process is not self.proc:
            self.sleep_until = at
            self.proc.interrupt()

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

    def run(self) -> Generator[simpy.Event, object, None]:
        core = self.core
        env = core.env
        width = core.hw.core.issue_width  # core.issue_width instructions per scheduler per cycle
        stats = core.stats
        stalls = stats.stalls
        by_line = stats.by_line
        gto = core.hw.core.policy == "gto"
        timeout = env.timeout
        while True:
            now = int(env._now)
            issued = 0
            best_t: float = INF
            best_reason = "no_eligible"
            best_line = 0
            finished = False
            ws = self.warps
            if gto:  # the last warp that issued first, then oldest (self.order(), inlined)
                last = self.last
                if last is not None and ws and last is not ws[0] and last in ws:
                    ws = [last] + [w for w in ws if w is not last]
            elif self.rr % len(ws) if ws else 0:
                ws = self.order()
            for wt in ws:
                if wt.finished:
                    continue
                if wt.dirty:
                    t, j, reason, line = wt.recompute(now)
                elif wt.valid_until <= now:
                    t, j, reason, line = wt.cached
                    # due now, its unit still free and nothing to fetch: recompute() would pick the same
                    # entry (the older ones were later, and units only get busier), so skip it
                    if t != now or wt.valid_until != now or wt.cunit.free > now or (
                            wt.fetch_at <= now and len(wt.window) < wt.lim and not wt.w.done):
                        t, j, reason, line = wt.recompute(now)
                else:
                    t, j, reason, line = wt.cached
                if t <= now:
                    wt.issue(j, now)
                    issued += 1
                    self.last = wt
                    if not gto:
                        self.rr = self.warps.index(wt) + 1
                    if wt.finished:
                        finished = True
                    if issued >= width:
                        break
                elif t < best_t:
                    best_t, best_reason, best_line = t, reason, line
            if finished:
                self.warps = [w for w in self.warps if not w.finished]
            if issued:
                # runs again next cycle anyway: no wake-up interrupt meanwhile (that one would land
                # outside the try below and end the simulation with simpy.Interrupt)
                self.sleep_until = now
                yield timeout(1)
                continue
            if not self.warps and not core.pending_work():
                return
            try:
                if best_t == INF:
                    self.wake_ev = env.event()
                    self.sleep_until = INF
                    yield self.wake_ev
                else:
                    self.sleep_until = best_t
                    yield timeout(best_t - now)
            except simpy.Interrupt:
                pass
            self.wake_ev = None
            elapsed = int(env.now) - now
            if elapsed > 0 and core.live_ctas:
                if self.warps:
                    stalls[best_reason] += elapsed
                    if best_line:
                        by_line[best_line][best_reason] += elapsed
                else:
                    stalls["no_eligible"] += elapsed


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
        self.mem = CoreMemory(hw, sim.devmem)
        self.tma = tma_engine(hw, self.mem)
        self.scheds = [Scheduler(self, i) for i in range(hw.core.schedulers)]
        self.live_ctas: list[CtaT] = []
        self.next_sched = 0

    @property
    def now(self) -> int:
        return int(self.env.now)

    def pending_work(self) -> bool:
        return bool(self.live_ctas) or self.sim.has_pending()

    def launch(self, ctaid: tuple[int, int, int], index: int) -> None:
        cta = make_cta(self.sim.P, ctaid)
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
            s.wake(self.now)
        self.live_ctas.append(ct)
        if ct.live == 0:
            self._cta_done(ct, self.now)

    def barrier_arrive(self, wt: WarpT, t: int) -> None:
        """bar.sync per CTA: released when the last warp arrives; the sync pipe's latency later."""
        ct = wt.cta
        ct.waiting.append(wt.w)
        ct.arrivals[id(wt.w)] = t
        self._check_barrier(ct, t)

    def _check_barrier(self, ct: CtaT, t: int) -> None:
        rel = barrier_ready(ct.cta, ct.waiting)
        if not rel:
            return
        last = max(ct.arrivals.pop(id(w), t) for w in rel)
        at = max(last, t) + self.hw.pipe_for("sync").latency
        ids = {id(w) for w in rel}
        ct.waiting = [w for w in ct.waiting if id(w) not in ids]
        for wt in ct.warps:
            if id(wt.w) in ids:
                wt.fetch_at = at
                wt.dirty = True
                wt.sched.wake(at)

    def warp_finished(self, wt: WarpT) -> None:
        ct = wt.cta
        ct.live -= 1
        if ct.waiting:  # an exited warp no longer counts at the barrier
            self._check_barrier(ct, self.now)
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
