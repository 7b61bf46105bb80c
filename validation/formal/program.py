"""Static structure of a kernel for the verifier: basic blocks, dominators, natural loops,
post-dominators (reconvergence), liveness and a divergence (thread-uniformity) analysis.

Pseudo-registers model the synchronisation state of one thread so that the symbolic executor can
treat them like ordinary registers (havoc, induction, invariants):

    %%bc    barriers executed so far
    %%gc    cp.async groups committed so far
    %%done  groups known complete by this thread's waits
    %%vis   %%done as it was at the most recent barrier (what the whole CTA may read)
    %%wgc   wgmma groups committed so far (an issued wgmma belongs to group %%wgc)
    %%wdone wgmma groups retired by this thread's wgmma.wait_group
    %%wvis  %%wdone as it was at the most recent barrier
    %%pf    fence.proxy.async executed so far
    %%pfg   %%done as it was at the most recent fence.proxy.async (cp.async groups fenced)
    %%txa   mbarrier of this thread's most recent arrive.expect_tx (or expect_tx)
    %%txb   bytes that expect_tx announced minus those its bulk copies / complete_tx signalled since
    %%txn   expect_tx executed so far; %%txl the line of the most recent one
    %%mwa   mbarrier of this thread's most recent successful try_wait / test_wait (NO_BARRIER before any)
    %%mwp   its parity (2 when the wait named a state, not a parity)
    %%mws   barriers this thread has waited on, one bit per 8-byte slot ((address >> 3) % 32)
    %%bgc   bulk (TMA store) groups committed so far (a bulk store belongs to group %%bgc)
    %%bdone bulk groups whose shared-memory reads this thread's cp.async.bulk.wait_group(.read) saw done
    %%bvis  %%bdone as it was at the most recent barrier
    %%mwe   1 when its most recent successful wait waited on parity 1 of a barrier it had not waited on
            before, in the first iteration of every enclosing loop (a wait for the phase before phase 0,
            which returns at once): a reader after it has not waited for the first copy
    %%bn    named-barrier arrivals of this thread (bar.sync/bar.arrive/bar.red id, count with a count below
            the CTA's threads: validation/formal/barriers.py); %%bns %%bn at its most recent named wait
            (bar.sync / bar.red, not bar.arrive). %%bc counts only the barriers of the whole CTA.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim import isa
from sim.errors import PtxError
from sim.functional.cfg import EXIT, Block, build_cfg, immediate_postdominators
from sim.ptx.ir import Instruction, Kernel, Operand

BC, GC, DONE, VIS = "%%bc", "%%gc", "%%done", "%%vis"
WGC, WDONE, WVIS, PF, PFG = "%%wgc", "%%wdone", "%%wvis", "%%pf", "%%pfg"
TXA, TXB, TXN, TXL, MWA, MWP = "%%txa", "%%txb", "%%txn", "%%txl", "%%mwa", "%%mwp"
MWS, MWE = "%%mws", "%%mwe"
BGC, BDONE, BVIS = "%%bgc", "%%bdone", "%%bvis"
BN, BNS = "%%bn", "%%bns"
PSEUDO = (BC, GC, DONE, VIS, WGC, WDONE, WVIS, PF, PFG, TXA, TXB, TXN, TXL, MWA, MWP, MWS, MWE, BGC, BDONE, BVIS,
          BN, BNS)
NID = "%%nid"  # not a register: the thread's named-barrier id in every access's counters (barriers.py)
NO_BARRIER = 0xFFFFFFFF  # %%mwa before the first wait: no shared address
PSEUDO_INIT = {MWA: NO_BARRIER}
_TX = {TXA, TXB, TXN, TXL}
# counters of events of one thread: assumed to stay below 2^31 (NO_WRAP), so that "later" is "greater"
COUNTERS = (BC, GC, DONE, VIS, WGC, WDONE, WVIS, PF, PFG, TXN, BGC, BDONE, BVIS, BN, BNS)
NO_WRAP = 1 << 31
# (a, b): a <= b in every state (a counts what b counted earlier: groups done <= committed, ...)
ORDERED = ((DONE, GC), (VIS, DONE), (WDONE, WGC), (WVIS, WDONE), (PFG, DONE), (BDONE, BGC), (BVIS, BDONE),
           (BNS, BN))
_MW = {MWA, MWP, MWS, MWE}

NONUNIFORM_SREGS = ("%tid", "%laneid", "%warpid", "%clock", "%clock64", "%clock_hi", "%smid",
                    "%globaltimer", "%globaltimer_lo", "%globaltimer_hi", "%lanemask_eq",
                    "%lanemask_le", "%lanemask_lt", "%lanemask_ge", "%lanemask_gt")
_ASYNC_DEFS_USES = {"commit": ({GC}, {GC}), "wait": ({DONE}, {GC, DONE}), "wait_all": ({DONE, GC}, {GC, DONE}),
                    "copy": (set(), {GC})}
_BULK_DEFS_USES = {"commit": ({BGC}, {BGC}), "wait": ({BDONE}, {BGC, BDONE}), "tensor_store": (set(), {BGC}),
                   "store": (set(), {BGC})}
_WGMMA_DEFS_USES = {"commit": ({WGC}, {WGC}), "wait": ({WDONE}, {WGC, WDONE}), "issue": (set(), {WGC}),
                    "fence": (set(), set())}


def barrier_operands(ins: Instruction) -> tuple[Operand | None, Operand | None]:
    """(id, thread count) of bar / barrier .sync, .arrive, .red (bar.red's result and predicate dropped);
    None where absent (bar.sync without operands is barrier 0 of every thread)."""
    ops = list(ins.operands)
    if "red" in ins.mods:
        ops = ops[1:-1]
    if "warp" in ins.mods or "cluster" in ins.mods:
        return None, None
    return (ops[0] if ops else None), (ops[1] if len(ops) > 1 else None)


def barrier_kind(ins: Instruction, nthreads: int | None) -> str:
    """"full" (a barrier of every thread of the CTA: no thread count, or the CTA's, or a cluster wait),
    "named" (a thread count that may be fewer: bar.sync/bar.red id, count, and every bar.arrive: the
    threads that arrive are counted, validation/formal/barriers.py), "cluster_arrive", or "" (no CTA
    barrier: bar.warp.sync, not a barrier)."""
    role = isa.barrier_role(ins)
    if role not in ("cta", "arrive"):
        return ""
    if "cluster" in ins.mods:
        return "full" if role == "cta" else "cluster_arrive"
    if role == "arrive":
        return "named"
    _, count = barrier_operands(ins)
    if count is None or (count.kind == "imm" and nthreads is not None and count.value == nthreads):
        return "full"
    return "named"


def pseudo_defs_uses(ins: Instruction, bar_kind: str | None = None) -> tuple[set[str], set[str]]:
    """The pseudo-registers ``ins`` writes and reads; ``bar_kind`` its barrier_kind (the structure's, which
    knows the launch's threads and the ids used with a thread count)."""
    bk = barrier_kind(ins, None) if bar_kind is None else bar_kind
    if bk == "full":
        return {BC, VIS, WVIS, BVIS}, {BC, DONE, WDONE, BDONE}
    if bk == "named":
        return ({BN, BNS} if isa.barrier_role(ins) == "cta" else {BN}), {BN}
    bulk = isa.bulk_role(ins)
    if bulk in _BULK_DEFS_USES:
        d, u = _BULK_DEFS_USES[bulk]
        return set(d), set(u)
    role = isa.async_role(ins)
    if role:
        d, u = _ASYNC_DEFS_USES[role]
        return set(d), set(u)
    wg = isa.wgmma_role(ins)
    if wg:
        d, u = _WGMMA_DEFS_USES[wg]
        return set(d), set(u)
    if isa.fence_proxy(ins) == "async":
        return {PF, PFG}, {PF, DONE}
    mb = isa.mbarrier_op(ins)
    if mb in ("expect_tx", "complete_tx"):
        return set(_TX), set(_TX)
    if mb == "wait":
        return set(_MW), set(_MW)
    if is_bulk_load(ins):
        return {TXB}, {TXB, TXA}
    return set(), set()


def is_bulk_store(ins: Instruction) -> bool:
    """cp.async.bulk(.tensor) shared -> global in a bulk group, or that group's commit / wait_group."""
    return isa.bulk_role(ins) in _BULK_DEFS_USES


def is_bulk_load(ins: Instruction) -> bool:
    """cp.async.bulk(.tensor) into shared memory that completes transactions on an mbarrier."""
    return "bulk" in ins.mods and "mbarrier::complete_tx::bytes" in ins.mods


def instr_defs_uses(ins: Instruction, bar_kind: str | None = None) -> tuple[set[str], set[str]]:
    d, u = pseudo_defs_uses(ins, bar_kind)
    defs = set(ins.dst_regs) | d
    uses = set(ins.src_regs) | u
    if ins.guard is not None:
        uses |= set(ins.dst_regs) | d  # a guarded write keeps the old value when the guard is false
        uses.add(ins.guard)
    return defs, uses


@dataclass
class Loop:
    header: int
    body: set[int]
    latches: list[int]
    parent: int | None = None  # header of the enclosing loop
    depth: int = 1
    has_barrier: bool = False


class KernelStructure:
    EXIT = EXIT

    def __init__(self, k: Kernel, nthreads: int | None = None):
        self.k = k
        self.nthreads = nthreads  # threads of the CTA when the launch is known (tells full from named barriers)
        # constant ids used with a thread count below the CTA's or by bar.arrive: every barrier with such an id
        # is named (bar.arrive 1, 128 + bar.sync 1, 128 in a CTA of 128 threads: the arrivals are counted)
        self.named_ids: set[int] = set()
        for ins in k.body:
            idop, _ = barrier_operands(ins)
            if barrier_kind(ins, nthreads) == "named" and idop is not None and idop.kind == "imm":
                self.named_ids.add(int(idop.value))
        self.cfg = build_cfg(k)
        self.blocks: list[Block] = self.cfg.blocks
        self.block_of: dict[int, int] = self.cfg.block_of
        nb = len(self.blocks)
        self.nb = nb
        self._dominators()
        self._loops()
        self._postdominators()
        self._liveness()

    # ------------------------------------------------------------------ dominators and loops
    def _dominators(self) -> None:
        nb = self.nb
        # reachable blocks in DFS order
        order: list[int] = []
        seen = set()
        stack = [(0, 0)] if nb else []
        post: list[int] = []
        while stack:
            b, i = stack.pop()
            if i == 0:
                if b in seen:
                    continue
                seen.add(b)
                order.append(b)
            succs = [s for s, _, _ in self.blocks[b].succ if s != self.EXIT]
            if i < len(succs):
                stack.append((b, i + 1))
                if succs[i] not in seen:
                    stack.append((succs[i], 0))
            else:
                post.append(b)
        self.reachable = seen
        self.rpo = list(reversed(post))
        pos = {b: i for i, b in enumerate(self.rpo)}
        idom: dict[int, int] = {0: 0} if nb else {}

        def intersect(a: int, b: int) -> int:
            while a != b:
                while pos[a] > pos[b]:
                    a = idom[a]
                while pos[b] > pos[a]:
                    b = idom[b]
            return a

        changed = True
        while changed:
            changed = False
            for b in self.rpo[1:]:
                preds = [p for p in self.blocks[b].pred if p in idom]
                if not preds:
                    continue
                new = preds[0]
                for p in preds[1:]:
                    new = intersect(p, new)
                if idom.get(b) != new:
                    idom[b] = new
                    changed = True
        self.idom = idom

    def dominates(self, a: int, b: int) -> bool:
        while True:
            if a == b:
                return True
            if b == 0 or b not in self.idom:
                return False
            nb = self.idom[b]
            if nb == b:
                return False
            b = nb

    def _loops(self) -> None:
        self.loops: dict[int, Loop] = {}
        self.back_edges: set[tuple[int, int]] = set()
        for b in self.rpo:
            for s, _, _ in self.blocks[b].succ:
                if s == self.EXIT:
                    continue
                if self.dominates(s, b):
                    self.back_edges.add((b, s))
                    lp = self.loops.setdefault(s, Loop(s, {s}, []))
                    lp.latches.append(b)
                    stack = [b]
                    while stack:
                        x = stack.pop()
                        if x in lp.body:
                            continue
                        lp.body.add(x)
                        stack.extend(self.blocks[x].pred)
        # irreducible control flow: a retreating edge in RPO that is not a back edge
        pos = {b: i for i, b in enumerate(self.rpo)}
        for b in self.rpo:
            for s, _, _ in self.blocks[b].succ:
                if s != self.EXIT and s in pos and pos[s] <= pos[b] and (b, s) not in self.back_edges:
                    ins = self.k.body[self.blocks[b].end - 1]
                    raise PtxError("irreducible control flow (a loop with two entries) is not supported "
                                   "by the verifier", self.k.file, ins.line)
        # nesting: parent = smallest enclosing loop
        for h, lp in self.loops.items():
            best = None
            for h2, lp2 in self.loops.items():
                if h2 != h and h in lp2.body and lp.body <= lp2.body:
                    if best is None or len(lp2.body) < len(self.loops[best].body):
                        best = h2
            lp.parent = best
        for lp in self.loops.values():
            d, p = 1, lp.parent
            while p is not None:
                d += 1
                p = self.loops[p].parent
            lp.depth = d
            lp.has_barrier = any(self.is_full_barrier(self.k.body[i]) for b in lp.body
                                 for i in range(self.blocks[b].start, self.blocks[b].end))
        self.loop_of: dict[int, int | None] = {}
        for b in range(self.nb):
            inner = None
            for h, lp in self.loops.items():
                if b in lp.body and (inner is None or len(lp.body) < len(self.loops[inner].body)):
                    inner = h
            self.loop_of[b] = inner

    def barrier_kind(self, ins: Instruction) -> str:
        """barrier_kind, with a whole-CTA count on an id that is also used as a named barrier named too."""
        kind = barrier_kind(ins, self.nthreads)
        if kind == "full" and self.named_ids:
            idop, count = barrier_operands(ins)
            if count is not None and idop is not None and idop.kind == "imm" and int(idop.value) in self.named_ids:
                return "named"
        return kind

    def is_full_barrier(self, ins: Instruction) -> bool:
        return self.barrier_kind(ins) == "full"

    def is_named_barrier(self, ins: Instruction) -> bool:
        return self.barrier_kind(ins) == "named"

    def enclosing_loops(self, b: int) -> list[int]:
        """Headers of the loops around block b, outermost first."""
        out = []
        h = self.loop_of.get(b)
        while h is not None:
            out.append(h)
            h = self.loops[h].parent
        return list(reversed(out))

    # ------------------------------------------------------------------ post-dominators
    def _postdominators(self) -> None:
        nb = self.nb
        self.ipdom: dict[int, int] = {b: (ip if ip != nb else self.EXIT) for b, ip in
                                      enumerate(immediate_postdominators(self.cfg.exit_succ()))}

    def divergence_region(self, b: int) -> set[int]:
        """Blocks reachable from block b's successors before its immediate post-dominator."""
        stop = self.ipdom[b]
        region: set[int] = set()
        stack = [s for s, _, _ in self.blocks[b].succ if s != self.EXIT]
        while stack:
            x = stack.pop()
            if x == stop or x in region or x == self.EXIT:
                continue
            region.add(x)
            stack.extend(s for s, _, _ in self.blocks[x].succ if s != self.EXIT)
        return region

    # ------------------------------------------------------------------ liveness
    def block_defs_uses(self, b: int) -> tuple[set[str], set[str]]:
        defs: set[str] = set()
        uses: set[str] = set()
        for i in range(self.blocks[b].start, self.blocks[b].end):
            d, u = instr_defs_uses(self.k.body[i], self.barrier_kind(self.k.body[i]))
            uses |= u - defs
            defs |= d
        return defs, uses

    def _liveness(self) -> None:
        du = [self.block_defs_uses(b) for b in range(self.nb)]
        live_in: list[set[str]] = [set() for _ in range(self.nb)]
        changed = True
        while changed:
            changed = False
            for b in reversed(self.rpo):
                out: set[str] = set()
                for s, _, _ in self.blocks[b].succ:
                    if s != self.EXIT:
                        out |= live_in[s]
                d, u = du[b]
                new = u | (out - d)
                if new != live_in[b]:
                    live_in[b] = new
                    changed = True
        self.live_in = live_in
        self.block_du = du

    def loop_defs(self, h: int) -> set[str]:
        out: set[str] = set()
        for b in self.loops[h].body:
            out |= self.block_du[b][0]
        return out

    def carried(self, h: int) -> set[str]:
        return self.live_in[h] & self.loop_defs(h)

    # ------------------------------------------------------------------ divergence
    def divergence(self) -> set[str]:
        """Registers (and pseudo-registers) whose value may differ between threads of a CTA at the
        same dynamic point (same iterations of the enclosing loops)."""
        body = self.k.body
        nonuni: set[str] = set()
        div_blocks: set[int] = set()
        changed = True
        while changed:
            changed = False
            for b in self.rpo:
                bl = self.blocks[b]
                for i in range(bl.start, bl.end):
                    ins = body[i]
                    defs, uses = instr_defs_uses(ins, self.barrier_kind(ins))
                    if not defs:
                        continue
                    bad = b in div_blocks or bool(uses & nonuni)
                    if not bad:
                        if isa.is_nonuniform(ins) and ins.dst_regs:
                            bad = True
                        for op in ins.operands[1:] if ins.dst_regs else ins.operands:
                            if op.kind == "sreg" and op.name.split(".")[0] in NONUNIFORM_SREGS:
                                bad = True
                    if bad and not defs <= nonuni:
                        nonuni |= defs
                        changed = True
                last = body[bl.end - 1]
                if last.guard is not None and last.guard in nonuni and len(bl.succ) > 1:
                    region = self.divergence_region(b)
                    if not region <= div_blocks:
                        div_blocks |= region
                        changed = True
            # registers defined in a divergent region and live after it are non-uniform too:
            # (covered because every def inside div_blocks is marked)
        self.div_blocks = div_blocks
        return nonuni
