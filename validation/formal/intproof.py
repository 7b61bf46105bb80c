"""Bounds through integer arithmetic, for the nonlinear address arithmetic (``row*K + col < M*K``
with free M, N, K) that the bit-vector solver gives up on.

Every bit-vector term t is translated into an integer term I(t) meant to equal t's unsigned value,
with *side conditions* under which it does: no wrap-around, ``I(a) * I(b) < 2^w``, for a mul or a
shift left (additions and subtractions are translated exactly, wrap included, as if-then-else).
Operations with no exact integer form (and/or with variables, arithmetic shifts, signed division,
functions) become fresh integers that keep only a range every bit-vector value satisfies, never a
relation to their operands; so the image of any bit-vector model (leaves and fresh integers = their
bit-vector values) satisfies every range.

Soundness: hypotheses (launch assumptions, the conjuncts of the access's path condition) are
admitted one at a time, in passes until none is left or none can be, each only once its side
conditions are proved from the ranges and the hypotheses admitted before it; in any bit-vector
model of the hypotheses its translation then has exact values (induction over the admission order
and the term depth) and so holds. The goal's side conditions are proved the same way, and the goal
itself by ``admitted and not goal`` being unsat over the integers. A hypothesis whose side
conditions cannot be shown is dropped (weaker, still sound).
"""

from __future__ import annotations

import time

import z3

_UNSIGNED_CMP = {z3.Z3_OP_ULT: lambda a, b: a < b, z3.Z3_OP_ULEQ: lambda a, b: a <= b,
                 z3.Z3_OP_UGT: lambda a, b: a > b, z3.Z3_OP_UGEQ: lambda a, b: a >= b}
_SIGNED_CMP = {z3.Z3_OP_SLT: lambda a, b: a < b, z3.Z3_OP_SLEQ: lambda a, b: a <= b,
               z3.Z3_OP_SGT: lambda a, b: a > b, z3.Z3_OP_SGEQ: lambda a, b: a >= b}


class OutOfTime(Exception):
    """The proof's time budget ran out (the caller answers unknown)."""


def _merge(*lists: list) -> list:
    """Side conditions of several subterms, each once: a term DAG shares subterms, and concatenating
    their lists would repeat a shared one once per path to it (exponential in the DAG's depth)."""
    if sum(1 for x in lists if x) <= 1:
        return next((x for x in lists if x), [])
    seen: set[int] = set()
    out = []
    for lst in lists:
        for c in lst:
            k = c.get_id()
            if k not in seen:
                seen.add(k)
                out.append(c)
    return out


def _const(a) -> int | None:
    """The value of a constant bit-vector term (also ZeroExt(.., 2) and the like), else None."""
    if not z3.is_bv(a):
        return None
    if not z3.is_bv_value(a) and a.num_args() == 1 and a.decl().kind() in (z3.Z3_OP_ZERO_EXT, z3.Z3_OP_SIGN_EXT):
        a = z3.simplify(a)
    return a.as_long() if z3.is_bv_value(a) else None


