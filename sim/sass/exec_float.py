"""Float SASS instructions with the PTX functional model's semantics (sim.functional.types): f32 adds
and multiplies round once to nearest even, FFMA is fused (fma_f32); .RM/.RP/.RZ round the exact result
in that direction (TwoSum error term); .FTZ flushes f32 subnormal inputs and results to signed zero;
.SAT clamps to [0, 1] with NaN -> 0. MUFU uses numpy float32 functions, as the PTX model's .approx ops.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from sim.functional.fragments import a_fragment, accumulator_map, b_fragment
from sim.functional.types import bf16_to_f32, f32_to_bf16, fma_f32, fma_f64
from sim.sass.exec_int import BOOL_OPS, Exec
from sim.sass.exec_operands import U32, U64, Ctx, Reader
from sim.sass.exec_state import Warp
from sim.sass.listing import Operand

F32, F64 = np.float32, np.float64
TINY = F32(1.1754943508222875e-38)
_ROUND = ("RN", "RM", "RP", "RZ")


def _ftz(x: Any) -> Any:
    x = np.asarray(x, F32)
    return np.where(np.abs(x) < TINY, np.copysign(F32(0), x), x).astype(F32)


def _directed(s: Any, e: Any, mode: str) -> Any:
    """f64 value s (+ a smaller error term e: the exact value is s + e) rounded to f32 in ``mode``."""
    s = np.asarray(s, F64)
    r = s.astype(F32)
    if mode == "RN":
        return r
    r64 = r.astype(F64)
    e = np.asarray(e, F64)
    above = (r64 > s) | ((r64 == s) & (e < 0))
    below = (r64 < s) | ((r64 == s) & (e > 0))
    if mode == "RM":
        return np.where(above, np.nextafter(r, F32(-np.inf)), r).astype(F32)
    if mode == "RP":
        return np.where(below, np.nextafter(r, F32(np.inf)), r).astype(F32)
    toward0 = np.where(s > 0, above, below)
    return np.where(toward0 & np.isfinite(s), np.nextafter(r, F32(0)), r).astype(F32)


def _two_sum(a: Any, b: Any) -> tuple[Any, Any]:
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _float_mods(cx: Ctx, extra: set[str]) -> tuple[str, bool, bool]:
    mods = cx.mods(set(_ROUND) | {"FTZ", "SAT"} | extra)
    mode = next((x for x in _ROUND if x in mods), "RN")
    return mode, "FTZ" in mods, "SAT" in mods


def _finish(r: Any, ftz: bool, sat: bool) -> Any:
    if ftz:
        r = _ftz(r)
    if sat:
        r = np.clip(np.nan_to_num(np.asarray(r, F32), nan=0.0), 0, 1).astype(F32)
    return np.asarray(r, F32).view(U32)


def _reader(cx: Ctx, op: Operand, ftz: bool) -> Reader:
    r = cx.f32(op)
    return (lambda w: _ftz(r(w))) if ftz else r


_SCALE = {"D2": 0.5, "D4": 0.25, "D8": 0.125, "M2": 2.0, "M4": 4.0, "M8": 8.0}  # FMUL's result scale


def b_fadd(cx: Ctx, mul: bool = False) -> Exec:
    """FADD d, a, b; FMUL d, a, b with ``mul`` (FMUL.D2 etc. scale the product by a power of two, as ptxas
    folds ``mul.f32 x, y`` and ``mul.f32 ., 0.5``: exact except where the product is subnormal)."""
    mode, ftz, sat = _float_mods(cx, set(_SCALE) if mul else set())
    scale = next((F32(_SCALE[k]) for k in cx.ins.modifiers if k in _SCALE), None)
    if scale is not None and mode != "RN":
        raise cx.err("FMUL with a result scale and a directed rounding is not modelled")
    d, a, b = cx.ins.operands[:3]
    ra, rb, wd = _reader(cx, a, ftz), _reader(cx, b, ftz), cx.w32(d)

    def run(w: Warp, m: np.ndarray) -> None:
        x, y = np.asarray(ra(w), F32), np.asarray(rb(w), F32)
        if mode == "RN":
            r = x * y if mul else x + y
            if scale is not None:
                r = r * scale
        elif mul:
            r = _directed(x.astype(F64) * y.astype(F64), 0.0, mode)
        else:
            r = _directed(*_two_sum(x.astype(F64), y.astype(F64)), mode)
        wd(w, _finish(r, ftz, sat), m)
    return run


def b_ffma(cx: Ctx) -> Exec:
    mode, ftz, sat = _float_mods(cx, set())
    d, a, b, c = cx.ins.operands[:4]
    ra, rb, rc, wd = _reader(cx, a, ftz), _reader(cx, b, ftz), _reader(cx, c, ftz), cx.w32(d)

    def run(w: Warp, m: np.ndarray) -> None:
        x, y, z = np.asarray(ra(w), F32), np.asarray(rb(w), F32), np.asarray(rc(w), F32)
        if mode == "RN":
            r = fma_f32(x, y, z)
        else:
            r = _directed(*_two_sum(x.astype(F64) * y.astype(F64), z.astype(F64)), mode)
        wd(w, _finish(r, ftz, sat), m)
    return run


def b_fmnmx(cx: Ctx) -> Exec:
    _, ftz, _ = _float_mods(cx, set())
    d, a, b, p = cx.ins.operands[:4]
    ra, rb, rp, wd = _reader(cx, a, ftz), _reader(cx, b, ftz), cx.pred(p), cx.w32(d)

    def run(w: Warp, m: np.ndarray) -> None:
        x, y = np.asarray(ra(w), F32), np.asarray(rb(w), F32)
        r = np.where(rp(w), np.fmin(x, y), np.fmax(x, y))
        wd(w, _finish(r, ftz, False), m)
    return run


_FCMP: dict[str, Callable[[Any, Any], Any]] = {
    "EQ": np.equal, "NE": lambda x, y: (x != y) & ~np.isnan(x) & ~np.isnan(y), "LT": np.less,
    "LE": np.less_equal, "GT": np.greater, "GE": np.greater_equal,
    "NUM": lambda x, y: ~np.isnan(x) & ~np.isnan(y), "NAN": lambda x, y: np.isnan(x) | np.isnan(y),
}
for _k in ("EQ", "NE", "LT", "LE", "GT", "GE"):
    _FCMP[_k + "U"] = (lambda f: lambda x, y: f(x, y) | np.isnan(x) | np.isnan(y))(
        {"NE": np.not_equal}.get(_k, _FCMP[_k]))


def b_fsetp(cx: Ctx) -> Exec:
    mods = cx.ins.modifiers
    cmp = [x for x in mods if x in _FCMP]
    op = [x for x in mods if x in BOOL_OPS]
    cx.mods(set(_FCMP) | set(BOOL_OPS) | {"FTZ"})
    if len(cmp) != 1 or len(op) != 1:
        raise cx.err("FSETP needs one compare and one boolean modifier")
    f, g = _FCMP[cmp[0]], BOOL_OPS[op[0]]
    ftz = "FTZ" in mods
    d1, d2, a, b, c = cx.ins.operands[:5]
    ra, rb, rc, w1, w2 = _reader(cx, a, ftz), _reader(cx, b, ftz), cx.pred(c), cx.wpred(d1), cx.wpred(d2)

    def run(w: Warp, m: np.ndarray) -> None:
        r = f(np.asarray(ra(w), F32), np.asarray(rb(w), F32))
        p = rc(w)
        w1(w, g(r, p), m)
        w2(w, g(~np.asarray(r), p), m)
    return run


_MUFU: dict[str, Callable[[Any], Any]] = {
    "RCP": lambda x: F32(1) / x, "RSQ": lambda x: F32(1) / np.sqrt(x), "SQRT": np.sqrt, "EX2": np.exp2,
    "LG2": np.log2, "SIN": np.sin, "COS": np.cos, "TANH": np.tanh,
}


def b_mufu(cx: Ctx) -> Exec:
    if "RCP64H" in cx.ins.modifiers:  # the high word of 1/x for the f64 x whose high word is the source
        cx.mods({"RCP64H"})
        d, a = cx.ins.operands[:2]
        rh, wh = cx.raw(a), cx.w32(d)

        def rcp64h(w: Warp, m: np.ndarray) -> None:
            x = (np.asarray(rh(w)).astype(U64) << U64(32)).view(F64)
            wh(w, (np.asarray(F64(1) / x).view(U64) >> U64(32)).astype(U32), m)
        return rcp64h
    mods = cx.mods(set(_MUFU) | {"FTZ"})
    fn = next((_MUFU[x] for x in cx.ins.modifiers if x in _MUFU), None)
    if fn is None:
        raise cx.err("MUFU without a modelled function")
    d, a = cx.ins.operands[:2]
    ra, wd = cx.f32(a), cx.w32(d)
    ftz = "FTZ" in mods
    return lambda w, m: wd(w, _finish(fn(np.asarray(ra(w), F32)).astype(F32), ftz, False), m)


_ITYPES = {"U32": np.uint32, "S32": np.int32, "U64": np.uint64, "S64": np.int64, "U16": np.uint16,
           "S16": np.int16, "U8": np.uint8, "S8": np.int8}


def _int_source(cx: Ctx, op: Operand, t: type) -> Reader:
    if np.dtype(t).itemsize == 8:
        return cx.u64(op)
    r = cx.u32(op)
    return lambda w: np.asarray(r(w)).astype(U32).view(np.int32 if np.dtype(t).kind == "i" else U32).astype(t)


def b_i2f(cx: Ctx) -> Exec:
    mods = cx.mods(set(_ROUND) | set(_ITYPES) | {"F32", "F64", "F16"})
    src = next((_ITYPES[x] for x in cx.ins.modifiers if x in _ITYPES), np.int32)
    mode = next((x for x in _ROUND if x in mods), "RN")
    d, a = cx.ins.operands[:2]
    ra = _int_source(cx, a, src)
    if "F64" in mods:
        w64 = cx.w64(d)
        return lambda w, m: w64(w, np.asarray(ra(w)).astype(src).astype(F64).view(U64), m)
    if "F16" in mods:
        raise cx.err("I2F to f16 is not modelled")
    wd = cx.w32(d)

    def run(w: Warp, m: np.ndarray) -> None:
        x = np.atleast_1d(np.asarray(ra(w)).astype(src))
        if np.dtype(src).itemsize < 8:
            r = _directed(x.astype(F64), 0.0, mode)
        else:
            r = x.astype(F32)
            if mode != "RN":  # exact comparison through Python integers
                ex = np.array([(int(rv) > int(xv)) - (int(rv) < int(xv)) if np.isfinite(rv) else 1
                               for rv, xv in zip(r.tolist(), x.tolist())])
                r = _directed(r.astype(F64), -ex.astype(F64), mode)
        wd(w, np.asarray(r, F32).view(U32), m)
    return run


def _f64(cx: Ctx, op: Operand) -> Reader:
    r = cx.u64(op)
    return lambda w: np.asarray(r(w)).view(F64)


_F2I_ROUND = {"TRUNC": np.trunc, "FLOOR": np.floor, "CEIL": np.ceil}


def b_f2i(cx: Ctx) -> Exec:
    mods = cx.mods(set(_F2I_ROUND) | set(_ITYPES) | {"FTZ", "NTZ", "F64", "F32"})
    dst = next((_ITYPES[x] for x in cx.ins.modifiers if x in _ITYPES), np.int32)
    rnd = next((_F2I_ROUND[x] for x in cx.ins.modifiers if x in _F2I_ROUND), np.rint)
    d, a = cx.ins.operands[:2]
    ra = _f64(cx, a) if "F64" in mods else cx.f32(a)
    info = np.iinfo(np.dtype(dst))  # type: ignore[type-var]
    wide = np.dtype(dst).itemsize == 8
    wr = cx.w64(d) if wide else cx.w32(d)

    def run(w: Warp, m: np.ndarray) -> None:
        x = rnd(np.asarray(ra(w), F64))
        x = np.where(np.isnan(x), 0.0, x)
        if wide:  # 2**63 / 2**64 are not exact in float64 arithmetic: saturate before converting
            hi = x >= float(info.max)
            r = np.where(hi, info.max, np.where(x <= float(info.min), info.min, x).astype(dst)).astype(dst)
        else:
            r = np.clip(x, info.min, info.max).astype(dst)
        wr(w, r.astype(np.int64 if info.min < 0 else np.uint64).view(U64) if wide else r.astype(U32), m)
    return run


def b_f2f(cx: Ctx) -> Exec:
    mods = cx.mods(set(_ROUND) | {"F64", "F32", "F16", "BF16", "FTZ"})
    types = [x for x in cx.ins.modifiers if x in ("F64", "F32", "F16", "BF16")]
    mode = next((x for x in _ROUND if x in mods), "RN")
    d, a = cx.ins.operands[:2]
    if types == ["F64", "F32"]:
        ra, w64 = cx.f32(a), cx.w64(d)
        return lambda w, m: w64(w, np.asarray(ra(w), F32).astype(F64).view(U64), m)
    if types == ["F32", "F64"]:
        r64, wd = cx.u64(a), cx.w32(d)
        return lambda w, m: wd(w, _directed(np.asarray(r64(w)).view(F64), 0.0, mode).view(U32), m)
    if types == ["F16", "F32"] and mode == "RN":
        r32, wd = cx.f32(a), cx.w32(d)
        return lambda w, m: wd(w, np.asarray(r32(w), F32).astype(np.float16).view(np.uint16).astype(U32), m)
    raise cx.err(f"F2F.{'.'.join(types)} with rounding {mode} is not modelled")


def b_fchk(cx: Ctx) -> Exec:
    """FCHK P, a, b: true when a / b needs the slow path. Set conservatively (any non-finite, zero or
    subnormal operand, or exponents far apart): the slow path computes the same quotient."""
    cx.mods(set())
    d, a, b = cx.ins.operands[:3]
    ra, rb, wp = cx.f32(a), cx.f32(b), cx.wpred(d)

    def run(w: Warp, m: np.ndarray) -> None:
        x, y = np.abs(np.asarray(ra(w), F64)), np.abs(np.asarray(rb(w), F64))
        ex, ey = np.frexp(x)[1], np.frexp(y)[1]
        bad = ~np.isfinite(x) | ~np.isfinite(y) | (y < TINY) | (x < TINY)
        wp(w, bad | (np.abs(ex - ey) >= 120) | (x >= 2.0 ** 126) | (y >= 2.0 ** 126), m)
    return run


# -- packed halves ---------------------------------------------------------------------------------
def _halves(cx: Ctx, op: Operand) -> Callable[[Warp], tuple[Any, Any]]:
    """(low, high) f16 halves of a source as float64, with .H0_H0 / .H1_H1 swizzles and -/|x|."""
    if op.kind == "float":
        raise cx.err("a single float immediate on a packed-half instruction")
    sw = [s for s in op.suffixes if s in ("H0_H0", "H1_H1", "H0_H1", "H1_H0")]
    r = cx.raw(op, {"reuse", "H0_H0", "H1_H1", "H0_H1", "H1_H0"})
    pick = {"H0_H0": (0, 0), "H1_H1": (1, 1), "H1_H0": (1, 0)}.get(sw[0] if sw else "", (0, 1))

    def rd(w: Warp) -> tuple[Any, Any]:
        v = np.asarray(r(w)).astype(U32)
        h = [(v & U32(0xFFFF)).astype(np.uint16).view(np.float16).astype(F64),
             (v >> U32(16)).astype(np.uint16).view(np.float16).astype(F64)]
        lo, hi = h[pick[0]], h[pick[1]]
        if op.absolute:
            lo, hi = np.abs(lo), np.abs(hi)
        if op.prefix == "-":
            lo, hi = -lo, -hi
        return lo, hi
    return rd


def _pack(lo: Any, hi: Any) -> Any:
    lo16 = np.asarray(lo).astype(np.float16).view(np.uint16).astype(U32)
    hi16 = np.asarray(hi).astype(np.float16).view(np.uint16).astype(U32)
    return lo16 | (hi16 << U32(16))


def b_hfma2(cx: Ctx, fma: bool) -> Exec:
    """HFMA2 d, a, b, c / HADD2 d, a, b (a + b, as a * 1 + b): per half, rounded once to f16
    (the f64 product of two halves is exact); .F32 writes the low half's result as f32. A pair of float
    immediates as the last source is (high, low)."""
    mods = cx.mods({"MMA", "F32", "FTZ"})
    ops = list(cx.ins.operands)
    if len(ops) >= 2 and ops[-1].kind == "float" and ops[-2].kind in ("float", "imm"):
        hi_v, lo_v = float(ops[-2].value or 0), float(ops[-1].value or 0)
        ops = ops[:-2]
        last: Callable[[Warp], tuple[Any, Any]] = lambda w: (F64(lo_v), F64(hi_v))  # noqa: E731
    else:
        last = _halves(cx, ops.pop())
    d = ops[0]
    srcs = [_halves(cx, o) for o in ops[1:]]
    if len(srcs) != (2 if fma else 1):
        raise cx.err("wrong number of sources")
    wd = cx.w32(d)

    def run(w: Warp, m: np.ndarray) -> None:
        c = last(w)
        if fma:
            a, b = srcs[0](w), srcs[1](w)
            lo, hi = a[0] * b[0] + c[0], a[1] * b[1] + c[1]
        else:
            a = srcs[0](w)
            lo, hi = a[0] + c[0], a[1] + c[1]
        if "F32" in mods:
            wd(w, np.asarray(lo).astype(F32).view(U32), m)
        else:
            wd(w, _pack(lo, hi), m)
    return run


# -- f64 -------------------------------------------------------------------------------------------
def b_dfma(cx: Ctx, op: str) -> Exec:
    """DFMA / DMUL / DADD (``op`` fma, mul, add) on register pairs."""
    cx.mods(set())
    ops = cx.ins.operands
    rs = [_f64(cx, o) for o in ops[1:]]
    w64 = cx.w64(ops[0])

    def run(w: Warp, m: np.ndarray) -> None:
        v = [x(w) for x in rs]
        r = fma_f64(*v) if op == "fma" else v[0] * v[1] if op == "mul" else v[0] + v[1]
        w64(w, np.asarray(r, F64).view(U64), m)
    return run


# -- tensor core -----------------------------------------------------------------------------------


def _lanes(v: Any) -> np.ndarray:
    """A register read as 32 lanes (a uniform value repeated), without np.broadcast_to's cost."""
    a = np.asarray(v)
    return a if a.shape == (32,) else np.full(32, a, dtype=a.dtype)


