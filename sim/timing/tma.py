"""One core's TMA unit (cp.async.bulk{.tensor}) and the mbarrier wake-ups of the timing model.

A copy is accepted `tma.issue` cycles after the previous one, waits while the bytes in flight would
exceed `tma.inflight_bytes`; the warp that issued it stops fetching until the unit has room for it: with
`tma.queue` 0 until the copy is accepted (its `issue` cycles end), with a queue of Q until the copy Q places
ahead of it is (stall reason "tma"; the H200 holds the issuing thread so, docs/tma-timing.md). The copy
sends its lines through the core's L2/DRAM path (CoreMemory.global_access, as global loads and stores go,
bypassing the L1; a CTA-to-CTA copy has none), streams at `tma.bytes_per_cycle` and completes
`tma.latency` cycles after its last line: a load then counts its bytes off its mbarrier
(ops_tma.complete_tx, deferred from the functional step), a store completes its bulk group.

A warp whose mbarrier wait found its phase incomplete stops fetching (reason "mbarrier") until an
mbarrier of its CTA changes: an arrive/expect_tx/complete_tx issuing (sync pipe latency later) or a
TMA load completing; it then runs its wait again. A CTA whose warps all wait for phases nothing will
complete ends the simulation with the deadlock error of Simulation.run."""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING

from sim.functional.ops_tma import BulkCopy, complete_tx
from sim.hw import HwConfig, Tma
from sim.timing.memory import CoreMemory

if TYPE_CHECKING:
    from sim.timing.core import Core, CtaT
    from sim.timing.warp import WarpT


class TmaEngine:
    def __init__(self, c: Tma, mem: CoreMemory):
        self.c = c
        self.mem = mem
        self.free = 0  # the cycle the unit accepts its next copy
        self.inflight: list[tuple[int, int]] = []  # heap of (completion cycle, bytes)
        self.bytes = 0  # bytes in flight
        self.busy = 0
        self.accepted: list[int] = []  # the cycles the last tma.queue + 1 copies were accepted

    def copy(self, t: int, cp: BulkCopy) -> tuple[int, int]:
        """(completion cycle, cycle the issuing warp is released) of a copy issued at t."""
        c = self.c
        start = max(t, self.free)
        fl = self.inflight
        while fl and (fl[0][0] <= start or self.bytes + cp.nbytes > c.inflight_bytes):
            done, n = heapq.heappop(fl)  # tma.inflight_bytes: wait for the oldest copies to complete
            start = max(start, done)
            self.bytes -= n
        self.free = start + c.issue
        self.busy += c.issue
        acc = self.accepted
        acc.append(self.free)
        if len(acc) > c.queue + 1:
            del acc[0]
        release = acc[0] if len(acc) == c.queue + 1 else t  # the copy tma.queue places ahead is accepted
        sent = start + c.issue
        lines = (self.mem.global_access(sent, cp.addrs, cp.piece, not cp.load, False, port=self.mem.tma_port)
                 if cp.addrs.size else sent)
        done = max(lines, sent + int(-(-cp.nbytes // c.bytes_per_cycle))) + c.latency
        heapq.heappush(fl, (done, cp.nbytes))
        self.bytes += cp.nbytes
        return done, release


def tma_engine(hw: HwConfig, mem: CoreMemory) -> TmaEngine | None:
    return TmaEngine(hw.tma, mem) if hw.tma is not None else None


def issue_copies(core: Core, wt: WarpT, t: int, copies: list[BulkCopy]) -> tuple[int, int]:
    """Time the bulk copies one instruction issued at t; loads complete their mbarrier transactions
    when done. Returns (the latest completion cycle, the cycle the unit releases the warp)."""
    eng = core.tma
    assert eng is not None  # statics() stops a TMA kernel on a hwconfig without tma
    last = release = t
    for cp in copies:
        done, rel = eng.copy(t, cp)
        if not cp.addrs.size and any(d is not wt.cta.cta for d in cp.dests):
            done += core.hw.shared.remote_extra  # a CTA-to-CTA copy crosses the SM-to-SM network (DSMEM)
        last = max(last, done)
        release = max(release, rel)
        if cp.load:
            core.env.timeout(done - t).callbacks.append(Landing(wt.cta, cp, done))
    return last, max(release, t + eng.c.warp_issue)  # tma.warp_issue: ptxas' issue sequence (PTX mode only)


class Landing:
    """The moment a TMA load's bytes are in shared memory: its mbarrier counts them, waiters wake."""

    def __init__(self, ct: CtaT, cp: BulkCopy, done: int):
        self.ct, self.cp, self.done = ct, cp, done

    def __call__(self, _event: object) -> None:
        own = self.ct.cta
        for cta in self.cp.dests or (own,):  # a multicast lands in every destination CTA at once
            complete_tx(cta, self.cp.mbar, self.cp.nbytes)
            ct = self.ct if cta is own else cta.cluster.hooks.ct_of(cta)  # type: ignore[union-attr]
            wake_mbarrier_waiters(ct, self.done)


def wake_mbarrier_waiters(ct: CtaT, at: int) -> None:
    """Every warp of the CTA stopped at an incomplete mbarrier wait fetches again from cycle `at`."""
    waiters, ct.mbar_waiters = ct.mbar_waiters, []
    for wt in waiters:
        wt.fetch_at = at
        wt.dirty = True
        wt.sched.wake(at)
