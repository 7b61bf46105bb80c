"""Memory accesses, barriers and cp.async groups of one symbolic thread (a mixin of the executor):
every access is recorded with its buffer, address, width, path condition and the synchronisation
pseudo-registers at that point."""

from __future__ import annotations

import z3

from sim import isa
from sim.ptx.ir import Instruction, Operand
from validation.formal.base import ExecutorBase
from validation.formal.program import (
    BC,
    BDONE,
    BN,
    BNS,
    BVIS,
    DONE,
    GC,
    NID,
    PSEUDO,
    VIS,
    WDONE,
    WVIS,
    barrier_operands,
)
from validation.formal.state import DSMEM, TYPE_INFO, Access, NamedBarrier, State, type_mods

WMMA_SHAPES = {"m16n16k16": (16, 16, 16), "m32n8k16": (32, 8, 16), "m8n32k16": (8, 32, 16), "m16n16k8": (16, 16, 8)}
# (M, N, K) of the wmma shapes; source: PTX ISA 8.x, "Matrix Shape" of the warp-level wmma instructions


class MemoryMixin(ExecutorBase):
    def sync_snapshot(self, st: State) -> dict[str, z3.ExprRef]:
        snap = {p: self.read(st, p) for p in PSEUDO}
        if self.nid is not None:
            snap[NID] = self.nid
        return snap

    def access_pc(self, st: State, ins: Instruction) -> z3.BoolRef:
        return z3.And(st.pc, self.guard(st, ins)) if ins.guard is not None else st.pc

    def address(self, st: State, op: Operand, width: int) -> tuple[z3.BitVecRef, frozenset]:
        base = op.base
        if base is None:
            return z3.BitVecVal(op.value % (1 << width), width), frozenset()
        if base.kind == "reg":
            v = self.fit(self.read(st, base.name), width)
        elif base.kind == "sym":
            v = self.fit(self.sym_addr(base.name), width)
        else:
            v = self.fresh("addr", width)
        return v + (op.value % (1 << width)), self.tags_of(st, base)

    def record(self, st, ins, space, kind, addr_op, nbytes, extra_pc=None, offset=None):
        if not self.recording:
            return
        tags0 = self.tags_of(st, addr_op) - {DSMEM}
        if space == "shared::cluster":  # a 32-bit shared window address; a mapa one names another CTA (DSMEM tag)
            space = "shared"
        if space == "generic":
            if tags0 and all(t.startswith("shared:") for t in tags0):
                space = "shared"
            elif tags0 and not any(t.startswith("shared:") for t in tags0):
                space = "global"
            else:
                space = "unknown"
        aw = 32 if space == "shared" else 64
        addr, tags = self.address(st, addr_op, aw)
        if offset is not None:
            addr = addr + self.fit(offset, aw)
        pc = self.access_pc(st, ins)
        if extra_pc is not None:
            pc = z3.And(pc, extra_pc)
        width = nbytes if isinstance(nbytes, z3.ExprRef) else z3.BitVecVal(nbytes, aw)
        width = self.fit(width, aw)
        cta = None
        if space == "shared" and DSMEM in tags:  # another CTA's shared memory: the offset, and the CTA apart
            addr, cta = self.cluster_split(ins, addr, pc, [width])
        self.accesses.append(Access(ins.index, ins.line, ins.text, space, kind, addr, width, pc, tags - {DSMEM},
                                    self.sync_snapshot(st), self.S.block_of[ins.index], cta=cta))

    def cluster_split(self, ins: Instruction, addr: z3.BitVecRef, pc: z3.BoolRef,
                      deps: list) -> tuple[z3.BitVecRef, z3.BitVecRef]:
        """(offset, rank byte) of a 32-bit shared::cluster address made by mapa (instructions._mapa); the event
        is remembered for the cluster-symmetry check (asyncprops.cluster_symmetry) with the parts of it that
        must be the same in every CTA (its path condition, offset and ``deps``)."""
        off = addr & 0xFFFFFF
        hi = z3.LShR(addr, 24)
        if self.recording:
            self.remote.append((ins.line, ins.text, pc, hi, [off, *deps]))
        return off, hi

    def do_memory(self, st: State, ins: Instruction) -> None:
        ops = ins.operands
        direction, space, nbytes = isa.mem_dir(ins), isa.mem_space(ins), isa.access_bytes(ins)
        if space == "param":
            if direction == "read":
                addr = ops[1]
                name = addr.base.name if addr.base is not None and addr.base.kind == "sym" else None
                if name is not None and name in self.ctx.param_syms and not addr.value:
                    tags = frozenset({"param:" + name}) if "param:" + name in self.ctx.buffers else frozenset()
                    self.write(st, ins, ops[0], self.ctx.param_syms[name], tags)
                    return
                self.write(st, ins, ops[0], self.fresh("param", self.width_of_reg(ops[0].name))
                           if ops[0].kind == "reg" else None)
            return
        if space in ("local", "const"):
            if direction == "read":
                self.fresh_dst(st, ins, ops[0], ins.line)
            return
        if direction == "read":
            self.record(st, ins, space, "read", ops[1], nbytes)
            got = self.fresh_dst(st, ins, ops[0], ins.line)
            if self.load_facts:
                self.assume_stored(st, ops[1], got)
            return
        if direction == "write":
            before = len(self.accesses)
            self.record(st, ins, space, "write", ops[0], nbytes)
            if len(self.accesses) > before and self.accesses[-1].space == "shared" and len(ops) > 1:
                items = ops[1].items if ops[1].kind in ("vec", "pair") else [ops[1]]
                bits = 8 * nbytes // len(items) if isinstance(nbytes, int) else 0
                if bits:
                    self.stored.append((self.accesses[-1], [(self.val(st, it, bits), bits) for it in items]))
            return
        if direction == "rmw":
            dst = isa.has_dst(ins)
            self.record(st, ins, space, "atomic", ops[1 if dst else 0], nbytes)
            if dst:
                self.fresh_dst(st, ins, ops[0], ins.line)
            return
        self.unsupported.append((ins.line, ins.full))

    def do_wmma(self, st: State, ins: Instruction) -> None:
        """wmma.load.{a,b,c} / wmma.store.d: the warp moves a rows x cols tile (operand and shape), element
        (i, j) at byte ``(major * stride + minor) * bytes`` from the address (``.row``: major i, minor j;
        ``.col``: the reverse; the stride operand, else the leading dimension). The ISA leaves which lane
        moves which element unspecified, so a thread's access is one element (i, j) of the tile, i and j
        fresh symbols below rows and cols: two threads' accesses overlap exactly when the two tiles share a
        byte, whichever lanes hold it; bounds then covers every element. A warp's own wmma accesses do not
        race with each other (properties.shared_race: the warp executes them together, in order)."""
        ops = ins.operands
        which = next((x for x in ins.mods if x in ("a", "b", "c", "d")), None)
        shape = next((WMMA_SHAPES[x] for x in ins.mods if x in WMMA_SHAPES), None)
        lay = next((x for x in ins.mods if x in ("row", "col")), None)
        tys = type_mods(ins)
        load = isa.wmma_role(ins) == "load"
        data, addr_op = (ops[0], ops[1]) if load else (ops[1], ops[0])
        if which is None or shape is None or lay is None or len(tys) != 1 or tys[0] not in TYPE_INFO:
            self.unsupported.append((ins.line, ins.full))
            if load:
                self.fresh_dst(st, ins, data, ins.line)
            return
        M, N, K = shape
        rows, cols = {"a": (M, K), "b": (K, N), "c": (M, N), "d": (M, N)}[which]
        major, minor = (rows, cols) if lay == "row" else (cols, rows)
        nbytes = TYPE_INFO[tys[0]][0] // 8
        space = isa.mem_space(ins)
        aw = 32 if space == "shared" else 64
        i, j = self.fresh(f"wmma_i@{ins.line}", aw), self.fresh(f"wmma_j@{ins.line}", aw)
        stride = self.fit(self.val(st, ops[2], 32), aw) if len(ops) > 2 else z3.BitVecVal(minor, aw)
        offset = (i * stride + j) * nbytes
        within = z3.And(z3.ULT(i, major), z3.ULT(j, minor))
        before = len(self.accesses)
        self.record(st, ins, space, "read" if load else "write", addr_op, nbytes, extra_pc=within, offset=offset)
        if len(self.accesses) > before:
            self.accesses[-1].collective = True
        if load:
            self.fresh_dst(st, ins, data, ins.line)

    def fresh_dst(self, st: State, ins: Instruction, d: Operand, line: int) -> list[z3.ExprRef]:
        items = d.items if d.kind in ("vec", "pair") else (d,)
        out = []
        for it in items:
            if it.kind == "reg":
                v = self.fresh(f"ld@{line}", self.width_of_reg(it.name))
                self.loadsyms[str(v)] = line
                self.write(st, ins, it, v, frozenset())
                out.append(v)
        return out

    def assume_stored(self, st: State, addr_op: Operand, values: list[z3.ExprRef]) -> None:
        """The stated assumption of a second bounds run (Verifier.bounds): a load from a shared buffer returns
        a value some store of the kernel wrote into it, so it satisfies what every such store's value does."""
        tags = [t for t in self.tags_of(st, addr_op) if t in self.load_facts]
        if len(tags) != 1:
            return
        bits, top, align = self.load_facts[tags[0]]
        facts = [z3.And(z3.ULE(v, top), v & (align - 1) == 0) for v in values
                 if z3.is_bv(v) and v.size() == bits]
        if facts:
            st.pc = z3.And(st.pc, *facts)

    def do_barrier(self, st: State, ins: Instruction) -> None:
        ops = ins.operands
        if "red" in ins.mods and ops and ops[0].kind == "reg":
            self.write(st, ins, ops[0], self.fresh("barred", self.width_of_reg(ops[0].name)))
        kind = self.S.barrier_kind(ins)
        if kind == "named":
            self.named_barrier(st, ins)
            return
        if kind == "cluster_arrive" and self.arrive_then_wait(ins):
            return  # barrier.cluster.arrive; barrier.cluster.wait: the pair is one barrier, at the wait
        if kind != "full":
            self.unsupported.append((ins.line, f"{ins.full} (only CTA barriers are modelled)"))
            return
        if self.recording:
            self.barriers.append((ins.index, ins.line, self.access_pc(st, ins)))
        bc = self.read(st, BC)
        done = self.read(st, DONE)
        wdone = self.read(st, WDONE)
        bdone = self.read(st, BDONE)
        self.write_pseudo(st, ins, BC, bc + 1)
        self.write_pseudo(st, ins, VIS, done)
        self.write_pseudo(st, ins, WVIS, wdone)
        self.write_pseudo(st, ins, BVIS, bdone)

    def arrive_then_wait(self, ins: Instruction) -> bool:
        """An unguarded barrier.cluster.arrive whose next instruction is an unguarded barrier.cluster.wait: no
        access of the thread lies between them, so the pair orders what every CTA barrier orders (and more:
        the cluster's other CTAs, whose shared memory the verifier does not pair) and is modelled at the wait."""
        body = self.k.body
        nxt = body[ins.index + 1] if ins.index + 1 < len(body) else None
        return (ins.guard is None and nxt is not None and nxt.guard is None and "cluster" in nxt.mods
                and self.S.barrier_kind(nxt) == "full")

    def named_barrier(self, st: State, ins: Instruction) -> None:
        """A barrier of a subset of the CTA's threads: %%bn counts this thread's arrivals, %%bns is %%bn
        at its last wait (see validation/formal/barriers.py for when two threads' counts name the same
        barrier instance)."""
        idop, cop = barrier_operands(ins)
        bid = self.val(st, idop, 32) if idop is not None else z3.BitVecVal(0, 32)
        count = self.val(st, cop, 32) if cop is not None else None
        wait = isa.barrier_role(ins) == "cta"
        if self.recording:
            aligned = isa.barrier_aligned(ins)
            self.named.append(NamedBarrier(ins.index, ins.line, ins.text, self.access_pc(st, ins), bid, count,
                                           wait, aligned))
        bn = self.read(st, BN) + 1
        self.write_pseudo(st, ins, BN, bn)
        if wait:
            self.write_pseudo(st, ins, BNS, bn)

    def wait_group(self, st: State, ins: Instruction, committed: str, done: str, what: str) -> None:
        """``WHAT N`` (a constant N): every group but the N most recent is retired, so ``done`` rises to
        ``committed`` - N (never falls)."""
        op = ins.operands[0] if ins.operands else None
        if op is None or op.kind != "imm":
            self.unsupported.append((ins.line, f"{what} with a non-constant count"))
            return
        c, d = self.read(st, committed), self.read(st, done)
        target = c - op.value
        self.write_pseudo(st, ins, done, z3.If(z3.And(z3.UGE(c, op.value), z3.UGT(target, d)), target, d))

    def write_pseudo(self, st: State, ins: Instruction, name: str, v: z3.ExprRef) -> None:
        if ins.guard is not None:
            v = z3.If(self.guard(st, ins), v, self.read(st, name))
        st.regs[name] = v
        st.tags[name] = frozenset()

    def do_cp_async(self, st: State, ins: Instruction) -> None:
        mods, ops = ins.mods, ins.operands
        gc = self.read(st, GC)
        if "commit_group" in mods:
            self.write_pseudo(st, ins, GC, gc + 1)
            return
        if "wait_group" in mods or "wait_all" in mods:
            if "wait_all" in mods:
                self.write_pseudo(st, ins, GC, gc + 1)
                self.write_pseudo(st, ins, DONE, gc + 1)
                return
            self.wait_group(st, ins, GC, DONE, "cp.async.wait_group")
            return
        if "bulk" in mods or "mbarrier" in mods or len(ops) < 3:
            self.unsupported.append((ins.line, ins.full))
            return
        cp = ops[2].value if ops[2].kind == "imm" else 16
        if len(ops) >= 4 and ops[3].kind in ("imm", "reg"):
            src_size = self.val(st, ops[3], 64)
        else:
            src_size = z3.BitVecVal(cp, 64)
        self.record(st, ins, "shared", "async", ops[0], cp)
        self.record(st, ins, "global", "read", ops[1], src_size, extra_pc=src_size != 0)
