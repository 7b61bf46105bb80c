"""Memory instructions over a lock-step wide warp (sim/sass/lockstep.py): LDS/LDG/STS/STG, LDSM and LDGSTS as
sim/sass/exec_mem.py runs them for one warp, here once for all the wide warp's lanes, (warps, 32) at a time.

A builder returns ``fn(x, m, recs)``: x the wide warp (its registers, its batch's shared memory, where each of
its warps' CTA window starts there, its access log), m the lanes that run it (warps x 32), recs each warp's
record, whose access (space, the warp's addresses in lane order, bytes per lane, direction) it fills as the
one-warp builder fills it. Shared offsets are checked against the CTA's window lane by lane (the batch's memory
holds the CTAs side by side: a lane outside its window must fault, as it does stepping); a fault of any kind
ends the run ahead (simulate_sass then steps, and the stepping run reports it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from sim.functional.conflicts import GLOBAL_DOMAIN, SHARED_DOMAIN
from sim.functional.lockstep import Refused
from sim.functional.types import bf16_to_f32
from sim.sass.exec_float import hmma_operands
from sim.sass.exec_mem import _matrices, address, ld_operands, ldgsts_operands, st_operands
from sim.sass.exec_operands import U32, Ctx

WideExec = Callable[[Any, np.ndarray, list], None]


def _split(act: np.ndarray, lanes: np.ndarray, m: np.ndarray, recs: list, space: str, size: int,
           direction: str) -> None:
    """Each warp's part of the flat addresses ``act`` of ``lanes`` (warp-major, lane order) into its record; not
    for a warp with no lane in m (its guard kept it out: stepping does not run the builder, its record has no
    access)."""
    ends = np.cumsum(np.count_nonzero(lanes, axis=1)).tolist()
    ran = np.count_nonzero(m, axis=1).tolist()
    start = 0
    for rec, end, r in zip(recs, ends, ran):
        if r:
            rec.space, rec.addrs, rec.size, rec.direction = space, act[start:end], size, direction
        start = end


def _shared(x: Any, offs: np.ndarray, m: np.ndarray, nbytes: int) -> np.ndarray:
    """The batch offsets of the active lanes' CTA offsets ``offs`` (flat, lanes of m), each checked in its window."""
    if offs.size and (int(offs.min()) < 0 or int(offs.max()) > x.batch.size - nbytes):
        raise Refused("a shared access outside its CTA's window")
    return offs.astype(np.int64) + np.broadcast_to(x.sbase, m.shape)[m]


def _log(x: Any, domain: int, addrs: np.ndarray, m: np.ndarray, size: int, write: bool) -> None:
    x.batch.log.add(domain, addrs, size, write, np.broadcast_to(x.owner, m.shape)[m], x.batch.epochs[x.cta0])


def b_ld(cx: Ctx, space: str) -> WideExec:
    dt, n, fa, ws, ext = ld_operands(cx, space)
    nbytes = dt.itemsize * n

    def run(x: Any, m: np.ndarray, recs: list) -> None:
        act = np.broadcast_to(fa(x), m.shape)[m]
        _split(act, m, m, recs, space, nbytes, "read")
        if space == "shared":
            where = _shared(x, act, m, nbytes)
            _log(x, SHARED_DOMAIN, where, m, nbytes, False)
            got = x.batch.shared.load(where, dt, n)
        else:
            _log(x, GLOBAL_DOMAIN, act, m, nbytes, False)
            got = x.batch.gmem.load(act, dt, n)
        vals = np.zeros(m.shape + (n,), dtype=dt)
        vals[m] = got
        for i, wr in enumerate(ws):
            wr(x, vals[..., i].astype(ext).view(U32), m)
    return run


def b_st(cx: Ctx, space: str) -> WideExec:
    dt, n, fa, rs = st_operands(cx, space)
    nbytes = dt.itemsize * n

    def run(x: Any, m: np.ndarray, recs: list) -> None:
        act = np.broadcast_to(fa(x), m.shape)[m]
        _split(act, m, m, recs, space, nbytes, "write")
        vals = np.stack([np.broadcast_to(np.asarray(r(x)), m.shape)[m] for r in rs], axis=1).astype(dt)
        if space == "shared":
            where = _shared(x, act, m, nbytes)
            _log(x, SHARED_DOMAIN, where, m, nbytes, True)
            x.batch.shared.store(where, vals, dt)
        else:
            _log(x, GLOBAL_DOMAIN, act, m, nbytes, True)
            x.batch.gmem.store(act, vals, dt)
    return run


