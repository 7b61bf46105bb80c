"""Symbolic execution of one PTX thread over bit-vectors (Z3), with sound loop summaries.

One *symbolic thread* T stands for every thread of the launch: its %tid / %ctaid are Z3 constants
constrained only by the launch shape, kernel parameters are constants constrained by their ranges.
The control-flow graph (reducible) is walked once in reverse post-order; states are merged at join
points (path condition = disjunction, registers = if-then-else), so the work is linear in the code
size, not in the number of paths.

Loops are summarised, never unrolled. At a loop header every register that is live there and
written in the loop is *havoc'ed* (replaced by a fresh value), then the body is run once
symbolically to see how each register changes per iteration. With an iteration variable k
(64-bit, k >= 0) for that visit of the loop:

* a register updated by a loop-invariant amount (``r += c``) becomes ``init + k*c`` (exact, modulo
  2^width); ``r ^= c`` becomes ``init ^ (k odd ? c : 0)``; ``r <<= c`` / ``r >>= c`` become
  ``init << k*c`` / ``init >> k*c``;
* every other register stays a fresh value, constrained by invariants that Houdini proves
  inductive (candidate ranges ``r <= 2^j-1``, ``r >= 0``, monotonicity, and relations
  ``r == s + c`` / ``r != s`` with the other loop registers); registers the divergence analysis
  shows uniform across the CTA are uninterpreted functions of the iteration numbers, so two
  threads in the same iteration see the same value;
* reaching iteration k >= 1 implies the back edge was taken at iteration k-1: that condition is
  added (with fresh values for whatever is not in closed form), which bounds k.

Each state carries the path condition; memory loads return fresh values. Every memory access,
barrier and branch is recorded with its address, width, path condition and synchronisation
counters (pseudo-registers of :mod:`validation.formal.program`) for the property checks.

The executor is assembled from one mixin per job: :mod:`~validation.formal.operands` (symbols,
registers, operands), :mod:`~validation.formal.instructions` (integer semantics),
:mod:`~validation.formal.memory` (accesses, barriers, cp.async groups), :mod:`~validation.formal.loops`
(loop summaries) and :mod:`~validation.formal.loopproofs` (ranking functions, Houdini); this module
keeps the control flow (merging states, walking blocks and regions).
"""

from __future__ import annotations

import z3

from sim import isa
from validation.formal.asyncops import AsyncOpsMixin
from validation.formal.context import Context
from validation.formal.instructions import DivisionMixin, InstructionsMixin
from validation.formal.loopproofs import LoopProofsMixin
from validation.formal.loops import LoopsMixin
from validation.formal.memory import MemoryMixin
from validation.formal.operands import OperandsMixin
from validation.formal.state import TYPE_INFO, Access, BranchRec, State

__all__ = ["TYPE_INFO", "Access", "Context", "Executor", "make_executor"]


class Executor(LoopsMixin, LoopProofsMixin, AsyncOpsMixin, MemoryMixin, InstructionsMixin, DivisionMixin,
               OperandsMixin):
    """Symbolic execution of one thread copy; records accesses, branches and loops (state: ExecutorBase)."""

    # ------------------------------------------------------------------ control flow
    def merge(self, states: list[State]) -> State | None:
        states = [s for s in states if not z3.is_false(s.pc)]
        if not states:
            return None
        if len(states) == 1:
            return states[0]
        pc = z3.Or([s.pc for s in states])
        names: set[str] = set()
        for s in states:
            names |= s.regs.keys()
        regs, tags = {}, {}
        for n in names:
            vals = [self.read(s, n) for s in states]
            first = vals[0]
            t = frozenset().union(*[s.tags.get(n, frozenset()) for s in states])
            if all(v.eq(first) for v in vals[1:]):
                regs[n] = first
            else:
                v = vals[-1]
                for s, x in zip(reversed(states[:-1]), reversed(vals[:-1])):
                    v = z3.If(s.pc, x, v) if not x.eq(v) else v
                regs[n] = v
            tags[n] = t
        return State(pc, regs, tags)

    def exec_block(self, b: int, st: State) -> list[tuple[int, State]]:
        st = st.copy()
        blk = self.S.blocks[b]
        body = self.k.body
        for i in range(blk.start, blk.end):
            ins = body[i]
            if isa.is_terminator(ins) and ins.guard is None:
                self.note_exit(st, ins)
                return []
            self.step(st, ins)
        last = body[blk.end - 1]
        outs = []
        if len(blk.succ) > 1 and last.guard is not None:
            g = self.fit(self.read(st, last.guard), None)
            if self.recording:
                cond = z3.Not(g) if last.guard_neg else g
                self.branches.append(BranchRec(b, last.index, last.line, st.pc, cond, tuple(self.kstack)))
        for tgt, guard, neg in blk.succ:
            if guard is None:
                outs.append((tgt, st))
                continue
            g = self.fit(self.read(st, guard), None)
            c = z3.Not(g) if neg else g
            outs.append((tgt, State(z3.And(st.pc, c), st.regs, st.tags)))
        return outs

    def exec_region(self, region: set[int], loop_h: int | None, entry: dict[int, list[State]]):
        incoming: dict[int, list[State]] = {b: list(v) for b, v in entry.items()}
        back: list[State] = []
        exits: list[tuple[int, State]] = []

        def route(tgt: int, s: State) -> None:
            if tgt == self.S.EXIT:
                return
            if loop_h is not None and tgt == loop_h:
                back.append(s)
            elif tgt in region:
                incoming.setdefault(tgt, []).append(s)
            else:
                exits.append((tgt, s))

        for b in self.S.rpo:
            if b not in region:
                continue
            chain = self.S.enclosing_loops(b)
            if loop_h is None:
                inner = chain[0] if chain else None
            else:
                i = chain.index(loop_h)
                inner = chain[i + 1] if i + 1 < len(chain) else None
            st = None
            if inner is not None:
                if b != inner:
                    continue
                st = self.merge(incoming.pop(b, []))
                if st is None:
                    continue
                for tgt, s2 in self.exec_loop(inner, st):
                    route(tgt, s2)
                continue
            st = self.merge(incoming.pop(b, []))
            if st is None:
                continue
            for tgt, s2 in self.exec_block(b, st):
                route(tgt, s2)
        return back, exits

    def run(self) -> None:
        st = State(z3.BoolVal(True), {}, {})
        if any(self.S.is_named_barrier(i) for i in self.k.body):
            self.nid = self.fresh("named_id", 32)
        self.exec_region(set(self.S.reachable), None, {0: [st]})


def make_executor(ctx: Context, suffix: str = "") -> Executor:
    ex = Executor(ctx, suffix)
    ex.tid = ctx.tid
    return ex
