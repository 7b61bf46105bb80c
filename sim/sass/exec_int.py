"""Integer and predicate SASS instructions: bit-exact on uint32 lanes with explicit 64-bit carries.

The uniform-datapath forms (UIADD3, ULEA, ...) use the same builders: their readers return scalars.
Operand order follows nvdisasm: destinations, then carry-out predicates, then sources, then carry-in
predicates (``IADD3 R7, P0, P1, R3, UR8, R4``; ``IADD3.X R9, R9, UR9, R5, P0, P1``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from sim.sass.exec_operands import U32, U64, Ctx, Reader
from sim.sass.exec_state import Warp
from sim.sass.listing import Operand

Exec = Callable[[Warp, np.ndarray], None]
M32 = U64(0xFFFFFFFF)
_PRED = ("pred", "upred")


def split(cx: Ctx, ndst: int = 1) -> tuple[list[Operand], list[Operand], list[Operand], list[Operand]]:
    """(destinations, carry-out predicates, sources, carry-in predicates)."""
    ops = list(cx.ins.operands)
    dst, rest = ops[:ndst], ops[ndst:]
    outs = []
    while rest and rest[0].kind in _PRED and len(rest) > 1:
        outs.append(rest.pop(0))
    ins_: list[Operand] = []
    while rest and rest[-1].kind in _PRED:
        ins_.insert(0, rest.pop())
    return dst, outs, rest, ins_


def _carry_in(cx: Ctx, preds: list[Operand]) -> Callable[[Warp], Any]:
    rs = [cx.pred(p) for p in preds]
    if not rs:
        return lambda w: U64(0)
    return lambda w: sum((np.asarray(r(w)).astype(U64) for r in rs), U64(0))


def _carry_out(cx: Ctx, outs: list[Operand]) -> Callable[[Warp, Any, np.ndarray], None]:
    """Carry count k (0..2) of a sum into up to two predicates: the first gets k >= 1, the second k >= 2
    (a following .X adds both back)."""
    ws = [cx.wpred(p) for p in outs]

    def wr(w: Warp, k: Any, m: np.ndarray) -> None:
        for j, wp in enumerate(ws):
            wp(w, np.asarray(k) >= j + 1 if len(ws) > 1 else np.asarray(k) >= 1, m)
    return wr


def _as64(cx: Ctx, op: Operand) -> Reader:
    """A 32-bit source as a 64-bit addend: ``-x`` counts as ``~x + 1`` (so ``-0`` carries out, as a
    subtraction's borrow-free case does), ``~x`` as ``~x``."""
    r = cx.raw(op)
    if op.prefix == "-":
        return lambda w: (~np.asarray(r(w))).astype(U64) + U64(1)
    if op.prefix == "~":
        return lambda w: (~np.asarray(r(w))).astype(U64)
    if op.prefix:
        raise cx.err(f"prefix {op.prefix} on '{op.text}'")
    return lambda w: np.asarray(r(w)).astype(U64)


def b_iadd3(cx: Ctx) -> Exec:
    mods = cx.mods({"X", "64"})
    (d,), outs, srcs, cins = split(cx)
    if len(srcs) != 3:
        raise cx.err("IADD3 needs three sources")
    if "64" in mods:  # UIADD3.64 UR26, UR18, 0x2, URZ: register pairs, no carries (wgmma descriptor steps)
        if outs or cins or "X" in mods:
            raise cx.err("IADD3.64 with carries is not modelled")
        r64 = [cx.u64(x) for x in srcs]
        wd64 = cx.w64(d)
        return lambda w, m: wd64(w, r64[0](w) + r64[1](w) + r64[2](w), m)
    a, b, c = (_as64(cx, s) for s in srcs)
    cin, cout, wd = _carry_in(cx, cins), _carry_out(cx, outs), cx.w32(d)

    def run(w: Warp, m: np.ndarray) -> None:
        s = a(w) + b(w) + c(w) + cin(w)
        wd(w, (s & M32).astype(U32), m)
        cout(w, s >> U64(32), m)
    return run


def b_viadd(cx: Ctx) -> Exec:
    cx.mods(set())
    d, a, b = cx.ins.operands[:3]
    ra, rb, wd = cx.u32(a), cx.u32(b), cx.w32(d)
    return lambda w, m: wd(w, (ra(w) + rb(w)).astype(U32), m)


def b_imad(cx: Ctx) -> Exec:
    mods = cx.mods({"MOV", "IADD", "SHL", "U32", "X", "WIDE", "HI"})
    (d,), outs, srcs, cins = split(cx)
    if len(srcs) != 3:
        raise cx.err("IMAD needs three sources")
    signed = "U32" not in mods
    cin, cout = _carry_in(cx, cins), _carry_out(cx, outs)
    ra, rb = cx.u32(srcs[0]), cx.u32(srcs[1])
    st = np.int32 if signed else np.uint32

    def prod(w: Warp) -> Any:  # the exact 64-bit product (two's complement for signed)
        x = np.asarray(ra(w)).view(st).astype(np.int64) if signed else np.asarray(ra(w)).astype(U64)
        y = np.asarray(rb(w)).view(st).astype(np.int64) if signed else np.asarray(rb(w)).astype(U64)
        return (x * y).astype(U64) if signed else x * y

    if "WIDE" in mods:
        rc64, wd64 = cx.u64(srcs[2]), cx.w64(d)
        return lambda w, m: wd64(w, prod(w) + rc64(w) + cin(w), m)
    wd = cx.w32(d)
    if "HI" in mods:  # c is a register pair: the high word of a * b + {c+1, c}
        rp = cx.u64(srcs[2])
        return lambda w, m: wd(w, ((prod(w) + rp(w) + cin(w)) >> U64(32)) & M32, m)
    rc = _as64(cx, srcs[2])

    def run(w: Warp, m: np.ndarray) -> None:
        s = (prod(w) & M32) + rc(w) + cin(w)
        wd(w, (s & M32).astype(U32), m)
        cout(w, s >> U64(32), m)
    return run


def b_lea(cx: Ctx) -> Exec:
    """LEA d, a, b, s: (a << s) + b. LEA.HI d, a, b, [c,] s: b + high word of ({c, a} << s), where
    .SX32 takes c as a's sign extension."""
    mods = cx.mods({"HI", "X", "SX32"})
    (d,), outs, srcs, cins = split(cx)
    sh = srcs[-1]
    if sh.kind != "imm":
        raise cx.err("LEA with a register shift is not modelled")
    s = int(sh.value or 0)
    cin, cout, wd = _carry_in(cx, cins), _carry_out(cx, outs), cx.w32(d)
    ra, rb = cx.u32(srcs[0]), _as64(cx, srcs[1])
    if "HI" in mods:
        if "SX32" in mods:
            rc: Reader = lambda w: (np.asarray(ra(w)).view(np.int32) >> 31).view(U32)  # noqa: E731
        elif len(srcs) == 4:
            rc = cx.u32(srcs[2])
        else:
            rc = lambda w: U32(0)  # noqa: E731

        def hi(w: Warp) -> Any:
            v = np.asarray(ra(w)).astype(U64) | (np.asarray(rc(w)).astype(U64) << U64(32))
            return ((v << U64(s)) >> U64(32)) & M32
        part = hi
    else:
        def part(w: Warp) -> Any:
            return (np.asarray(ra(w)).astype(U64) << U64(s)) & M32

    def run(w: Warp, m: np.ndarray) -> None:
        t = part(w) + rb(w) + cin(w)
        wd(w, (t & M32).astype(U32), m)
        cout(w, t >> U64(32), m)
    return run


def _lut(f: int, a: Any, b: Any, c: Any) -> Any:
    """Bitwise 3-input function with truth table f (bit (a<<2|b<<1|c) of f)."""
    out = a & ~a
    for i in range(8):
        if f >> i & 1:
            ta = a if i & 4 else ~a
            tb = b if i & 2 else ~b
            tc = c if i & 1 else ~c
            out = out | (ta & tb & tc)
    return out


def b_lop3(cx: Ctx) -> Exec:
    cx.mods({"LUT"})
    ops = list(cx.ins.operands)
    pdst = ops.pop(0) if ops[0].kind in ("pred", "upred") else None
    d, a, b, c, lut, pin = ops[:6]
    if pin.text != "!PT" and pin.text != "!UPT":
        raise cx.err("LOP3 with a predicate input other than !PT is not modelled")
    ra, rb, rc, wd = cx.u32(a), cx.u32(b), cx.u32(c), cx.w32(d)
    wp = cx.wpred(pdst) if pdst else None
    f = int(lut.value or 0)

    def run(w: Warp, m: np.ndarray) -> None:
        r = np.asarray(_lut(f, np.asarray(ra(w)), np.asarray(rb(w)), np.asarray(rc(w)))).astype(U32)
        wd(w, r, m)
        if wp is not None:
            wp(w, r != 0, m)
    return run


def b_plop3(cx: Ctx) -> Exec:
    cx.mods({"LUT"})
    d1, d2, a, b, c, f1, f2 = cx.ins.operands[:7]
    ra, rb, rc = cx.pred(a), cx.pred(b), cx.pred(c)
    w1, w2 = cx.wpred(d1), cx.wpred(d2)
    l1, l2 = int(f1.value or 0), int(f2.value or 0)

    def run(w: Warp, m: np.ndarray) -> None:
        x, y, z = (np.asarray(r(w), dtype=bool) for r in (ra, rb, rc))
        w1(w, _lut(l1, x, y, z), m)
        w2(w, _lut(l2, x, y, z), m)
    return run


def b_shf(cx: Ctx) -> Exec:
    """SHF.L/.R d, a, s, c: the 64-bit value {c, a} shifted; .HI keeps the high word, else the low one.
    Shift amounts clamp at the type's width (.U32/.S32: 32, .U64/.S64: 64)."""
    mods = cx.mods({"L", "R", "U32", "S32", "U64", "S64", "HI"})
    d, a, s, c = cx.ins.operands[:4]
    ra, rs, rc, wd = cx.u32(a), cx.u32(s), cx.u32(c), cx.w32(d)
    left, hi = "L" in mods, "HI" in mods
    signed = bool(mods & {"S32", "S64"})
    width = 64 if mods & {"U64", "S64"} else 32

    def run(w: Warp, m: np.ndarray) -> None:
        v = np.asarray(ra(w)).astype(U64) | (np.asarray(rc(w)).astype(U64) << U64(32))
        n = np.minimum(np.asarray(rs(w)).astype(U64), U64(width))
        if left:
            r = np.where(n >= 64, U64(0), v << np.minimum(n, U64(63)))
        elif signed:
            r = (v.view(np.int64) >> np.minimum(n, U64(63)).astype(np.int64)).view(U64)
        else:
            r = np.where(n >= 64, U64(0), v >> np.minimum(n, U64(63)))
        wd(w, ((r >> U64(32)) if hi else r & M32).astype(U32), m)
    return run


def b_sel(cx: Ctx, floats: bool = False) -> Exec:
    """SEL / FSEL d, a, b, P: P ? a : b (FSEL applies the float operand prefixes)."""
    cx.mods(set())
    d, a, b, p = cx.ins.operands[:4]
    rp, wd = cx.pred(p), cx.w32(d)
    fa, fb = (cx.f32(a), cx.f32(b)) if floats else (cx.u32(a), cx.u32(b))
    return lambda w, m: wd(w, np.where(rp(w), np.asarray(fa(w)).view(U32), np.asarray(fb(w)).view(U32)), m)


_ICMP: dict[str, Callable[[Any, Any], Any]] = {
    "EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal, "GT": np.greater,
    "GE": np.greater_equal,
}
BOOL_OPS: dict[str, Callable[[Any, Any], Any]] = {"AND": np.logical_and, "OR": np.logical_or,
                                               "XOR": np.logical_xor}


def b_isetp(cx: Ctx) -> Exec:
    mods = cx.ins.modifiers
    cmp = [x for x in mods if x in _ICMP]
    op = [x for x in mods if x in BOOL_OPS]
    cx.mods(set(_ICMP) | set(BOOL_OPS) | {"U32", "EX"})
    if len(cmp) != 1 or len(op) != 1:
        raise cx.err("ISETP needs one compare and one boolean modifier")
    f, g = _ICMP[cmp[0]], BOOL_OPS[op[0]]
    ex = "EX" in mods
    ops = cx.ins.operands
    d1, d2, a, b, c = ops[:5]
    dt = np.uint32 if "U32" in mods else np.int32
    ra, rb, rc, w1, w2 = cx.u32(a), cx.u32(b), cx.pred(c), cx.wpred(d1), cx.wpred(d2)
    rx = cx.pred(ops[5]) if ex else None
    strict = {"GE": np.greater, "LE": np.less, "GT": np.greater, "LT": np.less}.get(cmp[0])

    def run(w: Warp, m: np.ndarray) -> None:
        x, y = np.asarray(ra(w)).view(dt), np.asarray(rb(w)).view(dt)
        if rx is None:
            r = f(x, y)
        elif strict is not None:  # 64-bit compare: high words decide unless equal, then the low result
            r = strict(x, y) | ((x == y) & rx(w))
        elif cmp[0] == "EQ":
            r = (x == y) & rx(w)
        else:
            r = (x != y) | rx(w)
        p = rc(w)
        w1(w, g(r, p), m)
        w2(w, g(~np.asarray(r), p), m)
    return run


def b_mov(cx: Ctx) -> Exec:
    cx.mods(set())
    d, a = cx.ins.operands[:2]
    ra, wd = cx.raw(a), cx.w32(d)
    if a.prefix:
        raise cx.err("MOV with a prefixed source")
    return lambda w, m: wd(w, ra(w), m)


def b_ldc(cx: Ctx) -> Exec:
    mods = cx.mods({"64", "U8", "S8", "U16", "S16"})
    d, a = cx.ins.operands[:2]
    sub = mods - {"64"}
    if sub:  # LDC.U16 / ULDC.S8 ...: one sub-word at a constant address, zero- or sign-extended
        kind = next(iter(sub))
        if len(sub) > 1 or a.kind != "const" or a.bank != 0 or [r for r in a.regs if r not in ("RZ", "URZ")]:
            raise cx.err("sub-word constant loads other than from a constant c[0x0] address are not modelled")
        dt = np.dtype({"U8": np.uint8, "S8": np.int8, "U16": np.uint16, "S16": np.int16}[kind])
        v = cx.L.cbank.load(np.array([int(a.value or 0)]), dt)[0, 0]
        word = U32(np.int64(v) & 0xFFFFFFFF)
        wd0 = cx.w32(d)
        return lambda w, m: wd0(w, word, m)
    if "64" in mods:
        r64, w64 = cx.const(a, 8), cx.w64(d)
        return lambda w, m: w64(w, r64(w), m)
    r, wd = cx.const(a, 4), cx.w32(d)
    return lambda w, m: wd(w, r(w), m)


def b_s2r(cx: Ctx) -> Exec:
    cx.mods(set())
    d, a = cx.ins.operands[:2]
    wd = cx.w32(d)
    name = a.text
    return lambda w, m: wd(w, _special(cx, w, name), m)


def b_cs2r(cx: Ctx) -> Exec:
    mods = cx.mods({"32"})
    d, a = cx.ins.operands[:2]
    name = a.text
    if "32" in mods:
        wd = cx.w32(d)
        return lambda w, m: wd(w, _special(cx, w, name), m)
    w64 = cx.w64(d)
    if name == "SRZ":
        return lambda w, m: w64(w, U64(0), m)
    if name not in ("SR_CLOCKLO", "SR_GLOBALTIMERLO"):  # %clock64, %globaltimer: the clock (as PTX mode)
        raise cx.err(f"CS2R of {name} is not modelled")
    return lambda w, m: w64(w, U64(w.L.clock), m)


def _special(cx: Ctx, w: Warp, name: str) -> Any:
    try:
        return w.special(name)
    except KeyError:
        raise cx.err(f"special register {name} is not modelled") from None


def b_r2ur(cx: Ctx) -> Exec:
    """R2UR URd, Rs: Rs of the first active lane. ``R2UR{.OR} Pd, URd, Rs`` (ptxas' loops that run a uniform
    instruction once per distinct operand value, e.g. around UTMASTG): also Pd = the active lanes whose Rs
    differs from that value (.OR: or-ed into Pd), which the loop serves next."""
    ops = cx.ins.operands
    if ops and ops[0].kind == "pred":
        mods = cx.mods({"OR"})
        p, d, a = ops[:3]
        ra, wd, wp = cx.raw(a), cx.w32(d), cx.wpred(p)
        rp = cx.pred(p)

        def run(w: Warp, m: np.ndarray) -> None:
            v = np.broadcast_to(np.asarray(ra(w)), (32,))
            u = v[int(np.argmax(m))]
            differs = v != u
            wd(w, u, m)
            wp(w, differs | rp(w) if "OR" in mods else differs, m)
        return run
    cx.mods(set())
    d, a = ops[:2]
    ra, wd = cx.raw(a), cx.w32(d)
    return lambda w, m: wd(w, ra(w), m)


def b_iabs(cx: Ctx) -> Exec:
    cx.mods(set())
    d, a = cx.ins.operands[:2]
    ra, wd = cx.u32(a), cx.w32(d)
    return lambda w, m: wd(w, np.abs(np.asarray(ra(w)).view(np.int32)).view(U32), m)


def b_imnmx(cx: Ctx) -> Exec:
    mods = cx.mods({"U32"})
    d, a, b, p = cx.ins.operands[:4]
    ra, rb, rp, wd = cx.u32(a), cx.u32(b), cx.pred(p), cx.w32(d)
    dt = np.uint32 if "U32" in mods else np.int32

    def run(w: Warp, m: np.ndarray) -> None:
        x, y = np.asarray(ra(w)).view(dt), np.asarray(rb(w)).view(dt)
        wd(w, np.where(rp(w), np.minimum(x, y), np.maximum(x, y)).view(U32), m)
    return run


def b_prmt(cx: Ctx) -> Exec:
    cx.mods(set())
    d, a, s, b = cx.ins.operands[:4]
    ra, rs, rb, wd = cx.u32(a), cx.u32(s), cx.u32(b), cx.w32(d)

    def run(w: Warp, m: np.ndarray) -> None:
        v = np.asarray(ra(w)).astype(U64) | (np.asarray(rb(w)).astype(U64) << U64(32))
        sel = np.asarray(rs(w)).astype(U64)
        out = np.zeros(np.shape(sel), dtype=U64)
        for i in range(4):
            nib = (sel >> U64(4 * i)) & U64(0xF)
            byte = (v >> ((nib & U64(7)) * U64(8))) & U64(0xFF)
            byte = np.where(nib & U64(8), np.where(byte & U64(0x80), U64(0xFF), U64(0)), byte)
            out = out | (byte << U64(8 * i))
        wd(w, np.asarray(out).astype(U32), m)
    return run


def b_popc(cx: Ctx) -> Exec:
    cx.mods(set())
    d, a = cx.ins.operands[:2]
    ra, wd = cx.u32(a), cx.w32(d)

    def run(w: Warp, m: np.ndarray) -> None:
        x = np.asarray(ra(w)).astype(U32)
        wd(w, np.unpackbits(np.atleast_1d(x).view(np.uint8).reshape(-1, 4), axis=1).sum(axis=1).astype(U32), m)
    return run


def b_flo(cx: Ctx) -> Exec:
    """FLO.U32 Rd, Ra: the bit position of Ra's most significant 1 (0xffffffff when Ra is 0); .SH: 31 minus it
    (the shift that brings it to bit 31). The signed form (.S32 without .U32) is not modelled."""
    mods = cx.mods({"U32", "SH"})
    if "U32" not in mods:
        raise cx.err("FLO without .U32 (the signed form) is not modelled")
    d, a = cx.ins.operands[:2]
    ra, wd = cx.u32(a), cx.w32(d)
    sh = "SH" in mods

    def run(w: Warp, m: np.ndarray) -> None:
        x = np.atleast_1d(np.asarray(ra(w)).astype(np.uint64))
        pos = np.where(x == 0, -1, np.floor(np.log2(np.maximum(x, 1).astype(np.float64))).astype(np.int64))
        out = np.where(x == 0, -1, 31 - pos) if sh else pos
        wd(w, (out & 0xFFFFFFFF).astype(U32), m)
    return run


def b_sgxt(cx: Ctx) -> Exec:
    """SGXT[.U32] Rd, Ra, Rb|imm: keep the low Rb bits of Ra (0..32), zero- (.U32) or sign-extended."""
    mods = cx.mods({"U32", "W"})
    d, a, b = cx.ins.operands[:3]
    ra, rb, wd = cx.u32(a), cx.u32(b), cx.w32(d)
    unsigned = "U32" in mods

    def run(w: Warp, m: np.ndarray) -> None:
        x = np.asarray(ra(w)).astype(np.int64)
        n = np.minimum(np.asarray(rb(w)).astype(np.int64), 32)
        low = x & ((np.int64(1) << n) - 1)
        if not unsigned:
            sign = np.where(n > 0, (low >> np.maximum(n - 1, 0)) & 1, 0)
            low = low - (sign << n)
        wd(w, (low & 0xFFFFFFFF).astype(U32), m)
    return run


def b_nop(cx: Ctx) -> Exec:
    return lambda w, m: None


SASS_INT: dict[str, Callable[[Ctx], Exec]] = {
    "IADD3": b_iadd3, "UIADD3": b_iadd3, "VIADD": b_viadd, "IMAD": b_imad, "UIMAD": b_imad,
    "LEA": b_lea, "ULEA": b_lea, "LOP3": b_lop3, "ULOP3": b_lop3, "PLOP3": b_plop3, "UPLOP3": b_plop3,
    "SHF": b_shf, "USHF": b_shf, "SEL": b_sel, "USEL": b_sel, "FSEL": partial(b_sel, floats=True),
    "ISETP": b_isetp, "UISETP": b_isetp, "MOV": b_mov, "UMOV": b_mov, "LDC": b_ldc, "ULDC": b_ldc,
    "S2R": b_s2r, "S2UR": b_s2r, "CS2R": b_cs2r, "R2UR": b_r2ur, "IABS": b_iabs, "VIMNMX": b_imnmx,
    "IMNMX": b_imnmx, "PRMT": b_prmt, "UPRMT": b_prmt, "POPC": b_popc, "UPOPC": b_popc, "FLO": b_flo, "UFLO": b_flo,
    "NOP": b_nop, "SGXT": b_sgxt, "USGXT": b_sgxt,
}