class IntTranslator:
    def __init__(self, deadline: float | None = None) -> None:
        self.memo: dict[int, tuple] = {}  # term id -> (term, int term, side conditions)
        self.ranges: list[z3.BoolRef] = []
        self.n = 0
        self.deadline = deadline  # time.monotonic() past which translation stops (OutOfTime)

    def fresh(self, w: int, hi: int | None = None) -> z3.ArithRef:
        self.n += 1
        v = z3.Int(f"i!{self.n}")
        self.ranges += [v >= 0, v <= ((1 << w) - 1 if hi is None else hi)]
        return v

    def signed(self, a: z3.ArithRef, w: int) -> z3.ArithRef:
        return z3.If(a >= 2 ** (w - 1), a - 2**w, a)

    def bool(self, e: z3.BoolRef) -> tuple[z3.BoolRef, list]:
        key = e.get_id()
        hit = self.memo.get(key)
        if hit is not None:
            return hit[1], hit[2]
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise OutOfTime
        r = self._bool(e)
        self.memo[key] = (e, *r)
        return r

    def _bool(self, e):
        if z3.is_true(e) or z3.is_false(e):
            return e, []
        if z3.is_const(e) and e.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            return e, []
        kd = e.decl().kind()
        if kd in (z3.Z3_OP_AND, z3.Z3_OP_OR, z3.Z3_OP_NOT, z3.Z3_OP_IMPLIES, z3.Z3_OP_XOR) or (
                kd == z3.Z3_OP_ITE and z3.is_bool(e.arg(1))) or (
                kd in (z3.Z3_OP_EQ, z3.Z3_OP_DISTINCT) and z3.is_bool(e.arg(0)) and e.num_args() == 2):
            if kd == z3.Z3_OP_ITE:
                (c, s0), (a, s1), (b, s2) = self.bool(e.arg(0)), self.bool(e.arg(1)), self.bool(e.arg(2))
                return z3.If(c, a, b), _merge(s0, s1, s2)
            parts = [self.bool(c) for c in e.children()]
            xs, sc = [p[0] for p in parts], _merge(*(p[1] for p in parts))
            op = {z3.Z3_OP_AND: z3.And, z3.Z3_OP_OR: z3.Or, z3.Z3_OP_NOT: lambda x: z3.Not(x),
                  z3.Z3_OP_IMPLIES: z3.Implies, z3.Z3_OP_XOR: z3.Xor,
                  z3.Z3_OP_EQ: lambda a, b: a == b, z3.Z3_OP_DISTINCT: lambda a, b: a != b}[kd]
            return (op(*xs) if kd in (z3.Z3_OP_NOT, z3.Z3_OP_IMPLIES, z3.Z3_OP_XOR, z3.Z3_OP_EQ,
                                      z3.Z3_OP_DISTINCT) else op(xs)), sc
        if e.num_args() == 2 and z3.is_bv(e.arg(0)):
            a, b = e.arg(0), e.arg(1)
            w = a.size()
            if kd == z3.Z3_OP_ULEQ and b.decl().kind() == z3.Z3_OP_BADD and b.num_args() == 2 and b.arg(0).eq(a):
                # a <= a + y (unsigned) holds exactly when a + y does not wrap
                (ia, s1), (iy, s2) = self.bv(a), self.bv(b.arg(1))
                return ia + iy < 2**w, _merge(s1, s2)
            (ia, s1), (ib, s2) = self.bv(a), self.bv(b)
            s1 = _merge(s1, s2)
            s2 = []
            if kd in _UNSIGNED_CMP:
                return _UNSIGNED_CMP[kd](ia, ib), s1 + s2
            if kd in _SIGNED_CMP:
                return _SIGNED_CMP[kd](self.signed(ia, w), self.signed(ib, w)), s1 + s2
            if kd == z3.Z3_OP_EQ:
                return ia == ib, s1 + s2
            if kd == z3.Z3_OP_DISTINCT:
                return ia != ib, s1 + s2
        self.n += 1
        return z3.Bool(f"b!{self.n}"), []  # an unknown atom: unconstrained

    def bv(self, e: z3.BitVecRef) -> tuple[z3.ArithRef, list]:
        key = e.get_id()
        hit = self.memo.get(key)
        if hit is not None:
            return hit[1], hit[2]
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise OutOfTime
        r = self._bv(e)
        self.memo[key] = (e, *r)
        return r

    def _bv(self, e):
        w = e.size()
        if z3.is_bv_value(e):
            return z3.IntVal(e.as_long()), []
        kd = e.decl().kind()
        if z3.is_const(e) and kd == z3.Z3_OP_UNINTERPRETED:
            v = z3.Int(f"u!{e.decl().name()}!{w}")
            self.ranges += [v >= 0, v <= 2**w - 1]
            return v, []
        args = e.children()
        if kd == z3.Z3_OP_ITE:
            (c, s0), (a, s1), (b, s2) = self.bool(args[0]), self.bv(args[1]), self.bv(args[2])
            return z3.If(c, a, b), _merge(s0, s1, s2)
        parts = [self.bv(a) if z3.is_bv(a) else (None, []) for a in args]
        xs = [p[0] for p in parts]
        sc = _merge(*(p[1] for p in parts))
        consts = [_const(a) for a in args]
        if kd == z3.Z3_OP_BADD:  # exact: one wrap at most per addition
            r = xs[0]
            for x in xs[1:]:
                t = r + x
                r = z3.If(t >= 2**w, t - 2**w, t)
            return r, sc
        if kd == z3.Z3_OP_BSUB and len(xs) == 2:
            t = xs[0] - xs[1]
            return z3.If(t < 0, t + 2**w, t), sc
        if kd == z3.Z3_OP_BMUL:
            r = xs[0]
            for x in xs[1:]:
                r = r * x
            return r, _merge(sc, [r <= 2**w - 1])
        if kd == z3.Z3_OP_BSHL and consts[1] is not None and consts[1] < w:
            r = xs[0] * 2 ** consts[1]
            return r, _merge(sc, [r <= 2**w - 1])
        if kd == z3.Z3_OP_BLSHR and consts[1] is not None:
            return (xs[0] / 2 ** consts[1]) if consts[1] < w else z3.IntVal(0), sc
        if kd in (z3.Z3_OP_BUDIV, z3.Z3_OP_BUDIV_I) and consts[1]:
            return xs[0] / consts[1], sc
        if kd in (z3.Z3_OP_BUREM, z3.Z3_OP_BUREM_I) and consts[1]:
            return xs[0] % consts[1], sc
        if kd == z3.Z3_OP_BAND and len(xs) == 2:
            for i in (0, 1):
                c = consts[1 - i]
                if c is not None and c & (c + 1) == 0:  # mask 2^j - 1
                    return xs[i] % (c + 1), sc
            c = next((c for c in consts if c is not None), None)
            return self.fresh(w, c), sc
        if kd == z3.Z3_OP_BNOT:
            return 2**w - 1 - xs[0], sc
        if kd == z3.Z3_OP_BNEG:
            return z3.If(xs[0] == 0, 0, 2**w - xs[0]), sc
        if kd == z3.Z3_OP_ZERO_EXT:
            return xs[0], sc
        if kd == z3.Z3_OP_SIGN_EXT:
            wa = args[0].size()
            return z3.If(xs[0] >= 2 ** (wa - 1), xs[0] + 2**w - 2**wa, xs[0]), sc
        if kd == z3.Z3_OP_EXTRACT:
            hi, lo = e.params()
            return (xs[0] / 2**lo) % 2 ** (hi - lo + 1), sc
        if kd == z3.Z3_OP_CONCAT:
            r = z3.IntVal(0)
            for a, x in zip(args, xs):
                r = r * 2 ** a.size() + x
            return r, sc
        return self.fresh(w), []  # no exact integer form: any w-bit value


