"""TMA, bulk copies and mbarriers in SASS (sm_90a): the forms ptxas writes for cp.async.bulk{.tensor},
cp.reduce.async.bulk, mbarrier.* and elect.sync, seen in nvdisasm listings of tests/fixtures/hopper_cuda/tma_*.ptx,
tests/fixtures/tma/*.ptx, tests/fixtures/async/*.ptx, tests/fixtures/hopper/mbarrier_pc.ptx, kernelgen's
wgmma_tma kernels and a probe of every mbarrier form (docs/sass.md, "TMA and mbarriers"):

    SYNCS.EXCH.64 URZ, [UR6], UR4                 mbarrier.init: UR4 = (0x100000 - count) << 1
    SYNCS.ARRIVE.TRANS64 R2, [UR6], R0            arrive.expect_tx (one arrival, tx += R0); R2:R3 the state
    SYNCS.ARRIVE.TRANS64.RED.A0TR RZ, [UR6], R0   expect_tx (no arrival)
    SYNCS.ARRIVE.TRANS64.RED.A0TX RZ, [UR6], R0   complete_tx (tx -= R0)
    SYNCS.ARRIVE.TRANS64.A1T0 R8, [UR6], RZ       arrive; .ART0 R4, [..], R4: arrive with count R4
    SYNCS.ARRIVE.TRANS64.OPTOUT.A1T0              arrive_drop
    SYNCS.PHASECHK.TRANS64{.TRYWAIT} P0, [UR4], R2  test_wait / try_wait: P0 = the phase whose parity is
                                                  R2 bit 31 has completed (parity << 31, or a state's high word)
    SYNCS.CCTL.IV [UR6]                           mbarrier.inval
    ELECT P1, URZ, PT                             elect.sync: P1 in the lowest active lane of the mask
    UTMALDG.2D [UR4], [UR12]                      tensor load: UR4 shared destination, UR5 its mbarrier,
                                                  UR6.. the coordinates; UR12:UR13 the tensor map's address
    UTMALDG.2D.MULTICAST [UR12], [UR10], UR4      multicast: UR4 bits 16..31 the ctaMask
    UTMALDG.4D.IM2COL [UR8], [UR18], UR4          im2col: UR4 the offsets, 16 / (rank - 2) bits each, w first
    UTMASTG.3D [UR8], [UR6]                       tensor store: UR8 the shared source, UR9.. coordinates
    UTMAREDG.3D.ADD [UR8], [UR6]                  cp.reduce.async.bulk.tensor (the map's element type)
    UBLKCP.S.G [UR8], [UR6], UR4                  1-D load: UR8 destination, UR9 mbarrier, UR6:UR7 source,
                                                  UR4 = bytes / 16; .G.S a store, .S.S CTA to CTA
    UBLKRED.G.S.ADD{.F32.RN} [UR4], [UR17], UR7    cp.reduce.async.bulk (u32 unless a type is named)
    UTMACCTL.PF/.IV, UBLKPF.L2, UTMAPF.L2.ND,    tensor-map / bulk prefetches (and the tensormap proxy
    UTMACMDFLUSH,                                 fence's invalidate), bulk commit_group,
    CCTL.IVALL, YIELD                             cache invalidate, yield hint

A shared address is the CTA window's (0x400 reserved, SR_CgaCtaId << 24 above): an mbarrier operation, a
UBLKCP.S.S / UBLKRED.S.S destination reach the cluster CTA its rank byte names, a UTMALDG.MULTICAST every CTA
of its ctaMask (sim/sass/exec_cluster.py). The tensor map's address is either a generic one (c[0x0][0x198] holds
the generic address of the parameter bank's start, sim.sass.exec.constant_bank) or a parameter-bank offset; its 128
bytes are the launch's handle (sim/tensormap.py). Copies land at issue functionally; their mbarrier transactions too
unless ``Launched.defer_tx`` (SASS timing completes them when the TMA unit says, sim/sass/timing.py).
A PHASECHK whose phase is incomplete sets ``Warp.yielded`` so that the functional runner runs the other
warps (sim/sass/exec.py)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from sim.functional.memory import PARAM_WINDOW, WINDOW_SIZE, Fault
from sim.functional.ops_async import MBarrier
from sim.functional.ops_bulk import reduce_bytes
from sim.functional.ops_tma import BulkCopy
from sim.sass.exec_cluster import OFFSET_BITS, target
from sim.sass.exec_mem import address
from sim.sass.exec_operands import Ctx, reg_index
from sim.sass.exec_state import RZ, Cta, Warp
from sim.tensormap import HANDLE_SIZE, TensorMap, decode_handle, swizzled

Exec = Callable[[Warp, np.ndarray], None]
U8 = np.dtype(np.uint8)
PARAM_BASE = 0x210  # where the kernel parameters start in constant bank 0 (sim/sass/exec.py)
# SYNCS.ARRIVE.TRANS64's arrival / transaction field -> (arrivals, tx sign): count "R" = the register
_ARRIVE: dict[str, tuple[int | str, int]] = {"": (1, 1), "A0TR": (0, 1), "A0TX": (0, -1), "A1T0": (1, 0),
                                             "ART0": ("R", 0)}
_RED_TYPES = {"": "u32", "F32": "f32"}  # UBLKRED's element type modifiers seen in ptxas 13 output
_RED_OPS = ("ADD", "MIN", "MAX", "INC", "DEC", "AND", "OR", "XOR")


def _ur(cx: Ctx, i: int) -> int:
    """The uniform register of operand i (a [URn] address or URn)."""
    op = cx.ins.operands[i]
    regs = [r for r in op.regs if r != "URZ"]
    if len(regs) != 1 or not regs[0].startswith("UR") or op.value:
        raise cx.err(f"operand '{op.text}' is not a lone uniform register")
    return reg_index(regs[0])


def _mbar(w: Warp, addr: int, what: str) -> MBarrier:
    """The mbarrier at a shared window address (of the cluster CTA its rank byte names)."""
    cta, off = target(w, addr)
    mb = cta.mbars.get(off)
    if mb is None:
        where = f"shared offset {off:#x}" + (f" of CTA rank {cta.rank}" if cta is not w.cta else "")
        raise Fault(0, off, f"{what}: no initialised mbarrier at {where} (mbarrier.init first)")
    return mb


def _signal(w: Warp) -> None:
    w.L.mbar_epoch += 1


def complete(cta: Cta, off: int, nbytes: int) -> None:
    """A copy's bytes arrive at the mbarrier at shared offset ``off`` of ``cta``."""
    mb = cta.mbars.get(off)
    if mb is not None:
        mb.tx -= nbytes
        mb.settle()


