"""Small Z3 helpers shared by the executor and the property checks."""

from __future__ import annotations

import z3


class Substitution:
    """A fixed renaming applied to many terms: the pairs are marshalled for Z3 once, not on every
    call (``z3.substitute`` re-checks every pair's sort in Python each time, which dominates when
    the renaming has thousands of pairs)."""

    def __init__(self, pairs: list[tuple[z3.ExprRef, z3.ExprRef]]):
        for a, b in pairs:
            if not a.sort().eq(b.sort()):
                raise z3.Z3Exception(f"substitution of {a} by {b}: sorts differ")
        self.pairs = list(pairs)  # keeps the terms alive for the arrays below
        n = len(self.pairs)
        self.n = n
        self.src = (z3.Ast * n)()
        self.dst = (z3.Ast * n)()
        for i, (a, b) in enumerate(self.pairs):
            self.src[i] = a.as_ast()
            self.dst[i] = b.as_ast()

    def __call__(self, e: z3.ExprRef) -> z3.ExprRef:
        if not self.n:
            return e
        return z3.z3._to_expr_ref(z3.Z3_substitute(e.ctx.ref(), e.as_ast(), self.n, self.src, self.dst), e.ctx)
