"""Run the SASS ptxas writes for a PTX kernel, functionally: ``run_sass_functional(ptx_text, launch)``.

The launch, the global buffers and the argument bytes come from the PTX functional model's
``prepare`` (sim.functional.runner); this module adds the sm_90 constant bank, the SASS register
files and the Volta-style thread-group scheduler, and decodes each instruction the first time a warp
reaches it (an opcode never reached is never needed; one reached and not modelled is a one-line
SassError naming the SASS text, its pc and PTX line).

Constant bank 0 as sm_90 lays it out (source: the nvdisasm listings of this repository's kernels,
e.g. benchmarks/silicon/kernels/vectorAdd.ptx, where ``ld.param [vectorAdd_param_0]`` (PTX line 43)
becomes ``LDC.64 R2, c[0x0][0x210]``, ``mov %ntid.x`` ``ULDC c[0x0][0x0]``, ``mov %nctaid.x``
``ULDC c[0x0][0xc]``, and every global access takes its descriptor from ``ULDC.64 c[0x0][0x208]``;
the cubin's EIATTR_PARAM_CBANK attribute names the same 0x210 parameter base):
0x0/0x4/0x8 ntid.x/y/z, 0xc/0x10/0x14 nctaid.x/y/z, 0x28 the initial stack pointer (R1),
0x208 the global memory descriptor (ignored here: addresses are flat), 0x210.. the kernel parameters
at their PTX .param offsets. Shared memory: sm_90 reserves the first 0x400 bytes of a CTA's window
(``UMOV UR4, 0x400`` before the first ``.shared`` variable's address), so the window here is
0x400 + the PTX layout's size + ptxas' static size, zero-filled.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from sim.errors import ExecutionError
from sim.functional.memory import PARAM_WINDOW, Fault, FlatMemory
from sim.functional.runner import DEFAULT_MAX_INSTRUCTIONS, prepare, read_outputs
from sim.launch import Launch
from sim.sass.exec_cluster import SASS_CLUSTER_CTL, SASS_CLUSTER_OPS, cga_release, cluster_bank, link
from sim.sass.exec_ctl import SASS_CTL
from sim.sass.exec_float import SASS_FLOAT
from sim.sass.exec_gmma import SASS_GMMA
from sim.sass.exec_int import SASS_INT
from sim.sass.exec_mem import SASS_MEM
from sim.sass.exec_operands import Ctx
from sim.sass.exec_state import PT, Cta, Group, Launched, SassExecuted, Warp, lanes_any, merged_at_pc
from sim.sass.exec_tma import SASS_TMA
from sim.sass.listing import Operand, SassInstruction, disassemble
from sim.sass.tools import DEFAULT_ARCH, resources

PARAM_BASE = 0x210
SHARED_RESERVED = 0x400
STACK_TOP = 0x10000

# the SASS opcode table of the functional model: opcode -> builder (control builders move the group)
OPS: dict[str, Callable[[Ctx], Any]] = {**SASS_INT, **SASS_FLOAT, **SASS_MEM, **SASS_GMMA, **SASS_TMA,
                                        **SASS_CLUSTER_OPS}
CONTROL = {**SASS_CTL, **SASS_CLUSTER_CTL}


@dataclass
class SassResult:
    outputs: dict[int, np.ndarray]  # arg index -> final buffer contents
    warp_instructions: int
    ctas: int
    kernel: str


class _Decoded:
    __slots__ = ("fn", "ctl", "guard")

    def __init__(self, fn: Any, ctl: bool, guard: Callable[[Warp], Any] | None):
        self.fn = fn
        self.ctl = ctl
        self.guard = guard


def _decode(L: Launched, ins: SassInstruction) -> _Decoded:
    cx = Ctx(L, ins)
    guard = None
    if ins.guard and ins.guard not in ("PT", "UPT") or ins.guard_negated:
        kind = "upred" if ins.guard.startswith("U") else "pred"
        guard = cx.pred(Operand(kind, ins.guard, regs=(ins.guard,), prefix="!" if ins.guard_negated else ""))
    if ins.opcode in CONTROL:
        return _Decoded(CONTROL[ins.opcode](cx), True, guard)
    build = OPS.get(ins.opcode)
    if build is None:
        raise L.err(ins, f"opcode {ins.opcode} is not modelled by the SASS functional model")
    return _Decoded(build(cx), False, guard)


class Machine:
    """Steps warps of one launch; keeps the decoded instructions."""

    def __init__(self, L: Launched, on_record: Callable[[SassExecuted], None] | None = None):
        self.L = L
        self.decoded: list[_Decoded | None] = [None] * len(L.code)
        self.on_record = on_record
        self.count = 0

    def cta(self, index: int, ctaid: tuple[int, int, int]) -> Cta:
        """A new CTA of the launch (its warps at pc 0)."""
        return Cta(self.L, index, ctaid)

    @staticmethod
    def release(cta: Cta) -> bool:
        return _release(cta)

    def runnable(self, w: Warp) -> Group | None:
        """The group with the lowest pc that is not held at a barrier."""
        gs = w.groups
        if len(gs) == 1 and gs[0].wait == "":
            return gs[0]
        best = None
        for g in gs:
            if g.wait == "sync" and not lanes_any(g.want & w.live & ~g.mask):
                g.wait = ""
                g.pc += 1
            if g.wait == "" and (best is None or g.pc < best.pc):
                best = g
        return best

    def step(self, w: Warp, g: Group) -> None:
        L = self.L
        i = g.pc
        if i >= len(L.code):
            raise ExecutionError(f"warp {w.wid} of CTA {w.cta.ctaid} ran past the end of the SASS", L.file)
        d = self.decoded[i]
        ins = L.code[i]
        if d is None:
            d = self.decoded[i] = _decode(L, ins)
        m = g.mask if d.guard is None else g.mask & d.guard(w)
        rec = w.rec = SassExecuted(w.cta.index, w.wid, i, ins, m)
        self.count += 1
        L.clock += 1
        try:
            if d.ctl:
                d.fn(w, g, m)
            else:  # (a group in w.groups always has a lane: only a guard can leave none)
                if d.guard is None or lanes_any(m):
                    d.fn(w, m)
                g.pc = i + 1
        except Fault as f:
            raise ExecutionError(f"SASS {ins.kernel}+0x{ins.pc:04x} '{ins.text}': thread "
                                 f"{w.wid * 32 + f.lane} of CTA {w.cta.ctaid}: address {f.addr:#x}: {f.message}",
                                 L.file, ins.ptx_line) from None
        w.P[PT] = True
        if d.ctl or len(w.groups) > 1:  # only control instructions change masks; groups may meet at a pc
            self._merge(w)
        if self.on_record is not None:
            self.on_record(rec)

    @staticmethod
    def _merge(w: Warp) -> None:
        if len(w.groups) == 1:
            if not lanes_any(w.groups[0].mask):
                w.groups, w.done = [], True
            return
        gs = [g for g in w.groups if lanes_any(g.mask)]
        if len(gs) > 1:
            gs = merged_at_pc(gs)
        w.groups = gs
        w.done = not gs


def _release(cta: Cta) -> bool:
    """Release the groups waiting at a BAR.SYNC id once its count (or, without one, every live thread of
    the CTA) arrived, counting the BAR.ARV arrivals at that id."""
    waiting = [(w, g) for w in cta.warps for g in w.groups if g.wait == "bar"]
    if not waiting:
        return False
    live = sum(int(w.live.sum()) for w in cta.warps)
    done = False
    for bid in sorted({g.bar for _, g in waiting}):
        here = [g for _, g in waiting if g.bar == bid]
        arrived = sum(int(g.mask.sum()) for g in here) + cta.arrived.get(bid, 0)
        count = max(g.count for g in here)
        if arrived < (count if count else live):
            continue
        for g in here:
            g.wait = ""
            g.pc += 1
        cta.arrived.pop(bid, None)
        done = True
    return done


def run_cta(M: Machine, cta: Cta, budget: int) -> None:
    run_ctas(M, [cta], budget)


def run_ctas(M: Machine, ctas: list[Cta], budget: int) -> None:
    """Run one CTA, or the CTAs of one cluster together: each warp runs until it waits (a barrier, the
    cluster barrier, or an mbarrier wait that found its phase incomplete: Warp.yielded), round after round.
    A round in which nothing but such waits ran and no mbarrier changed, twice in a row, is a deadlock."""
    idle = 0
    warps = [w for cta in ctas for w in cta.warps]
    while True:
        progressed = False
        epoch = M.L.mbar_epoch
        spun = False
        spinner: Warp | None = None  # the first warp whose mbarrier wait failed this round (named by a deadlock)
        for w in warps:
            g = M.runnable(w)
            while g is not None:
                M.step(w, g)
                progressed = True
                if w.yielded:
                    w.yielded = spun = True
                    spinner = spinner or w
                    break
                g = M.runnable(w)
            w.yielded = False
            if M.count > budget:
                raise ExecutionError(f"more than {budget} warp instructions: an endless loop? "
                                     "raise the limit with --max-instructions", M.L.file)
        if all(w.done for w in warps):
            return
        released = any([_release(cta) for cta in ctas]) | bool(cga_release(ctas))
        idle = idle + 1 if spun and not released and M.L.mbar_epoch == epoch else 0
        if not released and (not progressed or idle > 2):
            w = spinner or next(w for w in warps if not w.done)
            ins = M.L.code[w.groups[0].pc]
            raise ExecutionError(f"deadlock in CTA {w.cta.ctaid}: warp {w.wid} waits at SASS "
                                 f"'{ins.text}' (0x{ins.pc:04x}) and nothing else can run", M.L.file, ins.ptx_line)


def param_layout(k: Any) -> list[tuple[int, int, int]]:
    """(PTX .param offset, bank offset, size) of each kernel parameter: ptxas aligns each parameter in the
    bank's absolute addresses from PARAM_BASE, so a .align 64 / 128 parameter (a CUtensorMap) moves (source:
    tests/fixtures/tma/tma_box.ptx, whose tmap_in at .param offset 64 is read at c[0x0][0x198] + 0x30 and
    whose nbytes at .param offset 320 at c[0x0][0x340])."""
    out, cur = [], PARAM_BASE
    for p in k.params:
        cur = -(-cur // max(1, p.align)) * max(1, p.align)
        out.append((p.offset, cur, p.size))
        cur += p.size
    return out


def constant_bank(launch: Launch, params: FlatMemory, param_size: int, kernel: Any = None,
                  cluster: tuple[int, int, int] = (1, 1, 1), explicit: bool = False) -> FlatMemory:
    """Constant bank 0: the launch shape, the stack top, the cluster words (sim/sass/exec_cluster.py),
    c[0x0][0x198] the generic address of the parameter bank's start (what cvta.param of a parameter adds its
    bank offset to: PARAM_WINDOW, as PTX mode's cvta.param), and the parameters at ptxas' offsets
    (param_layout; PTX offsets when ``kernel`` is None)."""
    layout = param_layout(kernel) if kernel is not None else [(0, PARAM_BASE, param_size)]
    end = max((b + n for _, b, n in layout), default=PARAM_BASE)
    cb = FlatMemory(max(end, PARAM_BASE + 8) + 16, "constant bank 0")
    words = np.array([*launch.block, *launch.grid], dtype=np.uint32)
    cb.data[0:24] = words.view(np.uint8)
    cb.data[0x28:0x2C] = np.array([STACK_TOP], dtype=np.uint32).view(np.uint8)
    cb.data[0x198:0x1A0] = np.array([PARAM_WINDOW], dtype=np.uint64).view(np.uint8)
    cluster_bank(cb, launch.grid, cluster, explicit)
    for off, b, n in layout:
        cb.data[b:b + n] = params.data[off:off + n]
    return cb


def launched(P: Any, prog: Any, launch: Launch, kernel: Any, res: Any, file: str) -> Launched:
    """The launch state SASS mode shares between its warps (functional and timed): constant bank 0 with the
    parameters and cluster words, the shared window, the tensor maps and the cluster shape."""
    k = prog.kernel(launch.kernel)
    param_size = max((p.offset + p.size for p in k.params), default=0)
    shared = SHARED_RESERVED + P.shared_size + (res.smem_static if res else 0)
    L = Launched(kernel, P.L.gmem, constant_bank(launch, P.L.params, param_size, k, P.L.cluster,
                                                  P.L.explicit_cluster),
                 launch.grid, launch.block, shared, file)
    L.tensormaps = P.L.tensormaps
    L.cluster = P.L.cluster
    return L


def cluster_ctas(L: Launched) -> int:
    sx, sy, sz = L.cluster
    return sx * sy * sz


def make_cluster(L: Launched, ctas: list[tuple[int, tuple[int, int, int]]]) -> list[Cta]:
    """The CTAs (launch index, ctaid) of one cluster, in rank order, linked (sim/sass/exec_cluster.py)."""
    out = [Cta(L, n, ctaid) for n, ctaid in ctas]
    link(out, L.cluster)
    return out


def run_sass_functional(ptx_text: str, launch: Launch, arch: str = DEFAULT_ARCH, file: str = "<ptx>",
                        max_instructions: int = DEFAULT_MAX_INSTRUCTIONS,
                        on_record: Callable[[SassExecuted], None] | None = None) -> SassResult:
    """Compile ``ptx_text`` with ptxas for ``arch`` and run the launch on its SASS; ``on_record`` gets one
    SassExecuted per warp instruction."""
    from sim.ptx.parser import parse_ptx

    prog = parse_ptx(ptx_text, file)
    kernels = disassemble(ptx_text, arch, file)
    if launch.kernel not in kernels:
        raise ExecutionError(f"ptxas wrote no SASS for kernel {launch.kernel}", file)
    res = resources(ptx_text, arch, file).get(launch.kernel)
    with np.errstate(all="ignore"):
        P = prepare(prog, launch)
        L = launched(P, prog, launch, kernels[launch.kernel], res, file)
        M = Machine(L, on_record)
        n = cluster_ctas(L)
        for i in range(0, len(P.ctas), n):  # a cluster's CTAs run together, rank by rank (sim.cluster)
            run_ctas(M, make_cluster(L, list(enumerate(P.ctas))[i: i + n]), max_instructions)
        return SassResult(read_outputs(P, launch), M.count, len(P.ctas), launch.kernel)
