"""Launch-wide symbols and assumptions: thread and block indices, launch shape, parameters and
their ranges, buffers (disjoint, aligned) and shared variables."""

from __future__ import annotations

import itertools

import z3

from sim.errors import PtxError
from sim.functional.operands import make_layout
from sim.ptx.ir import Kernel, Program
from validation.formal.program import KernelStructure
from validation.formal.state import TYPE_INFO


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