def nonlinear(e: z3.ExprRef, cache: dict) -> bool:
    """Whether e multiplies two non-constant terms."""
    hit = cache.get(e.get_id())
    if hit is not None:
        return hit[1]
    r = False
    if z3.is_app(e) and e.num_args():
        if e.decl().kind() == z3.Z3_OP_BMUL and sum(_const(a) is None for a in e.children()) >= 2:
            r = True
        else:
            r = any(nonlinear(c, cache) for c in e.children())
    cache[e.get_id()] = (e, r)
    return r


def prove_with_integers(assumptions: list, pc: z3.BoolRef, goal: z3.BoolRef, timeout_ms: int,
                        deadline: float | None = None) -> bool:
    """True when goal holds in every bit-vector model of assumptions and pc (see the module text).
    timeout_ms bounds each solver query; `deadline` (time.monotonic(), default now + 10 x timeout_ms)
    bounds the whole proof, translation included: past it the answer is False (not proved), which the
    verifier reports as unknown."""
    if deadline is None:
        deadline = time.monotonic() + 10 * timeout_ms / 1000
    try:
        return _prove(assumptions, pc, goal, timeout_ms, deadline)
    except OutOfTime:
        return False


def _prove(assumptions: list, pc: z3.BoolRef, goal: z3.BoolRef, timeout_ms: int, deadline: float) -> bool:
    tr = IntTranslator(deadline)
    s = z3.Solver()

    def holds(conds: list) -> bool:
        if not conds:
            return True
        left_ms = int((deadline - time.monotonic()) * 1000)
        if left_ms <= 0:
            raise OutOfTime
        s.set("timeout", min(timeout_ms, left_ms))
        s.push()
        s.add(tr.ranges)
        s.add(z3.Not(z3.And(conds)))
        r = s.check()
        s.pop()
        return r == z3.unsat

    memo: dict[int, list] = {}

    def conjuncts(e) -> list:
        """Facts implied by e: its conjuncts, and those common to every disjunct of a disjunction
        (the path condition after a join is Or(prefix and this, prefix and that)); memoised, since
        path conditions share sub-conditions."""
        k = e.get_id()
        hit = memo.get(k)
        if hit is not None:
            return hit
        if time.monotonic() > deadline:
            raise OutOfTime
        if z3.is_and(e):
            r = _merge(*(conjuncts(c) for c in e.children()))
        elif z3.is_or(e):
            sets = [conjuncts(c) for c in e.children()]
            common = {x.get_id() for x in sets[0]}
            for other in sets[1:]:
                common &= {x.get_id() for x in other}
            r = [x for x in sets[0] if x.get_id() in common] + [e]
        else:
            r = [e]
        memo[k] = r
        return r

    facts = _merge(*(conjuncts(a) for a in assumptions), conjuncts(pc))
    waiting = [tr.bool(x) for x in facts]
    progress = True
    while progress and waiting:  # a hypothesis may need others admitted first (e.g. a loop's trip bound)
        progress, later = False, []
        for ih, sc in waiting:
            if holds(sc):
                s.add(ih)
                progress = True
            else:
                later.append((ih, sc))
        waiting = later
    ig, sc = tr.bool(goal)
    if not holds(sc):
        return False
    return holds([ig])
