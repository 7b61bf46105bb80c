"""Integer semantics of PTX instructions over bit-vectors (a mixin of the executor). Floating point
results are fresh values; only integer and predicate arithmetic matters to the properties. Which
instructions are branches, barriers, async copies or memory accesses comes from sim/isa.py; the
semantics here are keyed by opcode (SEMANTICS_*), as the functional model's are."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import z3

from sim import isa
from sim.ptx.ir import Instruction, Operand
from validation.formal.base import ExecutorBase
from validation.formal.program import is_bulk_load, is_bulk_store
from validation.formal.state import DSMEM, TYPE_INFO, State, type_mods


class InstructionsMixin(ExecutorBase):
    def step(self, st: State, ins: Instruction) -> None:
        ops = ins.operands
        self.note_touch(st, ins)
        if isa.is_terminator(ins) and ins.guard is not None:
            self.note_exit(st, ins)
        if isa.is_branch(ins) or isa.is_terminator(ins):
            return
        if isa.mbarrier_op(ins):
            self.do_mbarrier(st, ins)
            return
        if is_bulk_load(ins):
            self.do_bulk_copy(st, ins)
            return
        if is_bulk_store(ins):
            self.do_bulk_store(st, ins)
            return
        if isa.wgmma_role(ins):
            self.do_wgmma(st, ins)
            return
        if isa.fence_proxy(ins) == "async":
            self.do_proxy_fence(st, ins)
            return
        if isa.barrier_role(ins) in ("cta", "arrive"):
            self.do_barrier(st, ins)
            return
        if isa.wmma_role(ins) in ("load", "store"):  # the tile's footprint (memory.do_wmma)
            self.do_wmma(st, ins)
            return
        if isa.bulk_role(ins):  # TMA / bulk copies and their groups: not modelled (properties say unknown)
            self.unsupported.append((ins.line, ins.full))
            return
        if isa.async_role(ins):
            self.do_cp_async(st, ins)
            return
        if isa.barrier_role(ins):  # bar.warp.sync: no order between threads is assumed from it
            return
        if isa.mem_dir(ins) != "none":
            self.do_memory(st, ins)
            return
        if isa.op_class(ins) == "sync":
            return
        if not ops or not ins.dst_regs and ops[0].kind not in ("reg", "vec", "pair", "sink"):
            return
        tys = type_mods(ins)
        w, kind = TYPE_INFO[tys[-1] if tys else "b32"]
        dst = ops[0]
        srcs = ops[1:]
        signed = kind == "s"
        allt = frozenset().union(*[self.tags_of(st, o) for o in srcs]) if srcs else frozenset()
        typed = SEMANTICS_TYPED.get(ins.opcode)
        if typed is not None:
            typed(self, st, ins, tys, allt)
            return
        if kind == "f":
            if dst.kind == "reg":
                self.write(st, ins, dst, self.fresh("f", self.width_of_reg(dst.name)))
            return
        logic = SEMANTICS_PRED.get(ins.opcode)
        if kind == "pred" and logic is not None:
            self.write(st, ins, dst, logic(*[self.val(st, o, None, signed) for o in srcs]))
            return
        arith = SEMANTICS_INT.get(ins.opcode)
        if arith is not None:
            r = None if "sat" in ins.mods or "cc" in ins.mods else arith(_Args(self, st, ins, srcs, w, signed))
            if r is None:
                r = self.fresh(ins.opcode, self.width_of_reg(dst.name))
            self.write(st, ins, dst, r, allt | TAGS_ADDED.get(ins.opcode, frozenset()))
            return
        # anything else that writes registers: a fresh value per destination
        for o in ops[:1]:
            if o.kind == "reg":
                self.write(st, ins, o, self.fresh(ins.opcode, self.width_of_reg(o.name)), allt)
            elif o.kind in ("vec", "pair"):
                for it in o.items:
                    if it.kind == "reg":
                        self.write(st, ins, it, self.fresh(ins.opcode, self.width_of_reg(it.name)))

    def do_mov(self, st: State, ins: Instruction, tys: list[str], allt: frozenset) -> None:
        dst, srcs = ins.operands[0], ins.operands[1:]
        w, kind = TYPE_INFO[tys[-1] if tys else "b32"]
        if dst.kind == "vec":  # unpack
            src = self.val(st, srcs[0], 64 if w <= 64 and len(dst.items) * 32 == 64 else w, kind == "s")
            n = len(dst.items)
            pw = src.size() // n if not z3.is_bool(src) else 1
            for i, it in enumerate(dst.items):
                self.write(st, ins, it, z3.Extract((i + 1) * pw - 1, i * pw, src))
            return
        if srcs and srcs[0].kind == "vec":
            items = srcs[0].items
            pw = w // len(items)
            parts = [self.val(st, it, pw) for it in items]
            self.write(st, ins, dst, z3.Concat(*reversed(parts)))
            return
        if srcs and srcs[0].kind == "fimm":
            self.write(st, ins, dst, self.fresh("f", self.width_of_reg(dst.name)))
            return
        dw = self.width_of_reg(dst.name) if dst.kind == "reg" else w
        self.write(st, ins, dst, self.val(st, srcs[0], dw), allt)

    def do_selp(self, st: State, ins: Instruction, tys: list[str], allt: frozenset) -> None:
        dst, srcs = ins.operands[0], ins.operands[1:]
        w, kind = TYPE_INFO[tys[-1] if tys else "b32"]
        c = self.val(st, srcs[2], None)
        a, b = self.val(st, srcs[0], w, kind == "s"), self.val(st, srcs[1], w, kind == "s")
        self.write(st, ins, dst, z3.If(c, a, b), allt)

    def do_cvt(self, st: State, ins: Instruction, tys: list[str], allt: frozenset) -> None:
        dst, srcs = ins.operands[0], ins.operands[1:]
        dt = tys[0] if tys else "b32"
        stp = tys[1] if len(tys) > 1 else dt
        dw, dk = TYPE_INFO[dt]
        sw, sk = TYPE_INFO[stp]
        if dk == "f" or sk == "f":
            self.write(st, ins, dst, self.fresh("cvt", self.width_of_reg(dst.name)))
            return
        v = self.val(st, srcs[0], sw)
        v = self.fit(v, dw, sk == "s")
        if "sat" in ins.mods:
            v = self.fresh("sat", dw)
        self.write(st, ins, dst, v, allt)

    def do_cvta(self, st: State, ins: Instruction, tys: list[str], allt: frozenset) -> None:
        dst, srcs = ins.operands[0], ins.operands[1:]
        v = self.val(st, srcs[0], TYPE_INFO[tys[-1] if tys else "b32"][0])
        if "to" in ins.mods and "shared" in ins.mods:
            v = self.fit(v, 32)
        self.write(st, ins, dst, v, allt)

    def do_setp(self, st: State, ins: Instruction, tys: list[str], allt: frozenset = frozenset()) -> None:
        ops = ins.operands
        t = tys[-1] if tys else "s32"
        w, kind = TYPE_INFO[t]
        cmp = ins.mods[0]
        if kind == "f":
            r = self.fresh("fcmp", None)
        else:
            s = kind == "s"
            a, b = self.val(st, ops[1], w, s), self.val(st, ops[2], w, s)
            table = {
                "eq": lambda: a == b, "ne": lambda: a != b,
                "lt": lambda: a < b if s else z3.ULT(a, b), "le": lambda: a <= b if s else z3.ULE(a, b),
                "gt": lambda: a > b if s else z3.UGT(a, b), "ge": lambda: a >= b if s else z3.UGE(a, b),
                "lo": lambda: z3.ULT(a, b), "ls": lambda: z3.ULE(a, b),
                "hi": lambda: z3.UGT(a, b), "hs": lambda: z3.UGE(a, b),
            }
            r = table[cmp]() if cmp in table else self.fresh("cmp", None)
        if len(ops) > 3:
            c = self.val(st, ops[3], None)
            if "and" in ins.mods:
                r1, r2 = z3.And(r, c), z3.And(z3.Not(r), c)
            elif "or" in ins.mods:
                r1, r2 = z3.Or(r, c), z3.Or(z3.Not(r), c)
            else:
                r1, r2 = z3.Xor(r, c), z3.Xor(z3.Not(r), c)
        else:
            r1, r2 = r, z3.Not(r)
        d = ops[0]
        if d.kind == "pair":
            self.write(st, ins, d.items[0], r1)
            self.write(st, ins, d.items[1], r2)
        else:
            self.write(st, ins, d, r1)


class DivisionMixin(ExecutorBase):
    """Unsigned division by a constant c > 1 outside loops (a tile copy's row and column from tid: tid / 6,
    tid % 6) as a quotient q and remainder r, fresh symbols tied to the dividend a by the linear
    ``a = q*c + r, r < c`` (computed without wrap) in the path condition: exact, and the solver no longer
    bit-blasts a divider circuit per term (two threads' copies of such a tile, paired in one race query,
    timed out: unknown). The same (a, c) gives the same pair. Inside a loop the terms stay UDiv/URem:
    symbols created in a loop body are that loop's locals, which its closed forms must not contain."""

    def udivrem(self, st: State, a: z3.BitVecRef, b: z3.BitVecRef) -> tuple[z3.BitVecRef, z3.BitVecRef]:
        bs = z3.simplify(b)
        if self.kstack or not z3.is_bv_value(bs) or bs.as_long() < 2 or z3.is_bv_value(z3.simplify(a)):
            return z3.UDiv(a, b), z3.URem(a, b)
        c, w = bs.as_long(), a.size()
        key = (a.get_id(), c)
        hit = self.divisions.get(key)
        if hit is None:
            q, r = self.fresh("quot", w), self.fresh("rem", w)
            k = c.bit_length() + 1
            tie = z3.And(z3.ZeroExt(k, q) * c + z3.ZeroExt(k, r) == z3.ZeroExt(k, a), z3.ULT(r, c),
                         z3.ULE(q, ((1 << w) - 1) // c))
            hit = self.divisions[key] = (a, q, r, tie)  # a kept alive: its id stays its own
        _, q, r, tie = hit
        st.pc = z3.And(st.pc, tie)
        return q, r


class _Args:
    """The source operands of an integer instruction as bit-vectors of its type's width."""

    def __init__(self, ex: ExecutorBase, st: State, ins: Instruction, srcs: list[Operand], w: int,
                 signed: bool):
        self.ex, self.st, self.srcs, self.w, self.signed = ex, st, srcs, w, signed
        self.wide = "wide" in ins.mods
        self.hi = "hi" in ins.mods

    def __call__(self, i: int, width: int = -1) -> Any:
        return self.ex.val(self.st, self.srcs[i], self.w if width == -1 else width, self.signed)

    def double(self, i: int) -> Any:
        return self.ex.fit(self(i), 2 * self.w, self.signed)


def _mul(acc: bool, hi_ok: bool = True) -> Callable[[_Args], Any]:
    """mul / mad (acc) and their 24-bit forms (whose .hi is not modelled: hi_ok False)."""
    def f(x: _Args) -> Any:
        w = x.w
        if x.wide:
            r = x.double(0) * x.double(1)
            return r + x(2, 2 * w) if acc else r
        if x.hi:
            if not hi_ok:
                return None
            r = z3.Extract(2 * w - 1, w, x.double(0) * x.double(1))
            return r + x(2) if acc else r
        r = x(0) * x(1)
        return r + x(2) if acc else r
    return f


def _shift(left: bool) -> Callable[[_Args], Any]:
    def f(x: _Args) -> Any:
        a = x(0)
        # PTX clamps shift amounts larger than the width; Z3 gives the same results
        b = x.ex.fit(x.ex.val(x.st, x.srcs[1], 32, False), x.w)
        if left:
            return a << b
        return a >> b if x.signed else z3.LShR(a, b)
    return f


def _minmax(lo: bool) -> Callable[[_Args], Any]:
    def f(x: _Args) -> Any:
        a, b = x(0), x(1)
        if lo:
            return z3.If(a < b if x.signed else z3.ULT(a, b), a, b)
        return z3.If(a > b if x.signed else z3.UGT(a, b), a, b)
    return f


def _field_args(x: _Args, i: int) -> tuple[Any, Any]:
    """bfe/bfi's position and length operands (i, i + 1): their low bytes (PTX: b & 0xff, c & 0xff) as
    bit-vectors of the instruction's width (so shifts by them clamp as the ISA's loops do)."""
    pos, ln = (x.ex.val(x.st, x.srcs[j], 32, False) & 0xFF for j in (i, i + 1))
    return (pos, ln) if x.w == 32 else (z3.ZeroExt(x.w - 32, pos), z3.ZeroExt(x.w - 32, ln))


def _bfe(x: _Args) -> Any:
    """bfe.{u,s}{32,64} d, a, pos, len (PTX ISA): pos = b & 0xff, len = c & 0xff; bit i of d is a[pos + i]
    where i < len and pos + i <= msb, else the sign bit sbit: 0 for .u and for len 0, else
    a[min(pos + len - 1, msb)]. With constant pos and len an Extract and a Zero/SignExt (the solver's
    cheapest form); otherwise the same as shifts: n = min(len, w - pos) valid bits (0 when pos >= w)."""
    w, a = x.w, x(0)
    pos, ln = _field_args(x, 1)
    ps, ls = z3.simplify(pos), z3.simplify(ln)
    if z3.is_bv_value(ps) and z3.is_bv_value(ls):
        p, n = ps.as_long(), ls.as_long()
        if n == 0:
            return z3.BitVecVal(0, w)
        if p >= w:
            return a >> (w - 1) if x.signed else z3.BitVecVal(0, w)
        top = min(p + n, w) - 1
        ext = w - (top - p + 1)
        field = z3.Extract(top, p, a)
        if not ext:
            return field
        return z3.SignExt(ext, field) if x.signed else z3.ZeroExt(ext, field)
    ones = z3.BitVecVal(-1, w)
    if not x.signed:  # a shift by >= w gives 0 in Z3, as the ISA's loop: pos >= w -> 0, len >= w -> all bits
        return z3.LShR(a, pos) & ~(ones << ln)
    n = z3.If(z3.UGE(pos, w), z3.BitVecVal(0, w), z3.If(z3.ULT(ln, w - pos), ln, w - pos))
    top = z3.If(z3.ULT(pos + ln - 1, w - 1), pos + ln - 1, z3.BitVecVal(w - 1, w))
    sbit = z3.Extract(0, 0, z3.LShR(a, top)) == 1
    v = (z3.LShR(a, pos) & ~(ones << n)) | z3.If(sbit, ones << n, z3.BitVecVal(0, w))
    return z3.If(ln == 0, z3.BitVecVal(0, w), v)


def _bfi(x: _Args) -> Any:
    """bfi.b{32,64} d, f, b, pos, len (PTX ISA): b with bits pos .. min(pos + len, w) - 1 replaced by the low
    bits of f (nothing replaced when len is 0 or pos >= w)."""
    f, b = x(0), x(1)
    pos, ln = _field_args(x, 2)
    mask = ~(z3.BitVecVal(-1, x.w) << ln) << pos
    return (b & ~mask) | ((f << pos) & mask)


def _abs(x: _Args) -> Any:
    a = x(0)
    return z3.If(a < 0, -a, a)


# Integer semantics over bit-vectors, keyed by opcode (a None result: not modelled, a fresh value)
def _mapa(x: _Args) -> Any:
    """mapa.shared::cluster.u32 d, a, r: a's offset (bits 0..23) with r + 1 in the rank byte (bits 24..31; 0 is
    the executing CTA's own window, as sim/cluster.py's DSMEM addresses), so a shared::cluster access or mbarrier
    operation can tell the offset (its footprint, its barrier) from the CTA it names (asyncops.cluster_split).
    The generic form (.u64) is a fresh value."""
    if x.w != 32:
        return None
    return (x(0) & 0xFFFFFF) | ((x(1) + 1) << 24)


# tags an instruction adds to its result's: a mapa result is a shared::cluster (DSMEM) address
TAGS_ADDED: dict[str, frozenset] = {"mapa": frozenset({DSMEM})}

SEMANTICS_INT: dict[str, Callable[[_Args], Any]] = {
    "mapa": _mapa,
    "add": lambda x: x(0) + x(1),
    "sub": lambda x: x(0) - x(1),
    "mul": _mul(False),
    "mad": _mul(True),
    "mul24": _mul(False, hi_ok=False),
    "mad24": _mul(True, hi_ok=False),
    "div": lambda x: x(0) / x(1) if x.signed else x.ex.udivrem(x.st, x(0), x(1))[0],
    "rem": lambda x: z3.SRem(x(0), x(1)) if x.signed else x.ex.udivrem(x.st, x(0), x(1))[1],
    "min": _minmax(True),
    "max": _minmax(False),
    "and": lambda x: x(0) & x(1),
    "or": lambda x: x(0) | x(1),
    "xor": lambda x: x(0) ^ x(1),
    "not": lambda x: ~x(0),
    "cnot": lambda x: z3.If(x(0) == 0, z3.BitVecVal(1, x.w), z3.BitVecVal(0, x.w)),
    "neg": lambda x: -x(0),
    "abs": _abs,
    "bfe": _bfe,
    "bfi": _bfi,
    "shl": _shift(True),
    "shr": _shift(False),
}
# Predicate logic, keyed by opcode
SEMANTICS_PRED: dict[str, Callable[..., Any]] = {"and": z3.And, "or": z3.Or, "xor": z3.Xor, "not": z3.Not}
# Instructions whose semantics read their own types (floats included), keyed by opcode
SEMANTICS_TYPED: dict[str, Callable[..., None]] = {
    "mov": InstructionsMixin.do_mov,
    "setp": InstructionsMixin.do_setp,
    "selp": InstructionsMixin.do_selp,
    "cvt": InstructionsMixin.do_cvt,
    "cvta": InstructionsMixin.do_cvta,
}
