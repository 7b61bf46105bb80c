"""Instruction counts of a kernel, taken from its emitter: the builder records every instruction it
writes (region, first token, times per pass) and each is classified by ``sim.isa.pipe_of``, the
one ISA table.

``Counts`` holds, per warp, the warp instructions by pipe class ("alu", "fma", "lsu", "tensor",
"sync", "branch", "sfu") of three regions: ``pre`` (parameters .. the K loop), ``iter`` (one K-loop
iteration, a rolled inner loop counted once per trip) and ``post`` (after the loop: the epilogue and
``ret``), plus the structural numbers the timing model needs, and ``ptx_regs``: the PTX virtual
registers the emitter declares (64-bit counted twice, predicates not at all: what sim.timing uses for
occupancy when ptxas' count is not given).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache

from kernelgen.ptxbuild import REG_CLASSES, PtxBuilder
from sim.isa import pipe_of
from sim.ptx.ir import Instruction


@dataclass
class Counts:
    pre: dict[str, int] = field(default_factory=dict)
    iter: dict[str, int] = field(default_factory=dict)
    post: dict[str, int] = field(default_factory=dict)
    copies_a: int = 0  # global copies per thread per K tile (A)
    copies_b: int = 0
    ptx_regs: int = 0
    post_loads: int = 0  # global loads per thread in the epilogue (C, bias)
    post_stores: int = 0
    head_alu: int = 0  # ALU instructions a warp issues after the barrier before its first ldmatrix
    pre_after: dict[str, int] = field(default_factory=dict)  # prologue issued after tile 0's copies

    def total(self, region: str) -> int:
        return sum(getattr(self, region).values())


@cache
def pipe(token: str) -> str:
    """Pipe class of an instruction from its first token (``fma.rn.f32``), by sim.isa."""
    opcode, *mods = token.split(".")
    return pipe_of(Instruction(opcode, tuple(mods), [], 0, token))


def _add(d: dict[str, int], token: str, times: int) -> None:
    p = pipe(token)
    d[p] = d.get(p, 0) + times


def tally(b: PtxBuilder, copies: tuple[int, int]) -> Counts:
    """Counts of what ``b`` recorded. ``pre_after``: the prologue after its first
    ``cp.async.commit_group``; ``head_alu``: the loop body's ALU instructions between its barrier and
    its first ``ldmatrix`` (both empty for a kernel without them)."""
    c = Counts(copies_a=copies[0], copies_b=copies[1])
    regions = {"pre": c.pre, "iter": c.iter, "post": c.post}
    committed = head = seen = False
    pending = 0
    for region, tok, times in b.ops:
        _add(regions[region], tok, times)
        if region == "pre":
            if committed:
                _add(c.pre_after, tok, times)
            committed = committed or tok == "cp.async.commit_group"
        elif region == "iter":
            if tok.startswith("bar.") and not seen:
                head, pending = True, 0
            elif tok.startswith("ldmatrix") and not seen:
                head, seen, c.head_alu = False, True, pending
            elif head and pipe(tok) == "alu":
                pending += times
        elif tok.startswith("ld.global"):
            c.post_loads += times
        elif tok.startswith("st.global"):
            c.post_stores += times
    c.ptx_regs = sum(n * (2 if REG_CLASSES[k][0].endswith("64") else 1) for k, n in b.counts.items() if k != "pred")
    return c