# -- mbarriers ---------------------------------------------------------------------------------------
def b_syncs(cx: Ctx) -> Exec:
    mods = list(cx.ins.modifiers)
    kind = mods[0] if mods else ""
    if kind == "EXCH":
        return _exch(cx)
    if kind == "ARRIVE":
        return _arrive(cx, mods[1:])
    if kind == "PHASECHK":
        cx.mods({"PHASECHK", "TRANS64", "TRYWAIT"})
        return _phasechk(cx)
    if kind == "CCTL" and mods[1:] == ["IV"]:
        fa = address(cx, cx.ins.operands[0], False)

        def inval(w: Warp, m: np.ndarray) -> None:
            for a in np.unique(fa(w)[m]):
                cta, off = target(w, int(a))
                cta.mbars.pop(off, None)
            _signal(w)
        return inval
    raise cx.err(f"SYNCS.{'.'.join(mods)} is not modelled (EXCH.64, ARRIVE.TRANS64, PHASECHK.TRANS64, CCTL.IV)")


def _exch(cx: Ctx) -> Exec:
    cx.mods({"EXCH", "64"})
    d, a, v = cx.ins.operands[:3]
    if d.regs[:1] != ("URZ",):
        raise cx.err("SYNCS.EXCH with a result (the old value) is not modelled")
    fa = address(cx, a, False)
    rv = cx.raw(v)

    def init(w: Warp, m: np.ndarray) -> None:
        lo = int(np.asarray(rv(w)).flat[0])
        count = 0x100000 - ((lo >> 1) & 0xFFFFF)
        for a in np.unique(fa(w)[m]):
            cta, off = target(w, int(a))
            if off % 8:
                raise Fault(int(np.argmax(m)), off, "mbarrier.init: the mbarrier is not 8-byte aligned")
            cta.mbars[off] = MBarrier(count, count)
        _signal(w)
    return init


