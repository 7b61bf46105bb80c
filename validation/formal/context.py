"""Launch-wide symbols and assumptions: thread and block indices, launch shape, parameters and
their ranges, buffers (disjoint, aligned) and shared variables."""

from __future__ import annotations

import itertools

import z3

from sim import isa
from sim.errors import PtxError, UsageError
from sim.functional.operands import make_layout
from sim.ptx.ir import Kernel, Program
from validation.formal.program import KernelStructure
from validation.formal.state import TYPE_INFO


class Context:
    """Launch-wide symbols and assumptions shared by every symbolic thread."""

    def __init__(self, prog: Program, k: Kernel, grid=None, block=None, ranges=None, extents=None,
                 dynamic_shared: int | None = None, tensormaps: dict[str, int] | None = None,
                 cluster: tuple[int, int, int] | None = None, tensormap_esize: dict[str, int] | None = None):
        self.prog, self.k = prog, k
        # the thread block cluster shape (the header's "cluster" or .reqnctapercluster): the cluster special
        # registers become functions of %ctaid (sim/cluster.py's definitions); None: they stay unconstrained
        self.cluster = tuple(int(c) for c in cluster) if cluster else None
        # tensor-map parameters (the metadata's "kind": "tensormap") -> bytes of one box: opaque 128-byte
        # handles, not scalars; `mov.u64 %rd, MAP` gives the map's parameter address (a symbol of its own)
        self.tensormaps: dict[str, int] = dict(tensormaps or {})
        self.tmap_syms = {name: z3.BitVec(f"&{name}", 64) for name in self.tensormaps}
        self.tmap_esize: dict[str, int] = dict(tensormap_esize or {})  # element bytes per map (its dtype)
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
        self.S = KernelStructure(k, block[0] * block[1] * block[2] if block is not None else None)
        if block is not None and block[0] * block[1] * block[2] == 32:
            isa.one_warp_cta(k)  # a full-mask bar.warp.sync orders the whole (one-warp) CTA
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
            if info and info[1] != "pred" and p.name not in self.tensormaps:
                self.param_syms[p.name] = z3.BitVec(f"p{i}", info[0])
        ranges = ranges or {}
        for pname, (lo, hi) in ranges.items():  # a fixed value becomes a constant (keeps products linear)
            p = k.params[self.param_index[pname]]
            if lo == hi and pname in self.param_syms and TYPE_INFO[p.type][1] in ("u", "s", "b"):
                self.param_syms[pname] = z3.BitVecVal(lo % 2 ** TYPE_INFO[p.type][0], TYPE_INFO[p.type][0])
        self._groups: list[tuple[str, int]] = [("the launch shape", 0)]  # (origin, first assumption index)
        for pname, (lo, hi) in ranges.items():
            p = k.params[self.param_index[pname]]
            v = self.param_syms.get(pname)
            if pname in self.tensormaps:
                raise UsageError(f"--param {pname}: a tensor map (an opaque handle) has no range; give the "
                                 "ranges of the scalars its dims come from", k.file)
            if v is None:
                raise PtxError(f"--param {pname}: parameter type .{p.type} has no integer range", k.file, k.line)
            w, kind = TYPE_INFO[p.type]
            tlo, thi = (-(2 ** (w - 1)), 2 ** (w - 1) - 1) if kind == "s" else (0, 2**w - 1)
            if not tlo <= lo <= hi <= thi:
                raise UsageError(f"--param p{self.param_index[pname]}={lo}..{hi}: this .{p.type} parameter ({pname}) "
                                 f"holds {tlo}..{thi}; "
                                 "give a range inside it (LO <= HI)", k.file)
            self._groups.append((f"--param {pname}={lo}..{hi}", len(self.assumptions)))
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
                    self._groups.append((f"the extent of {label}", len(self.assumptions)))
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
        self._groups.append(("disjoint buffers", len(self.assumptions)))
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
        self.check_consistent()

    @property
    def assumptions_without_extents(self) -> list[z3.BoolRef]:
        """The launch shape and --param ranges: what an extent expression may rely on."""
        end = next((i for o, i in self._groups if o.startswith(("the extent", "disjoint"))), len(self.assumptions))
        return self.assumptions[:end]

    def check_consistent(self, timeout_ms: int = 10_000) -> None:
        """A proof from contradictory assumptions proves anything: ask Z3 whether some launch satisfies
        them all, and name the groups of an unsatisfiable core otherwise. A solver that gives up
        (unknown) lets the run go on; its properties can then still only be proved, not assumed."""
        s = z3.Solver()
        s.set("timeout", timeout_ms)
        bounds = [i for _, i in self._groups[1:]] + [len(self.assumptions)]
        tags = []
        for gi, ((origin, start), end) in enumerate(zip(self._groups, bounds)):
            tag = z3.Bool(f"group!{gi}")
            tags.append((tag, origin))
            s.add(z3.Implies(tag, z3.And(self.assumptions[start:end] or [z3.BoolVal(True)])))
        if s.check([t for t, _ in tags]) != z3.unsat:
            return
        core = {str(c) for c in s.unsat_core()}
        names = [o for t, o in tags if str(t) in core] or [o for _, o in tags]
        raise UsageError(f"the assumptions are contradictory ({' with '.join(names)}): no launch satisfies "
                         "them, so nothing could be proved; check the --param ranges and --extent sizes",
                         self.k.file)

    def param_label(self, name: str) -> str:
        return f"p{self.param_index[name]}"
