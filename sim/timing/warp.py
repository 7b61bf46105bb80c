"""Timing state of one warp: a fetch window over the functional warp, a register scoreboard,
branch fetch blocking, cp.async group completion, and issue of one instruction.

Functional execution happens at fetch (values are real, program order per warp); timing decides
when each fetched instruction issues. A warp keeps up to `lookahead` fetched, not yet issued
instructions and may issue a younger one past an older stalled one when they are independent
(RAW/WAW/WAR on registers and predicates, memory order when either is a store). This stands for
the static scheduling ptxas does when it turns PTX into SASS; lookahead=1 is strict in-order issue.
Branches, barriers, fences, %clock reads and cp.async commit/wait issue only as the oldest.

Hot path notes (the scheduler asks for the earliest issue cycle several times per issued instruction):
- that answer (`recompute`) is cached with the cycle up to which it stays valid (`valid_until`):
  until then only a unit can get busier (so the cached cycle is at worst optimistic and is
  re-checked when reached); any change of the warp's own state sets `dirty`;
- which window entries are independent of every older one depends only on the static
  instructions in the window, so it is memoised per window signature (the tuple of their St);
- an entry's operand-ready cycle is computed once, when it first is independent (`wops`), and the
  plan of the independent entries is rebuilt only when the warp's state changed (`dirty`);
- the scoreboard is two lists indexed by register number (St.src_ids / St.dst_ids);
- an instruction with no memory access, async group, TMA, mbarrier signal, branch or barrier
  (St.plain) issues through a short path.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from sim.functional.ops_async import YIELD
from sim.functional.ops_mem import ARRIVE, BARRIER, EXIT
from sim.functional.record import Executed
from sim.functional.replay import ClockWarp, ReplayWarp
from sim.functional.warp import Warp
from sim.timing.pipe import PipeUnit
from sim.timing.static import (
    BULK_COMMIT,
    BULK_WAIT,
    CP_COMMIT,
    CP_COPY,
    CP_NONE,
    CP_WAIT,
    CP_WAIT_ALL,
    WG_COMMIT,
    WG_ISSUE,
    WG_WAIT,
    St,
)
from sim.timing.tma import issue_copies, wake_mbarrier_waiters

if TYPE_CHECKING:
    from sim.timing.core import Core, CtaT, Scheduler

INF: Final = 1 << 60  # "never": above every cycle (an int, so that cycles stay ints)
# the control codes of sim.functional (Final: constants in the compiled core, not module dictionary reads)
_YIELD: Final[int] = YIELD
_ARRIVE: Final[int] = ARRIVE
_BARRIER: Final[int] = BARRIER
_EXIT: Final[int] = EXIT
_FIRST: Final[tuple[int, ...]] = (0,)  # independent() of a window of one entry



class Budget:
    """Simulation.count (warp instructions fetched so far) and Simulation.max_instructions (the count at
    which the warps call Simulation.count_instruction_overflow) as fields of the compiled core: the warps
    count each instruction without reading the interpreted Simulation."""

    __slots__ = ("count", "limit")

    def __init__(self, limit: int):
        self.count = 0
        self.limit = limit


class Row:
    """A window entry once independent (WarpT.wops): its operand-ready cycle and reason (`otops`, `owhy`),
    unit and PTX line; and, as a row of the warp's plan (WarpT.plan), the cycle and reason with a wgmma /
    bulk wait's groups (`tops`, `why`), its cp.async wait (`gt`) and window index (`j`)."""

    __slots__ = ("otops", "owhy", "unit", "line", "tops", "why", "gt", "j")

    def __init__(self, tops: int, why: str, unit: PipeUnit, line: int):
        self.otops = tops
        self.owhy = why
        self.unit = unit
        self.line = line
        self.tops = tops
        self.why = why
        self.gt = 0
        self.j = 0


