"""SASS timing: the SASS functional model (sim.sass.exec) stepped warp by warp inside a cycle loop whose
issue rules are the control codes ptxas wrote (sim.sass.control, /work/shared/hw/sass-control.md).

Per core (SM): Core.schedulers schedulers, warp w of a CTA on scheduler w % schedulers, each issuing at
most one instruction per cycle (greedy: it stays on the warp that issued last until that warp cannot
issue or its instruction yields (Control.yields: the raw bit clear), then takes the next eligible warp
round-robin). A warp may issue when
- its stall count from the previous instruction has passed (fixed-latency results are covered by it);
- every scoreboard slot of its wait mask has cleared. An instruction with a write barrier sets its slot
  until the result exists: a memory access's ready cycle from sim.timing.memory.CoreMemory (shared banks,
  L1, L2 port, DRAM: the addresses of the SassExecuted record), MUFU / HMMA / others by their pipe's
  latency; a read barrier clears when the sources are read (the register file's latency plus one cycle);
- it is not held at BAR.SYNC (released Pipe 'sync'.latency cycles after the last warp arrives) or at a
  convergence barrier (BSYNC / WARPSYNC: the functional model's groups);
- a global store or atomic first passes its DrainPort (store bytes, atomic addresses): its read barrier
  clears, and its memory access starts, when the port takes it;
- DEPBAR.LE SB0, N: at most N of its LDGDEPBAR groups (the LDGSTS issued before each) are still in flight;
  WARPGROUP.DEPBAR.LE gsb0, N: at most N of its GMMA groups (closed by a GMMA with gsb0) are incomplete.
A warpgroup MMA (HGMMA / QGMMA / IGMMA) holds its tensor unit wgmma.issue cycles and queues its warp's
16 x N x K MACs there at wgmma.<type>_macs per cycle; its group completes wgmma.latency after them; its
scheduler issues nothing else for wgmma.issue_shared cycles (the H200's wgmma issue rate).
An instruction occupies its pipe unit (Pipe.count per core, unit = scheduler % count) for warp_size / lanes
cycles (HMMA: m*n*k MACs / lanes) times Pipe.interval; a warp whose next instruction's unit is busy waits.
CTAs are dealt to cores round-robin, up to
the resident limit of sim.timing.engine.occupancy with the registers ptxas allocates; a core starts its
next CTA when one ends. SR_CLOCKLO / CS2R reads the core's cycle.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from sim.errors import ExecutionError, UsageError
from sim.functional.runner import DEFAULT_MAX_INSTRUCTIONS, prepare, read_outputs
from sim.hw import HwConfig
from sim.launch import Launch
from sim.result import STALL_REASONS, SimResult
from sim.sass.exec import Machine, cluster_ctas, launched
from sim.sass.exec_gmma import gmma_group_end, gmma_work
from sim.sass.exec_state import Cta, Launched, SassExecuted, Warp, lanes_any
from sim.sass.listing import SassInstruction, disassemble
from sim.sass.lockstep import Replay, RunAhead, refusal
from sim.sass.timing_cluster import ClusterTiming
from sim.sass.timing_tma import BulkTiming
from sim.sass.tools import resources
from sim.timing import memory
from sim.timing.engine import occupancy
from sim.timing.memory import CoreMemory, DeviceMemory
from sim.timing.tma import TmaEngine

_DEPBAR = re.compile(r"SB(\d)\s*,\s*(0x[0-9a-fA-F]+|\d+)")  # nvdisasm prints the count in hex: SB0, 0x1

#: SASS opcodes the timing loop treats specially, by role (one table; everything else by its pipe)
ROLES = {"DEPBAR": "depbar", "LDGSTS": "ldgsts", "LDGDEPBAR": "ldgdepbar", "LDS": "shared", "LDSM": "shared",
         "STS": "shared", "STSM": "shared", "SHFL": "shared", "ATOMS": "shared", "HGMMA": "gmma", "QGMMA": "gmma",
         "IGMMA": "gmma",
         "WARPGROUP": "warpgroup", "LDC": "ldc", "S2R": "s2r"}


MEMORY = ("LDG", "STG", "LDS", "STS", "LDSM", "STSM", "LDGSTS", "ATOMS", "ATOMG", "REDG", "SHFL", "LD", "ST", "LDL",
          "STL")
UNPIPED = ("BRA", "EXIT", "BAR", "BSSY", "BSYNC", "WARPSYNC", "NOP", "S2R", "CS2R", "DEPBAR", "LDGDEPBAR", "CALL",
           "RET", "MOV", "LDC", "WARPGROUP", "FENCE")


#: integer multiply-adds issue to the FMA-heavy half of the FP32 pipe, not to the ALU; FP16x2 ops to both halves
#: at once. source: NVIDIA (Greg Smith) on the developer forum,
#: https://forums.developer.nvidia.com/t/separate-cuda-core-pipeline-for-fp16-and-fp32/302018/7 ("On GA10x:
#: FMAheavy pipe handles IMAD, IDP, and FP32 operations. FMAlite pipe handles FP32. FP16x2 operations are
#: dual-issued to both FMAheavy and FMAlite pipe. On GH100: same as GA10x for FMA pipes and FP16x2"); read
#: when the hwconfig's fma pipe gives pipes[].heavy_lanes, else integer multiply-adds stay on the ALU.
#: VIADD (sm_90's add with an immediate or uniform operand, where earlier ptxas wrote IMAD.IADD) goes with them.
#: source: the stall counts ptxas 13.5 (the pip wheel; 13.0 writes lds_indep the same) puts between back-to-back
#: instructions of the silicon suite's SASS (docs/sass-probe.md, session 9): VIADD->VIADD 2 (62 of 64 pairs),
#: VIADD->IMAD 2 (23/26), IMAD->VIADD 2 (51/69), as IMAD->IMAD 2; but VIADD->LOP3 1 (140/148), VIADD->IADD3 1
#: (85/107), LOP3->VIADD 1, IADD3->VIADD 1, as IMAD<->LOP3 1, while ALU->ALU pairs (LOP3, IADD3, LEA, SHF, ISETP)
#: are 2: ptxas's machine model puts VIADD on IMAD's half-rate pipe, not on the ALU. H200 (benchmarks/data/
#: sass_micro_2026-12-01.json pipe_add_lop): VIADD 1:1 with LOP3 1.17 / 1.10 cycles per instruction, LOP3 alone
#: 2.15 / 2.06 (benchmarks/sass_probe/stall_pairs.py prints the pair counts)
HEAVY = ("IMAD", "IMUL", "IDP", "VIADD")
PAIRED = ("HADD2", "HMUL2", "HFMA2")
ANY, HEAVY_ONLY, BOTH = 0, 1, 2  # which half of a split fma pipe an instruction takes (Pipe.heavy_lanes)
NEVER = 1 << 62
#: opcodes whose waits end by another core's or the TMA unit's action (sim/sass/timing_tma.py, timing_cluster.py)
ASYNC_WAITS = ("SYNCS", "UTMA", "UBLK", "UCGABAR")


def _pipe(ins: SassInstruction, split: bool = False, bar: bool = False) -> str | None:
    """The pipe class (sim.hw.PIPE_CLASSES) an instruction occupies; None for memory instructions (their
    units are the memory system's) and for control and uniform-datapath ones, which take no unit here.
    split: the fma pipe has an FMA-heavy half (Pipe.heavy_lanes), which takes the integer multiply-adds;
    bar: BAR arrives through the SM's barrier unit (the sync pipe's unit, Core.barrier_arrive_cycles)."""
    op = ins.opcode
    if op == "BAR" and bar:
        return "sync"
    if op in MEMORY:  # charged by the memory system's own units (SharedBanks ports, L2Port, DRAM banks)
        return None
    if op in UNPIPED or op.startswith("U") or op.startswith("R2U") or op == "VOTEU":
        return None
    if op in ("HMMA", "IMMA") or ROLES.get(op) == "gmma":
        return "tensor"
    if op == "MUFU":
        return "sfu"
    if op in ("DADD", "DMUL", "DFMA", "DSETP"):
        return "fp64"
    if op in HEAVY:
        return "fma" if split else "alu"
    if op.startswith("F") or op.startswith("H"):
        return "fma"
    return "alu"


def _macs(ins: SassInstruction) -> int:
    """MACs of one warp HMMA: m*n*k from its shape modifier (HMMA.16816.F32 -> 16 x 8 x 16)."""
    shape = next((m for m in ins.modifiers if m.isdigit() and len(m) in (4, 5)), "16816")
    m, n, k = int(shape[:2]), int(shape[2]), int(shape[3:])
    return m * n * k


class DrainPort:
    """A path out of a core that takes ``rate`` units a cycle in issue order (None: not limited); an
    instruction's sources are read when the port takes it. Two per core: global stores towards the L2 in
    bytes (Core.store_bytes_per_cycle, or the core's share of l2.write_bandwidth_gbps when that is less), and
    global atomics / reductions in distinct addresses, each its own read-modify-write in the L2
    (Core.atomic_addresses_per_cycle)."""

    def __init__(self, rate: float | None):
        self.rate = rate
        self.free = 0.0  # when the port takes the next unit

    def take(self, t: int, units: float) -> int:
        """The cycle the port takes an instruction issued at t that carries ``units``."""
        if not self.rate:
            return t
        start = max(float(t), self.free)
        self.free = start + units / self.rate
        return math.ceil(start)


def store_rate(hw: HwConfig, sharing_cores: int) -> float | None:
    """Bytes of global stores per cycle one core drains: Core.store_bytes_per_cycle (one core alone), or its
    share of l2.write_bandwidth_gbps over the cores the launch keeps busy when that is less."""
    rates = [hw.core.store_bytes_per_cycle] if hw.core.store_bytes_per_cycle else []
    if hw.l2.write_bandwidth_gbps:
        rates.append(hw.l2.write_bandwidth_gbps * 1e3 / hw.clock_mhz / max(1, sharing_cores))
    return min(rates) if rates else None


def full_line_rate(hw: HwConfig, sharing_cores: int) -> float | None:
    """Bytes per cycle one core drains of stores that write whole lines: core.full_line_store_bytes_per_cycle,
    or its share of l2.full_line_write_bandwidth_gbps over the busy cores when that is less (None: whole lines
    drain as partial ones)."""
    if not hw.core.full_line_store_bytes_per_cycle:
        return None
    rates = [hw.core.full_line_store_bytes_per_cycle]
    if hw.l2.full_line_write_bandwidth_gbps:
        rates.append(hw.l2.full_line_write_bandwidth_gbps * 1e3 / hw.clock_mhz / max(1, sharing_cores))
    return min(rates)


class _WarpT:
    __slots__ = ("w", "core", "sched", "ready", "sb", "groups", "pending_ldgsts", "wg_open", "wg_groups",
                 "bulk_open", "mbar_sleep")

    def __init__(self, w: Warp, core: int, sched: int):
        self.w = w
        self.core = core
        self.sched = sched
        self.ready = 0
        self.sb = [0] * 6  # cycle each scoreboard slot clears
        self.groups: list[int] = []  # completion cycle of each committed LDGDEPBAR group
        self.pending_ldgsts = 0  # latest completion among LDGSTS not yet committed
        self.wg_open = 0  # latest completion among the GMMAs since the last one with gsb0
        self.wg_groups: list[int] = []  # completion of each closed GMMA group not yet waited for
        self.bulk_open = 0  # latest completion among the bulk stores since the last UTMACMDFLUSH
        self.mbar_sleep = False  # its mbarrier wait failed: it sleeps until an mbarrier of its CTA changes


class _CoreT:
    def __init__(self, hw: HwConfig, dev: DeviceMemory):
        self.mem = CoreMemory(hw, dev)
        self.atomics = DrainPort(hw.core.atomic_addresses_per_cycle)
        self.stores = DrainPort(store_rate(hw, dev.sharing_cores or 1))
        self.full_lines = full_line_rate(hw, dev.sharing_cores or 1)  # B/cycle of whole-line stores
        self.ctas: list[tuple[Cta, int]] = []  # resident (CTA, start cycle)
        self.scheds: list[list[_WarpT]] = [[] for _ in range(hw.core.schedulers)]
        self.last = [0] * hw.core.schedulers
        self.pipe_free: dict[tuple[str, int], int] = {}  # (pipe class, unit) -> cycle it takes the next op
        self.macs_free: dict[int, int] = {}  # tensor unit -> cycle its queued GMMA MACs are done
        self.gmma_frac: dict[int, float] = {}  # scheduler -> the carried fraction of its GMMA issue holds
        self.tma = TmaEngine(hw.tma, self.mem) if hw.tma is not None else None  # the SM's TMA unit
        self.sched_start: list[int] | None = None  # cycle each scheduler issues its first instruction (cold code)
        # a scheduler that found no warp to issue: until when that holds and why (SassTiming.run; 0: look again)
        self.wake = [0] * hw.core.schedulers
        self.why = [""] * hw.core.schedulers


class SassTiming:
    def __init__(self, L: Launched, hw: HwConfig, ctas: list[tuple[int, int, int]], per_core: int,
                 max_instructions: int, ctas_total: int, trace: bool = False, cores: int | None = None,
                 machine: Machine | Replay | None = None):
        self.L, self.hw = L, hw
        self.trace: list[dict[str, Any]] | None = [] if trace else None
        self.units: dict[str, int] = {}  # unit name -> its trace track
        # the functional model: stepped warp by warp (Machine), or the records of a lock-step run ahead (Replay)
        self.M: Any = machine or Machine(L)
        self.todo = list(enumerate(ctas))
        self.per_core = per_core
        self.budget = max_instructions
        ncores = cores or hw.cores_used(len(ctas))
        n = cluster_ctas(L)
        if n > 1:
            ncores = ClusterTiming.cores(hw, n, ncores, L.file)
        # DRAM and L2 shared as by the whole grid, of which these ncores are simulated (sim/timing/dram.py)
        self.dev = DeviceMemory(hw, hw.cores_used(ctas_total), ncores)
        self.cores = [_CoreT(hw, self.dev) for _ in range(ncores)]
        self.clusters = ClusterTiming(self) if n > 1 else None  # sim/sass/timing_cluster.py
        self.spans: dict[int, int] = {}
        self.stalls = dict.fromkeys(STALL_REASONS, 0)
        # source: core.barrier_release_latency (else pipes sync latency) of the hwconfig
        self.bar_latency = hw.core.barrier_release_latency or hw.pipe_for("sync").latency
        self.bar_arrive = hw.core.barrier_arrive_cycles  # source: core.barrier_arrive_cycles
        self.read_latency = hw.registers.latency + 1  # source: registers.latency (+ the issue cycle)
        self.lsu_latency = hw.pipe_for("lsu").latency
        self.t = 0
        self.ctas_total = ctas_total
        self.bulk = BulkTiming(self)  # TMA copies, their landings, mbarrier sleeps (sim/sass/timing_tma.py)
        self.const_ops: dict[int, tuple[tuple[int, int], ...]] = {}  # pc -> its constant operands (_consts)
        self.imc = bool(hw.constant is not None and hw.constant.imm_line)  # immediate-constant cache modelled
        fma = hw.pipe_for("fma")
        self.split = bool(fma.heavy_lanes)  # the fma pipe is an FMA-heavy and an FMA-lite half (source: HEAVY)
        self.halves = (fma.heavy_lanes or fma.lanes, fma.lanes - (fma.heavy_lanes or 0))  # lanes: heavy, lite
        self.pipes: dict[int, tuple[str | None, int]] = {}  # id(instruction) -> (pipe class, ANY/HEAVY_ONLY/BOTH)
        self.info: list[tuple | None] = [None] * len(L.code)  # pc -> _info
        self.iss: list[tuple | None] = [None] * len(L.code)  # pc -> _iss
        self.occ: dict[int, tuple] = {}  # id(instruction) -> _occ
        self.pipe_by: dict[str, Any] = {}  # pipe class -> hw.pipe_for(class)
        self.until = 0  # set by _eligible
        # a scheduler with no warp to issue keeps its answer until a cycle _eligible named, unless an issue or
        # release on its core changes a warp's state (run); not with TMA / mbarrier / cluster waits, which other
        # cores and landings change
        self.cached = n <= 1 and not any(i.opcode.startswith(ASYNC_WAITS) for i in L.code)
        self.shared_units = any(p.count < hw.core.schedulers for p in hw.pipes)  # an issue may busy another's unit
        self.lockstep = "off"  # "" when the functional model ran ahead in lock-step (run_ahead), else why not

    def _start(self, c: _CoreT, most: int | None = None) -> None:
        if self.clusters is not None:  # whole clusters on groups of cores (sim/sass/timing_cluster.py)
            self.clusters.start(most)
            return
        while self.todo and len(c.ctas) < (self.per_core if most is None else most):
            n, ctaid = self.todo.pop(0)
            self.place(c, self.M.cta(n, ctaid))

    def place(self, c: _CoreT, cta: Cta) -> None:
        """Start ``cta`` on core ``c`` now: its warps join the core's schedulers."""
        c.ctas.append((cta, self.t))
        self._invalidate(c)
        if c.sched_start is None:  # the launch's code reaches the sub-partitions one after another
            stagger = self.hw.core.cold_code_stagger or 0
            c.sched_start = [self.t + i * stagger for i in range(len(c.scheds))]
        for w in cta.warps:
            s = w.wid % len(c.scheds)
            wt = _WarpT(w, self.cores.index(c), s)
            wt.ready = c.sched_start[s]
            c.scheds[s].append(wt)

    def _eligible(self, wt: _WarpT) -> str:
        """'' when the warp can issue now, else the stall reason; self.until: the cycle until which that reason
        holds while nothing issues on the warp's core (NEVER for a wait only an issue or a release ends)."""
        w = wt.w
        if w.done:
            self.until = NEVER
            return "done"
        if wt.mbar_sleep:
            self.until = NEVER
            return "mbarrier"
        gs = w.groups
        g = gs[0] if len(gs) == 1 and gs[0].wait == "" else self.M.runnable(w)
        if g is None:
            self.until = NEVER
            return "barrier"
        t = self.t
        if wt.ready > t:
            self.until = wt.ready
            return "pipe_busy"
        info = self.info[g.pc]
        if info is None:
            info = self._info(g.pc)
        waits, consts, p, half, kind, keep = info
        if waits:
            sb = wt.sb
            for s in waits:
                if sb[s] > t:
                    self.until = max(sb[x] for x in waits)
                    return "scoreboard"
        if consts:  # an immediate operand's line not in the immediate-constant cache: stall here (imc_miss)
            at = self.cores[wt.core].mem.const.imm_read(t, consts)  # type: ignore[union-attr]
            if at > t:
                wt.ready = at
                self.until = t + 1  # then "pipe_busy" until wt.ready
                return "memory"
        if p is not None:
            free = self._free(self.cores[wt.core], wt.sched, p, half)
            if free > t:
                self.until = free
                return "pipe_busy"
        if kind:
            groups = wt.groups if kind == 1 else wt.wg_groups
            late = max(groups[:max(0, len(groups) - keep)], default=0)
            if late > t:
                self.until = late
                return "memory" if kind == 1 else "scoreboard"
        return ""

    def _info(self, pc: int) -> tuple:
        """What _eligible reads of the instruction at pc, once: its wait mask, immediate-constant operands (with
        the immediate-constant cache modelled; not for LDC), pipe and half, DEPBAR kind (1: LDGDEPBAR groups, 2:
        GMMA groups) and the groups it leaves in flight."""
        ins = self.L.code[pc]
        role = ROLES.get(ins.opcode)
        consts = self._consts(pc, ins) if self.imc and role != "ldc" else ()
        p, half = self._pipe_of(ins)
        kind = keep = 0
        if role == "depbar":
            m = _DEPBAR.search(ins.text)
            kind, keep = 1, int(m.group(2), 0) if m else 0
        elif role == "warpgroup" and ins.modifiers[:1] == ("DEPBAR",):
            kind, keep = 2, int(ins.operands[-1].value or 0) if ins.operands else 0
        got = self.info[pc] = (tuple(ins.control.waits), consts, p, half, kind, keep)
        return got

    def _issue(self, c: _CoreT, s: int, wt: _WarpT) -> bool:
        """Step the warp's next instruction and time it; True when it was a control instruction (BAR, EXIT,
        branches, convergence barriers), the only ones that change what _release and _retire read."""
        t, w = self.t, wt.w
        g = self.M.runnable(w)
        assert g is not None
        pc = g.pc
        ins = self.L.code[pc]
        iss = self.iss[pc]
        if iss is None:
            iss = self._iss(pc)
        role, stall, wb, rb, fixed, shares = iss
        self.L.clock = t
        epoch = self.L.mbar_epoch
        self.M.step(w, g)
        rec = w.rec
        wt.ready = t + stall
        taken, port = t, None  # when the sources are read: at issue, or when a drain port takes it
        if not self.cached:  # TMA copies, mbarrier waits and bulk groups (none in a kernel without them)
            if rec is not None and rec.bulk:  # the TMA unit reads the operands when it accepts the copy
                taken, port = self.bulk.issue(c, wt, ins, rec.bulk), "tma"
            self.bulk.after_step(c, wt, ins, epoch)
        access = rec if rec is not None and rec.space and rec.addrs is not None else None  # a memory access
        if access is not None and access.space == "global":
            assert access.addrs is not None
            if access.direction == "atomic":
                taken, port = c.atomics.take(t, len(np.unique(access.addrs))), "atomic"
            elif access.direction == "write":
                taken, port = c.stores.take(t, self._store_units(c, access)), "store"
        if role == "gmma":
            done = self._gmma(c, s, wt, ins)
            self._gmma_issue(c, s)
        elif access is not None and lanes_any(access.mask):
            done = taken + self._latency(c, taken, ins, access)
        else:
            done = taken + fixed
        if role == "ldc" and c.mem.const is not None:  # LDC: the indexed constant cache (docs/const-cold.md)
            done = max(t + c.mem.const.ldc_latency,
                       max((c.mem.const.read(t, b, [o]) for b, o in self._consts(pc, ins)), default=0))
        self._occupy(c, s, ins)
        if role is not None:
            if role == "warpgroup" and ins.modifiers[:1] == ("DEPBAR",):  # the groups it waited for are done
                wt.wg_groups = [d for d in wt.wg_groups if d > t]
            elif role == "ldgsts":
                wt.pending_ldgsts = max(wt.pending_ldgsts, done)
            elif role == "ldgdepbar":
                wt.groups.append(wt.pending_ldgsts)
                wt.pending_ldgsts = 0
        if self.trace is not None:
            self._trace(wt, ins, port or self._pipe_of(ins)[0] or role or "issue", taken, done)
        sb = wt.sb
        if wb is not None and done > sb[wb]:
            sb[wb] = done
        if rb is not None and taken + self.read_latency > sb[rb]:
            sb[rb] = taken + self.read_latency
        if self.M.count > self.budget:
            raise ExecutionError(f"more than {self.budget} warp instructions: an endless loop? "
                                 "raise the limit with --max-instructions", self.L.file)
        if shares:  # a unit other schedulers share
            self._invalidate(c)
        d = self.M.decoded[pc]
        return d is not None and d.ctl

    def _iss(self, pc: int) -> tuple:
        """What _issue reads of the instruction at pc, once: its role, stall cycles (at least 1), write and read
        barrier slots, the latency of a result that is not a memory access's (shared with all lanes off:
        shared.latency; S2R: core.s2r_latency; else its pipe's, the alu's without one), and whether its pipe unit
        is shared between schedulers."""
        ins = self.L.code[pc]
        role = ROLES.get(ins.opcode)
        if role == "gmma" and self.hw.wgmma is None:
            raise ExecutionError(f"SASS {ins.kernel}+0x{ins.pc:04x} '{ins.text}': {self.hw.name} has no 'wgmma:' "
                                 "section to time warpgroup MMA by (docs/hwconfig.md)", self.L.file, ins.ptx_line)
        ctl = ins.control
        p = self._pipe_of(ins)[0]
        if role == "shared":
            fixed = self.hw.shared.latency  # source: shared.latency (lanes all inactive: no bank work)
        elif role == "s2r" and self.hw.core.s2r_latency:
            fixed = self.hw.core.s2r_latency  # source: core.s2r_latency
        else:
            fixed = self.pipe("alu" if p is None or p == "sync" else p).latency  # (BAR: no result)
        shares = p is not None and self.pipe(p).count < self.hw.core.schedulers
        got = self.iss[pc] = (role, max(1, ctl.stall), ctl.write_barrier, ctl.read_barrier, fixed, shares)
        return got

    def _trace(self, wt: _WarpT, ins: SassInstruction, unit: str, taken: int, done: int) -> None:
        """Chrome trace events as PTX mode writes them: the instruction on its warp's track (issue to result),
        and one cycle on its unit's track (from when the unit takes it)."""
        assert self.trace is not None
        t, w = self.t, wt.w
        gid = w.cta.index * len(w.cta.warps) + w.wid
        self.trace.append({"name": ins.text, "ph": "X", "ts": t, "dur": max(1, done - t), "pid": wt.core,
                           "tid": gid, "args": {"line": ins.ptx_line, "pc": f"0x{ins.pc:04x}"}})
        tid = 100000 + self.units.setdefault(unit, len(self.units))
        self.trace.append({"name": ins.text, "ph": "X", "ts": taken, "dur": 1, "pid": wt.core, "tid": tid})

    def trace_events(self) -> list[dict[str, Any]] | None:
        """The trace with its track names first (None when not traced)."""
        if self.trace is None:
            return None
        meta: list[dict[str, Any]] = [{"name": "process_name", "ph": "M", "pid": i, "args": {"name": f"core {i}"}}
                                      for i in range(len(self.cores))]
        meta += [{"name": "thread_name", "ph": "M", "pid": i, "tid": 100000 + u, "args": {"name": f"unit {n}"}}
                 for i in range(len(self.cores)) for n, u in self.units.items()]
        return meta + self.trace

    def _latency(self, c: _CoreT, t: int, ins: SassInstruction, rec: SassExecuted | None) -> int:
        """Cycles from t (the issue, or when the atomic port took it) to the result (what a write barrier
        waits for)."""
        if rec is not None and rec.space and rec.addrs is not None and lanes_any(rec.mask):
            cache = "cg" if "STRONG" in ins.modifiers or "BYPASS" in ins.modifiers else ""
            ready, _ = c.mem.access(t, rec.space, rec.addrs, rec.size, rec.direction, cache)  # type: ignore[arg-type]
            return ready - t
        if ROLES.get(ins.opcode) == "shared":
            return self.hw.shared.latency  # source: shared.latency (lanes all inactive: no bank work)
        if ROLES.get(ins.opcode) == "s2r" and self.hw.core.s2r_latency:
            return self.hw.core.s2r_latency  # source: core.s2r_latency
        p = self._pipe_of(ins)[0]
        return self.pipe("alu" if p is None or p == "sync" else p).latency  # (BAR: no result)

    def _store_units(self, c: _CoreT, rec: SassExecuted) -> float:
        """What a global store costs the core's store port, in bytes at its rate: its bytes, or, when more,
        its distinct lines at core.store_lines_per_cycle (docs/micro-store.md: a warp store to 8 lines of
        16 B drains at both limits at once, 4 B to each of 32 lines at the line limit). Lines the store writes
        whole drain at core.full_line_store_bytes_per_cycle instead (benchmarks/sass_probe st_f32 / st_v4:
        ~32 B/cycle where 16-32 B per line drain at 8)."""
        assert rec.addrs is not None
        nbytes = float(len(rec.addrs) * rec.size)
        lpc = self.hw.core.store_lines_per_cycle
        if not c.stores.rate or (not lpc and not c.full_lines):
            return nbytes
        a = rec.addrs.astype(np.int64)
        line = self.hw.l2.line
        nlines = len(np.unique(a // line))
        full = 0
        if c.full_lines and rec.size * len(a) >= line:  # lines whose every byte this store writes
            byte = np.unique((a[:, None] + np.arange(rec.size, dtype=np.int64)[None, :]).ravel())
            _, per_line = np.unique(byte // line, return_counts=True)
            full = int(np.count_nonzero(per_line == line))
        part = nlines - full
        part_bytes = nbytes - full * line
        cycles = max(part_bytes / c.stores.rate, part / lpc if lpc else 0.0)
        if full:
            assert c.full_lines is not None
            cycles += full * line / c.full_lines
        return cycles * c.stores.rate

    def _consts(self, pc: int, ins: SassInstruction) -> tuple[tuple[int, int], ...]:
        """(bank, offset) of the instruction's c[bank][offset] operands (a register-indexed one by its
        immediate offset: the index is not known before issue)."""
        got = self.const_ops.get(pc)
        if got is None:
            got = self.const_ops[pc] = tuple((int(op.bank or 0), int(op.value or 0))
                                             for op in ins.operands if op.kind == "const")
        return got

    def _gmma_issue(self, c: _CoreT, s: int) -> None:
        """A GMMA's issue as the H200 spaces it (wgmma.issue_shared: two warpgroups' wgmmas 18.35 cycles apart
        on the SM): scheduler `s` issues nothing else, from any warp, for issue_shared cycles. A lone
        warpgroup's 23.7-cycle spacing (wgmma.issue_lone) follows from it plus the loop's own instructions
        (benchmarks/micro_wgmma/sass_compare.py), so it is not a second rule. The fraction is carried per
        scheduler, so the spacing averages the measured figure."""
        wg = self.hw.wgmma
        assert wg is not None
        if not wg.issue_shared:
            return
        hold_f = c.gmma_frac.get(s, 0.0) + wg.issue_shared
        hold = int(hold_f)
        c.gmma_frac[s] = hold_f - hold
        t = self.t
        for other in c.scheds[s]:
            if other.ready < t + hold:
                other.ready = t + hold

    def _gmma(self, c: _CoreT, s: int, wt: _WarpT, ins: SassInstruction) -> int:
        """A warp's share of a warpgroup MMA, as PTX mode times wgmma.mma_async (sim/timing/static.py):
        its 16 x N x K MACs queue on its scheduler's tensor unit at wgmma.<type>_macs per cycle after
        wgmma.issue cycles, and its accumulators are complete wgmma.latency cycles after them. A GMMA with
        gsb0 closes the warp's open group, which WARPGROUP.DEPBAR.LE gsb0, N waits for."""
        wg = self.hw.wgmma
        assert wg is not None
        macs, atype = gmma_work(ins.modifiers)
        unit = s % self.hw.pipe_for("tensor").count
        start = max(self.t + wg.issue, c.macs_free.get(unit, 0))
        c.macs_free[unit] = start + -(-macs // wg.macs(atype))
        done = c.macs_free[unit] + wg.latency
        wt.wg_open = max(wt.wg_open, done)
        if gmma_group_end(ins.operands):
            wt.wg_groups.append(wt.wg_open)
            wt.wg_open = 0
        return done

    def _occupy(self, c: _CoreT, s: int, ins: SassInstruction) -> None:
        """The pipe unit takes its next warp instruction after warp_size / lanes cycles (HMMA: its MACs /
        lanes; a GMMA: wgmma.issue cycles, its MACs run from the unit's queue), times the pipe's interval;
        source: pipes[].lanes, .interval, .count and wgmma.issue of the hwconfig (per instruction: _occ)."""
        occ = self.occ.get(id(ins))
        if occ is None:
            occ = self.occ[id(ins)] = self._occ(ins)
        if not occ:
            return
        p, count, cycles, half, both, lite_cycles = occ
        key = (p, s % count)
        free, t = c.pipe_free, self.t
        if half < 0:  # one unit
            free[key] = max(t, free.get(key, 0)) + cycles
            return
        lite = ("fma.lite", key[1])  # the split fma pipe: the FMA-heavy half is key, the FMA-lite half lite
        if half == BOTH:
            free[key] = free[lite] = max(t, free.get(key, 0), free.get(lite, 0)) + both
        elif half == ANY and free.get(lite, 0) <= max(t, free.get(key, 0)):
            free[lite] = max(t, free.get(lite, 0)) + lite_cycles  # FP32 prefers the lite half
        else:
            free[key] = max(t, free.get(key, 0)) + cycles

    def _occ(self, ins: SassInstruction) -> tuple:
        """(pipe class, unit count, cycles it holds the unit (the heavy half's on a split fma pipe), half (-1: not a
        split fma pipe), cycles both halves, cycles the lite half), or () when it takes no unit."""
        p, half = self._pipe_of(ins)
        if p is None:
            return ()
        pipe = self.pipe(p)
        if ROLES.get(ins.opcode) == "gmma" and self.hw.wgmma is not None:
            return (p, pipe.count, self.hw.wgmma.issue * pipe.interval, -1, 0, 0)
        if p == "sync":  # one warp's arrival at the SM's barrier unit (core.barrier_arrive_cycles)
            return (p, pipe.count, self.bar_arrive or 1, -1, 0, 0)
        work = _macs(ins) if p == "tensor" else self.hw.warp_size
        if p == "fma" and self.split:
            return (p, pipe.count, max(1, -(-work // self.halves[0])) * pipe.interval, half,
                    max(1, -(-work // pipe.lanes)) * pipe.interval, max(1, -(-work // self.halves[1])) * pipe.interval)
        return (p, pipe.count, max(1, -(-work // pipe.lanes)) * pipe.interval, -1, 0, 0)

    def pipe(self, cls: str) -> Any:
        """hw.pipe_for(cls), remembered."""
        got = self.pipe_by.get(cls)
        if got is None:
            got = self.pipe_by[cls] = self.hw.pipe_for(cls)
        return got

    def _pipe_of(self, ins: SassInstruction) -> tuple[str | None, int]:
        """(pipe class, ANY / HEAVY_ONLY / BOTH: the halves of a split fma pipe it may take), per instruction."""
        got = self.pipes.get(id(ins))
        if got is None:
            p = _pipe(ins, self.split, bool(self.bar_arrive))
            half = ANY
            if p == "fma" and self.split:
                half = HEAVY_ONLY if ins.opcode in HEAVY else BOTH if ins.opcode in PAIRED else ANY
            got = self.pipes[id(ins)] = (p, half)
        return got

    def _free(self, c: _CoreT, s: int, p: str, half: int) -> int:
        """The cycle a unit of pipe class p on scheduler s's side can take the instruction (split fma pipe: the
        heavy half, either half, or both)."""
        unit = s % self.pipe(p).count
        busy = c.pipe_free.get((p, unit), 0)
        if p != "fma" or not self.split or half == HEAVY_ONLY:
            return busy
        lite = c.pipe_free.get(("fma.lite", unit), 0)
        return max(busy, lite) if half == BOTH else min(busy, lite)

    @staticmethod
    def _invalidate(c: _CoreT) -> None:
        """Every scheduler of the core looks at its warps again next time (an issue or release changed them)."""
        c.wake[:] = [0] * len(c.scheds)

    def _release_bars(self, c: _CoreT) -> None:
        for cta, _ in c.ctas:
            if self.M.release(cta):
                self._invalidate(c)
                for sched in c.scheds:
                    for wt in sched:
                        if wt.w.cta is cta:
                            wt.ready = max(wt.ready, self.t + self.bar_latency)

    def _retire(self, c: _CoreT) -> None:
        for cta, start in list(c.ctas):
            if all(w.done for w in cta.warps):
                self.spans[cta.index] = self.t - start
                c.ctas.remove((cta, start))
                self._invalidate(c)
                for i, sched in enumerate(c.scheds):
                    c.scheds[i] = [wt for wt in sched if wt.w.cta is not cta]
        self._start(c)

    def run(self) -> None:
        for k in range(1, self.per_core + 1):  # breadth-first: one CTA per core, then a second, ...
            for c in self.cores:
                self._start(c, k)
        stalls = self.stalls
        while any(c.ctas for c in self.cores):
            issued = False
            idle: list[str] = []  # why each scheduler without an issue this cycle had none
            t = self.t
            for c in self.cores:
                here = False  # an issue on this core: only then can a barrier complete or a CTA end
                flow = False  # a control instruction issued here (only those arrive at barriers or exit)
                wake, why = c.wake, c.why
                for s, sched in enumerate(c.scheds):
                    if not sched:
                        continue
                    if wake[s] > t:  # no warp here can issue yet, for the reason found then (cached)
                        idle.append(why[s])
                        continue
                    n = len(sched)
                    k = c.last[s] % n
                    reason = "no_eligible"
                    soon = NEVER
                    for i in range(n):
                        j = (k + i) % n
                        r = self._eligible(sched[j])
                        if r == "":
                            prev = sched[j]
                            flow = self._issue(c, s, prev) or flow
                            ctl_yield = self.L.code[prev.w.rec.index].control.yields if prev.w.rec else False
                            c.last[s] = j + 1 if ctl_yield else j
                            here = True
                            break
                        if r != "done":
                            reason = r
                        if self.until < soon:
                            soon = self.until
                    else:
                        idle.append(reason)
                        if self.cached:
                            wake[s], why[s] = soon, reason
                if here:  # (the functional state _release and _retire read changes only by an issue, and with
                    issued = True  # the cached scan only by a control instruction's)
                    if flow or not self.cached:
                        self._release_bars(c)
                        self._retire(c)
            if self.clusters is not None:  # UCGABAR waits whose cluster arrived (sim/sass/timing_cluster.py)
                self.clusters.release()
            if not issued:
                self.bulk.check_stuck()
            dt = 1 if issued else self._skip()
            for reason in dict.fromkeys(idle):  # (first-seen order, as one by one)
                stalls[reason] = stalls.get(reason, 0) + idle.count(reason) * dt
            self.t += dt
            self.bulk.land(self.t)

    def _skip(self) -> int:
        """Cycles to the next time a warp's stall count, awaited scoreboard slots, DEPBAR groups or pipe unit run
        out (at least 1; at most 64, as barriers are not in this bound)."""
        t = self.t
        nxt = min(t + 64, self.bulk.next_landing())
        info_of, runnable = self.info, self.M.runnable
        for c in self.cores:
            for sched in c.scheds:
                for wt in sched:
                    w = wt.w
                    if w.done or wt.mbar_sleep:
                        continue
                    gs = w.groups
                    g = gs[0] if len(gs) == 1 and gs[0].wait == "" else runnable(w)
                    if g is None:
                        continue
                    info = info_of[g.pc]
                    if info is None:
                        info = self._info(g.pc)
                    waits, _, p, half, kind, keep = info
                    cand = wt.ready
                    if p is not None:
                        busy = self._free(c, wt.sched, p, half)
                        if busy > cand:
                            cand = busy
                    sb = wt.sb
                    for s in waits:
                        if sb[s] > cand:
                            cand = sb[s]
                    if kind:  # DEPBAR.LE SB0, N / WARPGROUP.DEPBAR.LE gsb0, N: the groups it waits for
                        groups = wt.groups if kind == 1 else wt.wg_groups
                        cand = max(cand, max(groups[:max(0, len(groups) - keep)], default=0))
                    if t < cand < nxt:
                        nxt = cand
        return max(1, nxt - t)


def sampled(hw: HwConfig, ctas: list, sample: int | None, per_core: int) -> tuple[list, int | None]:
    """The CTAs a sampled run simulates: those the whole grid deals to its first cores (CTA i to core
    i % cores_used, as the H200 spreads a grid: docs/placement.md), enough cores for `sample` CTAs at
    `per_core` resident each, so that a sampled core shares its L2, crossbar and DRAM paths with as many
    CTAs as in the full launch (all CTAs when `sample` is None or covers the grid); and that many cores
    (None: as many as the CTAs spread over)."""
    if not sample or sample >= len(ctas):
        return ctas, None
    cores = hw.cores_used(len(ctas))
    k = max(1, min(cores, -(-sample // max(1, per_core))))
    return [c for i, c in enumerate(ctas) if i % cores < k], k


def run_ahead(L: Launched, ctas: list, budget: int) -> tuple[Replay | None, str]:
    """The launch's CTAs (``ctas``, in the order SassTiming numbers them) to run ahead in lock-step
    (sim/sass/lockstep.py), batch by batch as the cycle loop places them: (the replay for the cycle loop, "") or
    (None, why not). $WORKBENCH_SASS_LOCKSTEP=0 turns it off (the cycle loop then steps warp by warp, as it
    does for any launch the run ahead refuses; results are the same either way)."""
    import os

    if os.environ.get("WORKBENCH_SASS_LOCKSTEP", "1") == "0":
        return None, "off"
    why = refusal(L)
    if why is not None or any(i.opcode.startswith(ASYNC_WAITS) for i in L.code):  # (SassTiming.cached's test too)
        return None, "off"
    R = RunAhead(L, budget)
    R.start(list(enumerate(ctas)))
    return Replay(L, R), ""


def simulate_sass(ptx_text: str, launch: Launch, hw: HwConfig, file: str = "<ptx>",
                  max_instructions: int = DEFAULT_MAX_INSTRUCTIONS, sample_ctas: int | None = None, *,
                  warm_l2: bool = False, trace: bool = False) -> SimResult:
    """Time ``launch`` on the SASS ptxas writes for ``hw.arch``; outputs equal run_sass_functional's.
    sample_ctas: run only the CTAs the grid deals to its first ceil(N / resident CTAs per core) cores (outputs are
    then partial; sampled()); warm_l2: the buffer
    arguments start in the L2 as after their host-to-device copies (sim.timing.memory.warm_l2, as PTX mode);
    trace: keep Chrome trace events (SimResult.trace, sim.timing.write_trace)."""
    from sim.ptx.parser import parse_ptx

    if not hw.arch:
        raise ExecutionError(f"SASS timing needs a hardware model with an arch: key; {hw.name} has none", file)
    prog = parse_ptx(ptx_text, file)
    kernels = disassemble(ptx_text, hw.arch, file)
    if launch.kernel not in kernels:
        raise ExecutionError(f"ptxas wrote no SASS for kernel {launch.kernel}", file)
    res = resources(ptx_text, hw.arch, file).get(launch.kernel)
    with np.errstate(all="ignore"):
        P = prepare(prog, launch)
        smem = P.shared_size + (res.smem_static if res else 0)
        L = launched(P, prog, launch, kernels[launch.kernel], res, file)
        L.defer_tx = hw.tma is not None  # TMA loads complete their mbarrier transactions when timed
        bx, by, bz = launch.block
        occ = occupancy(hw, bx * by * bz, res.regs if res else hw.registers.per_thread, smem)
        occ["regs_source"] = "ptxas" if res else "hw maximum"
        if cluster_ctas(L) > 1 and sample_ctas is not None:  # as PTX mode (sim/timing/engine.py)
            raise UsageError("--sample-ctas does not sample cluster launches: run the whole grid", file)
        run, cores = sampled(hw, list(P.ctas), sample_ctas, occ["ctas_per_core"])
        machine, why = run_ahead(L, run, max_instructions)
        T = SassTiming(L, hw, run, occ["ctas_per_core"], max_instructions, len(P.ctas), trace, cores, machine)
        T.lockstep = why
        if warm_l2:
            memory.warm_l2(T.dev, hw, P.buffers, launch)
        try:
            T.run()
            if machine is not None:
                machine.ahead.finish()
        except Exception as e:  # (a conflict, a fault or anything else: stepping gives the answer, or the error)
            if machine is None:
                raise
            machine.ahead.close()
            P = prepare(prog, launch)  # the run ahead changed memory: start again from the launch
            L = launched(P, prog, launch, kernels[launch.kernel], res, file)
            L.defer_tx = hw.tma is not None
            T = SassTiming(L, hw, run, occ["ctas_per_core"], max_instructions, len(P.ctas), trace, cores)
            T.lockstep = f"{type(e).__name__}: {e}"
            if warm_l2:
                memory.warm_l2(T.dev, hw, P.buffers, launch)
            T.run()
        outputs = read_outputs(P, launch)
    return _result(T, hw, launch, occ, outputs)


def _result(T: SassTiming, hw: HwConfig, launch: Launch, occ: dict[str, Any],
            outputs: dict[int, np.ndarray]) -> SimResult:
    cycles = max(1, T.t)
    n = T.M.count
    return SimResult(
        cycles=cycles, cycles_per_cta=[T.spans[i] for i in sorted(T.spans)], warp_instructions=n,
        ipc=n / cycles, utilization={}, busy={}, stalls=T.stalls, stalls_by_line={}, bank_conflicts_by_line={},
        cache={"l1_hit_rate": None, "l2_hit_rate": None}, dram_bytes=0, flushes=[], occupancy=occ,
        outputs=outputs, hw=hw.name, kernel=launch.kernel, ctas_simulated=len(T.spans), ctas_total=T.ctas_total,
        trace=T.trace_events())