def hmma_operands(cx: Ctx) -> tuple:
    """HMMA's decoding, shared by b_hmma and the wide builder (sim/sass/exec_wide.py): K, the A/B/accumulator
    fragment maps as flat indices into the row-major (16 x K), (K x 8), (16 x 8) matrices (map after map, 32 lanes
    each), the readers of A, B, C, the writers of D and whether the inputs are bf16."""
    mods = cx.mods({"16816", "1688", "F32", "BF16"})
    if "F32" not in mods:
        raise cx.err("HMMA with an f16 accumulator is not modelled")
    k = 16 if "16816" in mods else 8
    amap = [a_fragment(2, i // 2, i % 2) for i in range(k // 2)]
    bmap = [b_fragment(2, i // 2, i % 2) for i in range(k // 4)]
    cmap = [accumulator_map(i) for i in range(4)]
    d, a, b, c = cx.ins.operands[:4]
    ra, rb = cx.rn(a, len(amap) // 2), cx.rn(b, len(bmap) // 2)
    rc, wd = cx.rn(c, 4), cx.wn(d, 4)

    def flat(maps: list, cols: int) -> np.ndarray:
        return np.concatenate([np.broadcast_to(r * cols + c, (32,)) for r, c in maps]).astype(np.intp)

    return k, flat(amap, k), flat(bmap, 8), flat(cmap, 8), ra, rb, rc, wd, "BF16" in mods


def b_hmma(cx: Ctx) -> Exec:
    """HMMA.16816.F32[.BF16] d, a, b, c (m16n8k16, f32 accumulate) and HMMA.1688.F32: the fragment layout
    of PTX mma.sync (sim/functional/fragments.py), products summed in f64 and rounded once to f32, as the
    PTX model does."""
    k, aidx, bidx, cidx, ra, rb, rc, wd, bf = hmma_operands(cx)

    def unpack(regs: list[Reader], w: Warp) -> np.ndarray:
        """Each register's low then high half of every lane, as f64: (2 x registers) rows of 32, flattened."""
        v = np.array([_lanes(r(w)) for r in regs], dtype=U32)
        h = np.stack(((v & U32(0xFFFF)).astype(np.uint16), (v >> U32(16)).astype(np.uint16)), axis=1)
        return (bf16_to_f32(h) if bf else h.view(np.float16)).astype(F64).ravel()

    def run(w: Warp, m: np.ndarray) -> None:
        A, B, C = np.zeros(16 * k), np.zeros(k * 8), np.zeros(16 * 8)
        A[aidx] = unpack(ra, w)
        B[bidx] = unpack(rb, w)
        C[cidx] = np.array([_lanes(r(w)).view(F32) for r in rc], dtype=F32).ravel()
        D = (A.reshape(16, k) @ B.reshape(k, 8) + C.reshape(16, 8)).astype(F32).ravel()[cidx].reshape(4, 32)
        for i, wr in enumerate(wd):
            wr(w, D[i].view(U32), m)
    return run


def b_f2fp(cx: Ctx) -> Exec:
    """F2FP.{F16,BF16}.F32.PACK_AB Rd, Ra, Rb: two f32 rounded to nearest-even, Ra's in the high half,
    Rb's in the low half (cvt.rn.f16x2.f32 / cvt.rn.bf16x2.f32)."""
    mods = cx.mods({"F16", "BF16", "F32", "PACK_AB"})
    if "PACK_AB" not in mods or "F32" not in mods or len(mods & {"F16", "BF16"}) != 1:
        raise cx.err("F2FP is modelled only as .F16.F32.PACK_AB or .BF16.F32.PACK_AB")
    d, a, b = cx.ins.operands[:3]
    ra, rb, wd = cx.f32(a), cx.f32(b), cx.w32(d)
    bf = "BF16" in mods

    def half(x: Any) -> np.ndarray:
        x = np.asarray(x, dtype=np.float32)
        h = f32_to_bf16(x) if bf else x.astype(np.float16).view(np.uint16)
        return np.asarray(h).astype(U32)

    return lambda w, m: wd(w, (half(ra(w)) << U32(16)) | half(rb(w)), m)


SASS_FLOAT: dict[str, Callable[[Ctx], Exec]] = {
    "F2FP": b_f2fp,
    "FADD": b_fadd, "FMUL": partial(b_fadd, mul=True), "FFMA": b_ffma, "FMNMX": b_fmnmx, "FSETP": b_fsetp,
    "MUFU": b_mufu, "I2F": b_i2f, "I2FP": b_i2f, "F2I": b_f2i, "F2F": b_f2f, "FCHK": b_fchk,
    "HADD2": partial(b_hfma2, fma=False), "HFMA2": partial(b_hfma2, fma=True), "DFMA": partial(b_dfma, op="fma"),
    "DADD": partial(b_dfma, op="add"), "DMUL": partial(b_dfma, op="mul"), "HMMA": b_hmma,
}
