"""Lock-step functional execution (issue 17): the warps that stand at the same instruction with the same
SIMT stack run it once, as one wide warp of n x 32 numpy lanes (a `Group`), across the warps of a CTA and
across CTAs.

The reference is the sequential order of sim/functional/runner.py: CTA after CTA, and in a CTA warp
after warp, each to its next barrier. Lock-step interleaves the warps' instructions instead, which gives
the same registers and memory whenever no warp touches what another writes within the same stretch
between two barriers of its CTA, and no CTA touches what another CTA of the batch writes at all. That
is checked, not assumed: every shared and global access is logged (4-byte words, the accessing warp,
the barrier epoch) and a batch in which two warps conflict (a write and another access of the same word
by two warps in one epoch of a CTA, or by two CTAs) is a `Refused` run: `run_functional` then reruns the
launch one CTA at a time in lock-step, and, should that conflict too, in the sequential order. So the
outputs and warp-instruction counts are bit-identical to the sequential order for every kernel, racy
ones included (a racy kernel simply pays for the runs it throws away).

A group splits when its warps would leave the common path (a branch taken by some warps and not by
others, lanes exiting in some warps only, a barrier or cp.async group operation some warps skip by
their guard): each part then runs on with its warps' lanes. Groups waiting at the same barrier with the
same stack merge again. Kernels this module does not model wide (mbarriers, TMA, wgmma, wmma, vote,
redux, stmatrix, calls, local memory, clusters, %globaltimer, register-named or counted barriers,
bar.arrive) run sequentially: `refusal` names the first instruction that keeps a kernel out. %clock
reads each warp's own instruction count, as Warp.clock does.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any

import numpy as np

from sim.errors import ExecutionError
from sim.functional.conflicts import (
    EMPTY,
    GLOBAL_DOMAIN,
    SHARED_DOMAIN,
    Access,
    Intervals,
    conflict,
    meets,
    merged,
    touched,
    union,
    words,
)
from sim.functional.memory import Fault, FlatMemory, _gather, _scatter, reduce_all, reduce_any
from sim.functional.ops_alu import SEMANTICS_ALU
from sim.functional.ops_mem import (
    BARRIER,
    BRANCH,
    EXIT,
    b_activemask,
    b_atom,
    b_bar,
    b_bra,
    b_cp,
    b_exit,
    b_ld,
    b_ldmatrix,
    b_nop,
    b_prefetch,
    b_shfl,
    b_st,
    b_trap,
)
from sim.functional.ops_mma import b_mma
from sim.functional.record import Executed
from sim.functional.types import storage
from sim.functional.warp import CTA, LANES, Copy, Frame, Warp, special_registers
from sim.isa import async_role, barrier_role, bulk_role, is_branch
from sim.ptx.ir import Instruction, Kernel

if TYPE_CHECKING:
    from sim.functional.runner import Prepared

# the semantics builders whose closures compute on any number of lanes (w.lanes)
WIDE = {*SEMANTICS_ALU.values(), b_ld, b_st, b_atom, b_ldmatrix, b_cp, b_prefetch, b_nop, b_bra, b_exit, b_bar,
        b_shfl, b_activemask, b_trap, b_mma}
# lanes of one lock-step batch: numpy's per-call cost is paid once per group instruction, its per-element
# cost grows with the lanes. Measured 2026-12-01 (process time, load 11; warp instructions/s of sgemm 128^3,
# mma f16 256^3, reduce6): 1,024 lanes 1.41M / 317K / 448K, 4,096 2.97M / 404K / 1.07M, 16,384 3.32M /
# 336K / 1.12M
BATCH_LANES = 4096
# warp instructions a streamed batch runs before it pauses (steps): records of about 3 MB
STREAM_CHUNK = 8192
SPLIT = -1  # Group.run_step's answer when the group split before executing (the parts execute it)


class Refused(Exception):
    """This launch cannot run in lock-step with the sequential order's results; the message says why.
    per_cta: the reason is between CTAs only, so running one CTA at a time may pass."""

    def __init__(self, message: str, per_cta: bool = False):
        super().__init__(message)
        self.per_cta = per_cta


class OverBudget(Refused):
    """The batch ran past its warp-instruction budget (no conflict found)."""


def refusal(k: Kernel, P: Prepared) -> str | None:
    """Why kernel k (as prepared) cannot run in lock-step, or None when it can."""
    from sim.functional.runner import SEMANTICS

    if P.layout.local_size:
        return "local memory (per-thread rows)"
    if P.L.cluster != (1, 1, 1) or P.L.tensormaps:
        return "clusters and tensor maps"
    for ins in k.body:
        if SEMANTICS[ins.opcode] not in WIDE:
            return f"line {ins.line}: '{ins.text}' is not modelled wide"
        if ins.info.get("space") in ("local", "shared::cluster") or bulk_role(ins):
            return f"line {ins.line}: '{ins.text}' (local, cluster or bulk memory)"
        role = barrier_role(ins)
        if role == "arrive" or "cluster" in ins.mods and SEMANTICS[ins.opcode] is b_bar:
            return f"line {ins.line}: '{ins.text}' (a barrier some threads only arrive at)"
        if role == "cta" and (len(ins.operands) > 1 or ins.operands and ins.operands[0].kind != "imm"):
            return f"line {ins.line}: '{ins.text}' (a counted or register-named barrier)"
        if any(op.kind == "sreg" and op.name.startswith("%globaltimer") for op in ins.operands):
            return f"line {ins.line}: '{ins.text}' reads the global timer"
    return None


def _effects(k: Kernel) -> list[bool]:
    """Per pc: whether the instruction acts on its warp as a whole (a barrier, a cp.async group
    operation), so that warps whose guard skips it must part from those that run it."""
    return [barrier_role(ins) == "cta" or async_role(ins) in ("commit", "wait", "wait_all") for ins in k.body]


class Batch:
    """The CTAs that run together: one shared memory holding each CTA's at its own base, the
    barrier epoch, and the log of shared and global accesses that `conflict` checks."""

    def __init__(self, P: Prepared, ctas: list[CTA], effects: list[bool], first: int = 0,
                 trace: dict[tuple[int, int, int], list[Any]] | None = None, compact: bool = False):
        self.P = P
        # a streamed batch (replay.Stream) runs as long as the timing model: its global accesses are
        # checked at every barrier release and kept as words per CTA (intervals), not as a log
        self.compact = compact
        self.cta_reads: dict[int, Intervals] = {}
        self.cta_writes: dict[int, Intervals] = {}
        self.effects = effects
        self.trace = trace  # when given: each warp's records, by CTA and warp (sim/functional/replay.py)
        self.ctas = ctas
        self.bounds = ctas[0].shared  # each CTA's shared memory: its size bounds every access
        self.stride = ctas[0].shared.data.size
        self.shared = FlatMemory(self.stride * len(ctas), "shared")
        self.wpc = -(-ctas[0].nthreads // 32)  # warps per CTA: owner // wpc is the owner's CTA in the launch
        self.base = first * self.wpc  # the owner of the batch's first warp
        self.epoch = 0
        self.log: list[Access] = []
        self.wrote = [False, False]  # per domain: a write since the last check
        # replay of a kernel whose clock values only reach stored data (sim/functional/replay.py
        # ClockStores): pc of such a store -> its data register; each warp's values of it (the lock-step
        # %clock reads are the warp's instruction count: which read a lane's value came from), by CTA and warp
        self.clock_data: dict[int, str] | None = None
        self.clock_tags: dict[tuple[int, int, int], list[Any]] = {}

    def record(self, domain: int, addrs: np.ndarray, size: int, owners: np.ndarray, write: bool) -> None:
        self.log.append((domain, self.epoch, addrs, size, owners, write))
        if write:
            self.wrote[domain] = True

    def end_epoch(self) -> None:
        """A barrier released every warp: shared accesses of the epoch are checked and dropped (shared
        memory is per CTA, and the barrier orders a CTA's warps)."""
        self._check_shared()
        if self.compact:
            self._fold_global()
        self.epoch += 1

    def _fold_global(self) -> None:
        """(compact) The epoch's global accesses: checked between the warps of a CTA and between CTAs
        within the epoch (`conflict`), then added to each CTA's words read and written."""
        glob = [e for e in self.log if e[0] == GLOBAL_DOMAIN]
        if not glob:
            return
        self.log = [e for e in self.log if e[0] != GLOBAL_DOMAIN]
        found = conflict(glob, self.wpc) if self.wrote[GLOBAL_DOMAIN] else ""
        self.wrote[GLOBAL_DOMAIN] = False
        if found == "ctas":
            raise Refused("two CTAs of the batch access a global word, one writing it", per_cta=True)
        if found:
            raise Refused("two warps of a CTA access a global word between two barriers, one writing it")
        for write, per in ((False, self.cta_reads), (True, self.cta_writes)):
            for c, iv in touched(glob, write, self.wpc).items():
                per[c] = union(per[c], iv) if c in per else iv

    def touched(self) -> tuple[Intervals, Intervals]:
        """(compact, after finish) The global words the batch read and wrote, all CTAs together."""
        r = merged(np.concatenate([EMPTY, *(iv[0] for iv in self.cta_reads.values())]),
                   np.concatenate([EMPTY, *(iv[1] for iv in self.cta_reads.values())]))
        w = merged(np.concatenate([EMPTY, *(iv[0] for iv in self.cta_writes.values())]),
                   np.concatenate([EMPTY, *(iv[1] for iv in self.cta_writes.values())]))
        return r, w

    def _check_shared(self) -> None:
        shared = [e for e in self.log if e[0] == SHARED_DOMAIN]
        self.log = [e for e in self.log if e[0] != SHARED_DOMAIN]
        if self.wrote[SHARED_DOMAIN] and shared_conflict(shared):  # CTAs' shared words never meet
            raise Refused("two warps of a CTA access a shared word between two barriers, one writing it")
        self.wrote[SHARED_DOMAIN] = False

    def finish(self) -> None:
        self._check_shared()
        if self.compact:
            self._fold_global()
            for c, w in self.cta_writes.items():  # a word one CTA writes and another touches, any epochs
                for d in set(self.cta_reads) | set(self.cta_writes):
                    if d != c and (meets(w, self.cta_reads.get(d, (EMPTY, EMPTY))) or
                                   meets(w, self.cta_writes.get(d, (EMPTY, EMPTY)))):
                        raise Refused("two CTAs of the batch access a global word, one writing it", per_cta=True)
            return
        if not self.wrote[GLOBAL_DOMAIN]:
            return
        found = conflict(self.log, self.wpc)
        if found == "ctas":
            raise Refused("two CTAs of the batch access a global word, one writing it", per_cta=True)
        if found:
            raise Refused("two warps of a CTA access a global word between two barriers, one writing it")


def shared_conflict(entries: list[Access]) -> bool:
    """Whether two warps touch one shared word, at least one writing it, in the accesses of one barrier
    epoch: `conflict(entries, wpc) != ""` for such a log (all its entries in one epoch, so any two
    owners meeting at a written word conflict, whether of one CTA or two), found without sorting: each
    written word's writer in an array over the batch's words (a word with two writers keeps one of
    them, and the other's lanes read back a different owner), then every access checked against it."""
    writes = [e for e in entries if e[5]]
    if not writes:
        return False
    ww, wo, _ = words(writes)
    rw, ro, _ = words([e for e in entries if not e[5]])
    if (ww.size and int(ww.min()) < 0) or (rw.size and int(rw.min()) < 0):
        return bool(conflict(entries, 1))  # not batch offsets: the general check
    top = max(int(ww.max()), int(rw.max()) if rw.size else 0) + 1
    writer = np.full(top, -1, dtype=np.int64)
    writer[ww] = wo
    if reduce_any(writer[ww] != wo):
        return True
    if not rw.size:
        return False
    w = writer[rw]
    return bool(reduce_any((w >= 0) & (w != ro)))


class Group(Warp):
    """n warps in lock-step: registers, stack masks and async copies over n x 32 lanes, warp by warp."""

    parts: list[Group] | None  # set when the group split: the groups that go on in its place
    sel: np.ndarray  # a part's lanes in the group it split from
    ibase: np.ndarray  # per warp: instructions it ran before the group formed
    owner: np.ndarray  # per lane: its warp's index in the batch (CTA x warps per CTA + warp)
    sbase: np.ndarray  # per lane: its CTA's first byte in the batch's shared memory
    n: int  # warps
    amask: np.ndarray | None  # the lanes whose addresses rec.addrs holds (None: every lane)
    dests: list[Callable[[Executed], None]] | None  # per warp: the append of its records (_record)

    @classmethod
    def of(cls, B: Batch) -> Group:
        """Every warp of the batch's CTAs, CTA after CTA, warp after warp."""
        g = cls.__new__(cls)
        g._common(B)
        per = B.wpc * 32
        g._shape(len(B.ctas) * B.wpc)
        g.r = {name: np.zeros(g.lanes, dtype=storage(t)) for name, t in B.P.regtypes.items()}
        lin = np.arange(per)
        each = [special_registers(B.P.L, c, lin, lin // 32) for c in B.ctas]
        g.sregs = {}
        for name, v0 in each[0].items():
            vals = [s[name] for s in each]
            if isinstance(v0, np.ndarray):  # per lane
                g.sregs[name] = np.concatenate(vals)
            elif all(v == v0 for v in vals):
                g.sregs[name] = v0
            else:  # per CTA
                g.sregs[name] = np.repeat(np.array(vals), per)
        g.stack = [Frame(0, np.tile(lin < B.ctas[0].nthreads, len(B.ctas)), -1)]
        g.ibase = np.zeros(g.n, dtype=np.int64)
        g.owner = np.repeat(np.arange(g.n, dtype=np.int64), 32) + B.base
        g.sbase = ((g.owner - B.base) // B.wpc).astype(np.uint64) * np.uint64(B.stride)
        return g

    def _common(self, B: Batch) -> None:
        self.B = B
        self.L = B.P.L
        self.cta = B.ctas[0]
        self.globals_ = B.P.L.globals_
        self.body = B.P.L.body
        self.effects = B.effects
        self.done = False
        self.parts = None
        self.cycle = None
        self.instructions = 0  # since the group formed; each warp's count is ibase + instructions
        self.bar_id = 0
        self.bar_count = 0
        self.waiting_on = None
        self.open_group = []
        self.groups = []
        self.landed = 0
        self.dests = None

    def _shape(self, n: int) -> None:
        self.n = n
        self.lanes = (32 * n,)
        self.laneid = np.tile(LANES, n)
        self.lane_base = np.repeat(np.arange(n) * 32, 32)

    # -- splitting and merging ------------------------------------------------------------------------
    def _take(self, idx: np.ndarray) -> Group:
        """The group's warps idx (0..n-1) as a group of their own."""
        g = Group.__new__(Group)
        g._common(self.B)
        g._shape(len(idx))
        sel = (idx[:, None] * 32 + LANES).ravel()
        g.r = {name: v[sel] for name, v in self.r.items()}
        g.sregs = {name: v[sel] if isinstance(v, np.ndarray) and v.shape == self.lanes else v
                   for name, v in self.sregs.items()}
        g.stack = [Frame(f.pc, f.mask[sel], f.rpc) for f in self.stack]
        g.owner, g.sbase = self.owner[sel], self.sbase[sel]
        g.open_group = [_take_copy(c, sel) for c in self.open_group]
        g.groups = [[_take_copy(c, sel) for c in grp] for grp in self.groups]
        g.landed = self.landed
        g.bar_id, g.bar_count = self.bar_id, self.bar_count
        g.ibase = self.ibase[idx] + self.instructions
        g.sel = sel
        return g

    def _split(self, key: np.ndarray) -> list[Group]:
        """Parts of warps with equal key, in the order of their first warp."""
        _, first, inv = np.unique(key, return_index=True, return_inverse=True)
        return [self._take(np.flatnonzero(inv == k)) for k in np.argsort(first)]

    def signature(self) -> tuple:
        return tuple((f.pc, f.rpc, bool(reduce_any(f.mask))) for f in self.stack), self.bar_id, self.landed, \
            bool(self.open_group or self.groups)

    # -- execution ------------------------------------------------------------------------------------
    def step(self, cycle: int | None = None) -> Executed:
        raise NotImplementedError("Group.run_step")

    def run_step(self) -> int | None:
        """Execute one instruction on every warp of the group: its control code, or SPLIT (then
        self.parts are the groups that go on, nothing executed)."""
        top = self.stack[-1]
        pc = top.pc
        ins = self.body[pc]
        m = top.mask
        full = top.full
        if ins.guard is not None:
            p = self.r[ins.guard]
            m = m & ~p if ins.guard_neg else m & p
            full = full and bool(reduce_all(m))
        if not full and self.effects[pc] and self.n > 1:
            runs = np.asarray(m.reshape(self.n, 32).any(axis=1))
            if not (runs.all() or not runs.any()):
                self.parts = self._split(runs)
                return SPLIT
        self.rec = Executed(m)
        self.amask = None
        self.full = full
        self.instructions += 1
        try:
            ctl = ins.exec(self, m, full) if (full or reduce_any(m) or ins.info["flow"] == "branch") else None
        except (Fault, ExecutionError, ValueError, TypeError, IndexError, OverflowError) as e:
            raise Refused(f"line {ins.line}: {e}") from e
        if ctl is None:
            top.pc = pc + 1
            if top.pc == top.rpc:
                self._reconverge()
            if self.B.trace is not None:
                self._record(m, full, ctl, ins)
            return None
        if ctl == BRANCH:
            self._branch(top, pc, ins, m)
        elif ctl == EXIT:
            self._exit(top, pc, m)
        elif ctl == BARRIER:
            top.pc = pc + 1
        else:
            raise Refused(f"line {ins.line}: control code {ctl}")
        for g in self.parts or [self]:
            g._reconverge()
        if self.B.trace is not None:
            self._record(m, full, ctl, ins)
        return ctl

    def _record(self, m: np.ndarray, full: bool, ctl: int | None, ins: Instruction) -> None:
        """Each warp's Executed of the step, as Warp.step would have returned it (for the timing model's
        replay, sim/functional/replay.py)."""
        n, rec, B = self.n, self.rec, self.B
        dests = self.dests
        if dests is None:  # each warp's record list, found once per group (its warps do not change)
            trace = B.trace
            assert trace is not None
            base, wpc, ctas = B.base, B.wpc, B.ctas
            dests = self.dests = [trace[ctas[(o - base) // wpc].ctaid][(o - base) % wpc].append
                                  for o in self.owner[::32].tolist()]
        runs: list[bool] | None = None if full or is_branch(ins) else \
            np.asarray(m.reshape(n, 32).any(axis=1)).tolist()
        addrs = rec.addrs
        # warps that made no memory access and agree on (next pc, groups landed, ran it) share one record:
        # nothing reads a record after the timing model's replay took it apart, and the timing model reads no
        # mask (the shared record's is the first such warp's)
        if self.parts is None:  # the group did not split: one next pc and one count of landed groups
            nx = self.stack[-1].pc if self.stack else -1
            if addrs is None:  # the common step: at most two records (ran it or not) for all the warps
                if runs is None:
                    r = Executed(m[:32], ctl, nx, self.landed)
                    for d in dests:
                        d(r)
                    return
                by_run: list[Executed | None] = [None, None]
                for j, run in enumerate(runs):
                    got = by_run[run]
                    if got is None:
                        got = by_run[run] = Executed(m[32 * j: 32 * j + 32], ctl if run else None, nx, self.landed)
                    dests[j](got)
                return
            if runs is None and self.amask is None and addrs.size == 32 * n:  # every lane accessed: a record each
                ld, space, size, direction = self.landed, rec.space, rec.size, rec.direction
                for d, mr, ar in zip(dests, m.reshape(n, 32), addrs.reshape(n, 32)):
                    d(Executed(mr, ctl, nx, ld, space, ar, size, direction))
                if B.clock_data is not None and ins.index in B.clock_data:
                    self._clock_tags(B, B.clock_data[ins.index], [True] * n, [32] * n, list(range(32, 32 * n + 1, 32)))
                return
            nxt_l, landed_l = [nx] * n, [self.landed] * n
        else:
            nxt = np.empty(n, dtype=np.int64)
            landed = np.empty(n, dtype=np.int64)
            for g in self.parts:
                idx = g.sel[::32] // 32
                nxt[idx] = g.stack[-1].pc if g.stack else -1
                landed[idx] = g.landed
            nxt_l, landed_l = nxt.tolist(), landed.tolist()
        if runs is None:
            runs = [True] * n
        counts: list[int] = []
        ends: list[int] = []
        if addrs is not None:
            c = np.full(n, 32) if self.amask is None else self.amask.reshape(n, 32).sum(axis=1)
            counts, ends = c.tolist(), np.cumsum(c).tolist()
            space, size, direction = rec.space, rec.size, rec.direction
        same: dict[tuple[int, int, bool], Executed] = {}
        for j in range(n):  # plain ints and lists: this loop runs for every warp of every step
            run = runs[j]
            if run and addrs is not None and counts[j]:
                r = Executed(m[32 * j: 32 * j + 32], ctl, nxt_l[j], landed_l[j], space,
                             addrs[ends[j] - counts[j]: ends[j]], size, direction)
            else:
                key = (nxt_l[j], landed_l[j], run)
                got = same.get(key)
                if got is None:
                    got = same[key] = Executed(m[32 * j: 32 * j + 32], ctl if run else None, nxt_l[j], landed_l[j])
                r = got
            dests[j](r)
        if B.clock_data is not None and addrs is not None and ins.index in B.clock_data:
            self._clock_tags(B, B.clock_data[ins.index], runs, counts, ends)

    def _clock_tags(self, B: Batch, reg: str, runs: list[bool], counts: list[int], ends: list[int]) -> None:
        """Each accessing warp's values of the store's data register, lanes as in its record's addrs."""
        vals = self.r[reg] if self.amask is None else self.r[reg][self.amask]
        for j, o in enumerate(self.owner[::32].tolist()):
            if runs[j] and counts[j]:
                c = B.ctas[(o - B.base) // B.wpc].ctaid
                B.clock_tags[c][(o - B.base) % B.wpc].append(vals[ends[j] - counts[j]: ends[j]].astype(np.uint64))

    def _branch(self, top: Frame, pc: int, ins: Instruction, taken: np.ndarray) -> None:
        target = ins.info["target"]
        if top.full and ins.guard is None:
            top.pc = target
            return
        nt = top.mask & ~taken
        n = self.n
        any_t = taken.reshape(n, 32).any(axis=1)
        any_nt = nt.reshape(n, 32).any(axis=1)
        code = np.where(~any_nt, 0, np.where(~any_t, 1, 2))
        if (code == code[0]).all():
            self._go(int(code[0]), self.stack[-1], pc, target, taken, nt)
            return
        self.parts = self._split(code)
        for g in self.parts:
            sel = g.sel
            g._go(int(code[sel[0] // 32]), g.stack[-1], pc, target, taken[sel], nt[sel])

    def _exit(self, top: Frame, pc: int, m: np.ndarray) -> None:
        self._mask_out(top, pc, m)
        live = np.array([f.mask.reshape(self.n, 32).any(axis=1) for f in self.stack])  # (frame, warp)
        if (live == live[:, :1]).all():
            self._pop_exited()
            return
        key = (live.astype(np.int64) << np.arange(len(self.stack))[:, None]).sum(axis=0)
        self.parts = self._split(key)
        for g in self.parts:
            g._pop_exited()

    def clock(self, name: str) -> Any:
        """What %clock / %clock64 read functionally: each warp's instructions so far (Warp.clock)."""
        c = np.repeat(self.ibase + self.instructions, 32)
        if name == "%clock":
            return (c & 0xFFFFFFFF).astype(np.uint32)
        return c.astype(np.uint64)

    # -- memory ----------------------------------------------------------------------------------------
    def _space_of(self, space: str, addrs: np.ndarray) -> tuple[str, np.ndarray]:
        if space != "generic":
            if space not in ("shared", "global", "param", "const"):
                raise Refused(f".{space} accesses are not modelled wide")
            return space, addrs
        hi = addrs >> np.uint64(32)
        if addrs.size and not reduce_all(hi == hi[0]):
            raise Refused("generic addresses in more than one window")
        sp, a = Warp._space_of(self, space, addrs)
        if sp not in ("shared", "global", "param", "const"):
            raise Refused(f"generic address in the .{sp} window")
        return sp, a

    def _shared_index(self, act: np.ndarray, nbytes: int, dt: np.dtype, sel: np.ndarray | None) -> np.ndarray:
        """Offsets into the batch's shared memory of the lanes `sel` (all when None), bounds-checked
        against one CTA's shared memory."""
        off = self.B.bounds._offsets(act, nbytes, dt)
        base = self.sbase if sel is None else self.sbase[sel]
        return off + base if off.dtype == base.dtype else off + base.astype(off.dtype)

    def mem_load(self, space: str, addrs: np.ndarray, m: np.ndarray, dt: np.dtype, n: int,
                 ins: Instruction) -> np.ndarray:
        rec = self.rec
        every = m is rec.mask and self.full
        if every:
            act, sel = addrs, None
        else:
            if not reduce_any(m):
                return np.zeros((self.lanes[0], n), dtype=dt)
            act, sel = addrs[m], m
        space, act = self._space_of(space, act)
        rec.space, rec.addrs, rec.size, rec.direction = space, act, dt.itemsize * n, "read"
        self.amask = sel
        owners = self.owner if sel is None else self.owner[sel]
        if space == "shared":
            idx = self._shared_index(act, dt.itemsize * n, dt, sel)
            vals = _gather(self.B.shared.view(dt), idx, dt, n)
            self.B.record(SHARED_DOMAIN, idx, dt.itemsize * n, owners, False)
        else:
            vals = self._mem(space).load(act, dt, n)
            if space == "global":
                self.B.record(GLOBAL_DOMAIN, act, dt.itemsize * n, owners, False)
        if every:
            return vals
        out = np.zeros((self.lanes[0], n), dtype=dt)
        out[m] = vals
        return out

    def mem_store(self, space: str, addrs: np.ndarray, m: np.ndarray, vals: np.ndarray, dt: np.dtype,
                  ins: Instruction, record: bool = True) -> None:
        if not reduce_any(m):
            return
        act = addrs[m]
        space, act = self._space_of(space, act)
        nbytes = dt.itemsize * vals.shape[1]
        if record:
            rec = self.rec
            rec.space, rec.addrs, rec.size, rec.direction = space, act, nbytes, "write"
            self.amask = m
        if space == "shared":
            idx = self._shared_index(act, nbytes, dt, m)
            _scatter(self.B.shared.view(dt), idx, dt, vals[m])
            self.B.record(SHARED_DOMAIN, idx, nbytes, self.owner[m], True)
        elif space == "global":
            self.L.gmem.store(act, vals[m], dt)
            self.B.record(GLOBAL_DOMAIN, act, nbytes, self.owner[m], True)
        else:
            raise Refused(f"store to .{space}")

    def async_copy(self, dst: np.ndarray, src: np.ndarray, m: np.ndarray, size: int,
                   srcsize: np.ndarray, ins: Instruction) -> None:
        if not reduce_any(m):
            return
        u8 = np.dtype(np.uint8)
        data = np.zeros((self.lanes[0], size), dtype=np.uint8)
        ss = np.clip(srcsize, 0, size)
        nz = m & (ss > 0)
        for nbytes in _distinct(ss[nz]):
            sel = nz & (ss == nbytes)
            vals = self.mem_load("global", src, sel, u8, int(nbytes), ins)
            data[sel, : int(nbytes)] = vals[sel]
        dsel = dst[m]
        if reduce_any((dsel.astype(np.int64) + size > self.B.bounds.size) | (dsel % size != 0)):
            raise Refused("cp.async destination outside shared memory or misaligned")
        rec = self.rec
        rec.space, rec.addrs, rec.size, rec.direction = "global", src[m], size, "read"
        self.amask = m
        self.open_group.append((dst + self.sbase, m.copy(), data, size))

    def _land(self, group: list[Copy]) -> None:
        sh = self.B.shared.data
        for dst, m, data, size in group:  # lanes in order: a later lane's bytes win on overlap
            lanes = np.flatnonzero(m)
            if not lanes.size:
                continue
            self.B.record(SHARED_DOMAIN, dst[lanes], size, self.owner[lanes], True)
            starts = dst[lanes].astype(np.int64)
            if len(lanes) > 1 and _all_distinct(starts):
                sh[(starts[:, None] + np.arange(size)).ravel()] = data[lanes].ravel()
                continue
            for lane in lanes:
                a = int(dst[lane])
                sh[a: a + size] = data[lane]


def _distinct(v: np.ndarray) -> np.ndarray:
    """np.unique(v) (sorted distinct values), without its hash table where all are equal (a cp.async's
    source sizes nearly always are)."""
    if v.size and bool((v == v[0]).all()):
        return v[:1]
    s = np.sort(v)  # np.unique's answer by sorting (np.unique imports numpy.ma at its first call, ~15 ms)
    return s[np.concatenate(([True], s[1:] != s[:-1]))] if s.size > 1 else s


def _all_distinct(v: np.ndarray) -> bool:
    """len(np.unique(v)) == len(v), by sorting (numpy's hash-table unique took ~1 ms on 4,096 lanes)."""
    s = np.sort(v)
    return not bool((s[1:] == s[:-1]).any())


def _take_copy(c: Copy, sel: np.ndarray) -> Copy:
    dst, m, data, size = c
    return dst[sel], m[sel], data[sel], size


def _merge(groups: list[Group]) -> list[Group]:
    """Groups at the same place of their program with no async copies in flight become one."""
    out: list[Group] = []
    by: dict[Any, list[Group]] = {}
    for g in groups:
        sig = g.signature()
        if sig[-1]:
            out.append(g)
        else:
            by.setdefault(sig, []).append(g)
    for gs in by.values():
        out.append(gs[0] if len(gs) == 1 else _concat(sorted(gs, key=lambda g: int(g.owner[0]))))
    return out


def _concat(gs: list[Group]) -> Group:
    g = Group.__new__(Group)
    g._common(gs[0].B)
    g._shape(sum(x.n for x in gs))
    g.r = {name: np.concatenate([x.r[name] for x in gs]) for name in gs[0].r}
    g.sregs = {}
    for name, v0 in gs[0].sregs.items():
        vals = [x.sregs[name] for x in gs]
        if all(not isinstance(v, np.ndarray) for v in vals) and all(v == v0 for v in vals):
            g.sregs[name] = v0
        else:
            g.sregs[name] = np.concatenate([np.broadcast_to(np.asarray(v), x.lanes) for v, x in zip(vals, gs)])
    g.stack = [Frame(f.pc, np.concatenate([x.stack[i].mask for x in gs]), f.rpc) for i, f in enumerate(gs[0].stack)]
    g.owner = np.concatenate([x.owner for x in gs])
    g.ibase = np.concatenate([x.ibase + x.instructions for x in gs])
    g.sbase = np.concatenate([x.sbase for x in gs])
    g.bar_id, g.bar_count, g.landed = gs[0].bar_id, gs[0].bar_count, gs[0].landed
    return g


def run_batch(B: Batch, budget: list[int]) -> int:
    """Run the batch's CTAs to completion in lock-step; returns warp instructions executed."""
    return sum(steps(B, budget[0], chunk=1 << 62))


def steps(B: Batch, limit: int | None = None, chunk: int = STREAM_CHUNK) -> Generator[int, None, None]:
    """Run the batch's CTAs in lock-step, pausing at every barrier release and after about `chunk` warp
    instructions: yields the warp instructions run since the last pause (a streamed replay runs it on as
    the timing model needs records, sim/functional/replay.py). Past `limit` warp instructions: Refused."""
    count = 0
    since = 0
    groups = [Group.of(B)]
    while True:
        waiting: list[Group] = []
        todo = groups[::-1]
        while todo:
            g = todo.pop()
            while True:
                if since >= chunk:
                    yield since
                    since = 0
                ctl = g.run_step()
                if ctl != SPLIT:
                    count += g.n
                    since += g.n
                    if limit is not None and count > limit:
                        raise OverBudget("past the warp-instruction budget")
                if g.parts is not None:
                    todo.extend(p for p in reversed(g.parts) if not p.done)
                    break
                if g.done:
                    break
                if ctl == BARRIER:
                    waiting.append(g)
                    break
        if not waiting:
            if since:
                yield since
            return
        if len({g.bar_id for g in waiting}) > 1:
            raise Refused("warps wait at different barriers")
        B.end_epoch()
        groups = _merge(waiting)
        if since:
            yield since
            since = 0


def run_lockstep(P: Prepared, ctas_per_batch: int, budget: list[int], progress: Any = None) -> int:
    """Every CTA of the prepared launch in lock-step batches of ctas_per_batch; warp instructions."""
    from sim.cluster import link as link_cluster

    def make_cta(P: Prepared, ctaid: tuple[int, int, int]) -> CTA:  # runner.make_cta, less its warps
        cta = CTA(ctaid, P.L.block, P.shared_size, P.layout.local_size)
        link_cluster([cta])
        return cta

    why = refusal(P.L.kernel, P)
    if why:
        raise Refused(f"static: {why}")
    effects = _effects(P.L.kernel)
    total = 0
    limit = budget[0]
    for i in range(0, len(P.ctas), ctas_per_batch):
        ctas = [make_cta(P, c) for c in P.ctas[i: i + ctas_per_batch]]
        B = Batch(P, ctas, effects)
        total += run_batch(B, budget)
        B.finish()
        budget[0] = limit - total
        if progress is not None:
            progress.update(min(i + ctas_per_batch, len(P.ctas)), total, None)
    return total


def batch_ctas(P: Prepared) -> int:
    """CTAs per batch: BATCH_LANES lanes' worth, at least one."""
    return max(1, BATCH_LANES // (32 * max(1, -(-P.L.block[0] * P.L.block[1] * P.L.block[2] // 32))))


__all__ = ["Refused", "OverBudget", "refusal", "run_lockstep", "steps", "batch_ctas", "Group", "Batch", "is_branch"]
