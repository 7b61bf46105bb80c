"""Proof helpers of the loop summaries (a mixin of the executor): free constants of a term,
ranking functions and affine exits for termination, Houdini over candidate invariants."""

from __future__ import annotations

import z3

from validation.formal.base import ExecutorBase

PROBE_RLIMIT = 1_000_000  # Z3 resource units (3-4M per CPU second): a probe costs at most ~0.3 s


class LoopProofsMixin(ExecutorBase):
    def free_consts(self, e: z3.ExprRef, cache: dict) -> frozenset:
        """Names of uninterpreted constants and functions occurring in e."""
        key = e.get_id()
        hit = cache.get(key)
        if hit is not None:
            return hit[1]
        if z3.is_const(e):
            r = frozenset() if e.decl().kind() != z3.Z3_OP_UNINTERPRETED else frozenset({e.decl().name()})
        else:
            acc = set()
            if e.decl().kind() == z3.Z3_OP_UNINTERPRETED:
                acc.add(e.decl().name())
            for c in e.children():
                acc |= self.free_consts(c, cache)
            r = frozenset(acc)
        cache[key] = (e, r)  # keep e alive: Z3 reuses the id of a freed term
        return r

    def affine_exit_bound(self, back_pc, hyps, entry_pc, next_pairs, init_pairs, local, cache):
        """Loops that leave when x == 0 for x = x0 + s*k (s a constant, e.g. unrolled loops comparing a
        counter with != ): bounded by |x0|/|s| when x0 has the right sign and is a multiple of s."""
        for e in self.atoms(back_pc, (z3.Z3_OP_EQ, z3.Z3_OP_DISTINCT), local, cache):
            a, b = e.arg(0), e.arg(1)
            x = a - b
            w = x.size()
            step = z3.simplify(z3.substitute(x, *next_pairs) - x, som=True)
            if not z3.is_bv_value(step):
                continue
            sv = step.as_long()
            sv = sv - (1 << w) if sv >> (w - 1) else sv
            if sv == 0 or not self.unsat(hyps + [back_pc, x == 0]):
                continue
            x0 = z3.SignExt(2, z3.substitute(x, *init_pairs))
            S = z3.BitVecVal(abs(sv), w + 2)
            if sv > 0:
                ok, K = z3.And(x0 <= 0, z3.SRem(-x0, S) == 0), z3.UDiv(-x0, S)
            else:
                ok, K = z3.And(x0 >= 0, z3.SRem(x0, S) == 0), z3.UDiv(x0, S)
            if self.unsat([entry_pc, z3.Not(ok)]):
                return K
        return None

    def atoms(self, cond, kinds, local, cache):
        out, todo, visited = [], [cond], set()
        while todo:
            e = todo.pop()
            if e.get_id() in visited or not z3.is_app(e):
                continue
            visited.add(e.get_id())
            kd = e.decl().kind()
            if kd in kinds and e.num_args() == 2 and z3.is_bv(e.arg(0)):
                if (self.free_consts(e.arg(0), cache) | self.free_consts(e.arg(1), cache)) & local:
                    out.append(e)
                continue
            if z3.is_bool(e):
                todo.extend(e.children())
        return out

    def unsat(self, cs) -> bool:
        return self.unsat_or_model(cs)[0]

    def unsat_or_model(self, cs) -> tuple[bool, z3.ModelRef | None]:
        """(unsat?, a model when sat)."""
        s = self.summary_solver()
        s.add(cs)
        r = s.check()
        if r == z3.unknown:
            self.gave_up.append(f"a loop-summary query ({s.reason_unknown()})")
        return r == z3.unsat, (s.model() if r == z3.sat else None)

    def loaded_consts(self, e: z3.ExprRef) -> list:
        """The constants of e that stand for loaded values (self.loadsyms), each once (a walk over distinct
        subterms: z3util.get_vars prints every subterm and takes seconds on a loop's path condition)."""
        out: dict[str, z3.ExprRef] = {}
        seen: set[int] = set()
        todo = [e]
        while todo:
            x = todo.pop()
            i = x.get_id()
            if i in seen:
                continue
            seen.add(i)
            if z3.is_const(x):
                if x.decl().kind() == z3.Z3_OP_UNINTERPRETED and x.decl().name() in self.loadsyms:
                    out[x.decl().name()] = x
            elif z3.is_app(x):
                todo.extend(x.children())
        return [out[n] for n in sorted(out)]

    def probe(self, cs, loaded: list) -> z3.ModelRef | None:
        """A model of cs with the loaded values ``loaded`` all 0 (false), or all 1 (true), each search within
        PROBE_RLIMIT (a cheap counterexample of a data-dependent loop: a step read from memory that is 0 never ends
        it, one that is 1 does; an mbarrier wait that fails keeps spinning); None otherwise (nothing is concluded
        from that, and nothing recorded as given up)."""
        for val in (0, 1):
            s = self.summary_solver()
            s.set("rlimit", PROBE_RLIMIT)
            s.add(cs)
            s.add([x == z3.BoolVal(val == 1) if z3.is_bool(x) else x == val  # an mbarrier wait's result is a Bool
                   for x in loaded if z3.is_bool(x) or z3.is_bv(x)])
            if s.check() == z3.sat:
                return s.model()
        return None

    @staticmethod
    def refuted(models: list, cs) -> bool:
        """Some model (of an earlier sat query) satisfies every formula of cs: cs is satisfiable, no query needed."""
        f = z3.And(cs)
        return any(z3.is_true(m.eval(f, model_completion=True)) for m in models)

    def ranking_candidates(self, cond, local, cache):
        kinds = {z3.Z3_OP_ULT: False, z3.Z3_OP_ULEQ: False, z3.Z3_OP_UGT: False, z3.Z3_OP_UGEQ: False,
                 z3.Z3_OP_SLT: True, z3.Z3_OP_SLEQ: True, z3.Z3_OP_SGT: True, z3.Z3_OP_SGEQ: True,
                 z3.Z3_OP_EQ: None, z3.Z3_OP_DISTINCT: None}
        seen = set()
        out = []
        todo = [cond]
        visited = set()
        while todo and len(out) < 24:
            e = todo.pop()
            if e.get_id() in visited:
                continue
            visited.add(e.get_id())
            if not z3.is_app(e):
                continue
            kd = e.decl().kind()
            if kd in kinds and e.num_args() == 2 and z3.is_bv(e.arg(0)):
                a, b = e.arg(0), e.arg(1)
                if (self.free_consts(a, cache) | self.free_consts(b, cache)) & local:
                    sg = kinds[kd]
                    for signed in ([True, False] if sg is None else [sg]):
                        ext = (lambda x: z3.SignExt(2, x)) if signed else (lambda x: z3.ZeroExt(2, x))
                        for R in (ext(b) - ext(a), ext(a) - ext(b)):
                            key = R.sexpr()
                            if key not in seen:
                                seen.add(key)
                                out.append(R)
                continue
            if z3.is_bool(e):
                todo.extend(e.children())
        return out

    def fresh_copies(self, e, local, cache, skip, tag):
        pairs = []
        for name in sorted(self.free_consts(e, cache) & local):
            if name in skip:
                continue
            c = self.by_name.get(name)
            if c is None:
                continue
            nc = self.fresh(f"{tag}:{name}", None if z3.is_bool(c) else c.size())
            pairs.append((c, nc))
        return pairs

    def candidates(self, others, carried_bv, vh, consts=(), lean=False):
        """Candidate invariants (text, function of the register values). ``lean`` (a loop inside another
        loop's dry run, where only what flows to the outer back edge matters): the bounds 1 and the loop's
        constants, and the equalities, without the powers of two, signs and disequalities."""
        cands = []
        bounds = {1} if lean else {2**j - 1 for j in (1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 16)}
        bounds |= {c + d for c in consts for d in (-1, 0)}
        for a in others:
            w = vh[a].size()
            for c in sorted(bounds | ({0} if a.startswith("%%") else set())):  # a pseudo-register may stay 0
                if 0 <= c < 2 ** (w - 1):
                    cands.append((f"{a} <= {c}", lambda v, a=a, c=c: z3.ULE(v[a], c)))
            if not lean:
                cands.append((f"{a} >= 0 (signed)", lambda v, a=a: v[a] >= 0))
            for bits, top, align in sorted(set(self.load_facts.values())):  # a register following loaded values
                if bits == w:
                    cands.append((f"{a} <= {top}", lambda v, a=a, c=top: z3.ULE(v[a], c)))
                    if align > 1:
                        cands.append((f"{a} % {align} == 0", lambda v, a=a, m=align - 1: v[a] & m == 0))
            for b in carried_bv:
                if b == a or vh[b].size() != w or self.is_float_reg(b):
                    continue
                if not lean:
                    cands.append((f"{a} != {b}", lambda v, a=a, b=b: v[a] != v[b]))
                for c in (-2, -1, 0, 1, 2):
                    cands.append((f"{a} == {b} + {c}", lambda v, a=a, b=b, c=c: v[a] == v[b] + c))
        return cands

    def houdini(self, cands, vh, init_vals, back_vals, facts, back_pc, k):
        """The largest subset of the candidates that holds on entry (k = 0) and is inductive over the
        back edge; [] when the solver gives up."""
        s = self.summary_solver()
        live = self.prune(s, list(cands), [facts[0]], lambda live: [], init_vals)
        if live is not None:
            live = self.prune(s, live, facts + [back_pc], lambda live: [fn(vh) for _, fn in live], back_vals)
        if live is None:
            self.gave_up.append("a loop invariant query (Houdini: solver timeout or no fixed point)")
            return []
        return live

    @staticmethod
    def prune(s: z3.Solver, live: list, hyps: list, assumed, vals: dict) -> list | None:
        """Drop the candidates a counterexample refutes until hyps (and assumed(live)) imply the rest
        at vals; None on a solver timeout or without a fixed point in 50 rounds."""
        for _ in range(50):
            if not live:
                return live
            s.push()
            s.add(hyps)
            s.add(assumed(live))
            s.add(z3.Not(z3.And([fn(vals) for _, fn in live])))
            r = s.check()
            m = s.model() if r == z3.sat else None
            s.pop()
            if r == z3.unsat:
                return live
            if m is None:
                return None
            live = [(t, fn) for t, fn in live if z3.is_true(m.eval(fn(vals), model_completion=True))]
        return None
