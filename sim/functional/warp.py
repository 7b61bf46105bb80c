"""One warp = 32 numpy lanes: registers, a SIMT reconvergence stack, memory access and async copies."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from sim.cluster import DSMEM_STRIDE, cluster_sregs
from sim.errors import ExecutionError, at_instruction
from sim.functional.memory import (
    LOCAL_WINDOW,
    PARAM_WINDOW,
    SHARED_WINDOW,
    WINDOW_SIZE,
    Fault,
    FlatMemory,
    GlobalMemory,
    LocalMemory,
    reduce_all,
    reduce_any,
)
from sim.functional.operands import WARP_LANES
from sim.functional.ops_async import MBarrier
from sim.functional.ops_mem import BRANCH, EXIT
from sim.functional.record import Executed
from sim.functional.types import storage
from sim.ptx.ir import Instruction, Kernel
from sim.tensormap import TensorMap

if TYPE_CHECKING:
    from sim.cluster import Cluster, ClusterShared

LANES = np.arange(32)
# one cp.async copy of a group: (destination addresses, lanes, bytes read, bytes per lane)
Copy = tuple[np.ndarray, np.ndarray, np.ndarray, int]


def _disjoint(starts: np.ndarray, size: int) -> bool:
    """Whether copies of `size` bytes at these aligned starts (multiples of size) never overlap."""
    return len(np.unique(starts)) == len(starts)


class Frame:
    """One SIMT stack entry: lanes in `mask` run from `pc` until they reach `rpc`."""

    __slots__ = ("pc", "mask", "rpc", "full")

    def __init__(self, pc: int, mask: np.ndarray, rpc: int):
        self.pc = pc
        self.mask = mask
        self.rpc = rpc
        self.full = bool(reduce_all(mask))


class CTA:
    def __init__(self, ctaid: tuple[int, int, int], block: tuple[int, int, int], shared_size: int,
                 local_size: int):
        self.ctaid = ctaid
        self.block = block
        self.nthreads = block[0] * block[1] * block[2]
        self.shared = FlatMemory(shared_size, "shared")
        self.local = LocalMemory(local_size, self.nthreads) if local_size else None
        self.warps: list[Warp] = []
        self.mbars: dict[int, MBarrier] = {}  # shared offset -> mbarrier object (sim/functional/ops_async.py)
        self.mbar_epoch = 0  # counts mbarrier operations: the runner's deadlock test
        self.defer_tx = False  # the timing model completes TMA transactions itself (sim/functional/ops_tma.py)
        self.cluster: Cluster | None = None  # the CTA's cluster, its rank and DSMEM view (sim/cluster.py)
        self.rank = 0
        self.dsmem: ClusterShared | None = None


class Launched:
    """What all warps of a launch share: the decoded kernel, memories, parameters."""

    def __init__(self, kernel: Kernel, gmem: GlobalMemory, const: FlatMemory, params: FlatMemory,
                 globals_: dict[str, int], grid: tuple[int, int, int], block: tuple[int, int, int],
                 rpcs: dict[int, int], file: str):
        self.kernel = kernel
        self.body: list[Instruction] = kernel.body
        self.gmem = gmem
        self.const = const
        self.params = params
        self.globals_ = globals_
        self.grid = grid
        self.block = block
        self.rpcs = rpcs
        self.file = file
        self.tensormaps: list[TensorMap] = []  # the launch's tensor maps, by handle index (sim/tensormap.py)
        self.cluster: tuple[int, int, int] = (1, 1, 1)  # the cluster shape (sim/cluster.py)
        self.explicit_cluster = False


def special_registers(L: Launched, cta: CTA, lin: np.ndarray, wid: int | np.ndarray) -> dict[str, Any]:
    """%tid, %ctaid, %laneid, ... of the threads `lin` (linear indices in the CTA: a warp's 32, or the
    several warps of a lock-step group, sim/functional/lockstep.py) of warp `wid` (or one per lane)."""
    bx, by, _ = cta.block
    tx, ty, tz = lin % bx, (lin // bx) % by, lin // (bx * by)
    lane = (lin % 32).astype(np.uint64)
    u32 = np.uint32
    gx, gy, gz = L.grid
    cx, cy, cz = cta.ctaid
    sregs = {
        "%tid.x": tx.astype(u32), "%tid.y": ty.astype(u32), "%tid.z": tz.astype(u32),
        "%ntid.x": u32(bx), "%ntid.y": u32(by), "%ntid.z": u32(cta.block[2]),
        "%ctaid.x": u32(cx), "%ctaid.y": u32(cy), "%ctaid.z": u32(cz),
        "%nctaid.x": u32(gx), "%nctaid.y": u32(gy), "%nctaid.z": u32(gz),
        "%laneid": lane.astype(u32), "%warpid": np.asarray(wid).astype(u32) if np.ndim(wid) else u32(wid),
        "%nwarpid": u32(64), "%smid": u32(0), "%nsmid": u32(1), "%gridid": np.uint64(0),
        "%lanemask_eq": (np.uint64(1) << lane).astype(u32),
        "%lanemask_lt": ((np.uint64(1) << lane) - np.uint64(1)).astype(u32),
        "%lanemask_le": ((np.uint64(2) << lane) - np.uint64(1)).astype(u32),
        "%lanemask_gt": (~((np.uint64(2) << lane) - np.uint64(1))).astype(u32),
        "%lanemask_ge": (~((np.uint64(1) << lane) - np.uint64(1))).astype(u32),
        "%dynamic_smem_size": u32(0), "%total_smem_size": u32(cta.shared.size),
        # no shared memory is reserved for the system: the reserved window is empty
        "%reserved_smem_offset_begin": u32(0), "%reserved_smem_offset_end": u32(0),
        "%reserved_smem_offset_cap": u32(0), "%reserved_smem_offset_0": u32(0),
        "%reserved_smem_offset_1": u32(0),
    }
    sregs.update(cluster_sregs(tuple(cta.ctaid), tuple(L.grid), tuple(L.cluster), L.explicit_cluster))
    return sregs


class Warp:
    rec: Executed  # the instruction executing now (set by step; its memory access is filled in as it runs)
    full: bool  # ... and whether every lane runs it
    # the lanes the closures compute on, each lane's index in its warp and its warp's first lane:
    # one warp here; a lock-step group (sim/functional/lockstep.py) is n warps x 32 lanes
    lanes: tuple[int, ...] = WARP_LANES
    laneid: np.ndarray = LANES
    lane_base: np.ndarray | int = 0

    def __init__(self, L: Launched, cta: CTA, wid: int, regtypes: dict[str, str]):
        self.L = L
        self.cta = cta
        self.wid = wid
        self.globals_ = L.globals_
        first = wid * 32
        lin = first + LANES
        valid = lin < cta.nthreads
        self.thread = lin
        self.r: dict[str, np.ndarray] = {n: np.zeros(32, dtype=storage(t)) for n, t in regtypes.items()}
        self.sregs = special_registers(L, cta, lin, wid)
        self.stack: list[Frame] = [Frame(0, valid.copy(), -1)] if valid.any() else []
        self.done = not self.stack
        self.instructions = 0  # warp instructions executed
        self.cycle: int | None = None  # what %clock reads (the timing model's issue cycle), else instructions
        # barrier and async-copy state
        self.bar_id = 0
        self.waiting_on: Instruction | None = None  # the mbarrier wait that last yielded
        self.bar_count = 0
        self.open_group: list[Copy] = []
        self.groups: list[list[Copy]] = []
        self.landed = 0  # groups landed in shared memory by waits

    # -- execution ---------------------------------------------------------------------------------
    def clock(self, name: str) -> np.uint32 | np.uint64:
        c = self.cycle if self.cycle is not None else self.instructions
        if name == "%clock":
            return np.uint32(c & 0xFFFFFFFF)
        return np.uint64(c)

    def step(self, cycle: int | None = None) -> Executed:
        """Execute one warp instruction (%clock reads `cycle` when given); returns what it did."""
        top = self.stack[-1]
        pc = top.pc
        ins = self.L.body[pc]
        m = top.mask
        full = top.full
        if ins.guard is not None:
            g = self.r[ins.guard]
            m = m & ~g if ins.guard_neg else m & g
            full = full and bool(reduce_all(m))
        rec = self.rec = Executed(m)
        self.full = full
        self.cycle = cycle
        self.instructions += 1
        try:
            ctl = ins.exec(self, m, full) if (full or reduce_any(m) or ins.info["flow"] == "branch") else None
        except Fault as f:
            raise self._fault(ins, f) from None
        except ExecutionError:
            raise
        except (ValueError, TypeError, IndexError, OverflowError) as e:
            raise at_instruction(ExecutionError, f"internal error executing '{ins.text}': {e}", self.L.file,
                                 ins) from e
        if ctl is None:
            top.pc = pc + 1
            if top.pc == top.rpc:
                self._reconverge()
        else:
            rec.ctl = ctl
            if ctl == BRANCH:
                self._branch(top, pc, ins, m)
            elif ctl == EXIT:
                self._exit(top, pc, m)
            else:  # BARRIER, ARRIVE
                top.pc = pc + 1
            self._reconverge()
        st = self.stack
        rec.next_pc = st[-1].pc if st else -1
        rec.landed = self.landed
        return rec

    def _branch(self, top: Frame, pc: int, ins: Instruction, taken: np.ndarray) -> None:
        target = ins.info["target"]
        if top.full and ins.guard is None:
            top.pc = target
            return
        nt = top.mask & ~taken
        self._go(0 if not reduce_any(nt) else 1 if not reduce_any(taken) else 2, top, pc, target, taken, nt)

    def _go(self, code: int, top: Frame, pc: int, target: int, taken: np.ndarray, nt: np.ndarray) -> None:
        """A branch's three outcomes: 0 every active lane jumps, 1 none does, 2 the warp diverges (the
        lock-step Group decides the code per warp and calls this too)."""
        if code == 0:
            top.pc = target
        elif code == 1:
            top.pc = pc + 1
        else:
            rpc = self.L.rpcs.get(pc, -1)
            top.pc = rpc
            self.stack.append(Frame(pc + 1, nt, rpc))
            self.stack.append(Frame(target, taken.copy(), rpc))

    def _mask_out(self, top: Frame, pc: int, m: np.ndarray) -> None:
        """exit: the lanes of m leave every frame of the stack."""
        top.pc = pc + 1
        keep = ~m
        for f in self.stack:
            f.mask = f.mask & keep
            f.full = bool(reduce_all(f.mask))

    def _exit(self, top: Frame, pc: int, m: np.ndarray) -> None:
        self._mask_out(top, pc, m)
        self._pop_exited()

    def _pop_exited(self) -> None:
        while self.stack and not reduce_any(self.stack[-1].mask):
            self.stack.pop()
        if not self.stack:
            self.flush_async()
            self.done = True

    def _reconverge(self) -> None:
        st = self.stack
        while len(st) > 1 and st[-1].pc == st[-1].rpc:
            st.pop()
        while st and not reduce_any(st[-1].mask):
            st.pop()
        if not st:
            self.done = True

    @property
    def pc(self) -> int:
        return self.stack[-1].pc if self.stack else -1

    def thread_index(self, lane: int) -> tuple[int, int, int]:
        """The (x, y, z) thread index of one lane."""
        t = int(self.thread[lane]) if 0 <= lane < 32 else -1
        bx, by, _ = self.cta.block
        return (t % bx, (t // bx) % by, t // (bx * by))

    def _fault(self, ins: Instruction, f: Fault) -> ExecutionError:
        tid = self.thread_index(int(f.lane))
        return at_instruction(ExecutionError, f"{f.message}: address {f.addr:#x} accessed by thread {tid} of "
                              f"block {self.cta.ctaid} in '{ins.text}'", self.L.file, ins)

    # -- memory ----------------------------------------------------------------------------------
    def _space_of(self, space: str, addrs: np.ndarray) -> tuple[str, np.ndarray]:
        if space != "generic":
            return space, addrs
        a0 = int(addrs[0])
        if SHARED_WINDOW <= a0 < SHARED_WINDOW + WINDOW_SIZE:
            return "shared::cluster" if a0 >= SHARED_WINDOW + DSMEM_STRIDE else "shared", addrs - np.uint64(
                SHARED_WINDOW)
        if LOCAL_WINDOW <= a0 < LOCAL_WINDOW + WINDOW_SIZE:
            return "local", addrs - np.uint64(LOCAL_WINDOW)
        if PARAM_WINDOW <= a0 < PARAM_WINDOW + WINDOW_SIZE:
            return "param", addrs - np.uint64(PARAM_WINDOW)
        return "global", addrs

    def mem_load(self, space: str, addrs: np.ndarray, m: np.ndarray, dt: np.dtype, n: int,
                 ins: Instruction) -> np.ndarray:
        rec = self.rec
        if m is rec.mask and self.full:  # every lane active: no gather or scatter
            space, act = self._space_of(space, addrs)
            rec.space, rec.addrs, rec.size, rec.direction = space, act, dt.itemsize * n, "read"
            if space != "local":
                return self._mem(space).load(act, dt, n)
        out = np.zeros((32, n), dtype=dt)
        if not reduce_any(m):
            return out
        act = addrs[m]
        idx = np.flatnonzero(m)
        space, act = self._space_of(space, act)
        rec.space, rec.addrs, rec.size, rec.direction = space, act, dt.itemsize * n, "read"
        try:
            out[m] = self._mem(space).load(act, dt, n) if space != "local" else \
                self.cta.local.load(self.thread[m], act, dt, n)  # type: ignore[union-attr]
        except Fault as f:
            f.lane = int(idx[f.lane]) if f.lane < len(idx) else 0
            raise
        return out

    def mem_store(self, space: str, addrs: np.ndarray, m: np.ndarray, vals: np.ndarray, dt: np.dtype,
                  ins: Instruction, record: bool = True) -> None:
        if not reduce_any(m):
            return
        act = addrs[m]
        idx = np.flatnonzero(m)
        space, act = self._space_of(space, act)
        if record:
            rec = self.rec
            rec.space, rec.addrs, rec.size, rec.direction = space, act, dt.itemsize * vals.shape[1], "write"
        if space in ("const", "param"):
            raise at_instruction(ExecutionError, f"store to read-only .{space} space in '{ins.text}'", self.L.file,
                                 ins)
        try:
            if space == "local":
                self.cta.local.store(self.thread[m], act, vals[m], dt)  # type: ignore[union-attr]
            else:
                self._mem(space).store(act, vals[m], dt)
        except Fault as f:
            f.lane = int(idx[f.lane]) if f.lane < len(idx) else 0
            raise

    def _mem(self, space: str) -> GlobalMemory | FlatMemory:
        if space == "global":
            return self.L.gmem
        if space == "shared":
            return self.cta.shared
        if space == "param":
            return self.L.params
        if space == "const":
            return self.L.const
        if space == "shared::cluster":  # another CTA's shared memory, or this CTA's (sim/cluster.py)
            return self.cta.dsmem if self.cta.dsmem is not None else self.cta.shared  # type: ignore[return-value]
        raise ExecutionError(f"unsupported state space .{space}", self.L.file, 0)

    # -- cp.async ----------------------------------------------------------------------------------
    def async_copy(self, dst: np.ndarray, src: np.ndarray, m: np.ndarray, size: int,
                   srcsize: np.ndarray, ins: Instruction) -> None:
        """Read the source now; the bytes land in shared memory when the group is waited on."""
        if not reduce_any(m):
            return
        u8 = np.dtype(np.uint8)
        data = np.zeros((32, size), dtype=np.uint8)
        ss = np.clip(srcsize, 0, size)
        nz = m & (ss > 0)
        for nbytes in np.unique(ss[nz]):  # each source size group, bounds-checked as it is read
            sel = nz & (ss == nbytes)
            vals = self.mem_load("global", src, sel, u8, int(nbytes), ins)
            data[sel, : int(nbytes)] = vals[sel]
        dsel = dst[m]
        bad = (dsel.astype(np.int64) + size > self.cta.shared.size) | (dsel % size != 0)
        if bad.any():
            j = int(np.argmax(bad))
            raise self._fault(ins, Fault(int(np.flatnonzero(m)[j]), int(dsel[j]),
                                         "cp.async destination outside shared memory or misaligned"))
        rec = self.rec
        rec.space, rec.addrs, rec.size, rec.direction = "global", src[m], size, "read"
        self.open_group.append((dst.copy(), m.copy(), data, size))

    def async_commit(self) -> None:
        self.groups.append(self.open_group)
        self.open_group = []

    def async_wait(self, n: int, include_open: bool = False) -> None:
        if include_open and self.open_group:
            self.async_commit()
        while len(self.groups) > n:
            self._land(self.groups.pop(0))
            self.landed += 1

    def _land(self, group: list[Copy]) -> None:
        sh = self.cta.shared
        for dst, m, data, size in group:  # lanes in order: a later lane's bytes win on overlap
            lanes = np.flatnonzero(m)
            if len(lanes) > 1 and _disjoint(dst[lanes], size):
                sh.data[(dst[lanes].astype(np.int64)[:, None] + np.arange(size)).ravel()] = data[lanes].ravel()
                continue
            for lane in lanes:
                a = int(dst[lane])
                sh.data[a: a + size] = data[lane]

    def flush_async(self) -> None:
        self.async_wait(0, include_open=True)
