"""Integer semantics of PTX instructions over bit-vectors (a mixin of the executor). Floating point
results are fresh values; only integer and predicate arithmetic matters to the properties."""

from __future__ import annotations

import z3

from sim.ptx.ir import Instruction
from validation.formal.base import ExecutorBase
from validation.formal.program import is_barrier
from validation.formal.state import MEM_OPS, TYPE_INFO, State, Unsupported, type_mods


class InstructionsMixin(ExecutorBase):
    def step(self, st: State, ins: Instruction) -> None:
        op = ins.opcode
        ops = ins.operands
        if op in ("bra", "ret", "exit", "trap", "brkpt"):
            return
        if is_barrier(ins):
            self.do_barrier(st, ins)
            return
        if op == "cp" and "async" in ins.mods:
            self.do_cp_async(st, ins)
            return
        if op in ("bar", "barrier"):
            if "warp" not in ins.mods:
                self.unsupported.append((ins.line, f"{ins.full} (only full-CTA bar.sync is modelled)"))
            return
        if op in MEM_OPS:
            self.do_memory(st, ins)
            return
        if op in ("membar", "fence", "nanosleep", "pmevent", "griddepcontrol", "setmaxnreg"):
            return
        if not ops or not ins.dst_regs and ops[0].kind not in ("reg", "vec", "pair", "sink"):
            return
        tys = type_mods(ins)
        t = tys[-1] if tys else "b32"
        w, kind = TYPE_INFO[t]
        dst = ops[0]
        srcs = ops[1:]
        signed = kind == "s"
        allt = frozenset().union(*[self.tags_of(st, o) for o in srcs]) if srcs else frozenset()

        def A(i, width=-1, sg=None):
            return self.val(st, srcs[i], w if width == -1 else width, signed if sg is None else sg)

        if op == "mov":
            if dst.kind == "vec":  # unpack
                src = A(0, 64 if w <= 64 and len(dst.items) * 32 == 64 else w)
                n = len(dst.items)
                pw = src.size() // n if not z3.is_bool(src) else 1
                for i, it in enumerate(dst.items):
                    self.write(st, ins, it, z3.Extract((i + 1) * pw - 1, i * pw, src))
                return
            if srcs and srcs[0].kind == "vec":
                items = srcs[0].items
                pw = w // len(items)
                parts = [self.val(st, it, pw) for it in items]
                self.write(st, ins, dst, z3.Concat(*reversed(parts)))
                return
            if srcs and srcs[0].kind == "fimm":
                self.write(st, ins, dst, self.fresh("f", self.width_of_reg(dst.name)))
                return
            dw = self.width_of_reg(dst.name) if dst.kind == "reg" else w
            self.write(st, ins, dst, self.val(st, srcs[0], dw), allt)
            return
        if kind == "f" and op not in ("selp", "setp", "cvt", "cvta"):
            if dst.kind == "reg":
                self.write(st, ins, dst, self.fresh("f", self.width_of_reg(dst.name)))
            return
        if kind == "pred" and op in ("and", "or", "xor", "not", "mov"):
            a = A(0, None)
            if op == "not":
                r = z3.Not(a)
            else:
                b = A(1, None)
                r = z3.And(a, b) if op == "and" else z3.Or(a, b) if op == "or" else z3.Xor(a, b)
            self.write(st, ins, dst, r)
            return
        if op == "setp":
            self.do_setp(st, ins, tys)
            return
        if op == "selp":
            c = self.val(st, srcs[2], None)
            self.write(st, ins, dst, z3.If(c, A(0), A(1)), allt)
            return
        if op == "cvt":
            dt = tys[0] if tys else t
            stp = tys[1] if len(tys) > 1 else dt
            dw, dk = TYPE_INFO[dt]
            sw, sk = TYPE_INFO[stp]
            if dk == "f" or sk == "f":
                self.write(st, ins, dst, self.fresh("cvt", self.width_of_reg(dst.name)))
                return
            v = self.val(st, srcs[0], sw)
            v = self.fit(v, dw, sk == "s")
            if "sat" in ins.mods:
                v = self.fresh("sat", dw)
            self.write(st, ins, dst, v, allt)
            return
        if op == "cvta":
            aw = w
            v = self.val(st, srcs[0], aw)
            if "to" in ins.mods and "shared" in ins.mods:
                v = self.fit(v, 32)
            self.write(st, ins, dst, v, allt)
            return
        if op in ("add", "sub", "mul", "mad", "div", "rem", "min", "max", "and", "or", "xor", "shl", "shr",
                  "abs", "neg", "not", "cnot", "mul24", "mad24"):
            if "sat" in ins.mods or "cc" in ins.mods or "hi" in ins.mods and op in ("mul24", "mad24"):
                self.write(st, ins, dst, self.fresh(op, self.width_of_reg(dst.name)), allt)
                return
            r = self.int_op(st, ins, op, srcs, w, signed)
            self.write(st, ins, dst, r, allt)
            return
        # anything else that writes registers: a fresh value per destination
        for o in ops[:1]:
            if o.kind == "reg":
                self.write(st, ins, o, self.fresh(op, self.width_of_reg(o.name)), allt)
            elif o.kind in ("vec", "pair"):
                for it in o.items:
                    if it.kind == "reg":
                        self.write(st, ins, it, self.fresh(op, self.width_of_reg(it.name)))

    def int_op(self, st, ins, op, srcs, w, signed):
        wide = "wide" in ins.mods
        hi = "hi" in ins.mods

        def A(i, width=w):
            return self.val(st, srcs[i], width, signed)

        if op in ("mul", "mad", "mul24", "mad24"):
            if wide:
                a, b = self.fit(A(0), 2 * w, signed), self.fit(A(1), 2 * w, signed)
                r = a * b
                if op in ("mad", "mad24"):
                    r = r + A(2, 2 * w)
                return r
            if hi:
                a, b = self.fit(A(0), 2 * w, signed), self.fit(A(1), 2 * w, signed)
                r = z3.Extract(2 * w - 1, w, a * b)
                if op == "mad":
                    r = r + A(2)
                return r
            r = A(0) * A(1)
            if op in ("mad", "mad24"):
                r = r + A(2)
            return r
        if op == "add":
            return A(0) + A(1)
        if op == "sub":
            return A(0) - A(1)
        if op == "div":
            return A(0) / A(1) if signed else z3.UDiv(A(0), A(1))
        if op == "rem":
            return z3.SRem(A(0), A(1)) if signed else z3.URem(A(0), A(1))
        if op == "min":
            a, b = A(0), A(1)
            return z3.If(a < b if signed else z3.ULT(a, b), a, b)
        if op == "max":
            a, b = A(0), A(1)
            return z3.If(a > b if signed else z3.UGT(a, b), a, b)
        if op == "and":
            return A(0) & A(1)
        if op == "or":
            return A(0) | A(1)
        if op == "xor":
            return A(0) ^ A(1)
        if op == "not":
            return ~A(0)
        if op == "cnot":
            return z3.If(A(0) == 0, z3.BitVecVal(1, w), z3.BitVecVal(0, w))
        if op == "neg":
            return -A(0)
        if op == "abs":
            a = A(0)
            return z3.If(a < 0, -a, a)
        if op in ("shl", "shr"):
            a = A(0)
            b = self.val(st, srcs[1], 32, False)
            b = self.fit(b, w)
            # PTX clamps shift amounts larger than the width; Z3 gives the same results
            if op == "shl":
                return a << b
            return a >> b if signed else z3.LShR(a, b)
        raise Unsupported(op)

    def do_setp(self, st: State, ins: Instruction, tys: list[str]) -> None:
        ops = ins.operands
        t = tys[-1] if tys else "s32"
        w, kind = TYPE_INFO[t]
        cmp = ins.mods[0]
        if kind == "f":
            r = self.fresh("fcmp", None)
        else:
            s = kind == "s"
            a, b = self.val(st, ops[1], w, s), self.val(st, ops[2], w, s)
            table = {
                "eq": lambda: a == b, "ne": lambda: a != b,
                "lt": lambda: a < b if s else z3.ULT(a, b), "le": lambda: a <= b if s else z3.ULE(a, b),
                "gt": lambda: a > b if s else z3.UGT(a, b), "ge": lambda: a >= b if s else z3.UGE(a, b),
                "lo": lambda: z3.ULT(a, b), "ls": lambda: z3.ULE(a, b),
                "hi": lambda: z3.UGT(a, b), "hs": lambda: z3.UGE(a, b),
            }
            r = table[cmp]() if cmp in table else self.fresh("cmp", None)
        if len(ops) > 3:
            c = self.val(st, ops[3], None)
            if "and" in ins.mods:
                r1, r2 = z3.And(r, c), z3.And(z3.Not(r), c)
            elif "or" in ins.mods:
                r1, r2 = z3.Or(r, c), z3.Or(z3.Not(r), c)
            else:
                r1, r2 = z3.Xor(r, c), z3.Xor(z3.Not(r), c)
        else:
            r1, r2 = r, z3.Not(r)
        d = ops[0]
        if d.kind == "pair":
            self.write(st, ins, d.items[0], r1)
            self.write(st, ins, d.items[1], r2)
        else:
            self.write(st, ins, d, r1)
