"""Instruction and register counts of the emitted kernels, mirrored from emit_simt.py / emit_mma.py /
emit_common.py (white-box: the planner counts what its own emitters will write, without writing it).

``counts(spec, t)`` returns, per warp, the warp instructions by pipe class ("alu", "fma", "lsu",
"tensor", "sync", "branch", "sfu") of three regions: ``pre`` (parameters .. the K loop), ``iter``
(one K-loop iteration) and ``post`` (after the loop: the epilogue), plus the structural numbers the
timing model needs (global copies per iteration, shared loads per k step, ...), and ``ptx_regs``:
the PTX virtual registers the emitter declares (64-bit counted twice, predicates not at all: what
sim.timing uses for occupancy when ptxas' count is not given). tests/test_kernelgen.py checks these
against the parsed emitted PTX.

Pipe classes follow sim/isa.py: integer/bit/mov/cvt/setp/selp -> alu; f32 add/mul/fma/max -> fma;
ld/st/ldmatrix/cp.async (copy, commit, wait) -> lsu; mma -> tensor; bar -> sync; bra/ret -> branch;
tanh -> sfu.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from kernelgen.spec import GemmSpec
from kernelgen.tiling import Tiling, operand_tiles


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
    head_alu: int = 0  # mma: ALU instructions a warp issues after the barrier before its first ldmatrix
    pre_after: dict[str, int] = field(default_factory=dict)  # mma: prologue issued after tile 0's copies

    def total(self, region: str) -> int:
        return sum(getattr(self, region).values())


def _add(d: dict[str, int], cls: str, n: int) -> None:
    if n:
        d[cls] = d.get(cls, 0) + n


def _epilogue(spec: GemmSpec, d: dict[str, int], nrows: int, ncols: int, nelem: int) -> tuple[int, int, int]:
    """emit_common.emit_epilogue: (registers, global loads, stores) per thread; instructions into d."""
    regs = 0
    _add(d, "alu", nrows + ncols)  # setp per row / col
    loads = 0
    if spec.has_bias:
        _add(d, "alu", 3 * ncols)  # mov, mul.wide, add.u64
        _add(d, "lsu", ncols)
        regs += 5 * ncols
        loads += ncols
    per = {"alu": 4, "fma": 1, "lsu": 1}  # and.pred, mad, selp, mul.wide | mul.f32 | st
    r = 1 + 2 + 1 + 2  # idx, off, v, da
    if spec.has_c:
        per["alu"] += 1  # add.u64
        per["fma"] += 1  # fma beta
        per["lsu"] += 1
        r += 3
        if spec.dtype_out == "f32":
            per["alu"] += 1  # mov.f32
        else:
            per["alu"] += 2  # mov.b16, cvt
            r += 1
        loads += nelem
    if spec.has_bias:
        per["fma"] += 1
    if spec.activation == "relu":
        per["fma"] += 1
    elif spec.activation == "gelu":
        per["fma"] += 7
        per["sfu"] = 1
        r += 1
    per["alu"] += 1  # add.u64 da
    if spec.dtype_out != "f32":
        per["alu"] += 1  # cvt
        r += 1
    for k, v in per.items():
        _add(d, k, v * nelem)
    return regs + r * nelem, loads, nelem


def _params(spec: GemmSpec, d: dict[str, int]) -> int:
    nbuf = 3 + spec.has_c + spec.has_bias
    nsc = 4 + spec.has_c
    _add(d, "lsu", nbuf + nsc)  # ld.param
    _add(d, "alu", nbuf)  # cvta
    return 2 * nbuf + nsc


@lru_cache(maxsize=65536)
def counts(spec: GemmSpec, t: Tiling) -> Counts:
    a, b = operand_tiles(spec, t)
    T = t.threads
    na, nb = a.chunks // T, b.chunks // T
    c = Counts(copies_a=na, copies_b=nb)
    pre, it, post = c.pre, c.iter, c.post
    regs = _params(spec, pre)
    if t.variant == "simt":
        _add(pre, "alu", 11 + 2 * 3 - (0 if a.vec > 1 else 1) - (0 if b.vec > 1 else 1) + 2 + 6)
        regs += 5 + 2 + 2 + 6 + 2 + 4
        _add(pre, "alu", t.tm * t.tn + 2)  # acc zero, k0, setp
        _add(pre, "branch", 1)
        regs += t.tm * t.tn + 1
        for n, dt in ((na, spec.dtype_a), (nb, spec.dtype_b)):
            _add(it, "alu", 2 + n * (9 + (1 if dt == "f32" else 2)))
            _add(it, "lsu", 2 * n)
            regs += 2 + n * (7 + (1 if dt == "f32" else 2))
        vec = lambda x: (x // 4) + (x % 4) // 2 + (x % 2)  # noqa: E731  v4/v2/scalar pieces
        _add(it, "lsu", t.bk * (vec(t.tm) + vec(t.tn)))
        _add(it, "fma", t.bk * t.tm * t.tn)
        _add(it, "sync", 2)
        _add(it, "alu", 2)
        _add(it, "branch", 1)
        regs += t.tm + t.tn
        _add(post, "alu", 2 * t.tm + 2 * t.tn - 2)  # mad (+ add) per row / col
        regs += t.tm + t.tn
        er, c.post_loads, c.post_stores = _epilogue(spec, post, t.tm, t.tn, t.tm * t.tn)
        regs += er
        _add(post, "branch", 1)  # ret
    else:
        S = t.stages
        mi, ni = t.mi, t.ni
        _add(pre, "alu", 13 + 4 + 2 * 3 - (0 if a.vec > 1 else 1) - (0 if b.vec > 1 else 1) + 2)
        regs += 9 + 2 + 2 + 6 + 2
        nld = 2 + (ni % 2)
        for tile in (a, b, b)[:nld]:
            _add(pre, "alu", 9 if tile.row_dim in ("m", "n") else 8)  # _ldmatrix_lane_offset
            regs += 6
        _add(pre, "alu", 4 * mi * ni)
        regs += 4 * mi * ni

        def tile_issue(d: dict[str, int]) -> int:
            r = 0
            for tile, n in ((a, na), (b, nb)):
                _add(d, "alu", 2 + 2 + n * (9 + 1))
                _add(d, "lsu", n * (1 if tile.vec > 1 else 2))
                r += 2 + 2 + n * 8
            _add(d, "lsu", 1)  # commit
            return r

        for _ in range(S - 1):
            _add(pre, "alu", 2)
            regs += tile_issue(pre)
        _add(c.pre_after, "alu", 6 + 1)  # after the first tile's copies: the other tiles and the loop entry
        _add(c.pre_after, "branch", 1)
        for _ in range(S - 2):
            _add(c.pre_after, "alu", 2)
            tile_issue(c.pre_after)
        _add(pre, "alu", 6 + 1)
        _add(pre, "branch", 1)
        regs += 5
        _add(it, "lsu", 2)  # wait_group + ... (bar is sync)
        it["lsu"] -= 1
        _add(it, "sync", 1)
        alu0 = it.get("alu", 0)
        regs += tile_issue(it)
        _add(it, "alu", 4 + (1 if ni % 2 else 0))
        c.head_alu = it["alu"] - alu0
        regs += 2 + (1 if ni % 2 else 0)
        if t.unroll < t.k_steps:  # rolled inner loop: mov; per trip 2-3 pointer adds, add, setp, bra
            trips = t.k_steps // t.unroll
            _add(it, "alu", 1 + trips * (4 + (1 if ni % 2 else 0)))
            _add(it, "branch", trips)
            regs += 1
        _add(it, "lsu", (t.bk // 16) * (mi + (ni + 1) // 2))
        _add(it, "tensor", (t.bk // 16) * mi * ni)
        regs += 4 * mi + 2 * ni
        _add(it, "alu", 6 + 2 + 1)
        _add(it, "branch", 1)
        _add(post, "lsu", 1)  # wait_group 0
        _add(post, "alu", 4 + 2 * mi + 2 * ni)
        regs += 2 + 2 * mi + 2 * ni
        er, c.post_loads, c.post_stores = _epilogue(spec, post, 2 * mi, 2 * ni, 4 * mi * ni)
        regs += er
        _add(post, "branch", 1)
    c.ptx_regs = regs
    return c