def independent(win_sts: list[St] | tuple[St, ...]) -> tuple[int, ...]:
    """Window indices whose instruction does not wait for any older one in the window."""
    out = []
    for j, st in enumerate(win_sts):
        for i in range(j):
            if st.blocked_by(win_sts[i]):
                break
        else:
            out.append(j)
    return tuple(out)


class WarpT:
    __slots__ = ("w", "cta", "sched", "core", "gid", "wst", "wrec", "wops", "ready", "ready_mem", "fetch_at",
                 "block_reason", "finished", "last_done", "open_done", "groups_done", "ct", "cj", "creason", "cline",
                 "valid_until", "dirty", "plan", "cunit", "lim", "statics", "units", "sim", "indep", "wg_open",
                 "wg_groups", "bulk_open", "bulk_groups", "tracing", "wdone", "budget", "recs", "rw", "cw",
                 "bar_ids", "ccount", "popleft")

    def __init__(self, w: Warp, cta_t: CtaT, sched: Scheduler, core: Core, gid: int):
        self.w = w
        self.cta = cta_t
        self.sched = sched
        self.core = core
        self.sim = core.sim
        self.gid = gid  # global warp id (trace track, GTO age)
        # the fetch window: each entry's static facts, and what it did when fetched (None for a %clock
        # read, which is executed only when it issues)
        self.wst: list[St] = []
        self.wrec: list[Executed | None] = []
        # ... and its operand-ready cycle, reason, unit and PTX line once known (see recompute)
        self.wops: list[Row | None] = []
        nregs = core.sim.nregs
        self.ready: list[int] = [0] * nregs  # register number -> cycle its value is ready
        self.ready_mem: list[bool] = [False] * nregs  # ... and whether a memory access produces it
        self.fetch_at: int = core.now + core.hw.branch.frontend_depth  # branch.frontend_depth: fetch to issue
        self.block_reason = "frontend"
        self.finished = False
        self.last_done = 0
        self.open_done = 0
        self.groups_done: list[int] = []
        self.wg_open = 0  # completion of the wgmmas issued since the last wgmma.commit_group
        self.wg_groups: list[int] = []  # completion of each committed, not yet waited-for wgmma group
        self.bulk_open = 0  # completion of the bulk (TMA) stores issued since the last bulk commit_group
        self.bulk_groups: list[int] = []  # completion of each committed, not yet waited-for bulk group
        # the last recompute() answer (cycle, window index, stall reason, PTX line), valid while nothing changed
        self.ct = -1
        self.cj = -1
        self.creason = ""
        self.cline = 0
        self.valid_until: int = -1  # ... before this cycle (and only while not dirty)
        self.cunit: PipeUnit | None = None  # the unit of the cached answer's entry (Scheduler.run's fast path)
        self.dirty = True
        self.plan: list[Row] = []  # the plan of the independent entries (recompute), rebuilt when dirty
        self.lim = core.lookahead
        self.statics = core.statics
        self.units = sched.units  # PTX index -> the PipeUnit this warp's instructions use
        # window (the tuple of its St: one St per PTX index, so it stands for the tuple of PTX indices the
        # engine's annotation names) -> its independent entries
        self.indep: dict[tuple[St, ...], tuple[int, ...]] = core.sim.indep_memo  # type: ignore[assignment]
        self.tracing = core.stats.trace is not None
        self.wdone = w.done  # w.done, kept here (a native field) after every w.step(): only step changes it
        self.budget: Budget = core.sim.counter
        # the records of a ReplayWarp or ClockWarp (sim/functional/replay.py; not a subclass): fill takes the
        # common case of its step() itself (records at hand, not a barrier; for a ClockWarp, not a clock read
        # nor a clock-fed store, St.cstore: those keep ClockWarp.step)
        wa: Any = w
        self.rw: ReplayWarp | None = wa if type(wa) is ReplayWarp or type(wa) is ClockWarp else None
        self.cw: ClockWarp | None = wa if type(wa) is ClockWarp else None
        self.recs: deque[Executed] | None = self.rw.records if self.rw is not None else None
        # pc -> the barrier id ReplayWarp.step sets there (from the PTX operands: the same at every visit), so
        # that fill replays barrier records inline too after the first (Simulation.bar_ids, one per kernel)
        self.bar_ids: dict[int, int] = core.sim.bar_ids
        self.ccount = 0  # a ClockWarp's count, kept here by fill's inline replay (written back before its step())
        # the records' popleft, bound once (no method lookup per record)
        self.popleft: Callable[[], Executed] | None = self.recs.popleft if self.recs is not None else None
        if self.cw is not None:
            self.ccount = self.cw.count
            for pc in self.cw.clocks.stores:  # the clock-fed stores (the clock reads are St.clock)
                self.statics[pc].cstore = True

    # -- fetch -------------------------------------------------------------------------------------
    def fill(self, now: int) -> None:
        """Fetch while the window has room (the caller checked fetch_at <= now)."""
        w = self.w
        wst = self.wst
        wrec = self.wrec
        wops = self.wops
        lim = self.lim
        statics = self.statics
        sim = self.sim
        budget = self.budget
        recs = self.recs
        popleft = self.popleft
        rw = self.rw
        cw = self.cw
        pc = w.pc
        moved = False  # pc advanced by the inline replay below and not yet written to rw.pc
        while len(wst) < lim and not self.wdone:
            st = statics[pc]
            if st.clock:  # executed at issue, so %clock reads the issue cycle
                if not wst:
                    wst.append(st)
                    wrec.append(None)
                    self.wops.append(None)
                    self.dirty = True
                    self.fetch_at = INF
                    self.block_reason = "scoreboard"
                break
            inline = False
            setbar = False
            bid = 0
            ctl: int | None = None
            if recs is not None and recs and not st.cstore:
                ctl = recs[0].ctl
                if ctl is None or ctl != _BARRIER:
                    inline = True
                else:  # a barrier: its id as ReplayWarp.step found it at this pc before (bar_ids), if it did
                    b = self.bar_ids.get(pc)
                    if b is not None:
                        bid = b
                        inline = setbar = True
            if inline:  # ReplayWarp.step (ClockWarp.step), inline; rw.pc is written when fill stops or calls out
                assert rw is not None and popleft is not None
                rec = popleft()
                if setbar:
                    rw.bar_id = bid
                pc = rec.next_pc
                moved = True
                wdone = pc == -1
                if wdone:  # (rw.done was False: it had records)
                    self.wdone = rw.done = True
                if cw is not None:
                    self.ccount += 1
            else:
                if moved:
                    assert rw is not None
                    rw.pc = pc
                    moved = False
                if cw is not None:
                    cw.count = self.ccount
                rec = w.step()
                if cw is not None:
                    self.ccount = cw.count
                wdone = self.wdone = w.done
                ctl = rec.ctl
                if ctl is not None and ctl == _BARRIER and rw is not None:  # ReplayWarp.step's id of this barrier
                    self.bar_ids[pc] = rw.bar_id
                pc = rec.next_pc
            self.dirty = True
            n = budget.count = budget.count + 1
            if n > budget.limit:
                if moved:
                    assert rw is not None
                    rw.pc = pc
                    moved = False
                if cw is not None:
                    cw.count = self.ccount
                sim.count_instruction_overflow(st.index)
            wst.append(st)
            wrec.append(rec)
            wops.append(None)
            if not ((ctl is not None and ctl != 0) or st.fetch_stop):
                continue
            if st.is_bra:
                self.fetch_at = INF  # until the branch issues (see issue)
                self.block_reason = "branch"
                break
            if ctl == _BARRIER and st.bar:
                self.fetch_at = INF  # until the CTA barrier releases
                self.block_reason = "barrier"
                break
            if ctl == _EXIT and wdone:
                break
            if st.tma:  # a bulk copy: fetch again when the TMA unit releases the warp (see _bulk)
                self.fetch_at = INF
                self.block_reason = "tma"
                break
            if ctl == _YIELD:  # an mbarrier wait found its phase incomplete: fetch again when one changes
                self.fetch_at = INF
                self.block_reason = "mbarrier"
                self.cta.mbar_waiters.append(self)
                break
        if moved:
            assert rw is not None
            rw.pc = pc

    # -- the earliest cycle something can issue -------------------------------------------------------
    def recompute(self, now: int) -> int:
        """The cycle of the first issuable instruction; its window index, stall reason and PTX line go to
        `cj`, `creason`, `cline` (the answer, with the cycle in `ct`: fields of the compiled core, no tuple).

        The scheduler reuses the answer while not `dirty` and before `valid_until`: units only get busier
        and the warp's own state marks it dirty, so a cached future cycle is at worst optimistic and gets
        re-checked then."""
        win = self.wst
        lim = self.lim
        if self.fetch_at <= now and len(win) < lim and not self.wdone:
            self.fill(now)
        if not win:
            if self.dirty:
                self.dirty = False
                self.plan = []
            self.valid_until = -1  # not cached: recomputed (cheaply) on every call
            self.cj = -1
            self.cline = 0
            if self.wdone:
                self.creason = "done"
                return INF
            self.creason = self.block_reason
            return self.fetch_at
        best_t: int = INF
        brow: Row | None = None  # the best row so far (the first of the earliest: older entries win ties)
        tops: int
        if self.dirty:  # a new plan, each row evaluated as it is made
            self.dirty = False
            if len(win) == 1:  # independent() of a window of one entry
                free = _FIRST
            else:
                key = tuple(win)
                got = self.indep.get(key)
                if got is None:
                    got = self.indep[key] = independent(key)
                free = got
            # the plan: per independent window entry what does not change until this warp issues again:
            # the cycle its operands are ready (scoreboard) with the reason (the first source register
            # reaching it), its pipe unit, and the cycle its cp.async wait is satisfied. An entry's
            # operand-ready cycle does not change while it stays independent in the window (the
            # instructions that issue meanwhile write none of its sources: an older writer would make it
            # dependent, a younger one is itself held by the read, WAR), so it is kept (`wops`) from the
            # first plan that sees it independent; a wgmma / bulk wait_group's group part is recomputed.
            # An entry is left out when an older one on the same unit is ready no later (operands and
            # cp.async wait): it can never issue first, as the older one wins every tie (the earliest
            # such operand-ready cycle per unit: PipeUnit.mmin, valid while PipeUnit.mgen is this plan's).
            wops = self.wops
            units = self.units
            core = self.core
            gen = core.plan_gen = core.plan_gen + 1
            plan: list[Row] = []
            for j in free:
                st = win[j]
                row = wops[j]
                if row is None:
                    tops = 0
                    why = "pipe_busy"
                    ready = self.ready
                    for r in st.src_ids:
                        rt = ready[r]
                        if rt > tops:
                            tops = rt
                            why = "memory" if self.ready_mem[r] else "scoreboard"
                    row = wops[j] = Row(tops, why, units[st.index], st.line)
                else:
                    tops = row.otops
                    why = row.owhy
                unit = row.unit
                cpk = st.cpk
                if cpk and (cpk == WG_WAIT or cpk == BULK_WAIT):  # wait_group N: all but the newest N groups complete
                    g = self.wg_groups if cpk == WG_WAIT else self.bulk_groups
                    if len(g) > st.wg_n and max(g[: len(g) - st.wg_n]) > tops:
                        tops = max(g[: len(g) - st.wg_n])
                        why = "scoreboard"
                if unit.mgen == gen and unit.mmin <= tops:
                    continue
                gt: int = 0
                if cpk and (cpk == CP_WAIT or cpk == CP_WAIT_ALL):
                    rec = self.wrec[j]
                    need = self.groups_done[: rec.landed if rec is not None else 0]
                    if cpk == CP_WAIT_ALL:
                        need = need + [self.open_done]
                    gt = max(need, default=0)
                if gt == 0:
                    unit.mgen = gen
                    unit.mmin = tops
                row.tops = tops
                row.why = why
                row.gt = gt
                row.j = j
                plan.append(row)
                t = tops if tops > now else now  # evaluated as recompute's loop below does
                uf = unit.free
                if uf > t:
                    t = uf
                if gt > t:
                    t = gt
                if t < best_t:
                    best_t = t
                    brow = row
            self.plan = plan
        else:
            for row in self.plan:
                tops = row.tops
                t = tops if tops > now else now
                uf = row.unit.free
                if uf > t:
                    t = uf
                gt = row.gt
                if gt > t:
                    t = gt
                if t < best_t:
                    best_t = t
                    brow = row
                    if t <= now:
                        break
        if brow is None:
            self.cj = -1
            self.creason = "scoreboard"
            self.cline = win[0].line
        else:
            # the reason of the term that set its cycle, checked in the order operands, unit, cp.async wait
            tops = brow.tops
            unit = brow.unit
            reason = brow.why
            if tops <= now:
                t = now
                reason = "pipe_busy"
            else:
                t = tops
            if unit.free > t:
                t = unit.free
                reason = "pipe_busy"
            if brow.gt > t:
                reason = "memory"
            self.cj = brow.j
            self.creason = reason
            self.cline = brow.line
            self.cunit = unit
        self.ct = best_t
        # valid while no unit gets busier (optimistic otherwise) and nothing new can be fetched
        fa = self.fetch_at
        if fa < best_t and len(win) < lim and not self.wdone:
            self.valid_until = fa
        else:
            self.valid_until = best_t
        return best_t

    # -- issue ---------------------------------------------------------------------------------------
    def issue(self, j: int, t: int) -> None:
        self.dirty = True
        st = self.wst.pop(j)
        rec = self.wrec.pop(j)
        self.wops.pop(j)
        w = self.w
        if rec is None:  # a %clock read: execute now, at its issue cycle
            cw = self.cw
            if cw is not None:
                cw.count = self.ccount
            rec = w.step(t)
            if cw is not None:
                self.ccount = cw.count
            self.wdone = w.done
            budget = self.budget
            budget.count += 1
            if budget.count > budget.limit:
                self.sim.count_instruction_overflow(st.index)
            self.fetch_at = t + 1
        u = self.units[st.index]
        occ = st.occ
        done = t + st.lat_total
        if st.plain:  # no memory access, async group, TMA, mbarrier signal, branch or barrier
            u.free = t + occ
            u.busy += occ
            bt = u.busy_at
            bt[t] = bt.get(t, 0) + occ
            ready = self.ready
            ready_mem = self.ready_mem
            for d in st.dst_ids:
                ready[d] = done
                ready_mem[d] = False
        else:
            done = self._issue_special(st, rec, u, occ, done, t)
        ld = done if done > t + 1 else t + 1
        if ld > self.last_done:
            self.last_done = ld
        if self.tracing:
            self.core.stats.issued(self, st, t, done)
        if self.wdone and not self.wst:
            self.finished = True
            self.core.warp_finished(self)

    def _issue_special(self, st: St, rec: Executed, u: PipeUnit, occ: int, done: int, t: int) -> int:
        """issue() of an instruction that is not St.plain; returns its completion cycle."""
        core = self.core
        stats = core.stats
        cpk = st.cpk
        addrs = rec.addrs
        if st.mem and addrs is not None:
            done, extra = core.mem.access(t, rec.space, addrs, rec.size, rec.direction, st.cache_op)
            if extra:
                pc = core.hw.shared.pass_cycles
                occ += extra * pc  # replays hold the LSU path (shared.pass_cycles)
                stats.conflict(st.line, extra, extra * pc)
            if cpk == CP_COPY and done > self.open_done:
                self.open_done = done
        if cpk >= WG_ISSUE:
            done = self._wgmma(st, cpk, t, u, done) if cpk < BULK_COMMIT else self._bulk_group(st, cpk, done)
        if st.tma:
            self.fetch_at = self._bulk(t, rec.bulk) if rec.bulk else t + 1
        if st.mbar_signal:
            wake_mbarrier_waiters(self.cta, t + st.lat_total)
        u.free = t + occ
        u.busy += occ
        bt = u.busy_at
        bt[t] = bt.get(t, 0) + occ
        is_mem = st.mem
        ready = self.ready
        ready_mem = self.ready_mem
        for d in st.dst_ids:
            ready[d] = done
            ready_mem[d] = is_mem
        if cpk != CP_NONE and (cpk == CP_COMMIT or cpk == CP_WAIT_ALL):
            self.groups_done.append(self.open_done)
            self.open_done = 0
        if st.is_bra:
            self._branch(st, rec.next_pc, t)
        if st.bar and rec.ctl != _ARRIVE:
            core.barrier_arrive(self, t)
        return done

    def _wgmma(self, st: St, cpk: int, t: int, u: PipeUnit, done: int) -> int:
        """A wgmma issue queues its MACs (St.wg_exec) on the unit after St.occ issue cycles and completes
        wgmma.latency cycles after them; commit_group closes the open group; wait_group N (which issued
        only once its groups completed, see recompute) forgets the groups it waited for. Returns the
        instruction's completion cycle."""
        if cpk == WG_ISSUE:
            start = max(t + st.occ, u.queued)
            u.queued = start + st.wg_exec
            u.busy += st.wg_exec
            done = u.queued + st.lat_total - st.occ - st.wg_exec
            if done > self.wg_open:
                self.wg_open = done
        elif cpk == WG_COMMIT:
            self.wg_groups.append(self.wg_open)
            self.wg_open = 0
        elif cpk == WG_WAIT and len(self.wg_groups) > st.wg_n:
            del self.wg_groups[: len(self.wg_groups) - st.wg_n]
        return done

    def _bulk(self, t: int, copies: list) -> int:
        """Bulk (TMA) copies go to the core's TMA unit (sim/timing/tma.py); stores join the open bulk group.
        Returns the cycle the unit releases the warp (tma.queue) and its fetch goes on."""
        done, release = issue_copies(self.core, self, t, copies)
        if done > self.last_done:
            self.last_done = done
        if not copies[0].load and done > self.bulk_open:
            self.bulk_open = done
        return max(release, t + 1)

    def _bulk_group(self, st: St, cpk: int, done: int) -> int:
        """cp.async.bulk.commit_group closes the open group; wait_group N (issued once its groups
        completed, see recompute) forgets the groups it waited for."""
        if cpk == BULK_COMMIT:
            self.bulk_groups.append(self.bulk_open)
            self.bulk_open = 0
        elif len(self.bulk_groups) > st.wg_n:
            del self.bulk_groups[: len(self.bulk_groups) - st.wg_n]
        return done

    def _branch(self, st: St, next_pc: int, t: int) -> None:
        """branch.predictor: none waits for the branch (Pipe latency) then refetches
        (branch.flush_penalty); a static prediction costs nothing when right and
        branch.flush_penalty cycles when wrong (counted from the branch's issue)."""
        b = self.core.hw.branch
        ins = st.ins
        taken = next_pc != ins.index + 1
        if b.predictor == "none":
            self.fetch_at = t + st.lat + b.flush_penalty
            self.block_reason = "branch"
            return
        if ins.guard is None:
            predicted = taken  # unconditional: the target is known at decode
        elif b.predictor == "not_taken":
            predicted = False
        else:  # backward_taken
            predicted = ins.info["target"] <= ins.index
        if predicted == taken:
            self.fetch_at = t + 1
        else:
            self.fetch_at = t + 1 + b.flush_penalty
            self.block_reason = "flush"
            self.core.stats.flush(st, b.flush_penalty)
