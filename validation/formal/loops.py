"""Loop summaries (a mixin of the executor): havoc at the header, closed forms in the iteration
variable k, Houdini invariants, the back-edge fact for k >= 1, a termination bound on k, then the
body run once under those facts. See :mod:`validation.formal.symexec`."""

from __future__ import annotations

import z3

from sim import isa
from validation.formal.base import ExecutorBase
from validation.formal.program import COUNTERS, NO_WRAP, ORDERED
from validation.formal.state import LoopRec, State, hname


def closed_form(kind: str, c, init: z3.BitVecRef, kk: z3.BitVecRef) -> z3.BitVecRef:
    """The value at iteration kk of a register that starts at init and changes per iteration by
    (kind, c): add c, xor c, shift by c, or count modulo c."""
    w = init.size()
    kw = z3.Extract(w - 1, 0, kk) if w < 64 else kk
    if kind == "add":
        return init + kw * c
    if kind == "xor":
        return z3.If(z3.Extract(0, 0, kk) == 1, init ^ c, init)
    if kind == "mod":  # (init + k) mod c; init < c < 2^15, so 16 bits hold the sum
        k16 = z3.Extract(15, 0, z3.URem(kk, c))
        i16 = z3.Extract(15, 0, init) if w >= 16 else z3.ZeroExt(16 - w, init)
        v = z3.URem(i16 + k16, c)
        return z3.Extract(w - 1, 0, v) if w < 16 else z3.ZeroExt(w - 16, v)
    lim = z3.ULT(kk, w)
    amt = kw * c
    if kind == "shl":
        return z3.If(lim, init << amt, z3.BitVecVal(0, w))
    if kind == "lshr":
        return z3.If(lim, z3.LShR(init, amt), z3.BitVecVal(0, w))
    return z3.If(lim, init >> amt, init >> (w - 1))


