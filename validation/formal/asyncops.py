"""Warpgroup MMA and proxy fences in one symbolic thread (a mixin of the executor).

``wgmma.mma_async`` is an asynchronous reader of shared memory through its matrix descriptors and a
writer of its accumulator registers: each descriptor operand becomes a shared "read" record (its
footprint, a byte range that contains every byte the layout addresses), the instruction a
:class:`~validation.formal.state.WgmmaRec` with the counters at its issue. ``commit_group`` and
``wait_group N`` move the pseudo-registers %%wgc / %%wdone as cp.async groups move %%gc / %%done;
``fence.proxy.async`` counts in %%pf and remembers in %%pfg which cp.async groups it covers.
"""

from __future__ import annotations

import numpy as np
import z3

from sim import isa
from sim.functional.ops_wgmma import SWIZZLE, Desc, swizzle, tile_addresses
from sim.ptx.ir import Instruction, Operand
from validation.formal.base import ExecutorBase
from validation.formal.program import BDONE, BGC, DONE, MWA, MWE, MWP, MWS, PF, PFG, TXA, TXB, TXL, TXN, WDONE, WGC
from validation.formal.state import DSMEM, Access, MbarEvent, RegTouch, State, WgmmaRec

_ES = {"f16": 2, "bf16": 2, "tf32": 4, "e4m3": 1, "e5m2": 1, "s8": 1, "u8": 1}


def _regs(op: Operand) -> frozenset:
    items = op.items if op.kind in ("vec", "pair") else (op,)
    return frozenset(it.name for it in items if it.kind == "reg")


def wgmma_shape(ins: Instruction) -> tuple[int, int, int, int]:
    """(M, N, K, A/B element bytes) from ``.mMnNkK`` and the A type."""
    shape = next(m for m in ins.mods if m.startswith("m64n"))
    n, k = shape[4:].split("k")
    tys = [m for m in ins.mods if m in _ES]
    return 64, int(n), int(k), _ES[tys[-2] if len(tys) >= 2 else tys[-1]]


def footprint_offsets(lbo: int, sbo: int, layout: int, rows: int, kdim: int, es: int,
                      mn_major: bool) -> tuple[int, int, int]:
    """(lowest, highest byte offset from the start address before the swizzle, swizzle row bytes R):
    the swizzle permutes 16-byte chunks inside aligned R-byte rows only, so every byte read lies in
    the R-rows that contain start + lowest .. start + highest."""
    bits, _ = SWIZZLE[layout]
    offs = tile_addresses(Desc(0, lbo, sbo, 0, layout), np.arange(rows), kdim, es, mn_major)
    plain = swizzle(offs, bits)  # the swizzle is an involution: undo it
    return int(plain.min()), int(plain.max()) + es - 1, 16 << bits


