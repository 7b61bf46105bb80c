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

from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from functools import cache

from kernelgen.ptxbuild import MARKS, REG_CLASSES, PtxBuilder
from kernelgen.tiling import Tiling
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
def count_key(t: Tiling) -> Tiling:
    """The tiling a variant counts in place of ``t``: shared-row padding moves addresses (immediates),
    never the instruction stream, so tilings that differ only in ``pad_a``/``pad_b`` share one counting
    pass (half of the planner's builds). tests/test_count_key.py compares every tiling of several specs
    against its own uncached count."""
    return t if t.pad_a == 0 and t.pad_b == 0 else replace(t, pad_a=0, pad_b=0)


def by_stages(count: Callable[[Tiling], Counts], t: Tiling) -> Counts:
    """The counts of a cp.async pipeline of ``t.stages`` > 3 buffers from its builds at 2 and 3: a stage
    adds one prologue tile (the same instructions and registers each time) and changes nothing else,
    so every count is affine in the stages. tests/test_count_key.py compares every tiling of several
    specs against its own build."""
    if t.stages <= 3:
        return count(t)
    c2, c3 = count(replace(t, stages=2)), count(replace(t, stages=3))
    n = t.stages - 2
    out = Counts()
    for f in fields(Counts):
        a, b = getattr(c2, f.name), getattr(c3, f.name)
        if isinstance(b, dict):
            setattr(out, f.name, {k: a.get(k, 0) + n * (v - a.get(k, 0)) for k, v in b.items()})
        else:
            setattr(out, f.name, a + n * (b - a))
    return out


@cache
def pipe(token: str) -> str:
    """Pipe class of an instruction from its first token (``fma.rn.f32``), by sim.isa."""
    opcode, *mods = token.split(".")
    return pipe_of(Instruction(opcode, tuple(mods), [], 0, token))


def by_pipe(tokens: dict[str, int]) -> dict[str, int]:
    out: dict[str, int] = {}
    for tok, n in tokens.items():
        p = pipe(tok)
        out[p] = out.get(p, 0) + n
    return out


def tally(b: PtxBuilder, copies: tuple[int, int]) -> Counts:
    """Counts of what ``b`` summed. ``pre_after``: the prologue after its first
    ``cp.async.commit_group``; ``head_alu``: the loop body's ALU instructions between its first
    barrier and its first ``ldmatrix`` or ``wgmma.fence`` (both empty for a kernel without them)."""
    pre, it, post = b.totals["pre"], b.totals["iter"], b.totals["post"]
    c = Counts(by_pipe(pre), by_pipe(it), by_pipe(post), copies[0], copies[1])
    commit = b.marks.get("cp.async.commit_group")
    if commit is not None:
        after = {tok: n - commit.get(tok, 0) - (tok == "cp.async.commit_group") for tok, n in pre.items()}
        c.pre_after = {p: n for p, n in by_pipe(after).items() if n}
    bar, ldm = b.marks.get("bar."), b.marks.get("ldmatrix", b.marks.get("wgmma.fence"))
    if bar is not None and ldm is not None:
        c.head_alu = by_pipe(ldm).get("alu", 0) - by_pipe(bar).get("alu", 0)
    c.post_loads = sum(n for tok, n in post.items() if tok.startswith("ld.global"))
    c.post_stores = sum(n for tok, n in post.items() if tok.startswith("st.global"))
    c.ptx_regs = sum(n * (2 if REG_CLASSES[k][0].endswith("64") else 1) for k, n in b.counts.items() if k != "pred")
    return c


def tally_without(b: PtxBuilder, copies: tuple[int, int],
                  span: tuple[dict[str, int], ...]) -> Counts:
    """Counts of what ``b`` summed less a stretch of its prologue: ``span`` is the prologue's sums and
    the registers declared before and after that stretch (PtxBuilder.spans). The stretch must write only
    first tokens the prologue wrote before it (the sums keep their order) and hold no mark."""
    pre0, regs0, pre1, regs1 = span
    if any(tok not in pre0 for tok in pre1):
        raise ValueError("the stretch writes a first token the prologue has not written before it")
    pre = {tok: n - (pre1.get(tok, 0) - pre0.get(tok, 0)) for tok, n in b.totals["pre"].items()}
    if any(sum(b.marks[m].values()) > sum(pre0.values()) for m in MARKS["pre"] if m in b.marks):
        raise ValueError("a mark of the prologue falls in the stretch")
    less = PtxBuilder(True)
    less.totals = {**b.totals, "pre": pre}
    less.marks = b.marks
    less.counts = {k: n - (regs1[k] - regs0[k]) for k, n in b.counts.items()}
    return tally(less, copies)
