"""Timing state of one warp: a fetch window over the functional warp, a register scoreboard,
branch fetch blocking, cp.async group completion, and issue of one instruction.

Functional execution happens at fetch (values are real, program order per warp); timing decides
when each fetched instruction issues. A warp keeps up to `lookahead` fetched, not yet issued
instructions and may issue a younger one past an older stalled one when they are independent
(RAW/WAW/WAR on registers and predicates, memory order when either is a store). This stands for
the static scheduling ptxas does when it turns PTX into SASS; lookahead=1 is strict in-order issue.
Branches, barriers, fences, %clock reads and cp.async commit/wait issue only as the oldest.
"""

from __future__ import annotations

from sim.functional.ops_mem import BARRIER, EXIT
from sim.timing.static import St

INF = float("inf")


class Entry:
    __slots__ = ("st", "acc", "next_pc", "need_groups", "deferred")

    def __init__(self, st: St, acc, next_pc: int, need_groups: int, deferred: bool = False):
        self.st = st
        self.acc = acc
        self.next_pc = next_pc
        self.need_groups = need_groups
        self.deferred = deferred


class WarpT:
    def __init__(self, w, cta_t, sched, core, gid: int):
        self.w = w
        self.cta = cta_t
        self.sched = sched
        self.core = core
        self.gid = gid  # global warp id (trace track, GTO age)
        self.window: list[Entry] = []
        self.ready: dict[str, int] = {}
        self.ready_mem: dict[str, bool] = {}
        self.fetch_at: float = core.now + core.hw.branch.frontend_depth  # branch.frontend_depth: fetch to issue
        self.block_reason = "frontend"
        self.finished = False
        self.last_done = 0
        self.open_done = 0
        self.groups_done: list[int] = []
        self.issued = 0
        self.cached: tuple = (-1, -1, "", 0)  # last earliest() answer, valid while nothing changed
        self.dirty = True
        self.free_ok: list[int] = []  # window indices not blocked by an older unissued entry
        w.clock_fn = None

    # -- fetch -------------------------------------------------------------------------------------
    def fill(self, now: int) -> None:
        w = self.w
        win = self.window
        lim = self.core.lookahead
        statics = self.core.statics
        while len(win) < lim and not w.done and self.fetch_at <= now:
            st = statics[w.pc]
            if st.clock:  # executed at issue, so %clock reads the issue cycle
                if not win:
                    win.append(Entry(st, None, -1, 0, deferred=True))
                    self.dirty = True
                    self.fetch_at = INF
                    self.block_reason = "scoreboard"
                break
            _, ctl = w.step()
            self.dirty = True
            self.core.count_instruction()
            win.append(Entry(st, w.acc, w.pc, w.waited_groups))
            if st.branch and st.ins.opcode == "bra":
                self.fetch_at = INF  # until the branch issues (see issue)
                self.block_reason = "branch"
                break
            if ctl == BARRIER and st.bar and not w.bar_arrive_only:
                self.fetch_at = INF  # until the CTA barrier releases
                self.block_reason = "barrier"
                break
            if ctl == EXIT and w.done:
                break

    # -- the earliest cycle something can issue -------------------------------------------------------
    def earliest(self, now: int) -> tuple[float, int, str, int]:
        """(cycle, window index, stall reason, PTX line) of the first issuable instruction.

        The answer is cached: units only get busier and the warp's own state marks it dirty, so a
        cached future cycle is at worst optimistic and gets re-checked then."""
        c = self.cached
        if not self.dirty and c[0] > now and (self.fetch_at > now or self.w.done
                                               or len(self.window) >= self.core.lookahead):
            return c
        self.fill(now)
        win = self.window
        if self.dirty:
            self.free_ok = self._independent()
            self.dirty = False
        if not win:
            if self.w.done:
                return INF, -1, "done", 0
            return self.fetch_at, -1, self.block_reason, 0
        best_t: float = INF
        best = (-1, "scoreboard", win[0].st.line)
        units = self.core.units
        sidx = self.sched.index
        for j in self.free_ok:
            e = win[j]
            st = e.st
            t = now
            reason = "pipe_busy"
            ready = self.ready
            for r in st.rsrcs:
                rt = ready.get(r, 0)
                if rt > t:
                    t = rt
                    reason = "memory" if self.ready_mem.get(r) else "scoreboard"
            ulist = units[st.pipe]
            u = ulist[sidx % len(ulist)]
            if u.free > t:
                t = u.free
                reason = "pipe_busy"
            if st.cp in ("wait", "wait_all"):
                need = self.groups_done[: e.need_groups]
                if st.cp == "wait_all":
                    need = need + [self.open_done]
                gt = max(need, default=0)
                if gt > t:
                    t, reason = gt, "memory"
            if t < best_t:
                best_t = t
                best = (j, reason, st.line)
                if t <= now:
                    break
        self.cached = (best_t, best[0], best[1], best[2])
        return self.cached

    def _independent(self) -> list[int]:
        win = self.window
        out = []
        for j, e in enumerate(win):
            st = e.st
            if j and st.ordered:
                break
            blocked = False
            for i in range(j):
                o = win[i].st
                if o.ordered or (o.dsts and (not o.dsts.isdisjoint(st.srcs) or not o.dsts.isdisjoint(st.dsts))) \
                        or (st.dsts and not st.dsts.isdisjoint(o.srcs)) or (o.mem and st.mem and (o.store or st.store)):
                    blocked = True
                    break
            if not blocked:
                out.append(j)
        return out

    # -- issue ---------------------------------------------------------------------------------------
    def issue(self, j: int, t: int) -> None:
        core = self.core
        self.dirty = True
        e = self.window.pop(j)
        st = e.st
        if e.deferred:  # a %clock read: execute now, at its issue cycle
            self.w.clock_fn = lambda: t
            self.w.step()
            self.w.clock_fn = None
            core.count_instruction()
            self.fetch_at = t + 1
        ulist = core.units[st.pipe]
        u = ulist[self.sched.index % len(ulist)]
        occ = u.occupancy(st.ops) + st.rf_extra
        done = t + st.lat + st.rf_extra
        if st.mem and e.acc is not None:
            done, extra = core.mem.access(t, e.acc, st.cache_op, st.atomic)
            if extra:
                occ += extra * core.hw.shared.pass_cycles  # replays hold the LSU path (shared.pass_cycles)
                core.stats.conflict(st.line, extra, extra * core.hw.shared.pass_cycles)
            if st.cp == "copy":
                self.open_done = max(self.open_done, done)
        u.take(t, occ)
        core.stats.busy(st.pipe, t, occ)
        is_mem = st.mem
        for d in st.dsts:
            self.ready[d] = done
            self.ready_mem[d] = is_mem
        if st.cp == "commit":
            self.groups_done.append(self.open_done)
            self.open_done = 0
        elif st.cp == "wait_all":
            self.groups_done.append(self.open_done)
            self.open_done = 0
        if st.branch and st.ins.opcode == "bra":
            self._branch(st, e, t)
        if st.bar and not self.w.bar_arrive_only:
            core.barrier_arrive(self, t)
        self.issued += 1
        self.last_done = max(self.last_done, done, t + 1)
        core.stats.issued(self, st, t, done)
        if self.w.done and not self.window:
            self.finished = True
            core.warp_finished(self)

    def _branch(self, st: St, e: Entry, t: int) -> None:
        """branch.predictor: none waits for the branch (Pipe latency) then refetches
        (branch.flush_penalty); a static prediction costs nothing when right and
        branch.flush_penalty cycles when wrong (counted from the branch's issue)."""
        b = self.core.hw.branch
        ins = st.ins
        taken = e.next_pc != ins.index + 1
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
