"""Semantics of the bulk (TMA) copies, ``cp.async.bulk{.tensor.Nd}``, per the PTX ISA:

- tensor load ``.shared::cluster.global.mbarrier::complete_tx::bytes [dst], [tmap, {c..}], [mbar]``:
  the box at the (signed) coordinates, elements outside the tensor zero-filled, written densely and
  swizzled into shared memory (sim/tensormap.py); its bytes complete a transaction on the mbarrier;
- tensor store ``.global.shared::cta.bulk_group [tmap, {c..}], [src]``: the (swizzled) box back to
  global memory, elements outside the tensor skipped;
- 1-D ``cp.async.bulk`` load (``[dst], [src], size, [mbar]``) and store (``[dst], [src], size``);
- 1-D ``cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [dst], [src], size, [mbar]``:
  this CTA's shared bytes into the shared memory of the cluster CTA that ``dst`` (a mapa address) names,
  completing on that CTA's mbarrier (``mbar``, also in that CTA);
- im2col loads (``.im2col``, an im2col tensor map, 16-bit im2col offsets after the mbarrier): the column of
  ``pixels`` x ``channels`` elements that sim/tensormap.py's im2col_addresses walks;
- ``cp.reduce.async.bulk{.tensor}`` (stores to global, or 1-D shared::cta -> shared::cluster): the bytes
  combined with the destination's (sim/functional/ops_bulk.py);
- ``commit_group`` / ``wait_group{.read} N`` and the prefetches: no-ops here (copies land at issue).

Each active lane issues its own copy. The tensor-map operand is the generic (or .param) address of a
128-byte handle the launch placed there (sim/tensormap.py). A copy's mbarrier transaction completes at
issue, or, when the timing model sets ``CTA.defer_tx``, when the timing model says (``complete_tx``).
Multicast (``.multicast::cluster`` with a 16-bit ctaMask operand) writes the box into the shared memory of
every CTA of the cluster whose rank bit is set, at the same offset, and completes its bytes on the
mbarrier at the same offset of each of those CTAs (PTX ISA, cp.async.bulk.tensor). A destination given
as a shared::cluster address (mapa's, sim/cluster.py) names the CTA it lies in."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from sim.cluster import DSMEM_STRIDE
from sim.errors import ExecutionError, at_instruction
from sim.functional.memory import PARAM_WINDOW, WINDOW_SIZE, Fault
from sim.functional.operands import DecodeCtx
from sim.functional.ops_bulk import reduce_bytes
from sim.isa import bulk_reduce, bulk_role
from sim.ptx.ir import Instruction
from sim.ptx.types import type_mods
from sim.tensormap import HANDLE_SIZE, TensorMap, decode_handle, swizzled

if TYPE_CHECKING:
    from sim.functional.ops_mem import Exec
    from sim.functional.warp import CTA, Warp

U8 = np.dtype(np.uint8)


@dataclass
class BulkCopy:
    """What one bulk copy moved, for the timing model: its global byte addresses (one per piece of
    ``piece`` bytes: an element, or 16 bytes of a 1-D copy), bytes, direction and the mbarrier (shared
    offset, -1 for none) it completes on."""

    load: bool
    addrs: np.ndarray
    piece: int
    nbytes: int
    mbar: int
    dests: tuple[CTA, ...] = ()  # the CTAs whose shared memory and mbarrier a load reaches (multicast)


def complete_tx(cta: CTA, off: int, nbytes: int) -> None:
    """A copy's ``nbytes`` arrive: the mbarrier at shared offset ``off`` counts them off its tx-count."""
    mb = cta.mbars.get(off)
    if mb is not None:
        mb.tx -= nbytes
        mb.settle()
        cta.mbar_epoch += 1


def _err(w: Warp, ins: Instruction, msg: str) -> ExecutionError:
    return at_instruction(ExecutionError, f"{msg} ('{ins.text}' in block {w.cta.ctaid})", w.L.file, ins)


