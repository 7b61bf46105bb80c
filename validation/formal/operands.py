"""Symbols, registers and operands of one symbolic thread (a mixin of the executor)."""

from __future__ import annotations

import z3

from sim.errors import PtxError
from sim.ptx.ir import Instruction, Operand
from validation.formal.base import ExecutorBase
from validation.formal.program import PSEUDO, PSEUDO_INIT
from validation.formal.state import TYPE_INFO, State


class OperandsMixin(ExecutorBase):
    """Fresh symbols, register reads and writes (guarded writes keep the old value), operand values
    and the buffer tags that follow a pointer through arithmetic."""

    def fresh(self, hint: str, width: int | None) -> z3.ExprRef:
        self.counter += 1
        name = f"{hint}#{self.counter}"
        e = z3.Bool(name) if width is None else z3.BitVec(name, width)
        self.created.append(e)
        self.created_names.append(name)
        self.by_name[name] = e
        return e

    def width_of_reg(self, name: str) -> int | None:
        if name in PSEUDO:
            return 32
        t = self.k.regs.get(name)
        if t is None:
            raise PtxError(f"register {name} is not declared", self.k.file, self.k.line)
        w, kind = TYPE_INFO.get(t, (32, "b"))
        return None if kind == "pred" else w

    def is_float_reg(self, name: str) -> bool:
        t = self.k.regs.get(name, "b32")
        return TYPE_INFO.get(t, (32, "b"))[1] == "f"

    def read(self, st: State, name: str) -> z3.ExprRef:
        v = st.regs.get(name)
        if v is not None:
            return v
        if name in PSEUDO:
            return z3.BitVecVal(PSEUDO_INIT.get(name, 0), 32)
        if name not in self.undef:
            self.undef[name] = self.fresh(f"undef{name}", self.width_of_reg(name))
        return self.undef[name]

    def sreg(self, name: str) -> z3.BitVecRef:
        ctx = self.ctx
        base, _, comp = name.partition(".")
        idx = "xyz".find(comp) if comp else -1
        if base == "%tid" and idx >= 0:
            return self.tid[idx]
        if base == "%ntid" and idx >= 0:
            return ctx.ntid[idx]
        if base == "%ctaid" and idx >= 0:
            return ctx.ctaid[idx]
        if base == "%nctaid" and idx >= 0:
            return ctx.nctaid[idx]
        if ctx.cluster is not None and base.startswith(("%cluster", "%ncluster")):
            c = [z3.BitVecVal(v, 32) for v in ctx.cluster]
            if base == "%cluster_nctarank":
                return z3.BitVecVal(ctx.cluster[0] * ctx.cluster[1] * ctx.cluster[2], 32)
            if base == "%cluster_ctarank":
                x, y, z = (z3.URem(ctx.ctaid[i], c[i]) for i in range(3))
                return x + c[0] * (y + c[1] * z)
            if idx >= 0 and base in ("%cluster_ctaid", "%cluster_nctaid", "%clusterid", "%nclusterid"):
                return {"%cluster_ctaid": lambda: z3.URem(ctx.ctaid[idx], c[idx]), "%cluster_nctaid": lambda: c[idx],
                        "%clusterid": lambda: z3.UDiv(ctx.ctaid[idx], c[idx]),
                        "%nclusterid": lambda: z3.UDiv(ctx.nctaid[idx], c[idx])}[base]()
        lin = self.tid[0] + ctx.ntid[0] * (self.tid[1] + ctx.ntid[1] * self.tid[2])
        if base == "%laneid":
            return z3.URem(lin, 32)
        if base == "%warpid":
            return z3.UDiv(lin, 32)
        if base == "%nwarpid":
            return z3.UDiv(ctx.ntid[0] * ctx.ntid[1] * ctx.ntid[2] + 31, 32)
        if base == "%dynamic_smem_size" and ctx.dynamic_shared is not None:
            return z3.BitVecVal(ctx.dynamic_shared, 32)
        return self.fresh(name.lstrip("%"), 64 if "64" in name else 32)

    # ------------------------------------------------------------------ operands
    @staticmethod
    def fit(v: z3.ExprRef, w: int | None, signed: bool = False) -> z3.ExprRef:
        if w is None:  # predicate wanted
            if z3.is_bool(v):
                return v
            return v != 0
        if z3.is_bool(v):
            return z3.If(v, z3.BitVecVal(1, w), z3.BitVecVal(0, w))
        vw = v.size()
        if vw == w:
            return v
        if vw > w:
            return z3.Extract(w - 1, 0, v)
        return z3.SignExt(w - vw, v) if signed else z3.ZeroExt(w - vw, v)

    def val(self, st: State, op: Operand, w: int | None, signed: bool = False) -> z3.ExprRef:
        if op.kind == "reg":
            v = self.fit(self.read(st, op.name), w, signed)
            return z3.Not(v) if op.neg and w is None else v
        if op.kind == "imm":
            if w is None:
                return z3.BoolVal(op.value != 0)
            return z3.BitVecVal(op.value % (1 << w), w)
        if op.kind == "sreg":
            return self.fit(self.sreg(op.name), w)
        if op.kind == "sym":
            return self.fit(self.sym_addr(op.name), w)
        return self.fresh("opaque", w)

    def sym_addr(self, name: str) -> z3.BitVecRef:
        ctx = self.ctx
        if "shared:" + name in ctx.shared:
            return z3.BitVecVal(ctx.shared["shared:" + name][0], 64)
        if name in ctx.global_vars:
            return ctx.global_vars[name]
        if name in ctx.param_syms:
            return self.fit(ctx.param_syms[name], 64)
        if name in ctx.tmap_syms:
            return ctx.tmap_syms[name]
        return self.fresh("sym_" + name, 64)

    def tags_of(self, st: State, op: Operand) -> frozenset:
        if op.kind == "reg":
            return st.tags.get(op.name, frozenset())
        if op.kind == "sym":
            if "shared:" + op.name in self.ctx.shared:
                return frozenset({"shared:" + op.name})
            if op.name in self.ctx.global_vars:
                return frozenset({"var:" + op.name})
            if "param:" + op.name in self.ctx.buffers:
                return frozenset({"param:" + op.name})
            if op.name in self.ctx.tensormaps:
                return frozenset({"tmap:" + op.name})
        if op.kind == "addr" and op.base is not None:
            return self.tags_of(st, op.base)
        return frozenset()

    def write(self, st: State, ins: Instruction, op: Operand, v: z3.ExprRef, tags: frozenset = frozenset()):
        if op.kind == "sink":
            return
        if op.kind == "vec":
            for item in op.items:
                self.write(st, ins, item, self.fresh("vec", self.width_of_reg(item.name)) if item.kind == "reg"
                           else v, tags)
            return
        if op.kind != "reg":
            return
        w = self.width_of_reg(op.name)
        v = self.fit(v, w)
        if ins.guard is not None:
            g = self.guard(st, ins)
            old = self.read(st, op.name)
            v = z3.If(g, v, old)
            tags = tags | st.tags.get(op.name, frozenset())
        st.regs[op.name] = v
        st.tags[op.name] = tags

    def guard(self, st: State, ins: Instruction) -> z3.BoolRef:
        assert ins.guard is not None, "guard() is called only for guarded instructions"
        g = self.fit(self.read(st, ins.guard), None)
        return z3.Not(g) if ins.guard_neg else g