class AsyncOpsMixin(ExecutorBase):
    def wgmma_register_set(self) -> frozenset:
        if not self.wgmma_regs:
            regs: set[str] = set()
            for ins in self.k.body:
                if isa.wgmma_role(ins) == "issue":
                    regs |= _regs(ins.operands[0])
                    if ins.operands[1].kind == "vec":
                        regs |= _regs(ins.operands[1])
            self.wgmma_regs = frozenset(regs) or frozenset({""})
        return self.wgmma_regs

    def note_touch(self, st: State, ins: Instruction) -> None:
        """Record a register access of a wgmma's registers by any other instruction."""
        regs = self.wgmma_register_set()
        if not self.recording or isa.wgmma_role(ins) == "issue":
            return
        r = frozenset(ins.src_regs) & regs
        w = frozenset(ins.dst_regs) & regs
        if r or w:
            self.reg_touches.append(RegTouch(ins.index, ins.line, ins.text, self.access_pc(st, ins),
                                             self.sync_snapshot(st), r, w))

    def do_wgmma(self, st: State, ins: Instruction) -> None:
        role = isa.wgmma_role(ins)
        wgc = self.read(st, WGC)
        if role == "commit":
            self.write_pseudo(st, ins, WGC, wgc + 1)
            return
        if role == "wait":
            self.wait_group(st, ins, WGC, WDONE, "wgmma.wait_group")
            return
        if role != "issue":
            return
        ops = ins.operands
        _, n, kdim, es = wgmma_shape(ins)
        a_regs = ops[1].kind == "vec"
        half = es == 2
        trans_a = bool(ops[6].value) if half and not a_regs and len(ops) > 6 and ops[6].kind == "imm" else False
        trans_b = bool(ops[-1].value) if half and ops[-1].kind == "imm" else False
        foot = []
        if self.recording:
            pc = self.access_pc(st, ins)
            sync = self.sync_snapshot(st)
            for op, rows, trans in ((None if a_regs else ops[1], 64, trans_a), (ops[2], n, trans_b)):
                if op is None:
                    continue
                a = self.descriptor_footprint(st, ins, op, rows, kdim, es, trans, pc, sync)
                if a is not None:
                    foot.append(a)
                    self.accesses.append(a)
            self.wgmmas.append(WgmmaRec(ins.index, ins.line, ins.text, pc, sync, _regs(ops[0]),
                                        _regs(ops[1]) if a_regs else frozenset(), foot))
        for it in ops[0].items:
            if it.kind == "reg":
                self.write(st, ins, it, self.fresh("wgmma", self.width_of_reg(it.name)))

    def descriptor_footprint(self, st: State, ins: Instruction, op: Operand, rows: int, kdim: int, es: int,
                             mn_major: bool, pc: z3.BoolRef, sync: dict) -> Access | None:
        d = self.fit(self.val(st, op, 64), 64)
        fields = self.constant_fields(d, pc)
        if fields is None:
            self.unsupported.append((ins.line, f"wgmma descriptor {op} whose leading/stride offsets, base "
                                               "or swizzle are not constant"))
            return None
        lbo, sbo, base, layout = fields
        if base:
            self.unsupported.append((ins.line, f"wgmma descriptor {op} with base offset {base}"))
            return None
        lo_off, hi_off, row = footprint_offsets(lbo << 4, sbo << 4, layout, rows, kdim, es, mn_major)
        start = z3.ZeroExt(18, z3.Extract(13, 0, d)) << 4
        mask = z3.BitVecVal(~(row - 1) & 0xFFFFFFFF, 32)
        lo = (start + lo_off) & mask
        hi = ((start + hi_off) & mask) + row
        return Access(ins.index, ins.line, f"{ins.text} (operand {op})", "shared", "read", lo, hi - lo, pc,
                      self.tags_of(st, op), sync, self.S.block_of[ins.index])

    def constant_fields(self, d: z3.BitVecRef, pc: z3.BoolRef) -> tuple[int, ...] | None:
        """(LBO >> 4, SBO >> 4, base offset, swizzle mode) of descriptor d when each is one value on
        every path to it (the start address may vary), else None."""
        spans = ((29, 16), (45, 32), (51, 49), (63, 62))
        fields = [z3.simplify(z3.Extract(hi, lo, d)) for hi, lo in spans]
        if all(z3.is_bv_value(f) for f in fields):
            return tuple(f.as_long() for f in fields)
        s = self.summary_solver()
        s.add(pc)
        if s.check() != z3.sat:
            return None
        m = s.model()
        vals = [m.eval(f, model_completion=True) for f in fields]
        s.add(z3.Or([f != v for f, v in zip(fields, vals)]))
        if s.check() != z3.unsat:
            return None
        return tuple(v.as_long() for v in vals)

    def do_proxy_fence(self, st: State, ins: Instruction) -> None:
        self.write_pseudo(st, ins, PF, self.read(st, PF) + 1)
        self.write_pseudo(st, ins, PFG, self.read(st, DONE))

    # ------------------------------------------------------------------ mbarriers and bulk copies
    def mbar_event(self, st: State, ins: Instruction, kind: str, **kw) -> MbarEvent | None:
        if not self.recording:
            return None
        ev = MbarEvent(kind, ins.index, ins.line, ins.text, self.access_pc(st, ins), self.sync_snapshot(st), **kw)
        self.mbar_events.append(ev)
        return ev

    def do_mbarrier(self, st: State, ins: Instruction) -> None:
        mods, ops = ins.mods, ins.operands
        addr = next((o for o in ops if o.kind == "addr"), None)
        if addr is None:
            self.unsupported.append((ins.line, f"mbarrier without an address operand: {ins.full}"))
            return
        bar, btags = self.address(st, addr, 32)
        if DSMEM in btags:  # another CTA's mbarrier (mapa): its offset, the CTA apart (cluster symmetry)
            last = ops[-1] if ops[-1].kind in ("imm", "reg") else None
            bar, _ = self.cluster_split(ins, bar, self.access_pc(st, ins), [self.val(st, last, 32)] if last else [])
        role = isa.mbarrier_op(ins)
        if role == "wait":
            self.mbar_wait_lines.add(ins.line)
            ok = self.fresh(f"mbar@{ins.line}", None)
            self.loadsyms[str(ok)] = ins.line
            self.write(st, ins, ops[0], ok)
            parity = self.val(st, ops[2], 32) if "parity" in mods and len(ops) > 2 else z3.BitVecVal(2, 32)
            if "parity" in mods and len(ops) > 2:
                self.mbar_event(st, ins, "wait", bar=bar, parity=parity)
            self.write_pseudo(st, ins, MWA, z3.If(ok, bar, self.read(st, MWA)))
            self.write_pseudo(st, ins, MWP, z3.If(ok, parity & 1 if "parity" in mods else parity, self.read(st, MWP)))
            seen = self.read(st, MWS)
            slot = z3.BitVecVal(1, 32) << (z3.LShR(bar, 3) & 31)
            first = z3.And([(seen & slot) == 0] + [k == 0 for k in self.kstack])
            early = z3.And(first, (parity & 1) == 1) if "parity" in mods else z3.BoolVal(False)
            self.write_pseudo(st, ins, MWE, z3.If(ok, z3.If(early, z3.BitVecVal(1, 32), z3.BitVecVal(0, 32)),
                                                  self.read(st, MWE)))
            self.write_pseudo(st, ins, MWS, z3.If(ok, seen | slot, seen))
            return
        if role == "arrive" or (role == "expect_tx" and "arrive" in mods):
            self.mbar_event(st, ins, "arrive", bar=bar)
        elif role == "other":
            self.mbar_other.append((ins.line, ins.full))  # e.g. arrive_drop: may complete a phase, not modelled
        n = self.val(st, ops[-1], 32) if ops[-1].kind in ("imm", "reg") else None
        if role == "expect_tx" and n is not None:
            self.mbar_event(st, ins, "expect", bar=bar, nbytes=n)
            self.write_pseudo(st, ins, TXA, bar)
            self.write_pseudo(st, ins, TXB, n)
            self.write_pseudo(st, ins, TXN, self.read(st, TXN) + 1)
            self.write_pseudo(st, ins, TXL, z3.BitVecVal(ins.line, 32))
        elif role == "complete_tx" and n is not None:
            self.mbar_event(st, ins, "complete", bar=bar, nbytes=n)
            self.write_pseudo(st, ins, TXB, self.read(st, TXB) - n)
        if ops and ops[0].kind == "reg" and ins.dst_regs:
            self.write(st, ins, ops[0], self.fresh("mbar", self.width_of_reg(ops[0].name)))

    def do_bulk_copy(self, st: State, ins: Instruction) -> None:
        """cp.async.bulk(.tensor) global -> shared with an mbarrier (complete_tx): an async-proxy write
        of the destination (kind "bulk") whose bytes count toward the barrier's transaction. A tensor
        copy brings one box of its tensor map (the header's box and dtype); its global side is the
        map's business (out-of-bounds elements are zero-filled), not a bounds question."""
        ops = ins.operands
        if "multicast::cluster" in ins.mods:  # its bytes land in several CTAs, whose barriers count the other
            # CTAs' parts too: a one-CTA view cannot balance them (unknown rather than a false violation)
            self.unsupported.append((ins.line, f"{ins.full}: a multicast copy (the cluster's other CTAs' parts of the "
                                               "stage and their mbarrier bytes are not modelled)"))
            self.untracked_copies.append(ins.line)
            return
        if "tensor" in ins.mods and len(ops) >= 3 and ops[1].kind == "addr" and ops[1].base is not None:
            maps = [t[5:] for t in self.tags_of(st, ops[1].base) if t.startswith("tmap:")]
            if len(maps) != 1:
                self.unsupported.append((ins.line, f"{ins.full}: cannot tell which tensor map it reads, so not how "
                                                   "many bytes it brings (give the map's box and dtype in the "
                                                   "@workbench header)"))
                self.untracked_copies.append(ins.line)
                return
            n = z3.BitVecVal(self.ctx.tensormaps[maps[0]], 32)
            self.record(st, ins, "shared", "bulk", ops[0], n)
            self.tma_coord(st, ins, ops[1], maps[0])
            mbar = ops[2]
        elif "tensor" not in ins.mods and len(ops) >= 4 and ops[2].kind in ("imm", "reg"):
            n = self.val(st, ops[2], 32)
            self.record(st, ins, "shared", "bulk", ops[0], n)
            # the source: global memory, or (the CTA-to-CTA form, shared::cluster <- shared::cta) this CTA's
            # shared memory, read by the async proxy
            if isa.bulk_role(ins) == "shared_copy":
                self.record(st, ins, "shared", "read", ops[1], n)
            else:
                self.record(st, ins, "global", "read", ops[1], z3.ZeroExt(32, n))
            mbar = ops[3]
        else:
            self.unsupported.append((ins.line, f"{ins.full} (only cp.async.bulk(.tensor) global -> shared "
                                               "with an mbarrier is modelled)"))
            self.untracked_copies.append(ins.line)
            return
        dst = next((a for a in reversed(self.accesses) if a.index == ins.index and a.kind == "bulk"), None)
        bar, btags = self.address(st, mbar, 32)
        bcta = None
        if DSMEM in btags:  # the destination CTA's mbarrier (mapa): its offset, the CTA apart (cluster symmetry)
            bar, bcta = self.cluster_split(ins, bar, self.access_pc(st, ins), [n])
        self.mbar_event(st, ins, "copy", bar=bar, nbytes=n, dst=dst, cta=bcta)
        self.write_pseudo(st, ins, TXB, self.read(st, TXB) - n)

    def tma_coord(self, st: State, ins: Instruction, op, tmap: str) -> None:
        """Record a tile-mode tensor copy's innermost coordinate for `bounds` (im2col copies are not checked)."""
        es = self.ctx.tmap_esize.get(tmap)
        if self.recording and es and "im2col" not in ins.mods and op.items and op.items[0].kind in ("reg", "imm"):
            self.tma_coords.append((ins.line, ins.text, self.access_pc(st, ins), self.val(st, op.items[0], 32), es))

    def do_bulk_store(self, st: State, ins: Instruction) -> None:
        """cp.async.bulk(.tensor) shared -> global in a bulk group: an async-proxy read of the shared source
        (a "read" record, also in bulk_stores) that lasts until a cp.async.bulk.wait_group(.read) covers its
        group (%%bgc at the issue); commit_group / wait_group move %%bgc / %%bdone as cp.async's do. A tensor
        store writes one box of its map (clipped by the TMA unit: no bounds question); the 1-D form writes
        its global destination (a bounds question)."""
        role, ops = isa.bulk_role(ins), ins.operands
        bgc = self.read(st, BGC)
        if role == "commit":
            self.write_pseudo(st, ins, BGC, bgc + 1)
            return
        if role == "wait":
            self.wait_group(st, ins, BGC, BDONE, "cp.async.bulk.wait_group")
            return
        if role == "tensor_store" and len(ops) >= 2 and ops[0].kind == "addr" and ops[0].base is not None:
            maps = [t[5:] for t in self.tags_of(st, ops[0].base) if t.startswith("tmap:")]
            if len(maps) != 1:
                self.unsupported.append((ins.line, f"{ins.full}: cannot tell which tensor map it writes (give "
                                                   "the map's box and dtype in the @workbench header)"))
                return
            n = z3.BitVecVal(self.ctx.tensormaps[maps[0]], 32)
            self.tma_coord(st, ins, ops[0], maps[0])
            src = ops[1]
        elif role == "store" and len(ops) >= 3 and ops[2].kind in ("imm", "reg"):
            n = self.val(st, ops[2], 32)
            self.record(st, ins, "global", "write", ops[0], z3.ZeroExt(32, n))
            src = ops[1]
        else:
            self.unsupported.append((ins.line, f"{ins.full} (only cp.async.bulk(.tensor) shared -> global "
                                               "stores in bulk groups are modelled)"))
            return
        mark = len(self.accesses)
        self.record(st, ins, "shared", "read", src, n)
        self.bulk_stores.extend(self.accesses[mark:])

    def note_exit(self, st: State, ins: Instruction) -> None:
        self.mbar_event(st, ins, "exit")
