"""`simulate(prog, launch, hw)`: the whole timing simulation of one launch."""

from __future__ import annotations

import contextlib
import gc
from collections import defaultdict
from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import simpy

from sim.errors import ExecutionError, UsageError
from sim.functional.replay import Abandon, Replay, replay_for
from sim.functional.runner import (
    DEFAULT_MAX_INSTRUCTIONS,
    HOT_SAMPLE,
    Prepared,
    budget_error,
    check_budget_covers,
    cluster_size,
    prepare,
    read_outputs,
)
from sim.hw import HwConfig
from sim.launch import Launch
from sim.ptx.ir import Program
from sim.result import STALL_REASONS, SimResult
from sim.timing.cluster import cluster_cores
from sim.timing.cluster import cta_done as cluster_cta_done
from sim.timing.cluster import first_wave as cluster_first_wave
from sim.timing.core import Core, CtaT, run_events
from sim.timing.memory import DeviceMemory, warm_l2
from sim.timing.regalloc import registers_for_occupancy
from sim.timing.static import St, register_count, statics
from sim.timing.warp import Budget

PROGRESS_EVERY = 2_000  # warp instructions between progress reports (about 0.1 s of the timing model)
# warp instructions between folds of the units' busy_at dicts into arrays (Simulation.fold): a long run's
# memory for the utilization series drops from about 100 to 12 bytes per issue cycle and unit
FOLD_EVERY = 250_000

if TYPE_CHECKING:
    from sim.progress import Progress
    from sim.timing.warp import WarpT


class Stats:
    def __init__(self, trace: bool):
        self.stalls: dict[str, int] = defaultdict(int)
        self.by_line: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.conflicts: dict[int, int] = defaultdict(int)
        self.flushes: dict[int, list[Any]] = {}  # line -> [count, text, cycles]
        self.trace: list[dict[str, Any]] | None = [] if trace else None

    def conflict(self, line: int, extra: int, cycles: int) -> None:
        self.conflicts[line] += extra
        self.stalls["bank_conflict"] += cycles
        self.by_line[line]["bank_conflict"] += cycles

    def flush(self, st: St, cycles: int) -> None:
        """A mispredicted branch (its cycles show up as the scheduler's "flush" stall)."""
        f = self.flushes.setdefault(st.line, [0, st.text, 0])
        f[0] += 1
        f[2] += cycles

    def issued(self, wt: WarpT, st: St, t: int, done: int) -> None:
        if self.trace is not None:
            self.trace.append({"name": st.text, "ph": "X", "ts": t, "dur": max(1, done - t),
                               "pid": wt.core.index, "tid": wt.gid, "args": {"line": st.line}})
            self.trace.append({"name": st.text, "ph": "X", "ts": t, "dur": 1, "pid": wt.core.index,
                               "tid": 100000 + _UNIT_TID.setdefault(st.pipe, len(_UNIT_TID))})


_UNIT_TID: dict[str, int] = {}


