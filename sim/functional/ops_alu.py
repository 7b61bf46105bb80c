"""Semantics of arithmetic, logic, comparison, move and conversion instructions.

Each builder takes (instruction, decode context) and returns a closure ``fn(warp, mask, full)``
that computes all 32 lanes with numpy and writes the active ones.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from sim.functional.operands import DecodeCtx
from sim.functional.types import (
    NP,
    SINT,
    UINT,
    bf16_to_f32,
    f32_to_bf16,
    f64_to_bf16,
    fma_f32,
    fma_f64,
    is_float,
    is_packed,
    is_signed,
)
from sim.ptx.ir import Instruction
from sim.ptx.types import TYPES

WIDE = {"u16": "u32", "s16": "s32", "u32": "u64", "s32": "s64", "u64": "u64", "s64": "s64"}


def _f(x, t):
    """Compute type for float ops: bf16 bits widen to f32."""
    return bf16_to_f32(np.asarray(x)) if t == "bf16" else x


def _back(x, t):
    if t == "bf16":
        return f32_to_bf16(x)
    return np.asarray(x).astype(NP[t], copy=False)


def _binary(fn_int, fn_float):
    def build(ins: Instruction, cx: DecodeCtx):
        t = cx.type1(ins)
        if is_packed(t):
            return b_packed(ins, cx, t)
        d, a, b = ins.operands[:3]
        ra, rb, wd = cx.rd(a, t, ins), cx.rd(b, t, ins), cx.wr(d, t, ins)
        sat = "sat" in ins.mods
        if is_float(t):
            def run(w, m, full):
                wd(w, _back(fn_float(_f(ra(w), t), _f(rb(w), t)), t), m, full)
        else:
            if fn_int is None:
                raise cx.err(ins, f"'{ins.full}' needs a floating-point type")
            lim = (np.iinfo(NP[t]).min, np.iinfo(NP[t]).max) if sat else None

            def run(w, m, full):
                if lim is not None:
                    r = fn_int(ra(w).astype(np.int64), rb(w).astype(np.int64))
                    wd(w, np.clip(r, *lim).astype(NP[t]), m, full)
                else:
                    wd(w, fn_int(ra(w), rb(w)), m, full)
        return run

    return build


def b_mul(ins: Instruction, cx: DecodeCtx):
    t = cx.type1(ins)
    if is_float(t) or is_packed(t):
        return _binary(None, np.multiply)(ins, cx)
    mode = next((x for x in ("lo", "hi", "wide") if x in ins.mods), "lo")
    d, a, b = ins.operands[:3]
    ra, rb = cx.rd(a, t, ins), cx.rd(b, t, ins)
    c = ins.operands[3] if len(ins.operands) > 3 else None
    return _int_mul(ins, cx, t, mode, d, ra, rb, c)


def _int_mul(ins, cx, t, mode, d, ra, rb, c):
    size = NP[t].itemsize
    if mode == "wide":
        tw = WIDE[t]
        wd = cx.wr(d, tw, ins)
        rc = cx.rd(c, tw, ins) if c is not None else None
        dtw = NP[tw]

        def run(w, m, full):
            r = ra(w).astype(dtw) * rb(w).astype(dtw)
            if rc is not None:
                r = r + rc(w)
            wd(w, r, m, full)
        return run
    wd = cx.wr(d, t, ins)
    rc = cx.rd(c, t, ins) if c is not None else None
    if mode == "lo":
        def run(w, m, full):
            r = ra(w) * rb(w)
            if rc is not None:
                r = r + rc(w)
            wd(w, r, m, full)
        return run
    # hi: upper half of the full product
    signed = is_signed(t)
    if size <= 4:
        big = np.int64 if signed else np.uint64

        def run(w, m, full):
            r = (np.asarray(ra(w)).astype(big) * np.asarray(rb(w)).astype(big)) >> (8 * size)
            r = r.astype(NP[t])
            if rc is not None:
                r = r + rc(w)
            wd(w, r, m, full)
        return run

    def run64(w, m, full):
        av = np.broadcast_to(ra(w), w.lanes)
        bv = np.broadcast_to(rb(w), w.lanes)
        r = np.array([((int(x) * int(y)) >> 64) & 0xFFFF_FFFF_FFFF_FFFF for x, y in zip(av, bv)],
                     dtype=np.uint64).view(NP[t])
        if rc is not None:
            r = r + rc(w)
        wd(w, r, m, full)
    return run64


def b_mad(ins: Instruction, cx: DecodeCtx):
    t = cx.type1(ins)
    if is_float(t):
        return b_fma(ins, cx)
    mode = next((x for x in ("lo", "hi", "wide") if x in ins.mods), "lo")
    d, a, b, c = ins.operands[:4]
    return _int_mul(ins, cx, t, mode, d, cx.rd(a, t, ins), cx.rd(b, t, ins), c)


def b_mul24(ins, cx):
    t = cx.type1(ins)
    d, a, b = ins.operands[:3]
    ra, rb = cx.rd(a, t, ins), cx.rd(b, t, ins)
    c = ins.operands[3] if len(ins.operands) > 3 else None
    rc = cx.rd(c, t, ins) if c is not None else None
    wd = cx.wr(d, t, ins)
    hi = "hi" in ins.mods

    def run(w, m, full):
        x = (ra(w).astype(np.int64) << 40) >> 40 if is_signed(t) else ra(w).astype(np.int64) & 0xFFFFFF
        y = (rb(w).astype(np.int64) << 40) >> 40 if is_signed(t) else rb(w).astype(np.int64) & 0xFFFFFF
        p = x * y
        r = (p >> 16) if hi else p  # .hi: bits 47..16 of the 48-bit product
        r = (r & 0xFFFFFFFF).astype(np.uint32).view(NP[t])
        if rc is not None:
            r = r + rc(w)
        wd(w, r, m, full)
    return run


def b_fma(ins: Instruction, cx: DecodeCtx):
    t = cx.type1(ins)
    if is_packed(t):
        return b_packed(ins, cx, t)
    d, a, b, c = ins.operands[:4]
    ra, rb, rc, wd = cx.rd(a, t, ins), cx.rd(b, t, ins), cx.rd(c, t, ins), cx.wr(d, t, ins)
    sat = "sat" in ins.mods
    if t == "f32":
        def run(w, m, full):
            r = fma_f32(ra(w), rb(w), rc(w))
            if sat:
                r = np.clip(np.nan_to_num(r, nan=0.0), 0, 1).astype(np.float32)
            wd(w, r, m, full)
    elif t == "f64":
        def run(w, m, full):
            wd(w, fma_f64(ra(w), rb(w), rc(w)), m, full)
    elif t in ("f16", "bf16"):
        def run(w, m, full):
            x = np.asarray(_f(ra(w), t), np.float64) * np.asarray(_f(rb(w), t), np.float64) + \
                np.asarray(_f(rc(w), t), np.float64)
            wd(w, _back(x.astype(np.float32) if t == "bf16" else x, t), m, full)
    else:
        raise cx.err(ins, f"fma.{t} is not supported")
    return run


def b_div(ins, cx):
    t = cx.type1(ins)
    if is_float(t):
        return _binary(None, np.divide)(ins, cx)
    signed = is_signed(t)

    def idiv(a, b):
        if signed:
            a64, b64 = np.asarray(a).astype(np.int64), np.asarray(b).astype(np.int64)
            q = np.abs(a64) // np.where(b64 == 0, 1, np.abs(b64))
            q = np.where((a64 < 0) != (b64 < 0), -q, q)
            return np.where(b64 == 0, -1, q).astype(NP[t])
        bb = np.asarray(b)
        ones = NP[t].type(2 ** (8 * NP[t].itemsize) - 1)  # x / 0 gives all ones, as on the GPU
        return np.where(bb == 0, ones, np.asarray(a) // np.where(bb == 0, 1, bb)).astype(NP[t])
    return _binary(idiv, np.divide)(ins, cx)


def b_rem(ins, cx):
    t = cx.type1(ins)
    signed = is_signed(t)

    def irem(a, b):
        a64 = np.asarray(a).astype(np.int64 if signed else np.uint64)
        b64 = np.asarray(b).astype(np.int64 if signed else np.uint64)
        safe = np.where(b64 == 0, 1, b64)
        if signed:
            r = np.abs(a64) % np.abs(safe)
            r = np.where(a64 < 0, -r, r)
        else:
            r = a64 % safe
        return np.where(b64 == 0, a64, r).astype(NP[t])
    return _binary(irem, None)(ins, cx)


def _unary(fn_int, fn_float):
    def build(ins: Instruction, cx: DecodeCtx):
        t = cx.type1(ins)
        if is_packed(t):
            return b_packed(ins, cx, t)
        d, a = ins.operands[:2]
        ra, wd = cx.rd(a, t, ins), cx.wr(d, t, ins)
        if is_float(t):
            def run(w, m, full):
                wd(w, _back(fn_float(_f(ra(w), t)), t), m, full)
        else:
            if fn_int is None:
                raise cx.err(ins, f"'{ins.full}' needs a floating-point type")

            def run(w, m, full):
                wd(w, fn_int(ra(w)), m, full)
        return run
    return build


def _fmin(a, b):
    return np.fmin(a, b)


def _fmax(a, b):
    return np.fmax(a, b)


def b_copysign(ins, cx):
    t = cx.type1(ins)
    d, a, b = ins.operands[:3]
    ra, rb, wd = cx.rd(a, t, ins), cx.rd(b, t, ins), cx.wr(d, t, ins)
    return lambda w, m, full: wd(w, np.copysign(rb(w), ra(w)), m, full)


def b_testp(ins, cx):
    t = cx.type1(ins)
    op = next(x for x in ("finite", "infinite", "number", "notanumber", "normal", "subnormal") if x in ins.mods)
    d, a = ins.operands[:2]
    ra, wd = cx.rd(a, t, ins), cx.wr(d, "pred", ins)
    fns: dict[str, Any] = {"finite": np.isfinite, "infinite": np.isinf, "number": lambda x: ~np.isnan(x),
           "notanumber": np.isnan,
           "normal": lambda x: np.isfinite(x) & (np.abs(x) >= np.finfo(NP[t]).tiny),
           "subnormal": lambda x: (x != 0) & (np.abs(x) < np.finfo(NP[t]).tiny)}
    fn = fns[op]
    return lambda w, m, full: wd(w, fn(ra(w)), m, full)


# -- packed halves (f16x2, bf16x2): element 0 in the low 16 bits ----------------------------------
# element type -> (bits -> f32, f32 -> bits, f64 -> bits), each rounding once to nearest even
_HALF = {
    "f16": (lambda b: b.view(np.float16).astype(np.float32),
            lambda x: np.asarray(x, np.float32).astype(np.float16).view(np.uint16),
            lambda x: np.asarray(x, np.float64).astype(np.float16).view(np.uint16)),
    "bf16": (bf16_to_f32, f32_to_bf16, f64_to_bf16),
}
_SIGN2 = np.uint32(0x80008000)


def _pack_cvt(ins: Instruction, cx: DecodeCtx, t: str):
    ts = cx.types(ins)
    if len(ins.operands) != 3 or ts[-1] != "f32" or "rn" not in ins.mods or "satfinite" in ins.mods:
        raise cx.err(ins, f"only cvt.rn{{.relu}}.{t}.f32 d, a, b packs two f32 values")
    d, a, b = ins.operands
    ra, rb, wd = cx.rd(a, "f32", ins), cx.rd(b, "f32", ins), cx.wr(d, t, ins)
    from32 = _HALF[TYPES[t].elem][1]
    relu = "relu" in ins.mods

    def half(x, lanes):
        x = np.broadcast_to(np.asarray(x, np.float32), lanes)
        if relu:
            x = np.where(x < 0, np.float32(0), x)
        return from32(x).astype(np.uint32)

    return lambda w, m, full: wd(w, (half(ra(w), w.lanes) << np.uint32(16)) | half(rb(w), w.lanes), m, full)


def _fma64(a, b, c):
    return a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64)


# opcode -> (operands, function, works on): "f32" element lanes rounded once from f32, "f64" from
# f64 (fma: one rounding), "bits" the whole register (neg / abs flip / clear each half's sign bit),
# "pack" two f32 sources rounded to one half each (cvt.rn{.relu}.f16x2.f32 d, a, b: a high, b low)
PACKED: dict[str, tuple[int, Callable[..., Any], str]] = {
    "cvt": (2, lambda x: x, "pack"),
    "add": (2, np.add, "f32"),
    "sub": (2, np.subtract, "f32"),
    "mul": (2, np.multiply, "f32"),
    "min": (2, np.fmin, "f32"),
    "max": (2, np.fmax, "f32"),
    "fma": (3, _fma64, "f64"),
    "neg": (1, lambda x: x ^ _SIGN2, "bits"),
    "abs": (1, lambda x: x & ~_SIGN2, "bits"),
}


def b_packed(ins: Instruction, cx: DecodeCtx, t: str):
    """Two halves per 32-bit register, each computed in f32 (f64 for fma: one rounding) and rounded
    once to the element type; add/sub/mul in f32 round as the half-precision operation would."""
    if ins.opcode not in PACKED or TYPES[t].elem not in _HALF:
        raise cx.err(ins, f"'{ins.full}' is not supported (packed ops: {' '.join(PACKED)})")
    n, fn, on = PACKED[ins.opcode]
    ops = ins.operands
    if on == "pack":
        return _pack_cvt(ins, cx, t)
    rs = [cx.rd(o, t, ins) for o in ops[1:1 + n]]
    wd = cx.wr(ops[0], t, ins)
    if on == "bits":
        return lambda w, m, full: wd(w, fn(np.asarray(rs[0](w), np.uint32)), m, full)
    to32, from32, from64 = _HALF[TYPES[t].elem]
    back = from64 if on == "f64" else from32
    sat = "sat" in ins.mods

    def half(vals, shift):
        return [to32(((np.asarray(v, np.uint32) >> np.uint32(shift)) & np.uint32(0xFFFF)).astype(np.uint16))
                for v in vals]

    def lane(vals, shift):
        r = fn(*half(vals, shift))
        if sat:
            r = np.clip(np.nan_to_num(r, nan=0.0), 0, 1)
        return back(r).astype(np.uint32)

    def run(w, m, full):
        vals = [np.broadcast_to(r(w), w.lanes) for r in rs]
        wd(w, lane(vals, 0) | (lane(vals, 16) << np.uint32(16)), m, full)
    return run


# -- logic and bit manipulation -----------------------------------------------------------------
def _logic(fn):
    def build(ins, cx):
        t = cx.type1(ins)
        ops = ins.operands
        rs = [cx.rd(o, t, ins) for o in ops[1:]]
        wd = cx.wr(ops[0], t, ins)
        if len(rs) == 1:
            return lambda w, m, full: wd(w, fn(rs[0](w)), m, full)
        r0, r1 = rs
        return lambda w, m, full: wd(w, fn(r0(w), r1(w)), m, full)
    return build


def b_cnot(ins, cx):
    t = cx.type1(ins)
    ra, wd = cx.rd(ins.operands[1], t, ins), cx.wr(ins.operands[0], t, ins)
    return lambda w, m, full: wd(w, (ra(w) == 0).astype(NP[t]), m, full)


def _shift(ins, cx, left: bool):
    t = cx.type1(ins)
    d, a, b = ins.operands[:3]
    ra, rb, wd = cx.rd(a, t, ins), cx.rd(b, "u32", ins), cx.wr(d, t, ins)
    bits = 8 * NP[t].itemsize
    arith = is_signed(t) and not left

    def run(w, m, full):
        x = np.asarray(ra(w))
        s = np.asarray(rb(w)).astype(np.uint32)
        big = s >= bits
        sc = np.where(big, 0, s).astype(x.dtype if x.dtype.kind in "iu" else np.uint32)
        if left:
            r = np.where(big, 0, x << sc)
        elif arith:
            r = np.where(big, np.where(x < 0, -1, 0), x >> sc)
        else:
            r = np.where(big, 0, x >> sc)
        wd(w, r.astype(NP[t]), m, full)
    return run


def b_shl(ins, cx):
    return _shift(ins, cx, True)


def b_shr(ins, cx):
    return _shift(ins, cx, False)


def b_shf(ins, cx):
    d, a, b, c = ins.operands[:4]
    ra, rb, rc, wd = cx.rd(a, "u32", ins), cx.rd(b, "u32", ins), cx.rd(c, "u32", ins), cx.wr(d, "b32", ins)
    left = "l" in ins.mods
    clamp = "clamp" in ins.mods

    def run(w, m, full):
        lo = np.asarray(ra(w)).astype(np.uint64)
        hi = np.asarray(rb(w)).astype(np.uint64)
        n = np.asarray(rc(w)).astype(np.uint64)
        n = np.minimum(n, 32) if clamp else n & np.uint64(31)
        v = (hi << np.uint64(32)) | lo
        r = (v << n) >> np.uint64(32) if left else v >> n
        wd(w, (r & np.uint64(0xFFFFFFFF)).astype(np.uint32), m, full)
    return run


def b_popc(ins, cx):
    t = cx.type1(ins)
    ra, wd = cx.rd(ins.operands[1], t, ins), cx.wr(ins.operands[0], "u32", ins)
    return lambda w, m, full: wd(w, np.bitwise_count(ra(w)).astype(np.uint32), m, full)


def b_clz(ins, cx):
    t = cx.type1(ins)
    ra, wd = cx.rd(ins.operands[1], t, ins), cx.wr(ins.operands[0], "u32", ins)
    bits = 8 * NP[t].itemsize

    def run(w, m, full):
        x = np.asarray(ra(w)).view(UINT[NP[t].itemsize]).astype(np.uint64)
        n = np.zeros(x.shape, dtype=np.int64)
        for i in range(bits):
            n = np.where((x >> np.uint64(i)) & np.uint64(1) != 0, bits - 1 - i, n)
        wd(w, np.where(x == 0, bits, n).astype(np.uint32), m, full)
    return run


def b_brev(ins, cx):
    t = cx.type1(ins)
    ra, wd = cx.rd(ins.operands[1], t, ins), cx.wr(ins.operands[0], t, ins)
    bits = 8 * NP[t].itemsize
    ut = UINT[NP[t].itemsize]

    def run(w, m, full):
        x = np.asarray(ra(w)).view(ut)
        r = np.zeros_like(x)
        for i in range(bits):
            r |= ((x >> ut.type(i)) & ut.type(1)) << ut.type(bits - 1 - i)
        wd(w, r, m, full)
    return run


def b_bfe(ins, cx):
    """bfe.{u,s}{32,64} d, a, b, c (PTX ISA): pos = b & 0xff, len = c & 0xff; bit i of d is a[pos + i] where
    i < len and pos + i <= msb, else sbit: 0 for .u and for len 0, else a[min(pos + len - 1, msb)]."""
    t = cx.type1(ins)
    d, a, b, c = ins.operands[:4]
    ra, rb, rc, wd = cx.rd(a, t, ins), cx.rd(b, "u32", ins), cx.rd(c, "u32", ins), cx.wr(d, t, ins)
    bits = 8 * NP[t].itemsize
    ones = (1 << bits) - 1
    signed = is_signed(t)

    def run(w, m, full):
        x = np.asarray(ra(w)).view(UINT[NP[t].itemsize]).astype(object)
        pos = np.broadcast_to(np.asarray(rb(w)) & 0xFF, w.lanes)
        ln = np.broadcast_to(np.asarray(rc(w)) & 0xFF, w.lanes)
        xs = np.broadcast_to(x, w.lanes)
        out = []
        for xi, p, n in zip(xs, pos, ln):
            p, n, xi = int(p), int(n), int(xi)
            k = min(n, max(bits - p, 0))  # the field's bits that lie inside a
            v = (xi >> p) & ((1 << k) - 1)
            if signed and n and (xi >> min(p + n - 1, bits - 1)) & 1:
                v |= ones ^ ((1 << k) - 1)
            out.append(v)
        wd(w, np.array(out, dtype=UINT[NP[t].itemsize]).view(NP[t]), m, full)
    return run


def b_bfi(ins, cx):
    t = cx.type1(ins)
    d, f, b, c, e = ins.operands[:5]
    rf, rb = cx.rd(f, t, ins), cx.rd(b, t, ins)
    rc, re_, wd = cx.rd(c, "u32", ins), cx.rd(e, "u32", ins), cx.wr(d, t, ins)
    bits = 8 * NP[t].itemsize
    ut = UINT[NP[t].itemsize]

    def run(w, m, full):
        fv = np.broadcast_to(np.asarray(rf(w)).view(ut), w.lanes).astype(object)
        bv = np.broadcast_to(np.asarray(rb(w)).view(ut), w.lanes).astype(object)
        pos = np.broadcast_to(np.asarray(rc(w)) & 0xFF, w.lanes)
        ln = np.broadcast_to(np.asarray(re_(w)) & 0xFF, w.lanes)
        out = []
        for fi, bi, p, n in zip(fv, bv, pos, ln):
            p, n = int(p), int(n)
            mask = (((1 << n) - 1) << p) & ((1 << bits) - 1) if p < bits else 0
            out.append((int(bi) & ~mask | (int(fi) << p) & mask) & ((1 << bits) - 1))
        wd(w, np.array(out, dtype=ut), m, full)
    return run


def b_prmt(ins, cx):
    d, a, b, c = ins.operands[:4]
    ra, rb, rc, wd = cx.rd(a, "u32", ins), cx.rd(b, "u32", ins), cx.rd(c, "u32", ins), cx.wr(d, "b32", ins)
    mode = next((x for x in ("f4e", "b4e", "rc8", "ecl", "ecr", "rc16") if x in ins.mods), None)
    if mode is not None:
        raise cx.err(ins, f"prmt mode .{mode} is not supported (only the default mode)")

    def run(w, m, full):
        av = np.broadcast_to(np.asarray(ra(w)).astype(np.uint64), w.lanes)
        bv = np.broadcast_to(np.asarray(rb(w)).astype(np.uint64), w.lanes)
        sel = np.broadcast_to(np.asarray(rc(w)).astype(np.uint64), w.lanes)
        src = (bv << np.uint64(32)) | av  # bytes 0..7
        r = np.zeros(w.lanes, dtype=np.uint64)
        for i in range(4):
            s = (sel >> np.uint64(4 * i)) & np.uint64(0xF)
            byte = (src >> ((s & np.uint64(7)) * np.uint64(8))) & np.uint64(0xFF)
            sign = np.where(byte & np.uint64(0x80), np.uint64(0xFF), np.uint64(0))
            byte = np.where(s & np.uint64(8), sign, byte)
            r |= byte << np.uint64(8 * i)
        wd(w, r.astype(np.uint32), m, full)
    return run


def b_lop3(ins, cx):
    d, a, b, c, lut = ins.operands[:5]
    ra, rb, rc, wd = cx.rd(a, "b32", ins), cx.rd(b, "b32", ins), cx.rd(c, "b32", ins), cx.wr(d, "b32", ins)
    if lut.kind != "imm":
        raise cx.err(ins, "lop3 needs an immediate lookup table")
    table = int(lut.value) & 0xFF

    def run(w, m, full):
        x, y, z = np.asarray(ra(w)), np.asarray(rb(w)), np.asarray(rc(w))
        r = np.zeros(w.lanes, dtype=np.uint32)
        for i in range(8):
            if table >> i & 1:
                r |= (x if i & 4 else ~x) & (y if i & 2 else ~y) & (z if i & 1 else ~z)
        wd(w, r, m, full)
    return run


# -- comparison and selection -------------------------------------------------------------------
_CMP = {
    "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal, "gt": np.greater,
    "ge": np.greater_equal, "lo": np.less, "ls": np.less_equal, "hi": np.greater, "hs": np.greater_equal,
}


def _compare(ins, cx, t):
    cmp = next((x for x in ins.mods if x in _CMP or x in ("equ", "neu", "ltu", "leu", "gtu", "geu",
                                                         "num", "nan")), None)
    if cmp is None:
        raise cx.err(ins, "missing comparison operator (.eq, .lt, ...)")
    if is_float(t):
        unordered = cmp.endswith("u") and cmp != "num"
        base = cmp[:-1] if unordered else cmp

        def f(a, b):
            a, b = _f(a, t), _f(b, t)
            nan = np.isnan(a) | np.isnan(b)
            if base == "num":
                return ~nan
            if base == "nan":
                return nan
            r = _CMP[base](a, b)
            return (r | nan) if unordered else (r & ~nan)
        return f
    fn = _CMP[cmp]
    if cmp in ("lo", "ls", "hi", "hs") and is_signed(t):
        ut = UINT[NP[t].itemsize]
        return lambda a, b: fn(np.asarray(a).view(ut), np.asarray(b).view(ut))
    return fn


_BOOL = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}


def b_setp(ins, cx):
    t = cx.type1(ins)
    cmp = _compare(ins, cx, t)
    ops = ins.operands
    d, a, b = ops[:3]
    ra, rb = cx.rd(a, t, ins), cx.rd(b, t, ins)
    bop = next((_BOOL[x] for x in ins.mods if x in _BOOL), None)
    rc = cx.rd(ops[3], "pred", ins) if len(ops) > 3 else None
    if d.kind == "pair":
        wp, wq = cx.wr(d.items[0], "pred", ins), cx.wr(d.items[1], "pred", ins)
    else:
        wp, wq = cx.wr(d, "pred", ins), None

    def run(w, m, full):
        r = cmp(ra(w), rb(w))
        if r.shape != w.lanes:  # two scalar operands
            r = np.broadcast_to(r, w.lanes)
        if bop is not None and rc is not None:
            c = rc(w)
            wp(w, bop(r, c), m, full)
            if wq is not None:
                wq(w, bop(~r, c), m, full)
        else:
            wp(w, r, m, full)
            if wq is not None:
                wq(w, ~r, m, full)
    return run


def b_selp(ins, cx):
    t = cx.type1(ins)
    d, a, b, c = ins.operands[:4]
    ra, rb, rc, wd = cx.rd(a, t, ins), cx.rd(b, t, ins), cx.rd(c, "pred", ins), cx.wr(d, t, ins)
    return lambda w, m, full: wd(w, np.where(rc(w), ra(w), rb(w)), m, full)


def b_slct(ins, cx):
    ts = cx.types(ins)
    t, ct = ts[0], ts[-1]
    d, a, b, c = ins.operands[:4]
    ra, rb, rc, wd = cx.rd(a, t, ins), cx.rd(b, t, ins), cx.rd(c, ct, ins), cx.wr(d, t, ins)
    return lambda w, m, full: wd(w, np.where(rc(w) >= 0, ra(w), rb(w)), m, full)


# -- moves and conversions ----------------------------------------------------------------------
def b_mov(ins, cx):
    t = cx.type1(ins)
    d, a = ins.operands[:2]
    size = NP[t].itemsize
    if a.kind == "vec":  # pack: lowest index in the lowest bits
        parts = a.items
        each = size // len(parts)
        pt = {1: "b8", 2: "b16", 4: "b32"}[each]
        rs = [cx.rd(p, pt, ins) for p in parts]
        wd = cx.wr(d, t, ins)
        ut = UINT[size]

        def pack(w, m, full):
            r = np.zeros(w.lanes, dtype=ut)
            for i, rp in enumerate(rs):
                r |= np.asarray(rp(w)).astype(ut) << ut.type(8 * each * i)
            wd(w, r, m, full)
        return pack
    if d.kind == "vec":  # unpack
        parts = d.items
        each = size // len(parts)
        pt = {1: "b8", 2: "b16", 4: "b32"}[each]
        ra = cx.rd(a, t, ins)
        ws = [cx.wr(p, pt, ins) for p in parts]
        ut = UINT[size]

        def unpack(w, m, full):
            x = np.broadcast_to(np.asarray(ra(w)).view(ut), w.lanes)
            for i, wp in enumerate(ws):
                wp(w, ((x >> ut.type(8 * each * i)) & ut.type((1 << 8 * each) - 1)).astype(UINT[each]), m, full)
        return unpack
    ra, wd = cx.rd(a, t, ins), cx.wr(d, t, ins)
    return lambda w, m, full: wd(w, ra(w), m, full)


_IRND = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}


def _cvt_tf32(ins, cx):
    """cvt.rna{.satfinite}.tf32.f32 d, a: round to 10 mantissa bits, ties away from zero, in a 32-bit
    container (the low 13 bits zero); NaN and infinity pass through (PTX ISA, cvt: tf32)."""
    d, a = ins.operands[:2]
    ra, wd = cx.rd(a, "b32", ins), cx.wr(d, "b32", ins)
    one = np.uint32(0x1000)
    keep = np.uint32(0xFFFFE000)

    def run(w, m, full):
        x = np.broadcast_to(np.asarray(ra(w), dtype=np.uint32), w.lanes)
        special = (x & np.uint32(0x7F800000)) == np.uint32(0x7F800000)
        wd(w, np.where(special, x, (x + one) & keep).astype(np.uint32), m, full)
    return run


def b_cvt(ins, cx):
    if "tf32" in ins.mods and "f32" in ins.mods:
        return _cvt_tf32(ins, cx)
    ts = cx.types(ins)
    if ts and is_packed(ts[0]):
        return b_packed(ins, cx, ts[0])
    if len(ts) != 2:
        raise cx.err(ins, "cvt needs a destination and a source type")
    dt_, at = ts
    d, a = ins.operands[:2]
    ra, wd = cx.rd(a, at, ins), cx.wr(d, dt_, ins)
    sat = "sat" in ins.mods
    irnd = next((x for x in ins.mods if x in _IRND), None)
    frnd = next((x for x in ins.mods if x in ("rn", "rz", "rm", "rp")), "rn")
    # float rounding modes other than .rn are approximated by round-to-nearest, except .rz narrowing
    # (docs/ptx-subset.md)
    if is_float(at) and not is_float(dt_):  # float -> int, saturating, NaN -> 0
        rnd = _IRND.get(irnd or "rzi", np.trunc)
        info = np.iinfo(NP[dt_])

        def f2i(w, m, full):
            x = np.asarray(_f(ra(w), at), np.float64)
            x = np.nan_to_num(rnd(x), nan=0.0, posinf=info.max, neginf=info.min)
            x = np.clip(x, info.min, info.max)
            wd(w, x.astype(NP[dt_]), m, full)
        return f2i
    if is_float(at) and is_float(dt_):
        def f2f(w, m, full):
            x = _f(ra(w), at)
            if irnd:
                x = _IRND[irnd](x)
            if sat:
                x = np.clip(np.nan_to_num(x, nan=0.0), 0, 1)
            if dt_ == "bf16":
                r = f32_to_bf16(np.asarray(x, np.float32) if at != "f64" else _round_f64_to_f32(x), frnd)
            else:
                r = np.asarray(x).astype(NP[dt_])
                if frnd == "rz" and NP[dt_].itemsize < NP[at].itemsize:
                    over = np.abs(r.astype(np.float64)) > np.abs(np.asarray(x, np.float64))
                    r = np.where(over, np.nextafter(r, NP[dt_].type(0)), r)
            wd(w, r, m, full)
        return f2f
    if not is_float(at) and is_float(dt_):  # int -> float
        def i2f(w, m, full):
            x = np.asarray(ra(w))
            if dt_ == "bf16":
                r = f32_to_bf16(x.astype(np.float64).astype(np.float32))
            else:
                r = x.astype(NP[dt_])
            wd(w, r, m, full)
        return i2f
    # int -> int
    if sat:
        info = np.iinfo(NP[dt_])

        def i2i_sat(w, m, full):
            x = np.asarray(ra(w)).astype(np.float64)
            wd(w, np.clip(x, info.min, info.max).astype(NP[dt_]), m, full)
        return i2i_sat

    def i2i(w, m, full):
        x = np.asarray(ra(w))
        if is_signed(at):
            x = x.astype(SINT[NP[at].itemsize])
        wd(w, x.astype(NP[dt_]), m, full)
    return i2i


def _round_f64_to_f32(x):
    return np.asarray(x, np.float64).astype(np.float32)


def b_cvta(ins, cx):
    from sim.functional.memory import LOCAL_WINDOW, PARAM_WINDOW, SHARED_WINDOW

    t = cx.type1(ins)
    d, a = ins.operands[:2]
    ra, wd = cx.rd(a, t, ins), cx.wr(d, t, ins)
    space = next((x for x in ins.mods if x in ("global", "shared", "local", "const", "param")), None)
    to = "to" in ins.mods
    if space in ("global", None):
        return lambda w, m, full: wd(w, ra(w), m, full)
    window = {"shared": SHARED_WINDOW, "local": LOCAL_WINDOW, "param": PARAM_WINDOW}.get(space)
    if window is None:
        raise cx.err(ins, f"cvta for .{space} is not supported")
    dt = NP[t]
    if to:
        return lambda w, m, full: wd(w, (np.asarray(ra(w)).astype(np.uint64) - np.uint64(window)).astype(dt), m, full)
    return lambda w, m, full: wd(w, (np.asarray(ra(w)).astype(np.uint64) + np.uint64(window)).astype(dt), m, full)


def _sfu(fn):
    return _unary(None, fn)


SEMANTICS_ALU = {
    "add": _binary(np.add, np.add),
    "sub": _binary(np.subtract, np.subtract),
    "mul": b_mul,
    "mad": b_mad,
    "mul24": b_mul24,
    "mad24": b_mul24,
    "fma": b_fma,
    "div": b_div,
    "rem": b_rem,
    "abs": _unary(np.abs, np.abs),
    "neg": _unary(np.negative, np.negative),
    "min": _binary(np.minimum, _fmin),
    "max": _binary(np.maximum, _fmax),
    "copysign": b_copysign,
    "rcp": _sfu(lambda x: np.float32(1) / x if x.dtype == np.float32 else 1.0 / x),
    "sqrt": _sfu(np.sqrt),
    "rsqrt": _sfu(lambda x: 1 / np.sqrt(x)),
    "sin": _sfu(np.sin),
    "cos": _sfu(np.cos),
    "lg2": _sfu(np.log2),
    "ex2": _sfu(np.exp2),
    "tanh": _sfu(np.tanh),
    "testp": b_testp,
    "and": _logic(lambda a, b: a & b),
    "or": _logic(lambda a, b: a | b),
    "xor": _logic(lambda a, b: a ^ b),
    "not": _logic(lambda a: ~a),
    "cnot": b_cnot,
    "lop3": b_lop3,
    "shl": b_shl,
    "shr": b_shr,
    "shf": b_shf,
    "popc": b_popc,
    "clz": b_clz,
    "brev": b_brev,
    "bfe": b_bfe,
    "bfi": b_bfi,
    "prmt": b_prmt,
    "setp": b_setp,
    "selp": b_selp,
    "slct": b_slct,
    "mov": b_mov,
    "cvt": b_cvt,
    "cvta": b_cvta,
}