def _arrive(cx: Ctx, mods: list[str]) -> Exec:
    flags = {m for m in mods if m in ("TRANS64", "RED", "OPTOUT")}
    field = [m for m in mods if m not in flags]
    if "TRANS64" not in flags or len(field) > 1 or (field and field[0] not in _ARRIVE):
        raise cx.err(f"SYNCS.ARRIVE.{'.'.join(mods)} is not modelled (TRANS64 with A1T0, A0TR, A0TX, ART0 or none)")
    arrivals, sign = _ARRIVE[field[0] if field else ""]
    drop = "OPTOUT" in flags
    d, a, v = cx.ins.operands[:3]
    fa = address(cx, a, False)
    rv = cx.raw(v)
    wd = cx.w64(d) if d.kind == "reg" and reg_index(d.regs[0]) != RZ else None

    def arrive(w: Warp, m: np.ndarray) -> None:
        offs = fa(w)
        vals = np.broadcast_to(np.asarray(rv(w)).astype(np.int64), (32,))
        state = np.zeros(32, dtype=np.uint64)
        for lane in np.flatnonzero(m):
            mb = _mbar(w, int(offs[lane]), "mbarrier.arrive")
            state[lane] = np.uint64((mb.phase & 1) << 63)  # the phase's parity in bit 31 of the high word
            n = int(vals[lane]) if arrivals == "R" else int(arrivals)
            mb.tx += sign * int(vals[lane]) if sign else 0
            mb.pending -= int(n)
            if drop:
                mb.expected -= 1
            mb.settle()
        if wd is not None:
            wd(w, state, m)
        _signal(w)
    return arrive


def _phasechk(cx: Ctx) -> Exec:
    d, a, v = cx.ins.operands[:3]
    wp = cx.wpred(d)
    fa = address(cx, a, False)
    rv = cx.raw(v)

    def check(w: Warp, m: np.ndarray) -> None:
        offs = fa(w)
        par = (np.broadcast_to(np.asarray(rv(w)), (32,)).astype(np.uint32) >> np.uint32(31)) & np.uint32(1)
        out = np.zeros(32, dtype=bool)
        for lane in np.flatnonzero(m):
            mb = _mbar(w, int(offs[lane]), "mbarrier wait")
            out[lane] = (mb.phase & 1) != int(par[lane])
        wp(w, out, m)
        if not out[m].all():
            w.yielded = True
    return check


def b_elect(cx: Ctx) -> Exec:
    """ELECT Pd, URd, Pmask: Pd true in the lowest active lane of the mask, URd its index."""
    d, u, p = cx.ins.operands[:3]
    wp = cx.wpred(d)
    wu = cx.w32(u)
    rp = cx.pred(p)

    def elect(w: Warp, m: np.ndarray) -> None:
        cand = np.flatnonzero(m & np.broadcast_to(np.asarray(rp(w)), (32,)))
        leader = int(cand[0]) if len(cand) else -1
        wp(w, np.arange(32) == leader, m)
        wu(w, np.full(32, max(leader, 0), dtype=np.uint32), m)
    return elect


# -- tensor maps and copies --------------------------------------------------------------------------
def tensor_map(w: Warp, addr: int) -> TensorMap:
    """The launch's tensor map whose 128-byte handle lies at ``addr``: a generic address of the parameter
    bank (c[0x0][0x198] + offset), a parameter-bank offset, or a global address."""
    L = w.L
    if PARAM_WINDOW <= addr < PARAM_WINDOW + WINDOW_SIZE:
        addr -= PARAM_WINDOW
    if PARAM_BASE + addr + HANDLE_SIZE <= L.cbank.size:
        raw = L.cbank.data[PARAM_BASE + addr: PARAM_BASE + addr + HANDLE_SIZE].tobytes()
    else:
        raw = L.gmem.load(np.array([addr], dtype=np.uint64), U8, HANDLE_SIZE)[0].tobytes()
    idx = decode_handle(raw)
    if idx is None or idx >= len(L.tensormaps):
        raise Fault(0, addr, "the tensor-map operand holds no tensor map the simulator built: pass it as a "
                    "'tensormap' param (docs/kernel-metadata.md)")
    return L.tensormaps[idx]