def b_ldgsts(cx: Ctx) -> WideExec:
    """exec_mem.b_ldgsts over the wide warp: the global read (lanes whose source is valid) in the records, the
    shared write of every lane that runs it (zeros where the source is not valid)."""
    size, nread, fd, fs, zp = ldgsts_operands(cx)
    u8 = np.dtype(np.uint8)

    def run(x: Any, m: np.ndarray, recs: list) -> None:
        ok = m if zp is None else m & np.broadcast_to(np.asarray(zp(x), dtype=bool), m.shape)
        act = np.broadcast_to(fs(x), m.shape)[ok]
        _split(act, ok, m, recs, "global", nread, "read")
        vals = np.zeros(m.shape + (size,), dtype=u8)
        if act.size and nread:
            _log(x, GLOBAL_DOMAIN, act, ok, nread, False)
            vals[ok, :nread] = x.batch.gmem.load(act, u8, nread)
        where = _shared(x, np.broadcast_to(fd(x), m.shape)[m], m, size)
        _log(x, SHARED_DOMAIN, where, m, size, True)
        x.batch.shared.store(where, vals[m], u8)
    return run


def b_ldsm(cx: Ctx) -> WideExec:
    """exec_mem.b_ldsm over the wide warp (lanes 8j..8j+7 of each warp give matrix j's row addresses, whatever
    the guard; the guard's lanes get the fragments)."""
    nmat, need, (r0, c0), (r1, c1) = _matrices(cx)
    d, a = cx.ins.operands[:2]
    fa, ws = address(cx, a, False), cx.wn(d, nmat)
    u16 = np.dtype(np.uint16)

    def run(x: Any, m: np.ndarray, recs: list) -> None:
        # (a warp its guard keeps out loads nothing)
        nd = np.broadcast_to(need, m.shape) & np.any(m, axis=1).reshape(-1, 1)
        act = np.broadcast_to(fa(x), m.shape)[nd]
        _split(act, nd, m, recs, "shared", 16, "read")
        where = _shared(x, act, nd, 16)
        _log(x, SHARED_DOMAIN, where, nd, 16, False)
        rows = np.zeros(m.shape + (8,), dtype=u16)
        rows[nd] = x.batch.shared.load(where, u16, 8)
        for j, wr in enumerate(ws):
            mat = rows[:, 8 * j:8 * j + 8]
            wr(x, mat[:, r0, c0].astype(U32) | (mat[:, r1, c1].astype(U32) << U32(16)), m)
    return run


WIDE_MEM: dict[str, Callable[[Ctx], WideExec]] = {
    "LDS": lambda cx: b_ld(cx, "shared"), "LDG": lambda cx: b_ld(cx, "global"),
    "STS": lambda cx: b_st(cx, "shared"), "STG": lambda cx: b_st(cx, "global"), "LDGSTS": b_ldgsts, "LDSM": b_ldsm,
}


def b_hmma(cx: Ctx) -> Callable[[Any, np.ndarray], None]:
    """exec_float.b_hmma over the wide warp: every warp's fragments gathered at once, each warp's
    (16 x k) @ (k x 8) f64 product as the one-warp builder computes it (np.matmul on the stacked matrices runs the
    same product per matrix), rounded once to f32."""
    k, aidx, bidx, cidx, ra, rb, rc, wd, bf = hmma_operands(cx)

    def regs(rs: list, x: Any, shape: tuple[int, int]) -> np.ndarray:
        return np.stack([np.broadcast_to(np.asarray(r(x)), shape) for r in rs], axis=1).astype(U32)

    def unpack(rs: list, x: Any, shape: tuple[int, int]) -> np.ndarray:
        v = regs(rs, x, shape)  # (warps, registers, 32)
        h = np.stack(((v & U32(0xFFFF)).astype(np.uint16), (v >> U32(16)).astype(np.uint16)), axis=2)
        return (bf16_to_f32(h) if bf else h.view(np.float16)).astype(np.float64).reshape(shape[0], -1)

    def run(x: Any, m: np.ndarray) -> None:
        n = m.shape[0]
        A, B, C = np.zeros((n, 16 * k)), np.zeros((n, k * 8)), np.zeros((n, 16 * 8))
        A[:, aidx] = unpack(ra, x, m.shape)
        B[:, bidx] = unpack(rb, x, m.shape)
        C[:, cidx] = regs(rc, x, m.shape).view(np.float32).reshape(n, -1)
        D = (A.reshape(n, 16, k) @ B.reshape(n, k, 8) + C.reshape(n, 16, 8)).astype(np.float32)
        D = D.reshape(n, 128)[:, cidx].reshape(n, 4, 32)
        for i, wr in enumerate(wd):
            wr(x, D[:, i].view(U32), m)
    return run


#: wide builders of instructions with no memory access, run as the lane-wise ones (fn(x, m))
WIDE_OPS: dict[str, Callable[[Ctx], Callable[[Any, np.ndarray], None]]] = {"HMMA": b_hmma}
