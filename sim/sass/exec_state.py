"""State of the SASS functional model: a warp's register files and thread groups, a CTA, the launch,
and the record each executed warp instruction leaves for the timing model.

Register files per warp (sm_90): R0..R254 as a (256, 32) uint32 array whose row 255 is RZ (always
zero, writes dropped); UR0..UR62 as (64,) uint32, row 63 URZ; P0..P6 as (8, 32) bool, row 7 PT (always
true); UP0..UP6 as (8,) bool, row 7 UPT; the convergence barriers B0..B15 as lane masks.

Divergence follows Volta's independent thread scheduling: a warp is a list of thread groups, each with
its own pc; the group with the lowest pc runs; groups that reach the same pc merge; BSYNC / WARPSYNC
hold a group until every live lane of the barrier's mask waits at the same pc.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.functional.memory import SHARED_WINDOW, FlatMemory, GlobalMemory
from sim.sass.listing import SassInstruction, SassKernel
from sim.sass.tools import SassError

LANES = np.arange(32)
RZ, URZ, PT = 255, 63, 7
ALL = np.ones(32, dtype=bool)


def lanes_any(m: np.ndarray) -> bool:
    """Whether any lane of a mask (bool or integer array) is set: np.logical_or.reduce's answer, without its ~2 us
    per call (a nonzero element has a nonzero byte)."""
    if type(m) is not np.ndarray:
        return bool(np.any(m))
    b = m.tobytes()
    return b.count(0) != len(b)


@dataclass(slots=True)
class SassExecuted:
    """One executed warp instruction, for the timing model: which warp, which instruction, which lanes,
    and for a memory access its space (global, shared, local, const), the accessing lanes' byte addresses
    (lane order; shared: offsets in the CTA's window) and bytes per lane."""

    cta: int  # index of the CTA in launch order
    warp: int
    index: int  # position in SassKernel.instructions
    ins: SassInstruction
    mask: np.ndarray  # lanes that executed it (group mask and guard)
    space: str = ""
    addrs: np.ndarray | None = None
    size: int = 0
    direction: str = ""  # read, write, atomic
    bulk: list | None = None  # the bulk (TMA) copies it started (sim.functional.ops_tma.BulkCopy), for timing


class Group:
    """Lanes of one warp that run together at one pc (an index into the kernel's instructions)."""

    __slots__ = ("pc", "mask", "wait", "want", "bar", "count")

    def __init__(self, pc: int, mask: np.ndarray):
        self.pc = pc
        self.mask = mask
        self.bar = 0  # the barrier id and thread count a "bar" wait is for (BAR.SYNC id, count)
        self.count = 0
        self.wait = ""  # "", "bar" (at BAR.SYNC), "sync" (at BSYNC/WARPSYNC, not yet released)
        self.want = mask  # the lanes a "sync" wait is for


def merged_at_pc(groups: list[Group]) -> list[Group]:
    """Groups that stand at one pc merged into the first of them (masks or-ed; it waits only if both wait):
    warp-by-warp execution and the lock-step wide warp (sim/sass/lockstep.py) reconverge this way."""
    by_pc: dict[int, Group] = {}
    for g in groups:
        h = by_pc.get(g.pc)
        if h is None:
            by_pc[g.pc] = g
        else:
            h.mask = h.mask | g.mask
            h.wait = "" if "" in (h.wait, g.wait) else h.wait
    return list(by_pc.values())


class Launched:
    """What every warp of a launch shares: the code, the memories, the constant bank, the grid."""

    def __init__(self, kernel: SassKernel, gmem: GlobalMemory, cbank: FlatMemory, grid: tuple[int, int, int],
                 block: tuple[int, int, int], shared_size: int, file: str):
        self.kernel = kernel
        self.code = kernel.instructions
        self.index = {ins.pc: i for i, ins in enumerate(kernel.instructions)}
        self.gmem = gmem
        self.cbank = cbank
        self.grid = grid
        self.block = block
        self.shared_size = shared_size
        self.file = file
        self.clock = 0  # SR_CLOCKLO/HI and CS2R SR_CLOCKLO read this counter of warp instructions
        self.tensormaps: list = []  # the launch's tensor maps by handle index (sim/tensormap.py, exec_tma.py)
        self.defer_tx = False  # copies complete their mbarrier transactions when timed (sim/sass/timing.py)
        self.mbar_epoch = 0  # counts mbarrier changes: the functional runner's progress test
        self.cluster: tuple[int, int, int] = (1, 1, 1)  # the launch's cluster shape (sim/cluster.py)

    def err(self, ins: SassInstruction, what: str) -> SassError:
        where = f"SASS {ins.kernel}+0x{ins.pc:04x} '{ins.text}'"
        ptx = f" (PTX line {ins.ptx_line})" if ins.ptx_line else ""
        return SassError(f"{where}{ptx}: {what}", self.file, ins.ptx_line)


class Cta:
    def __init__(self, L: Launched, index: int, ctaid: tuple[int, int, int]):
        self.index = index
        self.ctaid = ctaid
        self.shared = FlatMemory(L.shared_size, "shared")
        bx, by, bz = L.block
        self.nthreads = bx * by * bz
        self.warps = [Warp(L, self, w) for w in range((self.nthreads + 31) // 32)]
        self.mbars: dict = {}  # shared offset -> sim.functional.ops_async.MBarrier (sim/sass/exec_tma.py)
        self.arrived: dict[int, int] = {}  # barrier id -> threads that arrived with BAR.ARV (not waiting)
        self.rank = 0  # SR_CgaCtaId: the CTA's rank in its cluster (sim.cluster.rank_of)
        self.peers: list[Cta] = [self]  # the CTAs of its cluster by rank (itself included; sim/sass/exec.py)

    def peer(self, rank: int) -> Cta:
        """The CTA of its cluster a shared window address's rank byte (bits 24..31) names."""
        if rank >= len(self.peers):
            raise KeyError(rank)
        return self.peers[rank]


class Warp:
    def __init__(self, L: Launched, cta: Cta, wid: int):
        self.L = L
        self.cta = cta
        self.wid = wid
        self.R = np.zeros((256, 32), dtype=np.uint32)
        self.UR = np.zeros(64, dtype=np.uint32)
        self.P = np.zeros((8, 32), dtype=bool)
        self.P[PT] = True
        self.UP = np.zeros(8, dtype=bool)
        self.UP[PT] = True
        self.B = np.zeros((16, 32), dtype=bool)
        lin = wid * 32 + LANES
        self.live = lin < cta.nthreads  # lanes that exist and have not exited
        bx, by, _ = L.block
        self.tid = (lin % bx, (lin // bx) % by, lin // (bx * by))
        self.groups = [Group(0, self.live.copy())]
        self.done = False
        self.bar_id = 0
        self.bar_count = 0
        self.rec: SassExecuted | None = None  # the instruction executing now (memory ops fill in the access)
        self.yielded = False  # an mbarrier wait found its phase incomplete (sim/sass/exec_tma.py)
        self.cga = 0  # UCGABAR_ARV arrivals of this warp (barrier.cluster.arrive; sim/sass/exec_cluster.py)

    def special(self, name: str) -> np.ndarray:
        """An S2R / S2UR / CS2R source (SR_TID.X, SR_CTAID.Y, SR_LANEID, SR_CLOCKLO, ...) as uint32 lanes."""
        u = np.uint32
        axes = {"X": 0, "Y": 1, "Z": 2}
        head, _, axis = name.partition(".")
        if head == "SR_TID" and axis in axes:
            return self.tid[axes[axis]].astype(u)
        if head == "SR_CTAID" and axis in axes:
            return np.full(32, self.cta.ctaid[axes[axis]], dtype=u)
        if name == "SR_LANEID":
            return LANES.astype(u)
        if name in ("SR_CLOCKLO", "SR_GLOBALTIMERLO"):
            return np.full(32, self.L.clock & 0xFFFFFFFF, dtype=u)
        if name in ("SR_CLOCKHI", "SR_GLOBALTIMERHI"):
            return np.full(32, self.L.clock >> 32, dtype=u)
        if name == "SRZ":
            return np.zeros(32, dtype=u)
        if name == "SR_CgaCtaId":  # the CTA's rank in its cluster (%cluster_ctarank)
            return np.full(32, self.cta.rank, dtype=u)
        if name == "SR_SWINHI":  # the high word of the generic shared window (sim/sass/exec_cluster.py)
            return np.full(32, SHARED_WINDOW >> 32, dtype=u)
        if name == "SR_VIRTUALSMID" or name == "SR_SMID":
            return np.zeros(32, dtype=u)
        if name == "SR_EQMASK":
            return (np.uint64(1) << LANES.astype(np.uint64)).astype(u)
        if name == "SR_LTMASK":
            return ((np.uint64(1) << LANES.astype(np.uint64)) - np.uint64(1)).astype(u)
        raise KeyError(name)