def _record(w: Warp, cp: BulkCopy) -> None:
    rec = w.rec
    if rec is not None:
        rec.bulk = [*(rec.bulk or []), cp]


def _landed(w: Warp, cta: Cta, mbar: int, nbytes: int) -> None:
    if not w.L.defer_tx:
        complete(cta, mbar, nbytes)
        _signal(w)


def _rank(cx: Ctx) -> int:
    dims = [m for m in cx.ins.modifiers if len(m) == 2 and m[1] == "D" and m[0] in "12345"]
    if len(dims) != 1:
        raise cx.err(f"{cx.ins.opcode} names no rank (.1D .. .5D)")
    return int(dims[0][0])


def b_utmaldg(cx: Ctx) -> Exec:
    rank = _rank(cx)
    mods = cx.mods({f"{rank}D", "IM2COL", "MULTICAST"})
    a, b = _ur(cx, 0), _ur(cx, 1)
    extra = _ur(cx, 2) if len(cx.ins.operands) > 2 else None
    im2col = "IM2COL" in mods
    if "MULTICAST" in mods and im2col or (extra is None) == (im2col or "MULTICAST" in mods):
        raise cx.err("this UTMALDG operand form is not modelled")
    bits = 16 // (rank - 2) if im2col else 0

    x = extra if extra is not None else 63  # URZ when absent

    def load(w: Warp, m: np.ndarray) -> None:
        ur = w.UR
        dests = [w.cta]
        if "MULTICAST" in mods:  # the ctaMask (bits 16..31: ptxas writes UPRMT URc, URZ, 0x5410, URmask): the
            mask = int(ur[x]) >> 16  # box lands in every CTA of the cluster it names
            if mask >> len(w.cta.peers):
                raise Fault(0, mask, f"multicast ctaMask {mask:#x} names a CTA outside the cluster of "
                            f"{len(w.cta.peers)} CTAs")
            dests = [c for c in w.cta.peers if mask >> c.rank & 1]
        tm = tensor_map(w, int(ur[b]) | int(ur[b + 1]) << 32)
        coords = tuple(int(np.uint32(ur[a + 2 + i]).view(np.int32)) for i in range(rank))
        offs = tuple((int(ur[x]) >> (bits * i)) & ((1 << bits) - 1) for i in range(rank - 2)) if im2col else None
        if tm.spec.im2col != im2col:
            raise Fault(0, 0, "the tensor map's mode (tiled / im2col) does not match the UTMALDG")
        if why := tm.misaligned(coords):
            raise Fault(0, 0, why)
        addrs, inside = tm.im2col_addresses(coords, offs) if offs is not None else tm.element_addresses(coords)
        dst = int(ur[a]) & OFFSET_BITS
        mbar = int(ur[a + 1]) & OFFSET_BITS
        es, nbytes = tm.spec.esize, tm.box_bytes
        where = (swizzled(dst + 16 * np.arange(nbytes // 16, dtype=np.int64), tm.spec.swizzle)[:, None]
                 + np.arange(16)).ravel()
        box = np.zeros((addrs.size, es), dtype=np.uint8)
        ga = addrs[inside].astype(np.uint64)
        if ga.size:
            box[inside] = w.L.gmem.load(ga, U8, es)
        for cta in dests:
            cta.shared.store(where.astype(np.int64), box.reshape(-1, 1), U8)
            _mbar(w, mbar | cta.rank << 24, "UTMALDG")
        _record(w, BulkCopy(True, ga, es, nbytes, mbar, tuple(dests)))  # type: ignore[arg-type]
        for cta in dests:
            _landed(w, cta, mbar, nbytes)
    return load


def b_utmastg(cx: Ctx, red: bool = False) -> Exec:
    """UTMASTG.ND [URa], [URb] (tensor store); UTMAREDG.ND.OP (cp.reduce.async.bulk.tensor: the box combined
    with the tensor's elements, of the map's dtype)."""
    rank = _rank(cx)
    mods = cx.mods({f"{rank}D", *_RED_OPS} if red else {f"{rank}D"})
    op = next((m.lower() for m in mods if m in _RED_OPS), "")
    if red and not op:
        raise cx.err("UTMAREDG names no reduction (.ADD, .MIN, ...)")
    a, b = _ur(cx, 0), _ur(cx, 1)

    def store(w: Warp, m: np.ndarray) -> None:
        ur = w.UR
        tm = tensor_map(w, int(ur[b]) | int(ur[b + 1]) << 32)
        if tm.spec.im2col:
            raise Fault(0, 0, "UTMASTG with an im2col tensor map is not modelled")
        coords = tuple(int(np.uint32(ur[a + 1 + i]).view(np.int32)) for i in range(rank))
        if why := tm.misaligned(coords):
            raise Fault(0, 0, why)
        addrs, inside = tm.element_addresses(coords)
        src = int(ur[a]) & OFFSET_BITS
        es, nbytes = tm.spec.esize, tm.box_bytes
        where = (swizzled(src + 16 * np.arange(nbytes // 16, dtype=np.int64), tm.spec.swizzle)[:, None]
                 + np.arange(16)).ravel()
        box = w.cta.shared.data[where].reshape(addrs.size, es)[inside]
        ga = addrs[inside].astype(np.uint64)
        if ga.size and op:
            box = reduce_bytes(op, tm.spec.dtype, w.L.gmem.load(ga, U8, es).ravel(), box.ravel()).reshape(-1, es)
        if ga.size:
            w.L.gmem.store(ga, box, U8)
        _record(w, BulkCopy(False, ga, es, nbytes, -1))
    return store


def b_ublk(cx: Ctx, red: bool = False) -> Exec:
    """UBLKCP / UBLKRED: 1-D bulk copies .S.G (global -> shared, mbarrier), .G.S (shared -> global), .S.S
    (shared -> the shared memory of a CTA of the cluster, that CTA's mbarrier); UBLKRED combines."""
    mods = list(cx.ins.modifiers)
    dirs = mods[:2]
    rest = mods[2:]
    op = rest[0] if red and rest else ""
    tname = "".join(x for x in rest[1:2]) if red else ""
    if dirs not in (["S", "G"], ["G", "S"], ["S", "S"]) or (red and (op not in _RED_OPS or tname not in _RED_TYPES
                                                                    or rest[2:] not in ([], ["RN"]))) \
            or (not red and rest):
        raise cx.err(f"{cx.ins.opcode}.{'.'.join(mods)} is not modelled (.S.G, .G.S, .S.S; UBLKRED with "
                     f"{', '.join(_RED_OPS)} on u32 or F32.RN)")
    a, b, n = _ur(cx, 0), _ur(cx, 1), _ur(cx, 2)
    to_shared = dirs[0] == "S"
    from_global = dirs[1] == "G"
    rop = (op.lower(), _RED_TYPES[tname]) if red else None

    def copy(w: Warp, m: np.ndarray) -> None:
        ur = w.UR
        size = 16 * (int(ur[n]) & 0xFFFF)
        src = int(ur[b]) | int(ur[b + 1]) << 32 if from_global else int(ur[b]) & OFFSET_BITS
        if to_shared:  # into the cluster CTA the destination's rank byte names, completing on its mbarrier
            cta, dst = target(w, int(ur[a]))
            mcta, mbar = target(w, int(ur[a + 1]))
            if mcta is not cta:
                raise Fault(0, int(ur[a + 1]), "a bulk copy's mbarrier is not in its destination CTA")
            _mbar(w, int(ur[a + 1]), cx.ins.opcode)
            if dst + size > cta.shared.size:
                raise Fault(0, dst, f"bulk copy of {size} bytes past the end of shared memory ({cta.shared.size})")
            pieces = np.uint64(src) + np.arange(0, size, 16, dtype=np.uint64)
            data = w.L.gmem.load(pieces, U8, 16).ravel() if from_global else w.cta.shared.data[src: src + size].copy()
            if rop is not None:
                data = reduce_bytes(rop[0], rop[1], cta.shared.data[dst: dst + size].copy(), data)
            cta.shared.data[dst: dst + size] = data
            _record(w, BulkCopy(True, pieces if from_global else np.zeros(0, np.uint64), 16, size, mbar,
                                (cta,)))  # type: ignore[arg-type]
            _landed(w, cta, mbar, size)
            return
        gdst = int(ur[a]) | int(ur[a + 1]) << 32
        pieces = np.uint64(gdst) + np.arange(0, size, 16, dtype=np.uint64)
        data = w.cta.shared.data[src: src + size].reshape(-1, 16).copy()
        if rop is not None:
            data = reduce_bytes(rop[0], rop[1], w.L.gmem.load(pieces, U8, 16).ravel(), data.ravel()).reshape(-1, 16)
        w.L.gmem.store(pieces, data, U8)
        _record(w, BulkCopy(False, pieces, 16, size, -1))
    return copy


def b_noop(cx: Ctx) -> Exec:
    """UTMACCTL.PF / .IV (tensor-map prefetch, fence.proxy.tensormap's invalidate), UBLKPF.L2 / UTMAPF.L2.ND
    (bulk and tensor prefetches), UTMACMDFLUSH (bulk commit_group: its
    timing in sim/sass/timing_tma.py),
    CCTL.IVALL (cache invalidate), YIELD (a scheduling hint)."""
    allowed = {"UTMACCTL": {"PF", "IV"}, "CCTL": {"IVALL"}, "UBLKPF": {"L2"},
               "UTMAPF": {"L2", "IM2COL", "1D", "2D", "3D", "4D", "5D"}}.get(cx.ins.opcode, set())
    cx.mods(allowed)
    return lambda w, m: None


def b_setmaxreg(cx: Ctx) -> Exec:
    """USETMAXREG.DEALLOC / .TRY_ALLOC.CTAPOOL {UPd,} N (setmaxnreg.dec / .inc): the register file is not
    reallocated here (as PTX mode's setmaxnreg); a TRY_ALLOC always succeeds (UPd true)."""
    mods = cx.mods({"DEALLOC", "TRY_ALLOC", "CTAPOOL"})
    ops = cx.ins.operands
    wp = cx.wpred(ops[0]) if "TRY_ALLOC" in mods and ops and ops[0].kind == "upred" else None

    def run(w: Warp, m: np.ndarray) -> None:
        if wp is not None:
            wp(w, True, m)
    return run


def b_p2r(cx: Ctx) -> Exec:
    """P2R Rd, PR, Rb, mask: Rd = the predicates P0..P6 as bits under mask, Rb's bits elsewhere."""
    cx.mods(set())
    d, pr, b, k = cx.ins.operands[:4]
    if pr.text != "PR" or k.kind != "imm":
        raise cx.err("P2R other than 'P2R Rd, PR, Rb, imm' is not modelled")
    wd, rb = cx.w32(d), cx.u32(b)
    mask = np.uint32(int(k.value or 0) & 0x7F)
    weights = (np.uint32(1) << np.arange(7, dtype=np.uint32))[:, None]

    def run(w: Warp, m: np.ndarray) -> None:
        bits = (w.P[:7].astype(np.uint32) * weights).sum(axis=0).astype(np.uint32)
        wd(w, (bits & mask) | (np.asarray(rb(w), dtype=np.uint32) & ~mask), m)
    return run


SASS_TMA: dict[str, Callable[[Ctx], Any]] = {
    "USETMAXREG": b_setmaxreg, "P2R": b_p2r, "SYNCS": b_syncs, "ELECT": b_elect, "UTMALDG": b_utmaldg,
    "UTMASTG": b_utmastg, "UTMAREDG": partial(b_utmastg, red=True), "UBLKCP": b_ublk,
    "UBLKRED": partial(b_ublk, red=True), "UTMACCTL": b_noop, "UTMACMDFLUSH": b_noop, "CCTL": b_noop,
    "YIELD": b_noop, "UBLKPF": b_noop, "UTMAPF": b_noop,
}

__all__ = ["SASS_TMA", "complete", "tensor_map"]
