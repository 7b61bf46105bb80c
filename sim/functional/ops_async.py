"""Semantics of Hopper mbarriers (mbarrier.init / arrive / expect_tx / complete_tx / test_wait /
try_wait / inval), per the PTX ISA's mbarrier object: a phase number, the arrivals still pending in
the current phase, the expected arrival count and a transaction count (bytes). The current phase
completes when its pending arrivals reach zero and its tx-count is zero; the phase then advances and
the pending count resets to the expected count.

The object lives beside the CTA's shared memory (``CTA.mbars``, keyed by its shared offset); its 8
bytes of shared memory are not written. A ``test_wait`` / ``try_wait`` whose phase has not completed
sets its predicate false and yields the warp (control code YIELD): the functional runner then runs
the other warps, and reports a deadlock with the waiting line when a round of every warp changes no
mbarrier and passes no barrier."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from sim.cluster import DSMEM_STRIDE, mapa
from sim.errors import ExecutionError, at_instruction
from sim.functional.memory import SHARED_WINDOW
from sim.functional.operands import DecodeCtx
from sim.functional.ops_mem import b_nop
from sim.ptx.ir import Instruction

if TYPE_CHECKING:
    from sim.functional.ops_mem import Exec
    from sim.functional.warp import CTA, Warp

YIELD = 5  # control code: a wait that did not complete; the warp lets the others run


@dataclass
class MBarrier:
    """An mbarrier object in shared memory: its expected and pending arrivals, transactions, phase."""

    expected: int
    pending: int
    phase: int = 0
    tx: int = 0

    def settle(self) -> None:
        if self.pending <= 0 and self.tx == 0:
            self.phase += 1
            self.pending = self.expected


def _lanes(v: object) -> np.ndarray:
    return np.broadcast_to(np.asarray(v).astype(np.int64), (32,))


def _offsets(w: Warp, ins: Instruction, addrs: np.ndarray) -> np.ndarray:
    """Shared offsets of the mbarrier operands; a shared::cluster one (mapa's) names another CTA."""
    space = "shared" if any(m.startswith("shared") for m in ins.mods) else "generic"
    sp, off = w._space_of(space, addrs)
    if sp not in ("shared", "shared::cluster"):
        raise at_instruction(ExecutionError, f"mbarrier address {int(addrs[0]):#x} is not in shared memory "
                             f"('{ins.text}')", w.L.file, ins)
    return off.astype(np.int64)


def _get(w: Warp, ins: Instruction, off: int, cta: CTA | None = None) -> MBarrier:
    cta = cta or w.cta
    mb = cta.mbars.get(off)
    if mb is None:
        raise at_instruction(ExecutionError, f"mbarrier at shared offset {off:#x} of block {cta.ctaid} is used "
                             f"before mbarrier.init ('{ins.text}' in block {w.cta.ctaid})", w.L.file, ins)
    return mb


def _owner(w: Warp, ins: Instruction, off: int) -> tuple[CTA, int]:
    """(CTA, offset) of a shared offset: a shared::cluster one (sim/cluster.py) may name another CTA."""
    if off < DSMEM_STRIDE:
        return w.cta, off
    cl = w.cta.cluster
    rank = off // DSMEM_STRIDE - 1
    if cl is None or rank >= len(cl.ctas):
        n = len(cl.ctas) if cl is not None else 1
        raise at_instruction(ExecutionError, f"mbarrier address names CTA rank {rank} of a cluster of {n} "
                             f"('{ins.text}' in block {w.cta.ctaid})", w.L.file, ins)
    return cl.target(off)


def b_mbarrier(ins: Instruction, cx: DecodeCtx) -> Exec:
    mods = set(ins.mods)
    ops = ins.operands
    wait = "try_wait" in mods or "test_wait" in mods
    arrive = "arrive" in mods or "arrive_drop" in mods
    has_dst = wait or arrive
    if has_dst and len(ops) < 2 or not has_dst and not ops:
        raise cx.err(ins, f"'{ins.full}' is missing operands ({ins.text})")
    a_ix = 1 if has_dst else 0
    fa, _ = cx.addr(ops[a_ix], ins)
    rest = ops[a_ix + 1:]
    rarg = cx.rd(rest[0], "u64" if wait and "parity" not in mods else "u32", ins) if rest else None
    wr = cx.wr(ops[0], "pred" if wait else "u64", ins) if has_dst else None
    kind = next((k for k in ("init", "inval", "expect_tx", "complete_tx", "try_wait", "test_wait")
                 if k in mods), "arrive" if arrive else "")
    if not kind:
        raise cx.err(ins, f"'{ins.full}' names no mbarrier operation (init, arrive, expect_tx, complete_tx, "
                     f"test_wait, try_wait, inval)")
    if arrive and kind == "expect_tx":
        kind = "arrive_tx"
    if kind not in ("init", "inval") and not arrive and not wait and rarg is None:
        raise cx.err(ins, f"'{ins.full}' needs a transaction byte count ({ins.text})")
    if kind == "init" and rarg is None:
        raise cx.err(ins, f"mbarrier.init needs an arrival count ({ins.text})")
    drop = "arrive_drop" in mods

    def run(w: Warp, m: np.ndarray, full: bool) -> int | None:
        offs = _offsets(w, ins, fa(w))
        arg = _lanes(rarg(w)) if rarg is not None else np.ones(32, dtype=np.int64)
        out = np.zeros(32, dtype=np.int64)
        for lane in np.flatnonzero(m):
            cta, off = _owner(w, ins, int(offs[lane]))
            v = int(arg[lane])
            if kind == "init":
                if off % 8:
                    raise at_instruction(ExecutionError, f"mbarrier at shared offset {off:#x} is not 8-byte "
                                         f"aligned ('{ins.text}')", w.L.file, ins)
                cta.mbars[off] = MBarrier(v, v)
            elif kind == "inval":
                cta.mbars.pop(off, None)
            else:
                mb = _get(w, ins, off, cta)
                if wait and cta is not w.cta:
                    raise at_instruction(ExecutionError, f"'{ins.full}' waits on another CTA's mbarrier: waits "
                                         "take a shared::cta address", w.L.file, ins)
                if wait:
                    done = (mb.phase & 1) != (v & 1) if "parity" in mods else mb.phase != v
                    out[lane] = int(done)
                    continue
                out[lane] = mb.phase
                if kind in ("expect_tx", "arrive_tx"):
                    mb.tx += v
                elif kind == "complete_tx":
                    mb.tx -= v
                if arrive:
                    mb.pending -= 1 if kind == "arrive_tx" or rarg is None else v
                    if drop:
                        mb.expected -= 1
                mb.settle()
            cta.mbar_epoch += 1
            if cta is not w.cta and cta.cluster is not None and cta.cluster.hooks is not None:
                cta.cluster.hooks.mbarrier_signalled(cta, w)  # the timing model wakes its waiters
        if wr is not None:
            wr(w, out.astype(bool) if wait else out.astype(np.uint64), m, full)
        if wait and not bool(out[m].all()):
            w.waiting_on = ins
            return YIELD
        return None
    return run


def b_mapa(ins: Instruction, cx: DecodeCtx) -> Exec:
    """mapa{.shared::cluster}.{u32,u64} d, a, rank: the shared::cluster address of a's offset in the CTA
    of that rank (sim/cluster.py); a rank outside the cluster stops the run."""
    t = cx.type1(ins)
    d, a, b = ins.operands[:3]
    wd = cx.wr(d, t, ins)
    ra = cx.rd(a, t, ins)
    rb = cx.rd(b, "u32", ins)
    base = 0 if "shared::cluster" in ins.mods else SHARED_WINDOW

    def run(w: Warp, m: np.ndarray, full: bool) -> None:
        rank = _lanes(rb(w))
        n = len(w.cta.cluster.ctas) if w.cta.cluster is not None else 1
        bad = m & ((rank < 0) | (rank >= n))
        if bool(bad.any()):
            raise at_instruction(ExecutionError, f"mapa to CTA rank {int(rank[bad][0])} of a cluster of {n} CTAs "
                                 f"('{ins.text}' in block {w.cta.ctaid})", w.L.file, ins)
        addr = np.broadcast_to(np.asarray(ra(w)), (32,))
        wd(w, mapa(addr, rank, base).astype(addr.dtype), m, full)
    return run


def b_elect(ins: Instruction, cx: DecodeCtx) -> Exec:
    """elect.sync d|p, membermask: d (a 32-bit register or ``_``) gets the elected lane's index, p is
    true in that lane only; the elected lane is the lowest active lane inside membermask."""
    d, a = ins.operands[:2]
    if d.kind != "pair":
        raise cx.err(ins, f"elect.sync needs a destination pair d|p ({ins.text})")
    wd = cx.wr(d.items[0], "u32", ins)
    wp = cx.wr(d.items[1], "pred", ins)
    rmask = cx.rd(a, "u32", ins)

    def run(w: Warp, m: np.ndarray, full: bool) -> None:
        mask = int(np.asarray(rmask(w)).flat[0]) & 0xFFFFFFFF
        cand = np.flatnonzero(m & ((mask >> np.arange(32)) & 1).astype(bool))
        leader = int(cand[0]) if len(cand) else -1
        wd(w, np.full(32, max(leader, 0), dtype=np.uint32), m, full)
        wp(w, np.arange(32) == leader, m, full)
    return run


SEMANTICS_ASYNC = {"mbarrier": b_mbarrier, "mapa": b_mapa, "elect": b_elect, "setmaxnreg": b_nop,
                   "griddepcontrol": b_nop}

__all__ = ["SEMANTICS_ASYNC", "YIELD", "MBarrier"]