def _tensor_map(w: Warp, ins: Instruction, addr: int) -> TensorMap:
    """The tensor map whose handle lies at ``addr`` (generic, or a .param address from ``mov``)."""
    params = w.L.params
    if PARAM_WINDOW <= addr < PARAM_WINDOW + WINDOW_SIZE:
        addr -= PARAM_WINDOW
    if addr + HANDLE_SIZE <= params.size:
        raw = params.data[addr: addr + HANDLE_SIZE].tobytes()
    else:
        space, a = w._space_of("generic", np.array([addr], dtype=np.uint64))
        try:
            raw = w._mem(space).load(a, U8, HANDLE_SIZE)[0].tobytes()
        except (Fault, ExecutionError):
            raw = b""
    idx = decode_handle(raw)
    if idx is None or idx >= len(w.L.tensormaps):
        raise _err(w, ins, f"the tensor-map operand (address {addr:#x}) holds no tensor map the simulator "
                   "built: pass it as a 'tensormap' param in the @workbench header or with --tensormap "
                   "(docs/kernel-metadata.md)")
    return w.L.tensormaps[idx]


def _shared_range(w: Warp, ins: Instruction, off: int, nbytes: int, align: int) -> None:
    if off % align or off < 0 or off + nbytes > w.cta.shared.size:
        raise _err(w, ins, f"shared address {off:#x} (+{nbytes} bytes) is outside the {w.cta.shared.size}-byte "
                   f"shared memory or not {align}-byte aligned")


def _global(w: Warp, ins: Instruction, addrs: np.ndarray, n: int, data: np.ndarray | None = None) -> np.ndarray:
    """Read (data None) or write ``n`` bytes at each global address; faults name the instruction."""
    try:
        if data is None:
            return w.L.gmem.load(addrs, U8, n)
        w.L.gmem.store(addrs, data, U8)
        return data
    except Fault as f:
        raise _err(w, ins, f"TMA access {f.message}: global address {f.addr:#x}") from None