class LoopsMixin(ExecutorBase):
    def exec_loop(self, h: int, pre: State) -> list[tuple[int, State]]:
        """Summarise the loop at header h; the constants it creates (iteration counter, havoc'ed
        registers, the body's loaded values) stand for one arbitrary iteration (``iter_created``)."""
        mark = len(self.created)
        try:
            return self._exec_loop(h, pre)
        finally:
            self.iter_created.extend(self.created[mark:])

    def _exec_loop(self, h: int, pre: State) -> list[tuple[int, State]]:
        S = self.S
        lp = S.loops[h]
        line = self.k.body[S.blocks[h].start].line
        carried = sorted(S.carried(h))
        bv_carried = [r for r in carried if self.width_of_reg(r) is not None]
        k = self.fresh(f"k@{line}", 64)
        outer_ks = list(self.kstack)
        mark = len(self.created)
        hv: dict[str, z3.ExprRef] = {}
        for r in carried:
            w = self.width_of_reg(r)
            if r not in self.ctx.nonuniform and w is not None and not outer_ks:
                f = z3.Function(f"U{r}@{line}", *([z3.BitVecSort(64)] * (len(outer_ks) + 1)), z3.BitVecSort(w))
                hv[r] = f(*(outer_ks + [k]))
            else:
                hv[r] = self.fresh(f"h{r}@{line}", w)
        havoc_names = {hname(x) for x in hv.values()}

        # --- dry run: how does each register change per iteration?
        st0 = pre.copy()
        for r in carried:
            st0.regs[r] = hv[r]
        st0.pc = z3.And([pre.pc] + self.ordered_facts(st0, carried))
        saved = (self.recording, self.dry)
        self.recording, self.dry = False, True
        self.kstack.append(k)
        back, _ = self.exec_region(lp.body, h, {h: [st0]})
        self.kstack.pop()
        self.recording, self.dry = saved
        bst = self.merge(back)
        local = set(self.created_names[mark:]) | havoc_names
        cache: dict = {}

        def invariant(e):
            return not (self.free_consts(e, cache) & local)

        forms = self.find_forms(pre, bst, hv, bv_carried, h, invariant) if bst is not None else {}
        if bst is not None:  # registers whose next value is loaded data (a pointer chase): bounds names them
            for r in bv_carried:
                loaded = self.free_consts(self.read(bst, r), cache) & self.loadsyms.keys()
                if r not in forms and loaded:
                    self.data_havocs.setdefault(hname(hv[r]), set()).update(self.loadsyms[n] for n in loaded)

        def closed(r: str, kk: z3.BitVecRef, elsewise: z3.ExprRef | None = None) -> z3.ExprRef:
            kind, c = forms[r]
            init = self.read(pre, r)
            if kind in ("mod?", "mod-1"):  # a wrapping counter whose entry value is not known to be below c
                other = hv[r] if elsewise is None else elsewise
                if kind == "mod-1":  # ... but below c or -1 (Triton's stage counters start at -1: 0 at k = 1)
                    w = init.size()
                    zero = z3.BitVecVal(0, w)
                    other = z3.If(kk == 0, init, closed_form("mod", c, zero, kk - 1))
                    return z3.If(init == z3.BitVecVal(-1, w), other, closed_form("mod", c, init, kk))
                return z3.If(z3.ULT(init, c), closed_form("mod", c, init, kk), other)
            return closed_form(kind, c, init, kk)

        vh = {r: (closed(r, k) if r in forms else hv[r]) for r in carried}
        sub_k = [(hv[r], vh[r]) for r in forms]
        facts = [pre.pc]
        if bst is not None:
            # reaching iteration k >= 1 means the back edge was taken in iteration k-1
            prev_pairs = [(hv[r], closed(r, k - 1, self.fresh(f"prev{r}", self.width_of_reg(r)))) for r in forms]
            prev_pairs += [(hv[r], self.fresh(f"prev{r}", self.width_of_reg(r))) for r in carried if r not in forms]
            prev_pairs += self.fresh_copies(bst.pc, local, cache, skip={hname(hv[r]) for r in forms}, tag="prev")
            cond_prev = z3.substitute(bst.pc, *prev_pairs) if prev_pairs else bst.pc
            facts.append(z3.Implies(k != 0, cond_prev))

        # --- Houdini over candidate invariants of the registers without a closed form
        invs: list[z3.BoolRef] = []
        inv_text: list[str] = []
        others = [r for r in bv_carried if r not in forms and not self.is_float_reg(r)]
        nonclosed = [r for r in carried if r not in forms]
        init_vals = {r: self.read(pre, r) for r in carried}
        # iteration 0 sees the entry values (ties a havoc'ed register, e.g. a pipeline stage, to its start)
        first = [hv[r] == init_vals[r] for r in nonclosed]
        if first:
            facts.append(z3.Implies(k == 0, z3.And(first)))
        if bst is not None:
            back_vals = {r: z3.substitute(self.read(bst, r), *sub_k) if sub_k else self.read(bst, r)
                         for r in carried}
            back_pc = z3.substitute(bst.pc, *sub_k) if sub_k else bst.pc
        # the premise that a thread's event counters stay below 2^31 (they count instructions executed)
        premise = [z3.ULT(vh[r], NO_WRAP) for r in carried if r in COUNTERS]
        if others and bst is not None:
            cands = self.candidates(others, bv_carried, vh, self.loop_constants(h), lean=self.dry)
            kept = self.houdini(cands, vh, init_vals, back_vals, facts + premise, back_pc, k)
            for text, fn in kept:
                invs.append(fn(vh))
                inv_text.append(text)

        # --- termination: a ranking function over the back edge bounds the iteration count
        rec = LoopRec(h, line, k, {r: f[0] for r, f in forms.items()}, inv_text, None, True, set(), [])
        if bst is not None:
            self.prove_termination(rec, k, hv, carried, nonclosed, init_vals, back_vals, back_pc, facts, invs,
                                   local, cache)
        elif bst is None:
            rec.status, rec.text = "proved", "the back edge is never taken"

        # --- final run from the summarised header state
        hst = pre.copy()
        for r in carried:
            hst.regs[r] = vh[r]
            if bst is not None:
                hst.tags[r] = pre.tags.get(r, frozenset()) | bst.tags.get(r, frozenset())
        hst.pc = z3.And(facts + invs + self.ordered_facts(hst, carried))
        self.kstack.append(k)
        back2, exits = self.exec_region(lp.body, h, {h: [hst]})
        self.kstack.pop()
        if self.recording:
            rec.has_exit = bool(exits)
            if not exits and back2:
                rec.status = "violated"
                rec.violation = z3.Or([s.pc for s in back2])
                rec.text = "the loop has no exit"
            self.loops.append(rec)
        return exits

    def ordered_facts(self, st: State, carried: list[str]) -> list[z3.BoolRef]:
        """What every state satisfies, for the counters a loop havocs: groups done <= groups committed,
        done at the last barrier or proxy fence <= done (program.ORDERED; waits never pass their commits)."""
        return [z3.ULE(self.read(st, a), self.read(st, b)) for a, b in ORDERED if a in carried or b in carried]

    def prove_termination(self, rec: LoopRec, k, hv, carried, nonclosed, init_vals, back_vals, back_pc,
                          facts: list, invs: list, local: set, cache: dict) -> None:
        """Bound the iteration count k (an affine != exit or a ranking function); the bound is appended
        to facts. Otherwise the loop is violated (the exit condition can never change) or unknown."""
        hyps = facts + invs
        skip = {hname(hv[r]) for r in carried}
        next_pairs = [(k, k + 1)] + [(hv[r], back_vals[r]) for r in nonclosed]
        next_pairs += self.fresh_copies(back_pc, local, cache, skip=skip, tag="next")
        cond_next = z3.substitute(back_pc, *next_pairs)
        init_pairs = [(k, z3.BitVecVal(0, 64))] + [(hv[r], init_vals[r]) for r in nonclosed]
        init_pairs += self.fresh_copies(back_pc, local, cache, skip=skip, tag="first")
        rec.back_pc = back_pc
        rec.load_lines = sorted({self.loadsyms[n] for n in self.free_consts(back_pc, cache) & local
                                 if n in self.loadsyms})
        K = self.affine_exit_bound(back_pc, hyps, facts[0], next_pairs, init_pairs, local | {str(k)}, cache)
        models: list = []  # of hyps and back_pc, from the failed ranking candidates: they answer later queries
        if K is None:
            K = self.ranking_bound(back_pc, hyps, cond_next, next_pairs, init_pairs, local | {str(k)}, cache, models)
        if K is not None:
            wk = K.size()
            facts.append(z3.ULE(k, z3.ZeroExt(64 - wk, K)) if wk < 64 else z3.ULE(z3.ZeroExt(wk - 64, k), K))
            rec.status = "proved"
            rec.text = "trip count <= " + " ".join(str(z3.simplify(K)).split())
        elif not self.exits_somewhere(hyps + [back_pc, z3.Not(cond_next)], models, back_pc):
            rec.status = "violated"
            rec.violation = z3.substitute(back_pc, *init_pairs)
            rec.text = "once its back edge is taken it is taken forever (the exit condition never changes)"
        else:
            rec.status = "unknown"
            rec.text = "no ranking function found"
            if rec.load_lines:
                rec.text += f"; the exit condition depends on data loaded at line(s) {rec.load_lines}"

    def exits_somewhere(self, cs, models: list, back_pc) -> bool:
        """cs (a back edge followed by an exit) may be satisfiable: a model at hand, a probe of the loaded values,
        else the solver's answer (False only when it proves cs unsat)."""
        if self.refuted(models, cs):
            return True
        loaded = self.loaded_consts(back_pc)
        if loaded and self.probe(cs, loaded) is not None:
            return True
        return not self.unsat(cs)

    def ranking_bound(self, back_pc, hyps, cond_next, next_pairs, init_pairs, local, cache, models: list):
        """A ranking function b - a from a comparison of the exit condition, positive on every back
        edge and decreasing by a constant d: at most (R0 - 1) / d + 1 back edges. A candidate that a model of
        an earlier candidate's counterexample already refutes is skipped (the models are kept in ``models``)."""
        loaded = None  # the loaded values the exit condition depends on: probed at 0 first (data-dependent steps)
        for R in self.ranking_candidates(back_pc, local, cache):
            Rn = z3.substitute(R, *next_pairs)
            d = z3.simplify(R - Rn, som=True)
            wr = R.size()
            if not (z3.is_bv_value(d) and 0 < d.as_long() < (1 << (wr - 1))):
                d = z3.BitVecVal(1, wr)
            bad = hyps + [back_pc, z3.Or(R <= 0, z3.And(cond_next, Rn > R - d))]
            if self.refuted(models, bad):
                continue
            if loaded is None:
                loaded = self.loaded_consts(back_pc)
            m = self.probe(bad, loaded) if loaded else None
            if m is not None:
                models.append(m)
                continue
            ok, m = self.unsat_or_model(bad)
            if ok:
                R0 = z3.substitute(R, *init_pairs)
                return z3.If(R0 > 0, z3.UDiv(R0 - 1, d) + 1, z3.BitVecVal(0, wr))
            if m is not None:
                models.append(m)
        return None

    def find_forms(self, pre: State, bst: State, hv: dict, bv_carried: list[str], h: int,
                   invariant) -> dict[str, tuple[str, z3.ExprRef]]:
        """Closed forms in k of the registers the back edge changes by a loop-invariant amount."""
        forms: dict[str, tuple[str, z3.ExprRef]] = {}
        for r in bv_carried:
            nxt = self.read(bst, r)
            hr = hv[r]
            d = z3.simplify(nxt - hr)
            if invariant(d):
                forms[r] = ("add", d)
                continue
            x = z3.simplify(nxt ^ hr)
            if invariant(x):
                forms[r] = ("xor", x)
                continue
            n2 = z3.simplify(nxt)
            if z3.is_app(n2) and n2.num_args() == 2 and n2.arg(0).eq(hr) and z3.is_bv_value(n2.arg(1)):
                kd = n2.decl().kind()
                if kd in (z3.Z3_OP_BSHL, z3.Z3_OP_BLSHR, z3.Z3_OP_BASHR) and n2.arg(1).as_long() > 0:
                    forms[r] = ({z3.Z3_OP_BSHL: "shl", z3.Z3_OP_BLSHR: "lshr", z3.Z3_OP_BASHR: "ashr"}[kd],
                                n2.arg(1))
                    continue
            wrap = self.wrap_modulus(pre, bst, r, hr, nxt, h)
            if wrap is not None:
                forms[r] = wrap
        return forms

    def wrap_modulus(self, pre: State, bst: State, r: str, hr, nxt, h: int) -> tuple[str, int] | None:
        """A counter that wraps, r = (r + 1 == m) ? 0 : r + 1 (a pipeline stage; Triton writes it
        selp(r + 1 > c, 0, r + 1), which wraps at m = c + 1, or with >= m): m such that, for every value
        below m, the back edge gives (r + 1) mod m: ("mod", m) when the entry value is below m, ("mod-1", m)
        when it is below m or -1 (all ones) and the back edge takes -1 to 0, else ("mod?", m) (the form then
        holds only where the entry value is below m). m is a constant the loop compares against, or one
        more than one."""
        if self.is_float_reg(r):
            return None
        w = hr.size()
        init = self.read(pre, r)
        consts = self.loop_constants(h)
        for m in sorted(consts | {c + 1 for c in consts}):
            if not 1 < m < 2 ** min(w - 1, 15):  # keeps (init + k mod m) within 16 bits
                continue
            step = z3.URem(z3.ZeroExt(1, hr) + 1, m)
            if self.unsat([z3.ULT(hr, m), bst.pc, z3.ZeroExt(1, nxt) != step]):
                if self.unsat([pre.pc, z3.UGE(init, m)]):
                    return "mod", m
                ones = z3.BitVecVal(-1, w)
                if (self.unsat([pre.pc, z3.UGE(init, m), init != ones])
                        and self.unsat([hr == ones, bst.pc, nxt != 0])):
                    return "mod-1", m
                return "mod?", m
        return None

    def loop_constants(self, h: int) -> set[int]:
        """Small immediates compared against in the loop (e.g. a stage counter wrapping at 3)."""
        S, body = self.S, self.k.body
        out: set[int] = set()
        for b in S.loops[h].body:
            for i in range(S.blocks[b].start, S.blocks[b].end):
                ins = body[i]
                if isa.op_class(ins) == "compare":
                    out |= {op.value for op in ins.operands[1:3] if op.kind == "imm" and 0 < op.value <= 4096}
        return out
