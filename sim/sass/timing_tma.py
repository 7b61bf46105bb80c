"""TMA copies and mbarrier waits in SASS timing (sim/sass/timing.py), as PTX mode times them (sim/timing/tma.py):

- a UTMALDG / UTMASTG / UBLKCP / UBLKRED goes to its core's TMA unit (sim.timing.tma.TmaEngine: accepted
  `tma.issue` cycles after the previous copy, `tma.inflight_bytes`, lines through the L2/DRAM model at
  `tma.bytes_per_cycle`, `tma.latency`). Its uniform source registers are read when the unit accepts it
  (the instruction's read barrier clears then: the hold of the issuing warp, `tma.queue`);
- a load's bytes complete its mbarrier transaction when it lands (Launched.defer_tx: the functional step
  left them pending); stores join the warp's open bulk group, which UTMACMDFLUSH closes and
  DEPBAR.LE SB0, N waits for (as LDGDEPBAR groups);
- a SYNCS.PHASECHK that found its phase incomplete puts its warp to sleep (stall reason "mbarrier") until an
  mbarrier of its CTA changes (a landing, or another warp's SYNCS); the warp then polls again;
- in a cluster (sim/sass/timing_cluster.py) a multicast load lands in every CTA of its ctaMask at its completion,
  a CTA-to-CTA copy (UBLKCP.S.S, UBLKRED.S.S) shared.remote_extra cycles after it (the SM-to-SM trip, as PTX
  mode), and a SYNCS wakes the sleepers of every CTA of its cluster."""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING, Any

from sim.errors import ExecutionError
from sim.functional.ops_tma import BulkCopy
from sim.sass.exec_tma import complete
from sim.sass.listing import SassInstruction

if TYPE_CHECKING:
    from sim.sass.exec_state import Cta

INF = 1 << 62
BULK_COMMIT = frozenset({"UTMACMDFLUSH"})  # cp.async.bulk.commit_group: closes the warp's open bulk group


class BulkTiming:
    def __init__(self, T: Any):
        self.T = T
        self.landings: list[tuple[int, int, Cta, int, int]] = []  # heap of (cycle, seq, CTA, mbarrier, bytes)
        self.seq = 0

    def issue(self, c: Any, wt: Any, ins: SassInstruction, copies: list[BulkCopy]) -> int:
        """Send the copies to the core's TMA unit; returns when the unit accepted the last (its operands read)."""
        T = self.T
        if c.tma is None:
            raise ExecutionError(f"SASS {ins.kernel}+0x{ins.pc:04x} '{ins.text}': {T.hw.name} has no 'tma:' section "
                                 "to time TMA copies by (docs/hwconfig.md)", T.L.file, ins.ptx_line)
        taken = T.t
        for cp in copies:
            done, release = c.tma.copy(T.t, cp)
            taken = max(taken, release)
            if cp.load:  # a multicast lands in every CTA of its ctaMask; a CTA-to-CTA copy crosses the SM-to-SM
                dests: tuple[Any, ...] = cp.dests or (wt.w.cta,)
                for cta in dests:  # network (DSMEM) after its bytes streamed
                    at = done + (T.hw.shared.remote_extra if not cp.addrs.size and cta is not wt.w.cta else 0)
                    heapq.heappush(self.landings, (at, self.seq, cta, cp.mbar, cp.nbytes))
                    self.seq += 1
            elif done > wt.bulk_open:
                wt.bulk_open = done
        return taken

    def after_step(self, c: Any, wt: Any, ins: SassInstruction, epoch: int) -> None:
        """After a warp's instruction executed: a failed wait sleeps, an mbarrier change wakes its CTA's sleepers,
        UTMACMDFLUSH closes the bulk group."""
        w = wt.w
        if w.yielded:
            w.yielded = False
            wt.mbar_sleep = True
        if ins.opcode in BULK_COMMIT:
            wt.groups.append(wt.bulk_open)
            wt.bulk_open = 0
        if self.T.L.mbar_epoch != epoch:  # every CTA of the cluster: a SYNCS may name a peer's mbarrier
            for cta in w.cta.peers:
                self._wake(cta, self.T.t + 1)

    def land(self, t: int) -> None:
        """Complete the transactions of the copies that landed by cycle t and wake their CTAs' sleepers."""
        heap = self.landings
        while heap and heap[0][0] <= t:
            at, _, cta, mbar, nbytes = heapq.heappop(heap)
            complete(cta, mbar, nbytes)
            self.T.L.mbar_epoch += 1
            self._wake(cta, at)

    def check_stuck(self) -> None:
        """A deadlock error when warps sleep on mbarriers, no copy is in flight and every other live warp
        waits too (at a barrier): nothing can change an mbarrier any more."""
        if self.landings:
            return
        T = self.T
        live = [wt for c in T.cores for sched in c.scheds for wt in sched if not wt.w.done]
        sleeping = [wt for wt in live if wt.mbar_sleep]
        if not sleeping or any(not wt.mbar_sleep and T.M.runnable(wt.w) is not None for wt in live):
            return
        wt = sleeping[0]
        g = wt.w.groups[0]
        ins = T.L.code[max(0, g.pc - 1)]
        raise ExecutionError(f"deadlock in CTA {wt.w.cta.ctaid}: warp {wt.w.wid} waits on an mbarrier near SASS "
                             f"'{ins.text}' (0x{ins.pc:04x}) that nothing will complete", T.L.file, ins.ptx_line)

    def next_landing(self) -> int:
        return self.landings[0][0] if self.landings else INF

    def _wake(self, cta: Cta, at: int) -> None:
        for c in self.T.cores:
            for sched in c.scheds:
                for wt in sched:
                    if wt.mbar_sleep and wt.w.cta is cta:
                        wt.mbar_sleep = False
                        wt.ready = max(wt.ready, at)


__all__ = ["BulkTiming"]