def _tensor_copy(w: Warp, ins: Instruction, tm: TensorMap, coords: tuple[int, ...], smem: int, load: bool,
                 mbar: int, dests: tuple[CTA, ...], offsets: tuple[int, ...] | None = None,
                 red: tuple[str, str] | None = None) -> BulkCopy:
    es = tm.spec.esize
    nbytes = tm.box_bytes
    sw = tm.spec.swizzle
    _shared_range(w, ins, smem, nbytes, 128)
    if offsets is not None and not tm.spec.im2col:
        raise _err(w, ins, "an .im2col load needs an im2col tensor map: give the map 'im2col' fields "
                   "(docs/kernel-metadata.md)")
    if offsets is None and tm.spec.im2col:
        raise _err(w, ins, "the tensor map is an im2col one: only .im2col loads (with im2col offsets) use it")
    if offsets is None and (why := tm.misaligned(coords)):
        raise _err(w, ins, why)
    addrs, inside = tm.im2col_addresses(coords, offsets) if offsets is not None else tm.element_addresses(coords)
    chunks = swizzled(smem + 16 * np.arange(nbytes // 16, dtype=np.int64), sw)  # where each 16-byte piece lies
    sh = w.cta.shared.data
    where = (chunks[:, None] + np.arange(16)).ravel()
    ga = addrs[inside].astype(np.uint64)
    if load:
        box = np.zeros((addrs.size, es), dtype=np.uint8)
        if ga.size:
            box[inside] = _global(w, ins, ga, es)
        for c in dests:
            c.shared.data[where] = box.ravel()
    elif ga.size:
        box = sh[where].reshape(addrs.size, es)[inside]
        if red is not None:
            box = _reduced(w, ins, (red[0], red[1] or tm.spec.dtype), _global(w, ins, ga, es), box)
        _global(w, ins, ga, es, box)
    return BulkCopy(load, ga, es, nbytes, mbar, dests)


def _reduced(w: Warp, ins: Instruction, red: tuple[str, str], old: np.ndarray, new: np.ndarray) -> np.ndarray:
    try:
        return reduce_bytes(red[0], red[1], old.ravel(), new.ravel()).reshape(new.shape)
    except ValueError as e:
        raise _err(w, ins, str(e)) from None


def _plain_copy(w: Warp, ins: Instruction, smem: int, gaddr: int, size: int, load: bool, mbar: int,
                dests: tuple[CTA, ...], red: tuple[str, str] | None = None) -> BulkCopy:
    if size % 16 or gaddr % 16:
        raise _err(w, ins, f"a bulk copy needs a size and global address that are multiples of 16 (size {size}, "
                   f"address {gaddr:#x})")
    _shared_range(w, ins, smem, size, 16)
    pieces = np.uint64(gaddr) + np.arange(0, size, 16, dtype=np.uint64)
    sh = w.cta.shared.data
    if load:
        data = _global(w, ins, pieces, 16).ravel()
        for c in dests:
            c.shared.data[smem: smem + size] = data
    else:
        chunks: np.ndarray = sh[smem: smem + size].reshape(-1, 16).copy()
        if red is not None:
            chunks = _reduced(w, ins, red, _global(w, ins, pieces, 16), chunks)
        _global(w, ins, pieces, 16, chunks)
    return BulkCopy(load, pieces, 16, size, mbar, dests)


def _peer_copy(w: Warp, ins: Instruction, dst: CTA, doff: int, soff: int, size: int, mbar: int,
               red: tuple[str, str] | None) -> BulkCopy:
    """cp{.reduce}.async.bulk.shared::cluster.shared::cta: ``size`` bytes of this CTA's shared memory at
    ``soff`` into (or combined with) ``dst``'s at ``doff``. No global traffic (empty addrs)."""
    if size % 16 or size <= 0:
        raise _err(w, ins, f"a bulk copy needs a positive size that is a multiple of 16 (size {size})")
    _shared_range(w, ins, soff, size, 16)
    if doff % 16 or doff + size > dst.shared.size:
        raise _err(w, ins, f"destination shared address {doff:#x} (+{size} bytes) is outside block {dst.ctaid}'s "
                   f"{dst.shared.size}-byte shared memory or not 16-byte aligned")
    data = w.cta.shared.data[soff: soff + size].copy()
    if red is not None:
        data = _reduced(w, ins, red, dst.shared.data[doff: doff + size], data)
    dst.shared.data[doff: doff + size] = data
    return BulkCopy(True, np.zeros(0, dtype=np.uint64), 16, size, mbar, (dst,))


def _destinations(w: Warp, ins: Instruction, raw: int, mask: int | None) -> tuple[CTA, ...]:
    """The CTAs a load writes: those of the multicast ctaMask, else the one its address names."""
    cl = w.cta.cluster
    n = len(cl.ctas) if cl is not None else 1
    if mask is not None:
        ranks = [r for r in range(16) if mask >> r & 1]
        if not ranks or ranks[-1] >= n:
            raise _err(w, ins, f"multicast ctaMask {mask:#x} names no CTA or a rank outside the cluster of {n} "
                       f"CTAs (give bits 0..{n - 1})")
        return tuple(cl.ctas[r] for r in ranks) if cl is not None else (w.cta,)
    if raw >= DSMEM_STRIDE:
        if cl is None or raw // DSMEM_STRIDE - 1 >= n:
            raise _err(w, ins, f"destination address {raw:#x} names a CTA outside the cluster of {n}")
        return (cl.target(raw)[0],)
    return (w.cta,)


def _shared_offsets(w: Warp, addrs: np.ndarray) -> np.ndarray:
    space, off = w._space_of("generic", addrs)
    return (off if space in ("shared", "shared::cluster") else addrs).astype(np.int64)


def b_bulk(ins: Instruction, cx: DecodeCtx) -> Exec:
    role = bulk_role(ins)
    if role in ("commit", "wait", "prefetch"):
        return lambda w, m, full: None
    ops = ins.operands
    tensor = role.startswith("tensor")
    peer = role == "shared_copy"
    load = role.endswith("load") or peer
    need = (3 if load else 2) if tensor else (4 if load else 3)
    im2col = "im2col" in ins.mods
    if len(ops) < need or (load and "mbarrier::complete_tx::bytes" not in ins.mods) or \
            (not load and "bulk_group" not in ins.mods):
        form = ("[dst], [tmap, {c..}], [mbar] with .mbarrier::complete_tx::bytes" if load else
                "[tmap, {c..}], [src] with .bulk_group") if tensor else \
            ("[dst], [src], size, [mbar] with .mbarrier::complete_tx::bytes" if load else
             "[dst], [src], size with .bulk_group")
        raise cx.err(ins, f"'{ins.full}' takes {form}")
    red_op = bulk_reduce(ins)
    red = None
    if red_op:
        tys = type_mods(ins.mods)
        if not (tys or tensor) or load and not peer:
            raise cx.err(ins, f"'{ins.full}': cp.reduce.async.bulk needs a type (.add.u32 ...) and a global or "
                         "shared::cluster destination")
        red = (red_op, tys[-1] if tys else "")  # a tensor reduction's elements are its map's dtype
    roffs = None
    mb_ix = need - 1
    if im2col:
        rank = int(next(m for m in ins.mods if m.endswith("d") and m[0].isdigit())[0])
        if len(ops) <= need or ops[need].kind != "vec" or len(ops[need].items) != rank - 2:
            raise cx.err(ins, f"'{ins.full}' needs {rank - 2} im2col offsets {{o..}} after the mbarrier "
                         f"({rank}-D im2col: one per spatial dim)")
        roffs = [cx.rd(o, "u16", ins) for o in ops[need].items]
        need += 1
    tops = ops[1] if load else ops[0]
    if tensor and len(tops.items) != int(next(m for m in ins.mods if m.endswith("d") and m[0].isdigit())[0]):
        raise cx.err(ins, f"'{ins.full}' needs as many coordinates as its .Nd names")
    fd, _ = cx.addr(ops[0], ins)
    fs, _ = cx.addr(ops[1], ins)
    rcoords = [cx.rd(c, "s32", ins) for c in tops.items]
    rsize = None if tensor else cx.rd(ops[2], "u32", ins)
    fbar = cx.addr(ops[mb_ix], ins)[0] if load else None
    rmask = cx.rd(ops[need], "u16", ins) if "multicast::cluster" in ins.mods and len(ops) > need else None

    def run(w: Warp, m: np.ndarray, full: bool) -> None:
        dst, src = fd(w), fs(w)
        coords = [np.broadcast_to(np.asarray(r(w)).astype(np.int64), (32,)) for r in rcoords]
        offs = [np.broadcast_to(np.asarray(r(w)).astype(np.int64), (32,)) for r in roffs] if roffs else None
        size = np.broadcast_to(np.asarray(rsize(w)).astype(np.int64), (32,)) if rsize is not None else None
        bars = _shared_offsets(w, fbar(w)) if fbar is not None else None
        mask = np.broadcast_to(np.asarray(rmask(w)).astype(np.int64), (32,)) if rmask is not None else None
        copies = []
        for lane in np.flatnonzero(m):
            mbar = int(bars[lane]) % DSMEM_STRIDE if bars is not None else -1
            sa = dst if load else src
            raw = int(_shared_offsets(w, sa[lane:lane + 1])[0])
            dests = _destinations(w, ins, raw, int(mask[lane]) if mask is not None else None) if load else (w.cta,)
            smem = raw % DSMEM_STRIDE
            for d in dests if load else ():
                if d.mbars.get(mbar) is None:
                    raise _err(w, ins, f"the copy completes on shared offset {mbar:#x} of block {d.ctaid}, which "
                               "holds no initialised mbarrier (mbarrier.init first)")
            if peer:
                soff = int(_shared_offsets(w, src[lane:lane + 1])[0]) % DSMEM_STRIDE
                cp = _peer_copy(w, ins, dests[0], smem, soff, int(size[lane]), mbar, red)  # type: ignore[index]
            elif tensor:
                tm = _tensor_map(w, ins, int((src if load else dst)[lane]))
                cp = _tensor_copy(w, ins, tm, tuple(int(x[lane]) for x in coords), smem, load, mbar, dests,
                                  tuple(int(x[lane]) for x in offs) if offs is not None else None, red)
            else:
                ga = src if load else dst
                cp = _plain_copy(w, ins, smem, int(ga[lane]), int(size[lane]), load, mbar,  # type: ignore[index]
                                 dests, red)
            if load and not w.cta.defer_tx:
                for d in dests:
                    complete_tx(d, mbar, cp.nbytes)
            copies.append(cp)
        w.rec.bulk = copies
    return run


__all__ = ["BulkCopy", "b_bulk", "complete_tx"]
