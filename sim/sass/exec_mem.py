"""Memory and warp-level SASS instructions: LDG/STG, LDS/STS, LDSM, LDGSTS, ATOMS/ATOMG/REDG, SHFL, VOTE.

Addresses: ``[R2.64+0x10]`` (a 64-bit register pair plus an offset) for global, ``[R0+UR4+0x40]``
(32-bit terms) for shared, where a CTA's window starts at 0 and sm_90 reserves its first 0x400 bytes.
The ``desc[URx]`` memory descriptor is ignored (addresses are flat). LDGSTS copies at once: the copy is
in shared memory when the instruction retires, so LDGDEPBAR / DEPBAR have nothing left to do.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from sim.functional.memory import Fault
from sim.functional.ops_mem import shfl_source
from sim.sass.exec_cluster import GenericView, generic_record, own_offsets
from sim.sass.exec_int import Exec
from sim.sass.exec_operands import U32, U64, Ctx, Reader
from sim.sass.exec_state import LANES, Warp
from sim.sass.listing import Operand

_SIZES = {"U8": (np.uint8, 1), "S8": (np.int8, 1), "U16": (np.uint16, 1), "S16": (np.int16, 1),
          "32": (np.uint32, 1), "64": (np.uint32, 2), "128": (np.uint32, 4)}
_CACHE = {"E", "CONSTANT", "EF", "EL", "LU", "EU", "NA", "STRONG", "GPU", "SYS", "SM", "CTA", "WEAK", "BYPASS",
          "ZFILL", "LTC128B", "LTC64B", "LTC256B"}


def _zext(r: Reader) -> Reader:
    return lambda w: np.asarray(r(w)).astype(U64)


def address(cx: Ctx, op: Operand, wide: bool) -> Callable[[Warp], np.ndarray]:
    """Per-lane addresses of a memory operand (uint64 when ``wide``, else int64 offsets). A global
    address's first R register is a 64-bit pair whether or not nvdisasm prints .64 (ATOMG.E.CAS
    prints ``[R10+0x40]``)."""
    if op.kind != "mem":
        raise cx.err(f"operand '{op.text}' is not a memory address")
    if set(op.suffixes) - {"64"}:
        raise cx.err(f"address suffix in '{op.text}' is not modelled")
    off = int(op.value or 0)
    terms: list[Reader] = []
    for j, r in enumerate(op.regs):
        kind = "ureg" if r.startswith("UR") else "reg"
        pair = j == 0 and ("64" in op.suffixes or (wide and kind == "reg"))
        o = Operand(kind, r, regs=(r,), suffixes=("64",) if pair else ())
        terms.append(cx.u64(o) if "64" in o.suffixes else _zext(cx.raw(o)))

    def addr(w: Warp) -> np.ndarray:
        a = np.full(32, off & 0xFFFFFFFFFFFFFFFF, dtype=U64)
        for t in terms:
            a = a + t(w)
        return a if wide else a.astype(np.int64) & 0xFFFFFFFF
    return addr


def _access(w: Warp, space: str, addrs: np.ndarray, m: np.ndarray, size: int, direction: str) -> np.ndarray:
    act = addrs[m]
    if space == "shared":  # the own CTA's window (a cluster's shared addresses carry the rank byte)
        act = _own(w, act, m)
    rec = w.rec
    if rec is not None:
        rec.space, rec.addrs, rec.size, rec.direction = space, act, size, direction
        if space == "generic":  # timed in the window the addresses fall in (sim/sass/exec_cluster.py)
            rec.space, rec.addrs = generic_record(w, act)
    return act


def _mem(w: Warp, space: str) -> Any:
    if space == "generic":
        return GenericView(w)
    return w.L.gmem if space == "global" else w.cta.shared


def _own(w: Warp, act: np.ndarray, m: np.ndarray) -> np.ndarray:
    try:
        return own_offsets(w, act)
    except Fault as f:
        raise Fault(int(np.flatnonzero(m)[f.lane]), f.addr, f.message) from None


def _load(w: Warp, space: str, act: np.ndarray, m: np.ndarray, dt: np.dtype, n: int) -> np.ndarray:
    if space == "shared":
        act = _own(w, act, m)
    try:
        return _mem(w, space).load(act, dt, n)
    except Fault as f:
        raise Fault(int(np.flatnonzero(m)[f.lane]), f.addr, f.message) from None


def _store(w: Warp, space: str, act: np.ndarray, m: np.ndarray, vals: np.ndarray, dt: np.dtype) -> None:
    if space == "shared":
        act = _own(w, act, m)
    try:
        _mem(w, space).store(act, vals, dt)
    except Fault as f:
        raise Fault(int(np.flatnonzero(m)[f.lane]), f.addr, f.message) from None


def _shape(cx: Ctx) -> tuple[np.dtype, int]:
    size = [x for x in cx.ins.modifiers if x in _SIZES]
    t, n = _SIZES[size[0] if size else "32"]
    return np.dtype(t), n


def ld_operands(cx: Ctx, space: str) -> tuple:
    """LD/LDS/LDG's decoding, shared by b_ld and the wide builder (sim/sass/exec_wide.py): element type, elements
    per lane, address reader, destination writers and the type a loaded element widens to."""
    cx.mods(set(_SIZES) | _CACHE)
    dt, n = _shape(cx)
    d, a = cx.ins.operands[:2]
    return dt, n, address(cx, a, space != "shared"), cx.wn(d, n), (np.int32 if dt.kind == "i" else np.uint32)


def st_operands(cx: Ctx, space: str) -> tuple:
    """ST/STS/STG's decoding, shared by b_st and the wide builder: element type, elements per lane, address
    reader and source readers."""
    cx.mods(set(_SIZES) | _CACHE)
    dt, n = _shape(cx)
    a, s = cx.ins.operands[:2]
    return dt, n, address(cx, a, space != "shared"), cx.rn(s, n)


def b_ld(cx: Ctx, space: str) -> Exec:
    dt, n, fa, ws, ext = ld_operands(cx, space)

    def run(w: Warp, m: np.ndarray) -> None:
        act = _access(w, space, fa(w), m, dt.itemsize * n, "read")
        vals = np.zeros((32, n), dtype=dt)
        vals[m] = _load(w, space, act, m, dt, n)
        for i, wr in enumerate(ws):
            wr(w, vals[:, i].astype(ext).view(U32), m)
    return run


def b_st(cx: Ctx, space: str) -> Exec:
    dt, n, fa, rs = st_operands(cx, space)

    def run(w: Warp, m: np.ndarray) -> None:
        act = _access(w, space, fa(w), m, dt.itemsize * n, "write")
        vals = np.stack([np.broadcast_to(np.asarray(r(w)), (32,)) for r in rs], axis=1)[m]
        _store(w, space, act, m, vals.astype(dt), dt)
    return run


def ldgsts_operands(cx: Ctx) -> tuple:
    """LDGSTS's decoding, shared by b_ldgsts and the wide builder (sim/sass/exec_wide.py): bytes per lane, bytes
    read from global (less the .ZFILL tail), the shared and global address functions and the source-valid
    predicate (None when absent)."""
    mods = cx.mods(_CACHE | {"64", "128"})
    size = 16 if "128" in mods else 8 if "64" in mods else 4
    ops = cx.ins.operands
    dst, src = ops[0], ops[1]
    fd = address(cx, dst, False)
    zfill = 0
    if "ZFILL" in mods:
        zfill = int(src.value or 0)
        src = Operand(src.kind, src.text, regs=src.regs, value=0, desc=src.desc, suffixes=src.suffixes)
    fs = address(cx, src, True)
    zp = cx.pred(ops[2]) if len(ops) > 2 else None
    return size, size - zfill, fd, fs, zp


def b_ldgsts(cx: Ctx) -> Exec:
    """LDGSTS[.BYPASS][.128] [smem], [gmem][, P]: copy 4/8/16 bytes per lane; lanes where the trailing
    predicate (source valid) is false get zeros (ptxas writes cp.async's src-size 0 as ``, !PT``).
    With .ZFILL the printed offset is the count of trailing bytes zero-filled (ptxas writes cp.async's
    src-size 4/8/12 of a 16-byte copy as +0xc/+0x8/+0x4 on the source address)."""
    size, nread, fd, fs, zp = ldgsts_operands(cx)
    u8 = np.dtype(np.uint8)

    def run(w: Warp, m: np.ndarray) -> None:
        zero = ~np.broadcast_to(np.asarray(zp(w), dtype=bool), (32,)) if zp is not None else np.zeros(32, bool)
        act = _access(w, "global", fs(w), m & ~zero, nread, "read")
        vals = np.zeros((32, size), dtype=u8)
        if act.size and nread:
            vals[m & ~zero, :nread] = _load(w, "global", act, m & ~zero, u8, nread)
        _store(w, "shared", fd(w)[m], m, vals[m], u8)
    return run


_ATOM: dict[str, Callable[[Any, Any, Any], Any]] = {
    "ADD": lambda o, b, c: o + b, "MIN": lambda o, b, c: np.minimum(o, b), "MAX": lambda o, b, c: np.maximum(o, b),
    "AND": lambda o, b, c: o & b, "OR": lambda o, b, c: o | b, "XOR": lambda o, b, c: o ^ b,
    "EXCH": lambda o, b, c: b, "INC": lambda o, b, c: np.where(o >= b, 0, o + 1).astype(o.dtype),
    "DEC": lambda o, b, c: np.where((o == 0) | (o > b), b, o - 1).astype(o.dtype),
    "CAS": lambda o, b, c: np.where(o == b, c, o).astype(o.dtype),
}
_ATYPES = {"32": np.uint32, "U32": np.uint32, "S32": np.int32, "F32": np.float32, "64": np.uint64,
           "U64": np.uint64, "S64": np.int64}


def b_atom(cx: Ctx, space: str, red: bool = False) -> Exec:
    """ATOMS / ATOMG [P,] d, [a], b[, c] and REDG [a], b: lanes one at a time, in lane order (as the PTX
    model serializes them). POPC.INC adds 1 per lane."""
    mods = cx.mods(set(_ATOM) | set(_ATYPES) | _CACHE | {"POPC", "FTZ", "RN"})
    op = next((x for x in cx.ins.modifiers if x in _ATOM), None)
    if op is None:
        raise cx.err("atomic without a modelled operation")
    t = np.dtype(next((_ATYPES[x] for x in cx.ins.modifiers if x in _ATYPES), np.uint32))
    wide = t.itemsize == 8
    if wide and "POPC" in cx.ins.modifiers:
        raise cx.err("64-bit POPC.INC atomics are not modelled")
    ops = [o for o in cx.ins.operands if o.kind not in ("pred",)]
    if red:
        d, a, rest = None, ops[0], ops[1:]
    else:
        d, a, rest = ops[0], ops[1], ops[2:]
    fa = address(cx, a, space != "shared")
    popc = "POPC" in mods
    read = cx.u64 if wide else cx.raw
    rb = (lambda w: U32(1)) if popc else read(rest[0])
    rc = read(rest[1]) if len(rest) > 1 else rb
    wd = (cx.w64 if wide else cx.w32)(d) if d is not None else None
    lane_t = np.dtype(np.uint64 if wide else U32)
    fn = _ATOM["ADD" if popc else op]

    def run(w: Warp, m: np.ndarray) -> None:
        addrs = fa(w)
        act = _access(w, space, addrs, m, t.itemsize, "atomic")
        bv = np.broadcast_to(np.asarray(rb(w)).astype(lane_t), (32,)).view(t)
        cv = np.broadcast_to(np.asarray(rc(w)).astype(lane_t), (32,)).view(t)
        olds = np.zeros(32, dtype=t)
        for j, lane in enumerate(np.flatnonzero(m)):
            one = np.zeros(32, bool)
            one[lane] = True
            at = act[j:j + 1]
            old = _load(w, space, at, one, t, 1)[0, 0]
            new = np.asarray(fn(np.array([old], dtype=t), bv[lane:lane + 1], cv[lane:lane + 1]), dtype=t)
            _store(w, space, at, one, new.reshape(1, 1), t)
            olds[lane] = old
        if wd is not None:
            wd(w, olds.view(lane_t), m)
    return run


def _matrices(cx: Ctx) -> tuple[int, np.ndarray, tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """LDSM/STSM .16.M88.N / .MT88.N: (N matrices, the lanes that give row addresses, (row, column) of each
    lane's first and second b16 element: row l/4, columns 2(l%4), 2(l%4)+1, swapped with .MT88)."""
    mods = cx.mods({"16", "M88", "MT88", "1", "2", "4"})
    nmat = next(int(x) for x in ("1", "2", "4") if x in mods)
    t, g = LANES % 4, LANES // 4
    first, second = ((2 * t, g), (2 * t + 1, g)) if "MT88" in mods else ((g, 2 * t), (g, 2 * t + 1))
    return nmat, LANES < 8 * nmat, first, second


def b_ldsm(cx: Ctx) -> Exec:
    """LDSM.16.M88.N / .MT88.N: ldmatrix of N 8x8 b16 matrices; lanes 8j..8j+7 give matrix j's row
    addresses; lane l gets row l/4, columns 2(l%4), 2(l%4)+1 of each (transposed with .MT88)."""
    nmat, need, (r0, c0), (r1, c1) = _matrices(cx)
    d, a = cx.ins.operands[:2]
    fa, ws = address(cx, a, False), cx.wn(d, nmat)
    u16 = np.dtype(np.uint16)

    def run(w: Warp, m: np.ndarray) -> None:
        act = _access(w, "shared", fa(w), need, 16, "read")
        rows = np.zeros((32, 8), dtype=u16)
        rows[need] = _load(w, "shared", act, need, u16, 8)
        for j, wr in enumerate(ws):
            mat = rows[8 * j:8 * j + 8]
            wr(w, mat[r0, c0].astype(U32) | (mat[r1, c1].astype(U32) << U32(16)), m)
    return run


def b_shfl(cx: Ctx) -> Exec:
    """SHFL.IDX/UP/DOWN/BFLY p, d, a, b, c: PTX shfl.sync with c = clamp | segment mask << 8."""
    mode = next((x for x in ("IDX", "UP", "DOWN", "BFLY") if x in cx.ins.modifiers), None)
    cx.mods({"IDX", "UP", "DOWN", "BFLY"})
    p, d, a, b, c = cx.ins.operands[:5]
    ra, rb, rc, wd, wp = cx.raw(a), cx.u32(b), cx.u32(c), cx.w32(d), cx.wpred(p)

    def run(w: Warp, m: np.ndarray) -> None:
        src = np.broadcast_to(np.asarray(ra(w)), (32,))
        j, ok = shfl_source(str(mode).lower(), rb(w), rc(w))
        wd(w, src[j], m)
        wp(w, ok, m)
    return run


def b_vote(cx: Ctx) -> Exec:
    """VOTE.ANY/ALL/EQ [d,] p, q: d = ballot of q over the active lanes; p = any / all / all-equal."""
    mods = cx.mods({"ANY", "ALL", "EQ"})
    ops = cx.ins.operands
    d = ops[0] if ops[0].kind in ("reg", "ureg") else None
    p, q = ops[1:3] if d is not None else ops[:2]
    rq, wp = cx.pred(q), cx.wpred(p)
    wd = cx.w32(d) if d is not None else None
    bits = (np.uint64(1) << LANES.astype(np.uint64))

    def run(w: Warp, m: np.ndarray) -> None:
        v = np.broadcast_to(np.asarray(rq(w), dtype=bool), (32,)) & m
        if wd is not None:
            wd(w, U32(int(bits[v].sum())), m)
        act = v[m]
        r = act.any() if "ANY" in mods else act.all() if "ALL" in mods else act.all() or not act.any()
        wp(w, np.bool_(r), m)
    return run


def b_membar(cx: Ctx) -> Exec:
    return lambda w, m: None


def b_stsm(cx: Ctx) -> Exec:
    """STSM.16.M88.N / .MT88.N [a], Rs: stmatrix of N 8x8 b16 matrices, LDSM's inverse: lanes 8j..8j+7 give
    matrix j's row addresses; lane l holds row l/4, columns 2(l%4), 2(l%4)+1 of matrix j in register Rs+j
    (low half first; transposed with .MT88)."""
    nmat, need, (r0, c0), (r1, c1) = _matrices(cx)
    a, d = cx.ins.operands[:2]
    fa, rs = address(cx, a, False), cx.rn(d, nmat)
    u16 = np.dtype(np.uint16)

    def run(w: Warp, m: np.ndarray) -> None:
        act = _access(w, "shared", fa(w), need, 16, "write")
        rows = np.zeros((32, 8), dtype=u16)
        for j, rd in enumerate(rs):
            v = np.broadcast_to(np.asarray(rd(w)).astype(U32), (32,))
            mat = np.zeros((8, 8), dtype=u16)
            mat[r0, c0] = (v & U32(0xFFFF)).astype(u16)
            mat[r1, c1] = (v >> U32(16)).astype(u16)
            rows[8 * j:8 * j + 8] = mat
        _store(w, "shared", act, need, rows[need], u16)
    return run


SASS_MEM: dict[str, Callable[[Ctx], Exec]] = {
    "LDG": partial(b_ld, space="global"), "LDS": partial(b_ld, space="shared"), "STG": partial(b_st, space="global"),
    "STS": partial(b_st, space="shared"), "LDGSTS": b_ldgsts, "ATOMS": partial(b_atom, space="shared"),
    "ATOMG": partial(b_atom, space="global"), "REDG": partial(b_atom, space="global", red=True),
    "LDSM": b_ldsm, "STSM": b_stsm, "SHFL": b_shfl, "VOTE": b_vote, "VOTEU": b_vote, "MEMBAR": b_membar,
    "LD": partial(b_ld, space="generic"), "ST": partial(b_st, space="generic"),
    "ATOM": partial(b_atom, space="generic"),
}
