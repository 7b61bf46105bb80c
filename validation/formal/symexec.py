"""Symbolic execution of one PTX thread over bit-vectors (Z3), with sound loop summaries.

One *symbolic thread* T stands for every thread of the launch: its %tid / %ctaid are Z3 constants
constrained only by the launch shape, kernel parameters are constants constrained by their ranges.
The control-flow graph (reducible) is walked once in reverse post-order; states are merged at join
points (path condition = disjunction, registers = if-then-else), so the work is linear in the code
size, not in the number of paths.

Loops are summarised, never unrolled. At a loop header every register that is live there and
written in the loop is *havoc'ed* (replaced by a fresh value), then the body is run once
symbolically to see how each register changes per iteration. With an iteration variable k
(64-bit, k >= 0) for that visit of the loop:

* a register updated by a loop-invariant amount (``r += c``) becomes ``init + k*c`` (exact, modulo
  2^width); ``r ^= c`` becomes ``init ^ (k odd ? c : 0)``; ``r <<= c`` / ``r >>= c`` become
  ``init << k*c`` / ``init >> k*c``;
* every other register stays a fresh value, constrained by invariants that Houdini proves
  inductive (candidate ranges ``r <= 2^j-1``, ``r >= 0``, monotonicity, and relations
  ``r == s + c`` / ``r != s`` with the other loop registers); registers the divergence analysis
  shows uniform across the CTA are uninterpreted functions of the iteration numbers, so two
  threads in the same iteration see the same value;
* reaching iteration k >= 1 implies the back edge was taken at iteration k-1: that condition is
  added (with fresh values for whatever is not in closed form), which bounds k.

Each state carries the path condition; memory loads return fresh values. Every memory access,
barrier and branch is recorded with its address, width, path condition and synchronisation
counters (pseudo-registers of :mod:`validation.formal.program`) for the property checks.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import z3

from sim.errors import PtxError
from sim.functional.operands import make_layout
from sim.ptx.ir import Instruction, Kernel, Operand, Program
from validation.formal.program import BC, DONE, GC, PSEUDO, VIS, KernelStructure, is_barrier

TYPE_INFO: dict[str, tuple[int, str]] = {}
for _w in (8, 16, 32, 64):
    for _k in ("b", "u", "s"):
        TYPE_INFO[f"{_k}{_w}"] = (_w, _k)
TYPE_INFO.update({"f16": (16, "f"), "bf16": (16, "f"), "f16x2": (32, "f"), "bf16x2": (32, "f"),
                  "f32": (32, "f"), "tf32": (32, "f"), "f64": (64, "f"), "pred": (1, "pred"),
                  "e4m3x2": (16, "f"), "e5m2x2": (16, "f")})

MEM_OPS = ("ld", "ldu", "st", "atom", "red", "ldmatrix", "stmatrix", "cp", "prefetch", "prefetchu")


def hname(e: z3.ExprRef) -> str:
    return e.decl().name()


def type_mods(ins: Instruction) -> list[str]:
    return [m for m in ins.mods if m in TYPE_INFO]


@dataclass
class State:
    pc: z3.BoolRef
    regs: dict[str, z3.ExprRef]
    tags: dict[str, frozenset]

    def copy(self) -> State:
        return State(self.pc, dict(self.regs), dict(self.tags))


@dataclass
class Access:
    index: int
    line: int
    text: str
    space: str  # "global" | "shared" | "unknown"
    kind: str  # "read" | "write" | "atomic" | "async" (cp.async destination write)
    addr: z3.BitVecRef  # 64-bit for global, 32-bit for shared
    width: z3.BitVecRef  # bytes, same width as addr
    pc: z3.BoolRef
    tags: frozenset
    sync: dict[str, z3.ExprRef]  # pseudo-register values at the access
    block: int = 0


@dataclass
class BranchRec:
    block: int
    index: int
    line: int
    pc: z3.BoolRef
    cond: z3.BoolRef
    ks: tuple


@dataclass
class LoopRec:
    header: int
    line: int
    k: z3.BitVecRef
    forms: dict[str, str]
    invariants: list[str]
    back_pc: z3.BoolRef | None
    has_exit: bool
    local: set
    next_pairs: list
    notes: list[str] = field(default_factory=list)
    load_lines: list[int] = field(default_factory=list)
    status: str = "unknown"
    text: str = ""
    violation: z3.BoolRef | None = None


class Unsupported(Exception):
    pass


class Context:
    """Launch-wide symbols and assumptions shared by every symbolic thread."""

    def __init__(self, prog: Program, k: Kernel, grid=None, block=None, ranges=None, extents=None,
                 dynamic_shared: int | None = None):
        self.prog, self.k = prog, k
        self.S = KernelStructure(k)
        self.layout = make_layout(k, prog)
        self.assumptions: list[z3.BoolRef] = []
        self.tid = [z3.BitVec(f"tid.{c}", 32) for c in "xyz"]
        self.ctaid = [z3.BitVec(f"ctaid.{c}", 32) for c in "xyz"]
        req = k.directives.get("reqntid") if isinstance(k.directives, dict) else None
        if block is None and req:
            try:
                vals = [int(x) for x in (req if isinstance(req, (list, tuple)) else str(req).split(","))]
                block = tuple(vals + [1] * (3 - len(vals)))
            except (TypeError, ValueError):
                block = None
        self.block, self.grid = block, grid
        if block is not None:
            self.ntid = [z3.BitVecVal(v, 32) for v in block]
        else:
            self.ntid = [z3.BitVec(f"ntid.{c}", 32) for c in "xyz"]
            for v, hi in zip(self.ntid, (1024, 1024, 64)):
                self.assumptions += [z3.UGE(v, 1), z3.ULE(v, hi)]
            prod = z3.ZeroExt(32, self.ntid[0]) * z3.ZeroExt(32, self.ntid[1]) * z3.ZeroExt(32, self.ntid[2])
            self.assumptions.append(z3.ULE(prod, 1024))
        if grid is not None:
            self.nctaid = [z3.BitVecVal(v, 32) for v in grid]
        else:
            self.nctaid = [z3.BitVec(f"nctaid.{c}", 32) for c in "xyz"]
            for v, hi in zip(self.nctaid, (2**31 - 1, 65535, 65535)):
                self.assumptions += [z3.UGE(v, 1), z3.ULE(v, hi)]
        for t, n in zip(self.tid, self.ntid):
            self.assumptions.append(z3.ULT(t, n))
        for c, n in zip(self.ctaid, self.nctaid):
            self.assumptions.append(z3.ULT(c, n))
        # parameters
        self.param_syms: dict[str, z3.ExprRef] = {}
        self.param_index: dict[str, int] = {}
        for i, p in enumerate(k.params):
            self.param_index[p.name] = i
            info = TYPE_INFO.get(p.type)
            if info and info[1] != "pred":
                self.param_syms[p.name] = z3.BitVec(f"p{i}", info[0])
        ranges = ranges or {}
        for pname, (lo, hi) in ranges.items():  # a fixed value becomes a constant (keeps products linear)
            p = k.params[self.param_index[pname]]
            if lo == hi and pname in self.param_syms and TYPE_INFO[p.type][1] in ("u", "s", "b"):
                self.param_syms[pname] = z3.BitVecVal(lo % 2 ** TYPE_INFO[p.type][0], TYPE_INFO[p.type][0])
        for pname, (lo, hi) in ranges.items():
            p = k.params[self.param_index[pname]]
            v = self.param_syms.get(pname)
            if v is None:
                raise PtxError(f"--param {pname}: parameter type .{p.type} has no integer range", k.file, k.line)
            w, kind = TYPE_INFO[p.type]
            if kind == "s":
                self.assumptions += [v >= lo, v <= hi]
            else:
                self.assumptions += [z3.UGE(v, lo % 2**w), z3.ULE(v, hi % 2**w)]
        # buffers: tag -> (base, extent or None, label)
        self.buffers: dict[str, tuple] = {}
        extents = extents or {}
        bases = []
        for p in k.params:
            if p.type in ("u64", "b64", "s64"):
                base = self.param_syms[p.name]
                ext = extents.get(p.name)
                label = f"p{self.param_index[p.name]} ({p.name})"
                self.buffers["param:" + p.name] = (base, ext, label)
                if ext is not None:
                    bases.append((base, ext))
                    self.assumptions += [base & 255 == 0, z3.UGT(base, 0), z3.ULE(base, base + ext),
                                         z3.ULT(ext, 2**48)]
        self.global_vars: dict[str, z3.BitVecRef] = {}
        for v in prog.variables.values():
            if v.space in ("global", "const"):
                base = z3.BitVec(f"&{v.name}", 64)
                self.global_vars[v.name] = base
                ext = z3.BitVecVal(v.size, 64)
                self.buffers["var:" + v.name] = (base, ext, f"{v.space} variable {v.name}")
                bases.append((base, ext))
                self.assumptions += [base & 255 == 0, z3.UGT(base, 0), z3.ULE(base, base + ext)]
        for (b1, e1), (b2, e2) in itertools.combinations(bases, 2):
            self.assumptions.append(z3.Or(z3.ULE(b1 + e1, b2), z3.ULE(b2 + e2, b1)))
        # shared variables: tag -> (offset, size or None)
        self.shared: dict[str, tuple[int, int | None]] = {}
        for v in list(prog.variables.values()) + list(k.variables.values()):
            if v.space == "shared":
                size = v.size if not (v.extern or v.count == 0) else dynamic_shared
                self.shared["shared:" + v.name] = (self.layout.shared[v.name], size)
        self.nonuniform = self.S.divergence()
        self.dynamic_shared = dynamic_shared

    def param_label(self, name: str) -> str:
        return f"p{self.param_index[name]}"


class Executor:
    """Symbolic execution of one thread copy; records accesses, branches and loops."""

    def __init__(self, ctx: Context, suffix: str = ""):
        self.ctx = ctx
        self.k = ctx.k
        self.S = ctx.S
        self.counter = 0
        self.created: list[z3.ExprRef] = []  # thread-local constants, in creation order
        self.created_names: list[str] = []
        self.by_name: dict[str, z3.ExprRef] = {}
        self.loadsyms: dict[str, int] = {}  # name of a loaded value -> line
        self.undef: dict[str, z3.ExprRef] = {}
        self.recording = True
        self.dry = False
        self.kstack: list[z3.BitVecRef] = []
        self.accesses: list[Access] = []
        self.branches: list[BranchRec] = []
        self.barriers: list[tuple[int, int, z3.BoolRef]] = []
        self.loops: list[LoopRec] = []
        self.unsupported: list[tuple[int, str]] = []  # (line, what) instructions not modelled
        self.solver_timeout_ms = 2000

    # ------------------------------------------------------------------ symbols
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
            return z3.BitVecVal(0, 32)
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
        g = self.fit(self.read(st, ins.guard), None)
        return z3.Not(g) if ins.guard_neg else g

    # ------------------------------------------------------------------ instructions
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

    # ------------------------------------------------------------------ memory and synchronisation
    def sync_snapshot(self, st: State) -> dict[str, z3.ExprRef]:
        return {p: self.read(st, p) for p in PSEUDO}

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

    def record(self, st, ins, space, kind, addr_op, nbytes, extra_pc=None):
        if not self.recording:
            return
        tags0 = self.tags_of(st, addr_op)
        if space == "generic":
            if tags0 and all(t.startswith("shared:") for t in tags0):
                space = "shared"
            elif tags0 and not any(t.startswith("shared:") for t in tags0):
                space = "global"
            else:
                space = "unknown"
        aw = 32 if space == "shared" else 64
        addr, tags = self.address(st, addr_op, aw)
        pc = self.access_pc(st, ins)
        if extra_pc is not None:
            pc = z3.And(pc, extra_pc)
        width = nbytes if isinstance(nbytes, z3.ExprRef) else z3.BitVecVal(nbytes, aw)
        width = self.fit(width, aw)
        self.accesses.append(Access(ins.index, ins.line, ins.text, space, kind, addr, width, pc, tags,
                                    self.sync_snapshot(st), self.S.block_of[ins.index]))

    def do_memory(self, st: State, ins: Instruction) -> None:
        op, mods, ops = ins.opcode, ins.mods, ins.operands
        tys = type_mods(ins)
        esize = (TYPE_INFO[tys[-1]][0] // 8) if tys else 4
        vec = 1
        for m in mods:
            if m in ("v2", "v4", "v8"):
                vec = int(m[1])
        space = next((s for s in ("global", "shared", "local", "param", "const") if s in mods), "generic")
        if op in ("prefetch", "prefetchu"):
            return
        if space == "param":
            if op == "ld":
                addr = ops[1]
                name = addr.base.name if addr.base is not None and addr.base.kind == "sym" else None
                if name in self.ctx.param_syms and not addr.value:
                    tags = frozenset({"param:" + name}) if "param:" + name in self.ctx.buffers else frozenset()
                    self.write(st, ins, ops[0], self.ctx.param_syms[name], tags)
                    return
                self.write(st, ins, ops[0], self.fresh("param", self.width_of_reg(ops[0].name))
                           if ops[0].kind == "reg" else None)
            return
        if op == "ldmatrix":
            n = 4 if "x4" in mods else 2 if "x2" in mods else 1
            self.record(st, ins, "shared", "read", ops[1], 16 if n else 16)
            self.fresh_dst(st, ins, ops[0], ins.line)
            return
        if op == "stmatrix":
            self.record(st, ins, "shared", "write", ops[0], 16)
            return
        if space in ("local", "const"):
            if op in ("ld", "ldu"):
                self.fresh_dst(st, ins, ops[0], ins.line)
            return
        if op in ("ld", "ldu"):
            self.record(st, ins, space, "read", ops[1], esize * vec)
            self.fresh_dst(st, ins, ops[0], ins.line)
            return
        if op == "st":
            self.record(st, ins, space, "write", ops[0], esize * vec)
            return
        if op in ("atom", "red"):
            addr_i = 1 if op == "atom" else 0
            self.record(st, ins, space, "atomic", ops[addr_i], esize * vec)
            if op == "atom":
                self.fresh_dst(st, ins, ops[0], ins.line)
            return
        self.unsupported.append((ins.line, ins.full))

    def fresh_dst(self, st: State, ins: Instruction, d: Operand, line: int) -> None:
        items = d.items if d.kind in ("vec", "pair") else (d,)
        for it in items:
            if it.kind == "reg":
                v = self.fresh(f"ld@{line}", self.width_of_reg(it.name))
                self.loadsyms[str(v)] = line
                self.write(st, ins, it, v, frozenset())

    def do_barrier(self, st: State, ins: Instruction) -> None:
        ops = ins.operands
        if len(ops) >= 2 and not (ops[1].kind == "imm" and self.ctx.block is not None
                                  and ops[1].value == self.ctx.block[0] * self.ctx.block[1] * self.ctx.block[2]):
            self.unsupported.append((ins.line, f"{ins.full} with a thread count (partial barrier)"))
        if "red" in ins.mods and ops and ops[0].kind == "reg":
            self.write(st, ins, ops[0], self.fresh("barred", self.width_of_reg(ops[0].name)))
        if self.recording:
            self.barriers.append((ins.index, ins.line, self.access_pc(st, ins)))
        bc = self.read(st, BC)
        done = self.read(st, DONE)
        self.write_pseudo(st, ins, BC, bc + 1)
        self.write_pseudo(st, ins, VIS, done)

    def write_pseudo(self, st: State, ins: Instruction, name: str, v: z3.ExprRef) -> None:
        if ins.guard is not None:
            v = z3.If(self.guard(st, ins), v, self.read(st, name))
        st.regs[name] = v
        st.tags[name] = frozenset()

    def do_cp_async(self, st: State, ins: Instruction) -> None:
        mods, ops = ins.mods, ins.operands
        gc, done = self.read(st, GC), self.read(st, DONE)
        if "commit_group" in mods:
            self.write_pseudo(st, ins, GC, gc + 1)
            return
        if "wait_group" in mods or "wait_all" in mods:
            if "wait_all" in mods:
                self.write_pseudo(st, ins, GC, gc + 1)
                self.write_pseudo(st, ins, DONE, gc + 1)
                return
            n = ops[0].value if ops and ops[0].kind == "imm" else None
            if n is None:
                self.unsupported.append((ins.line, "cp.async.wait_group with a non-constant count"))
                return
            target = gc - n
            new = z3.If(z3.And(z3.UGE(gc, n), z3.UGT(target, done)), target, done)
            self.write_pseudo(st, ins, DONE, new)
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

    # ------------------------------------------------------------------ control flow
    def merge(self, states: list[State]) -> State | None:
        states = [s for s in states if not z3.is_false(s.pc)]
        if not states:
            return None
        if len(states) == 1:
            return states[0]
        pc = z3.Or([s.pc for s in states])
        names = set()
        for s in states:
            names |= s.regs.keys()
        regs, tags = {}, {}
        for n in names:
            vals = [self.read(s, n) for s in states]
            first = vals[0]
            t = frozenset().union(*[s.tags.get(n, frozenset()) for s in states])
            if all(v.eq(first) for v in vals[1:]):
                regs[n] = first
            else:
                v = vals[-1]
                for s, x in zip(reversed(states[:-1]), reversed(vals[:-1])):
                    v = z3.If(s.pc, x, v) if not x.eq(v) else v
                regs[n] = v
            tags[n] = t
        return State(pc, regs, tags)

    def exec_block(self, b: int, st: State) -> list[tuple[int, State]]:
        st = st.copy()
        blk = self.S.blocks[b]
        body = self.k.body
        for i in range(blk.start, blk.end):
            ins = body[i]
            if ins.opcode in ("ret", "exit", "trap") and ins.guard is None:
                return []
            self.step(st, ins)
        last = body[blk.end - 1]
        outs = []
        if len(blk.succ) > 1 and last.guard is not None:
            g = self.fit(self.read(st, last.guard), None)
            if self.recording:
                cond = z3.Not(g) if last.guard_neg else g
                self.branches.append(BranchRec(b, last.index, last.line, st.pc, cond, tuple(self.kstack)))
        for tgt, guard, neg in blk.succ:
            if guard is None:
                outs.append((tgt, st))
                continue
            g = self.fit(self.read(st, guard), None)
            c = z3.Not(g) if neg else g
            outs.append((tgt, State(z3.And(st.pc, c), st.regs, st.tags)))
        return outs

    def exec_region(self, region: set[int], loop_h: int | None, entry: dict[int, list[State]]):
        incoming: dict[int, list[State]] = {b: list(v) for b, v in entry.items()}
        back: list[State] = []
        exits: list[tuple[int, State]] = []

        def route(tgt: int, s: State) -> None:
            if tgt == self.S.EXIT:
                return
            if loop_h is not None and tgt == loop_h:
                back.append(s)
            elif tgt in region:
                incoming.setdefault(tgt, []).append(s)
            else:
                exits.append((tgt, s))

        for b in self.S.rpo:
            if b not in region:
                continue
            chain = self.S.enclosing_loops(b)
            if loop_h is None:
                inner = chain[0] if chain else None
            else:
                i = chain.index(loop_h)
                inner = chain[i + 1] if i + 1 < len(chain) else None
            st = None
            if inner is not None:
                if b != inner:
                    continue
                st = self.merge(incoming.pop(b, []))
                if st is None:
                    continue
                for tgt, s2 in self.exec_loop(inner, st):
                    route(tgt, s2)
                continue
            st = self.merge(incoming.pop(b, []))
            if st is None:
                continue
            for tgt, s2 in self.exec_block(b, st):
                route(tgt, s2)
        return back, exits

    def run(self) -> None:
        st = State(z3.BoolVal(True), {}, {})
        self.exec_region(set(self.S.reachable), None, {0: [st]})

    # ------------------------------------------------------------------ loops
    def free_consts(self, e: z3.ExprRef, cache: dict) -> frozenset:
        """Names of uninterpreted constants and functions occurring in e."""
        key = e.get_id()
        hit = cache.get(key)
        if hit is not None:
            return hit[1]
        if z3.is_const(e):
            r = frozenset() if e.decl().kind() != z3.Z3_OP_UNINTERPRETED else frozenset({e.decl().name()})
        else:
            acc = set()
            if e.decl().kind() == z3.Z3_OP_UNINTERPRETED:
                acc.add(e.decl().name())
            for c in e.children():
                acc |= self.free_consts(c, cache)
            r = frozenset(acc)
        cache[key] = (e, r)  # keep e alive: Z3 reuses the id of a freed term
        return r

    def exec_loop(self, h: int, pre: State) -> list[tuple[int, State]]:
        S = self.S
        lp = S.loops[h]
        line = self.k.body[S.blocks[h].start].line
        carried = sorted(S.carried(h))
        bv_carried = [r for r in carried if self.width_of_reg(r) is not None]
        k = self.fresh(f"k@{line}", 64)
        outer_ks = list(self.kstack)
        mark = len(self.created)
        hv: dict[str, z3.ExprRef] = {}
        for r in carried:
            w = self.width_of_reg(r)
            if r not in self.ctx.nonuniform and w is not None and not outer_ks:
                f = z3.Function(f"U{r}@{line}", *([z3.BitVecSort(64)] * (len(outer_ks) + 1)), z3.BitVecSort(w))
                hv[r] = f(*(outer_ks + [k]))
            else:
                hv[r] = self.fresh(f"h{r}@{line}", w)
        havoc_names = {hname(x) for x in hv.values()}

        # --- dry run: how does each register change per iteration?
        st0 = pre.copy()
        for r in carried:
            st0.regs[r] = hv[r]
        saved = (self.recording, self.dry)
        self.recording, self.dry = False, True
        self.kstack.append(k)
        back, _ = self.exec_region(lp.body, h, {h: [st0]})
        self.kstack.pop()
        self.recording, self.dry = saved
        bst = self.merge(back)
        local = set(self.created_names[mark:]) | havoc_names
        cache: dict = {}

        def invariant(e):
            return not (self.free_consts(e, cache) & local)

        forms: dict[str, tuple[str, z3.ExprRef]] = {}
        if bst is not None:
            for r in bv_carried:
                nxt = self.read(bst, r)
                hr = hv[r]
                d = z3.simplify(nxt - hr)
                if invariant(d):
                    forms[r] = ("add", d)
                    continue
                x = z3.simplify(nxt ^ hr)
                if invariant(x):
                    forms[r] = ("xor", x)
                    continue
                n2 = z3.simplify(nxt)
                if z3.is_app(n2) and n2.num_args() == 2 and n2.arg(0).eq(hr) and z3.is_bv_value(n2.arg(1)):
                    kd = n2.decl().kind()
                    if kd in (z3.Z3_OP_BSHL, z3.Z3_OP_BLSHR, z3.Z3_OP_BASHR) and n2.arg(1).as_long() > 0:
                        forms[r] = ({z3.Z3_OP_BSHL: "shl", z3.Z3_OP_BLSHR: "lshr", z3.Z3_OP_BASHR: "ashr"}[kd],
                                    n2.arg(1))
                        continue
                m = self.wrap_modulus(pre, bst, r, hr, nxt, h)
                if m is not None:
                    forms[r] = ("mod", m)

        def closed(r: str, kk: z3.BitVecRef) -> z3.ExprRef:
            kind, c = forms[r]
            init = self.read(pre, r)
            w = init.size()
            kw = z3.Extract(w - 1, 0, kk) if w < 64 else kk
            if kind == "add":
                return init + kw * c
            if kind == "xor":
                return z3.If(z3.Extract(0, 0, kk) == 1, init ^ c, init)
            if kind == "mod":  # (init + k) mod c; init < c < 2^15, so 16 bits hold the sum
                k16 = z3.Extract(15, 0, z3.URem(kk, c))
                i16 = z3.Extract(15, 0, init) if w >= 16 else z3.ZeroExt(16 - w, init)
                v = z3.URem(i16 + k16, c)
                return z3.Extract(w - 1, 0, v) if w < 16 else z3.ZeroExt(w - 16, v)
            lim = z3.ULT(kk, w)
            amt = kw * c
            if kind == "shl":
                return z3.If(lim, init << amt, z3.BitVecVal(0, w))
            if kind == "lshr":
                return z3.If(lim, z3.LShR(init, amt), z3.BitVecVal(0, w))
            return z3.If(lim, init >> amt, init >> (w - 1))

        vh = {r: (closed(r, k) if r in forms else hv[r]) for r in carried}
        sub_k = [(hv[r], vh[r]) for r in forms]
        facts = [pre.pc]
        if bst is not None:
            # reaching iteration k >= 1 means the back edge was taken in iteration k-1
            prev_pairs = [(hv[r], closed(r, k - 1)) for r in forms]
            prev_pairs += [(hv[r], self.fresh(f"prev{r}", self.width_of_reg(r))) for r in carried if r not in forms]
            prev_pairs += self.fresh_copies(bst.pc, local, cache, skip={hname(hv[r]) for r in forms}, tag="prev")
            cond_prev = z3.substitute(bst.pc, *prev_pairs) if prev_pairs else bst.pc
            facts.append(z3.Implies(k != 0, cond_prev))

        # --- Houdini over candidate invariants of the registers without a closed form
        invs: list[z3.BoolRef] = []
        inv_text: list[str] = []
        others = [r for r in bv_carried if r not in forms and not self.is_float_reg(r)]
        nonclosed = [r for r in carried if r not in forms]
        init_vals = {r: self.read(pre, r) for r in carried}
        # iteration 0 sees the entry values (ties a havoc'ed register, e.g. a pipeline stage, to its start)
        first = [hv[r] == init_vals[r] for r in nonclosed]
        if first:
            facts.append(z3.Implies(k == 0, z3.And(first)))
        if bst is not None:
            back_vals = {r: z3.substitute(self.read(bst, r), *sub_k) if sub_k else self.read(bst, r)
                         for r in carried}
            back_pc = z3.substitute(bst.pc, *sub_k) if sub_k else bst.pc
        if others and bst is not None and not self.dry:
            cands = self.candidates(others, bv_carried, vh, self.loop_constants(h))
            kept = self.houdini(cands, vh, init_vals, back_vals, facts, back_pc, k)
            for text, fn in kept:
                invs.append(fn(vh))
                inv_text.append(text)

        # --- termination: a ranking function over the back edge bounds the iteration count
        rec = LoopRec(h, line, k, {r: f[0] for r, f in forms.items()}, inv_text, None, True, set(), [])
        if bst is not None and not self.dry:
            hyps = facts + invs
            skip = {hname(hv[r]) for r in carried}
            next_pairs = [(k, k + 1)] + [(hv[r], back_vals[r]) for r in nonclosed]
            next_pairs += self.fresh_copies(back_pc, local, cache, skip=skip, tag="next")
            cond_next = z3.substitute(back_pc, *next_pairs)
            init_pairs = [(k, z3.BitVecVal(0, 64))] + [(hv[r], init_vals[r]) for r in nonclosed]
            init_pairs += self.fresh_copies(back_pc, local, cache, skip=skip, tag="first")
            rec.back_pc = back_pc
            rec.load_lines = sorted({self.loadsyms[n] for n in self.free_consts(back_pc, cache) & local
                                     if n in self.loadsyms})
            K = self.affine_exit_bound(back_pc, hyps, facts[0], next_pairs, init_pairs, local | {str(k)}, cache)
            if K is None:
                for R in self.ranking_candidates(back_pc, local | {str(k)}, cache):
                    Rn = z3.substitute(R, *next_pairs)
                    d = z3.simplify(R - Rn, som=True)
                    wr = R.size()
                    if not (z3.is_bv_value(d) and 0 < d.as_long() < (1 << (wr - 1))):
                        d = z3.BitVecVal(1, wr)
                    if self.unsat(hyps + [back_pc, z3.Or(R <= 0, z3.And(cond_next, Rn > R - d))]):
                        R0 = z3.substitute(R, *init_pairs)
                        # R > 0 on every back edge and drops by >= d: at most (R0-1)/d + 1 back edges
                        K = z3.If(R0 > 0, z3.UDiv(R0 - 1, d) + 1, z3.BitVecVal(0, wr))
                        break
            if K is not None:
                wk = K.size()
                facts.append(z3.ULE(k, z3.ZeroExt(64 - wk, K)) if wk < 64 else z3.ULE(z3.ZeroExt(wk - 64, k), K))
                rec.status = "proved"
                rec.text = "trip count <= " + " ".join(str(z3.simplify(K)).split())
            elif self.unsat(hyps + [back_pc, z3.Not(cond_next)]):
                rec.status = "violated"
                rec.violation = z3.substitute(back_pc, *init_pairs)
                rec.text = "once its back edge is taken it is taken forever (the exit condition never changes)"
            else:
                rec.status = "unknown"
                rec.text = "no ranking function found"
                if rec.load_lines:
                    rec.text += f"; the exit condition depends on data loaded at line(s) {rec.load_lines}"
        elif bst is None:
            rec.status, rec.text = "proved", "the back edge is never taken"

        # --- final run from the summarised header state
        hst = pre.copy()
        hst.pc = z3.And(facts + invs)
        for r in carried:
            hst.regs[r] = vh[r]
            if bst is not None:
                hst.tags[r] = pre.tags.get(r, frozenset()) | bst.tags.get(r, frozenset())
        self.kstack.append(k)
        back2, exits = self.exec_region(lp.body, h, {h: [hst]})
        self.kstack.pop()
        if self.recording:
            rec.has_exit = bool(exits)
            if not exits and back2:
                rec.status = "violated"
                rec.violation = z3.Or([s.pc for s in back2])
                rec.text = "the loop has no exit"
            self.loops.append(rec)
        return exits

    def affine_exit_bound(self, back_pc, hyps, entry_pc, next_pairs, init_pairs, local, cache):
        """Loops that leave when x == 0 for x = x0 + s*k (s a constant, e.g. unrolled loops comparing a
        counter with != ): bounded by |x0|/|s| when x0 has the right sign and is a multiple of s."""
        for e in self.atoms(back_pc, (z3.Z3_OP_EQ, z3.Z3_OP_DISTINCT), local, cache):
            a, b = e.arg(0), e.arg(1)
            x = a - b
            w = x.size()
            step = z3.simplify(z3.substitute(x, *next_pairs) - x, som=True)
            if not z3.is_bv_value(step):
                continue
            sv = step.as_long()
            sv = sv - (1 << w) if sv >> (w - 1) else sv
            if sv == 0 or not self.unsat(hyps + [back_pc, x == 0]):
                continue
            x0 = z3.SignExt(2, z3.substitute(x, *init_pairs))
            S = z3.BitVecVal(abs(sv), w + 2)
            if sv > 0:
                ok, K = z3.And(x0 <= 0, z3.SRem(-x0, S) == 0), z3.UDiv(-x0, S)
            else:
                ok, K = z3.And(x0 >= 0, z3.SRem(x0, S) == 0), z3.UDiv(x0, S)
            if self.unsat([entry_pc, z3.Not(ok)]):
                return K
        return None

    def atoms(self, cond, kinds, local, cache):
        out, todo, visited = [], [cond], set()
        while todo:
            e = todo.pop()
            if e.get_id() in visited or not z3.is_app(e):
                continue
            visited.add(e.get_id())
            kd = e.decl().kind()
            if kd in kinds and e.num_args() == 2 and z3.is_bv(e.arg(0)):
                if (self.free_consts(e.arg(0), cache) | self.free_consts(e.arg(1), cache)) & local:
                    out.append(e)
                continue
            if z3.is_bool(e):
                todo.extend(e.children())
        return out

    def unsat(self, cs) -> bool:
        s = z3.Solver()
        s.set("timeout", self.solver_timeout_ms)
        s.add(self.ctx.assumptions)
        s.add(cs)
        return s.check() == z3.unsat

    def ranking_candidates(self, cond, local, cache):
        kinds = {z3.Z3_OP_ULT: False, z3.Z3_OP_ULEQ: False, z3.Z3_OP_UGT: False, z3.Z3_OP_UGEQ: False,
                 z3.Z3_OP_SLT: True, z3.Z3_OP_SLEQ: True, z3.Z3_OP_SGT: True, z3.Z3_OP_SGEQ: True,
                 z3.Z3_OP_EQ: None, z3.Z3_OP_DISTINCT: None}
        seen = set()
        out = []
        todo = [cond]
        visited = set()
        while todo and len(out) < 24:
            e = todo.pop()
            if e.get_id() in visited:
                continue
            visited.add(e.get_id())
            if not z3.is_app(e):
                continue
            kd = e.decl().kind()
            if kd in kinds and e.num_args() == 2 and z3.is_bv(e.arg(0)):
                a, b = e.arg(0), e.arg(1)
                if (self.free_consts(a, cache) | self.free_consts(b, cache)) & local:
                    sg = kinds[kd]
                    for signed in ([True, False] if sg is None else [sg]):
                        ext = (lambda x: z3.SignExt(2, x)) if signed else (lambda x: z3.ZeroExt(2, x))
                        for R in (ext(b) - ext(a), ext(a) - ext(b)):
                            key = R.sexpr()
                            if key not in seen:
                                seen.add(key)
                                out.append(R)
                continue
            if z3.is_bool(e):
                todo.extend(e.children())
        return out

    def fresh_copies(self, e, local, cache, skip, tag):
        pairs = []
        for name in sorted(self.free_consts(e, cache) & local):
            if name in skip:
                continue
            c = self.by_name.get(name)
            if c is None:
                continue
            nc = self.fresh(f"{tag}:{name}", None if z3.is_bool(c) else c.size())
            pairs.append((c, nc))
        return pairs

    def wrap_modulus(self, pre: State, bst: State, r: str, hr, nxt, h: int) -> int | None:
        """A counter that wraps, r = (r + 1 == m) ? 0 : r + 1 (a pipeline stage): m such that, for every
        value below m, the back edge gives (r + 1) mod m, and the entry value is below m."""
        if self.dry or self.is_float_reg(r):
            return None
        w = hr.size()
        init = self.read(pre, r)
        for m in sorted(self.loop_constants(h)):
            if not 1 < m < 2 ** min(w - 1, 15):  # keeps (init + k mod m) within 16 bits
                continue
            step = z3.URem(z3.ZeroExt(1, hr) + 1, m)
            if self.unsat([z3.ULT(hr, m), bst.pc, z3.ZeroExt(1, nxt) != step]) and \
                    self.unsat([pre.pc, z3.UGE(init, m)]):
                return m
        return None

    def loop_constants(self, h: int) -> set[int]:
        """Small immediates compared against in the loop (e.g. a stage counter wrapping at 3)."""
        S, body = self.S, self.k.body
        out: set[int] = set()
        for b in S.loops[h].body:
            for i in range(S.blocks[b].start, S.blocks[b].end):
                ins = body[i]
                if ins.opcode == "setp":
                    out |= {op.value for op in ins.operands[1:3] if op.kind == "imm" and 0 < op.value <= 4096}
        return out

    def candidates(self, others, carried_bv, vh, consts=()):
        cands = []
        bounds = {2**j - 1 for j in (1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 16)}
        bounds |= {c + d for c in consts for d in (-1, 0)}
        for a in others:
            w = vh[a].size()
            for c in sorted(bounds):
                if 0 < c < 2 ** (w - 1):
                    cands.append((f"{a} <= {c}", lambda v, a=a, c=c: z3.ULE(v[a], c)))
            cands.append((f"{a} >= 0 (signed)", lambda v, a=a: v[a] >= 0))
            for b in carried_bv:
                if b == a or vh[b].size() != w or self.is_float_reg(b):
                    continue
                cands.append((f"{a} != {b}", lambda v, a=a, b=b: v[a] != v[b]))
                for c in (-2, -1, 0, 1, 2):
                    cands.append((f"{a} == {b} + {c}", lambda v, a=a, b=b, c=c: v[a] == v[b] + c))
        return cands

    def houdini(self, cands, vh, init_vals, back_vals, facts, back_pc, k):
        s = z3.Solver()
        s.set("timeout", self.solver_timeout_ms)
        s.add(self.ctx.assumptions)
        # initiation: candidates must hold on entry (k = 0)
        live = list(cands)
        pre_pc = facts[0]
        for _ in range(50):
            if not live:
                break
            s.push()
            s.add(pre_pc, z3.Not(z3.And([fn(init_vals) for _, fn in live])))
            r = s.check()
            if r == z3.unsat:
                s.pop()
                break
            if r != z3.sat:
                s.pop()
                return []
            m = s.model()
            live = [(t, fn) for t, fn in live if z3.is_true(m.eval(fn(init_vals), model_completion=True))]
            s.pop()
        # consecution
        for _ in range(50):
            if not live:
                break
            s.push()
            s.add(facts)
            s.add([fn(vh) for _, fn in live])
            s.add(back_pc)
            s.add(z3.Not(z3.And([fn(back_vals) for _, fn in live])))
            r = s.check()
            if r == z3.unsat:
                s.pop()
                break
            if r != z3.sat:
                s.pop()
                return []
            m = s.model()
            live = [(t, fn) for t, fn in live if z3.is_true(m.eval(fn(back_vals), model_completion=True))]
            s.pop()
        return live


def make_executor(ctx: Context, suffix: str = "") -> Executor:
    ex = Executor(ctx, suffix)
    ex.tid = ctx.tid
    return ex