class Simulation:
    def __init__(self, prog: Program, launch: Launch, hw: HwConfig, trace: bool, max_instructions: int,
                 sample_ctas: int | None, lookahead: int | None, regs: int | None, warm_l2: bool = False,
                 prepared: Prepared | None = None, deal: list[list[int]] | None = None):
        self.hw = hw
        self.env = simpy.Environment()
        if sample_ctas is None and deal is None:
            check_budget_covers(launch, max_instructions, prog.file)
        self.P = prepared if prepared is not None else prepare(prog, launch)
        self.replay: Replay | None = None  # the warps' records from a lock-step run (sim/functional/replay.py)
        k = self.P.L.kernel
        self.kernel = k
        self.statics = statics(k.body, hw, self.P.L.file)
        self.nregs = register_count(self.statics)
        self.indep_memo: dict[tuple[int, ...], tuple[int, ...]] = {}  # window signature -> independent entries
        self.bar_ids: dict[int, int] = {}  # pc -> a replayed barrier's id there (WarpT.fill)
        self.lookahead = max(1, lookahead if lookahead is not None else hw.core.lookahead)
        self.stats = Stats(trace)
        self.budget = max_instructions
        self.next_fold = FOLD_EVERY
        self.counter = Budget(min(max_instructions, FOLD_EVERY))  # count and max_instructions (the warps')
        self.folded: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}  # id(unit) -> (cycles, occupancy)
        self.progress: Progress | None = None
        self.hot_pcs: list[int] = []  # instructions sampled after the budget ran out (budget_error)
        self._wid = 0
        nthreads = launch.block[0] * launch.block[1] * launch.block[2]
        src = "given"
        if regs is None:
            regs, src = registers_for_occupancy(prog, k, hw)
        self.occupancy = occupancy(hw, nthreads, regs, self.P.shared_size)
        self.occupancy["regs_source"] = src
        self.ctas_per_core = self.occupancy["ctas_per_core"]
        ctas = list(self.P.ctas)
        self.ctas_total = len(ctas)
        # the first wave deals CTA i to core i % cores (HwConfig.cores_used), so a sample takes every
        # CTA of its first k cores, as the whole grid deals them
        spread = hw.cores_used(self.ctas_total)
        ncores = spread
        if sample_ctas is not None:
            per_core = min(self.ctas_per_core, -(-self.ctas_total // spread))
            ncores = max(1, min(spread, -(-max(1, sample_ctas) // per_core)))
            ctas = [c for i, c in enumerate(ctas) if i % spread < ncores]
        self.cluster_n = cluster_size(self.P)
        if self.cluster_n > 1:  # whole clusters on groups of cores (sim/timing/cluster.py)
            if sample_ctas is not None or deal is not None:
                raise UsageError("--sample-ctas does not sample cluster launches: run the whole grid",
                                 self.P.L.file)
            ncores = cluster_cores(self, self.cluster_n, ncores)
        self.deal = deal
        if deal is not None:  # given CTAs (launch indices) per core, all resident at once
            ncores, ctas = len(deal), []
        self.pending = list(enumerate(ctas))
        self.launching = 0  # CTAs popped from `pending` whose launch is scheduled but not done
        # cores the whole launch keeps busy at once share the DRAM bandwidth (also when sampling)
        self.devmem = DeviceMemory(hw, spread, max(1, ncores))  # ncores of them simulated (sim/timing/dram.py)
        if warm_l2:
            self.warm_l2(launch)
        self.cta_spans: dict[int, int] = {}
        self.end = 0
        self.cores = [Core(self, i) for i in range(max(1, ncores))]

    def warm_l2(self, launch: Launch) -> None:
        """The buffer arguments start in the L2 (sim.timing.memory.warm_l2)."""
        warm_l2(self.devmem, self.hw, self.P.buffers, launch)

    @property
    def count(self) -> int:
        """Warp instructions fetched so far."""
        return self.counter.count

    @property
    def max_instructions(self) -> int:
        """The count at which the warps call count_instruction_overflow."""
        return self.counter.limit

    @max_instructions.setter
    def max_instructions(self, n: int) -> None:
        self.counter.limit = n

    def show_progress(self, progress: Progress) -> None:
        """Report to `progress` every PROGRESS_EVERY warp instructions: the warps' one budget comparison
        stops at the next report too, so the display adds nothing to their hot path."""
        self.progress = progress
        self.max_instructions = min(self.budget, self.next_fold, self.count + PROGRESS_EVERY)

    def count_instruction_overflow(self, pc: int) -> None:
        """Called by the warps when `count` passed `max_instructions` at instruction `pc`: the budget,
        the next fold of the busy_at dicts, or the next progress report when one is shown."""
        if self.count > self.budget:
            self.hot_pcs.append(pc)  # every warp instruction calls back from here on (max_instructions = count)
            if len(self.hot_pcs) >= HOT_SAMPLE:
                raise budget_error(self.kernel, self.hot_pcs, self.budget)
            self.max_instructions = self.count
            return
        if self.count >= self.next_fold:
            self.fold()
            self.next_fold = self.count + FOLD_EVERY
        nxt = self.next_fold
        if self.progress is not None:
            self.progress.update(len(self.cta_spans), self.count, int(self.env.now))
            nxt = min(nxt, self.count + PROGRESS_EVERY)
        self.max_instructions = min(self.budget, nxt)

    def fold(self) -> None:
        """Move every unit's busy_at (issue cycle -> occupancy, PipeUnit) into arrays: the same sums,
        in an eighth of the memory (_result adds both)."""
        for c in self.cores:
            for us in c.units.values():
                for u in us:
                    bt = u.busy_at
                    if not bt:
                        continue
                    occ = np.fromiter(bt.values(), np.float64, len(bt))
                    if not np.array_equal(occ, np.round(occ)) or occ.max() >= 2**31:
                        continue  # fractional cycles: sums in another order could round differently
                    pair = (np.fromiter(bt.keys(), np.int64, len(bt)), occ.astype(np.int32))
                    self.folded.setdefault(id(u), []).append(pair)
                    bt.clear()

    def next_warp_id(self) -> int:
        self._wid += 1
        return self._wid - 1

    def has_pending(self) -> bool:
        """CTAs still to run: waiting for a slot, or taken off the list and about to launch
        (a scheduler with no warps must not retire while a launch is on its way)."""
        return bool(self.pending) or self.launching > 0

    def cta_done(self, core: Core, ct: CtaT, end: int) -> None:
        if self.cluster_n > 1:
            return cluster_cta_done(self, core, ct, end, self.cluster_n)
        self.cta_spans[ct.index] = end - ct.start
        self.end = max(self.end, end)
        if self.pending:
            delay = max(0, end - int(self.env.now))
            item = self.pending.pop(0)
            self.launching += 1
            self.env.process(self._launch_later(core, item, delay))

    def _launch_later(self, core: Core, item: tuple[int, tuple[int, int, int]], delay: int,
                      ) -> Generator[simpy.Event, object, None]:
        if delay:
            yield self.env.timeout(delay)
        self.launching -= 1
        core.launch(item[1], item[0])

    def run(self) -> None:
        for core, group in zip(self.cores, self.deal or []):
            for idx in group:
                core.launch(self.P.ctas[idx], idx)
        if self.cluster_n > 1:
            cluster_first_wave(self, self.cluster_n)
        # first wave: fill every core up to ctas_per_core, round robin
        for _slot in range(self.ctas_per_core if self.cluster_n == 1 else 0):
            for core in self.cores:
                if self.pending:
                    idx, ctaid = self.pending.pop(0)
                    core.launch(ctaid, idx)
        run_events(self.env)  # = self.env.run(), the schedulers' wake-ups dispatched directly
        stuck = [ct for c in self.cores for ct in c.live_ctas]
        if stuck:
            ct = stuck[0]
            if ct.mbar_waiters:
                wait = ct.mbar_waiters[0].w.waiting_on
                text, at = (wait.text, wait.line) if wait is not None else ("an mbarrier wait", 0)
                raise ExecutionError(f"deadlock: block {ct.cta.ctaid} waits at '{text}' for an mbarrier phase "
                                     "that no warp or TMA copy completes", self.P.L.file, at)
            w = next((wt.w for wt in ct.warps if not wt.finished), None)
            line = self.P.L.body[max(0, w.pc - 1)].line if w is not None else 0
            raise ExecutionError(f"deadlock: block {ct.cta.ctaid} never finished (a warp waits at a barrier "
                                 "the others never reach)", self.P.L.file, line)


def occupancy(hw: HwConfig, nthreads: int, regs: int, smem: int) -> dict[str, Any]:
    """Resident CTAs per core: the smallest of HwConfig.resident_limits."""
    lim = hw.resident_limits(nthreads, regs, smem)
    limiter = min(lim, key=lambda k: lim[k])
    n = max(1, lim[limiter])
    warps = -(-nthreads // hw.warp_size)
    return {"ctas_per_core": n, "warps_per_core": n * warps, "regs_per_thread": regs, "limiter": limiter,
            "limits": lim}


def simulate(prog: Program, launch: Launch, hw: HwConfig, *, trace: bool = False, window: int | None = None,
             max_instructions: int = DEFAULT_MAX_INSTRUCTIONS, sample_ctas: int | None = None,
             lookahead: int | None = None, regs_per_thread: int | None = None, warm_l2: bool = False,
             progress: Progress | None = None) -> SimResult:
    """Run `launch` cycle by cycle on `hw`. Functional results equal run_functional's.

    window: cycles per point of the utilization series (default: about 100 points);
    sample_ctas: simulate about N CTAs: all the CTAs that the whole grid deals to the first k cores,
                 k = ceil(N / CTAs per core) (outputs are then partial);
    lookahead: fetched-but-unissued instructions per warp that may issue out of order (1 = in order;
               default Core.lookahead of the hwconfig);
    regs_per_thread: registers per thread for occupancy (default: what ptxas allocates where hw.arch names
                     an architecture and ptxas is installed, else the declared PTX registers; the
                     result's occupancy['regs_source'] says which);
    warm_l2: the buffer arguments start in the L2, as after their host-to-device copies (default: an
             empty L2, every first touch a DRAM access);
    progress: told of every finished CTA (sim.progress; the command line's display)."""
    with np.errstate(all="ignore"), _young_collections():
        replay = None
        if sample_ctas is None:
            check_budget_covers(launch, max_instructions, prog.file)
            replay = replay_for(prog, launch, max_instructions)
        try:
            sim = _run(prog, launch, hw, trace, max_instructions, sample_ctas, lookahead, regs_per_thread, warm_l2,
                       progress, replay)
        except Abandon:  # a streamed replay met a conflict: execute instead (sim/functional/replay.py)
            sim = _run(prog, launch, hw, trace, max_instructions, sample_ctas, lookahead, regs_per_thread, warm_l2,
                       progress, None)
        if sim.hot_pcs:  # the launch ended within the sample after passing its budget
            raise budget_error(sim.kernel, sim.hot_pcs, sim.budget)
        return _result(sim, launch, window)


@contextlib.contextmanager
def _young_collections(every: int = 10_000) -> Iterator[None]:
    """The garbage collector's youngest generation collected every `every` net allocations instead of
    Python's 700 while a simulation runs (the threshold restored after): the run allocates millions of
    short-lived tuples and records, and the collector took 0.47 s of 4.4 s on mma f16 256^3 and 0.48 s of
    5.5 s on sgemm 128^3 (gc.callbacks; 0.10 s with this). When it collects changes no result."""
    old = gc.get_threshold()
    gc.set_threshold(max(old[0], every), *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)


def _run(prog: Program, launch: Launch, hw: HwConfig, trace: bool, max_instructions: int, sample_ctas: int | None,
         lookahead: int | None, regs: int | None, warm_l2: bool, progress: Progress | None,
         replay: Replay | None) -> Simulation:
    sim = Simulation(prog, launch, hw, trace, max_instructions, sample_ctas, lookahead, regs, warm_l2,
                     prepared=replay.P if replay is not None else None)
    sim.replay = replay
    if progress is not None:
        sim.show_progress(progress)
    sim.run()
    if replay is not None:
        replay.close()
    return sim


def _result(sim: Simulation, launch: Launch, window: int | None) -> SimResult:
    hw = sim.hw
    st = sim.stats
    cycles = max(1, sim.end)
    ncores = len(sim.cores)
    busy = {p.name: 0 for p in hw.pipes}
    util: dict[str, float] = {}
    for c in sim.cores:
        for name, us in c.units.items():
            busy[name] += sum(u.busy for u in us)
    for p in hw.pipes:
        util[p.name] = round(busy[p.name] / (cycles * p.count * ncores), 6)
    sh_busy = sum(c.mem.shared.busy for c in sim.cores)
    busy["shared"] = sh_busy
    util["shared"] = round(sh_busy / (cycles * hw.shared.ports * ncores), 6)
    dram_busy = sum(c.mem.dram.busy for c in sim.cores)
    busy["dram"] = int(dram_busy)
    util["dram"] = round(dram_busy / (cycles * sum(c.mem.dram.capacity for c in sim.cores)), 6)
    l1h = [c.mem.l1 for c in sim.cores if c.mem.l1 is not None]
    l1_hits = sum(x.hits for x in l1h)
    l1_all = l1_hits + sum(x.misses for x in l1h)
    cache = {"l1_hit_rate": (l1_hits / l1_all) if l1_all else None, "l2_hit_rate": sim.devmem.l2.hit_rate()}
    win = window or max(1, -(-cycles // 100))
    nwin = -(-cycles // win)
    series: dict[str, Any] = {"window": win, "t": [i * win for i in range(nwin)]}
    per = {p.name: np.zeros(nwin) for p in hw.pipes}
    # the issue cycles' busy sums (PipeUnit.busy_at, then Simulation.fold's arrays, unit by unit): every
    # (cycle, occupancy) of a pipe in that order, added to its window by one np.add.at (in index order: the
    # additions a loop over them made, in the same order)
    cyc: dict[str, list[int]] = {name: [] for name in per}
    occ: dict[str, list[Any]] = {name: [] for name in per}
    segs: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {name: [] for name in per}

    def flush(name: str) -> None:
        ks, vs = cyc[name], occ[name]
        if ks:
            segs[name].append((np.fromiter(ks, np.int64, len(ks)), np.fromiter(vs, np.float64, len(vs))))
            ks.clear()
            vs.clear()

    folded = sim.folded
    for c in sim.cores:
        for name, us in c.units.items():
            ks, vs = cyc[name], occ[name]
            for u in us:
                bt = u.busy_at
                ks.extend(bt.keys())
                vs.extend(bt.values())
                f = folded.get(id(u)) if folded else None
                if f:
                    flush(name)
                    segs[name] += [(ts, occs.astype(np.float64)) for ts, occs in f]
    for name, row in per.items():
        flush(name)
        if sg := segs[name]:
            ts = sg[0][0] if len(sg) == 1 else np.concatenate([k for k, _ in sg])
            occ_all = sg[0][1] if len(sg) == 1 else np.concatenate([v for _, v in sg])
            np.add.at(row, np.minimum(nwin - 1, ts // win), occ_all)
    for p in hw.pipes:
        series[p.name] = [round(float(x), 4) for x in per[p.name] / (win * p.count * ncores)]
    stalls = {r: int(st.stalls.get(r, 0)) for r in STALL_REASONS}
    for r, v in st.stalls.items():
        stalls.setdefault(r, int(v))
    trace = None
    if st.trace is not None:
        trace = _trace_meta(sim) + st.trace
    return SimResult(
        cycles=int(cycles),
        cycles_per_cta=[int(sim.cta_spans[i]) for i in sorted(sim.cta_spans)],
        warp_instructions=sim.count,
        ipc=round(sim.count / cycles, 6),
        utilization=util,
        busy={k: int(v) for k, v in busy.items()},
        stalls=stalls,
        stalls_by_line={ln: dict(v) for ln, v in sorted(st.by_line.items())},
        bank_conflicts_by_line=dict(sorted(st.conflicts.items())),
        cache=cache,
        dram_bytes=int(sum(c.mem.dram.bytes for c in sim.cores)),
        flushes=[{"line": ln, "count": f[0], "text": f[1], "cycles": f[2]} for ln, f in sorted(st.flushes.items())],
        occupancy={k: v for k, v in sim.occupancy.items()},
        series=series,
        trace=trace,
        outputs=read_outputs(sim.P, launch),
        hw=hw.name,
        kernel=sim.kernel.name,
        ctas_simulated=len(sim.cta_spans),
        ctas_total=sim.ctas_total,
    )


def _trace_meta(sim: Simulation) -> list[dict[str, Any]]:
    ev: list[dict[str, Any]] = []
    for c in sim.cores:
        ev.append({"name": "process_name", "ph": "M", "pid": c.index, "args": {"name": f"core {c.index}"}})
    for c in sim.cores:
        for name, tid in _UNIT_TID.items():
            ev.append({"name": "thread_name", "ph": "M", "pid": c.index, "tid": 100000 + tid,
                       "args": {"name": f"unit {name}"}})
    return ev
