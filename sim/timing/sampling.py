"""`simulate_sampled(prog, launch, hw, n)`: simulate about n CTAs spread over a launch and estimate the
whole launch's cycles, with a confidence bound (the model and its measured error: docs/sampling.md).

Groups: the CTAs one core holds at once. The whole grid deals wave w's CTAs w*S + s*spread + c
(slot s < ctas_per_core, S = spread * ctas_per_core) to core c, as Simulation.run's first wave does;
later waves are taken as starting when the one before ends (the simulator launches each CTA as a
slot frees, so waves overlap a little in a full run).
Sample: the groups of ceil(n / CTAs per group) CTAs spread over the launch order (pick).
L2: each sampled wave runs in its own Simulation (all its sampled groups, one core each), with the
L2 as the grid leaves it: every CTA of the earlier waves touched its footprint (footprint.py) in
launch order, then the wave's un-simulated CTAs did. A line that one of those fetches first (launch
order) and a sampled CTA also touches is filled, at the sampled CTA's first touch, through a
stand-in for the fetcher's core's DRAM queue, loaded in proportion to all it fetches (_warm_same_wave).
Estimate: a wave's duration is its last sampled CTA's end; the full waves not sampled take the
sampled full waves' mean, a partial last wave (always sampled) its own duration. Bound: the
Student-t interval (CONFIDENCE) of that total from the spread of the sampled full waves' durations
(finite-population correction), plus, for waves simulated in part, the range of their sampled
groups' durations x the fraction of their groups not simulated (estimate()).
Execution: the waves replay streamed lock-step records where the kernel allows (run_waves), in `jobs`
forked processes when asked (waves_in_processes: the same numbers as one process); simulate_by_waves
times every CTA this way (--by-waves), its cycles each core's groups chained (chained).
"""

from __future__ import annotations

import gc
import math
import multiprocessing as mp
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from sim.errors import UsageError
from sim.functional.replay import Abandon, Intervals, Stream, meets, replayable
from sim.functional.runner import Prepared, cluster_size, prepare, read_outputs
from sim.hw import HwConfig
from sim.launch import Launch
from sim.ptx.ir import Program
from sim.timing.dram import DeviceDram, DramPort
from sim.timing.engine import Simulation, occupancy
from sim.timing.footprint import Footprints
from sim.timing.regalloc import registers_for_occupancy
from sim.timing.units import Dram, SetAssocCache

if TYPE_CHECKING:
    from sim.progress import Progress

CONFIDENCE = 0.95


@dataclass
class SampledResult:
    cycles: int  # the estimate of the whole launch
    bound: int  # +- cycles at CONFIDENCE
    waves: int
    wave_cycles: dict[int, int]  # sampled wave -> its duration
    group_cycles: list[int]  # every sampled group's duration
    ctas_simulated: list[int]  # launch indices
    ctas_total: int
    warp_instructions: int
    footprint: str
    outputs: dict[int, np.ndarray]
    execution: str = ""  # how the waves ran: "replayed", "replayed, N processes", "executed"
    by_waves: bool = False  # every CTA timed, wave by wave (simulate_by_waves)
    core: str = ""  # the timing core the waves ran on: "compiled" (sim/timing/native.py), "python", "mixed"

    def to_json(self) -> dict[str, Any]:
        return {"cycles": self.cycles, "sampled": {
            "estimate": self.cycles, "bound": self.bound, "confidence": CONFIDENCE, "waves": self.waves,
            "wave_cycles": {str(k): v for k, v in self.wave_cycles.items()}, "group_cycles": self.group_cycles,
            "ctas_simulated": len(self.ctas_simulated), "ctas_total": self.ctas_total,
            "footprint": self.footprint, "execution": self.execution, "by_waves": self.by_waves,
            "core": self.core},
            "warp_instructions": self.warp_instructions,
            "ctas_simulated": len(self.ctas_simulated), "ctas_total": self.ctas_total}


def groups_of(total: int, spread: int, per_core: int) -> list[list[int]]:
    """Every core's CTAs (launch indices) wave by wave, in launch order; empty groups left out."""
    slots = spread * per_core
    out = []
    for w in range(-(-total // slots)):
        for c in range(spread):
            g = [w * slots + s * spread + c for s in range(per_core) if w * slots + s * spread + c < total]
            if g:
                out.append(g)
    return out


def pick(total: int, k: int, width: int) -> list[int]:
    """k CTAs (launch indices), one in each of k equal stretches of the launch order: the j-th at
    offset j mod min(width, stretch) into its stretch, so that the picks walk along the grid's rows
    (`width` CTAs) instead of taking the same column every time."""
    k = max(1, min(total, k))
    stretch = total // k
    return [j * total // k + j % max(1, min(width, stretch)) for j in range(k)]


@dataclass
class Layout:
    """How the whole grid deals its CTAs: `slots` per wave, `groups` (one core's CTAs in one wave)."""

    total: int
    slots: int
    per_core: int
    groups: list[list[int]]

    @property
    def waves(self) -> int:
        return -(-self.total // self.slots)

    def wave_of(self, group: list[int]) -> int:
        return group[0] // self.slots


def layout_of(P: Prepared, launch: Launch, hw: HwConfig, regs: int) -> Layout:
    nthreads = launch.block[0] * launch.block[1] * launch.block[2]
    resident = occupancy(hw, nthreads, regs, P.shared_size)["ctas_per_core"]
    spread = hw.cores_used(len(P.ctas))
    per_core = min(resident, -(-len(P.ctas) // spread))
    return Layout(len(P.ctas), spread * per_core, per_core, groups_of(len(P.ctas), spread, per_core))


def _prepared(prog: Program, launch: Launch, hw: HwConfig, regs_per_thread: int | None,
              no_clusters: str) -> tuple[Prepared, int, Layout]:
    """The prepared launch, the registers that set residency (ptxas' where not given) and the CTAs' layout over
    waves and cores; `no_clusters` is the one-line error for a cluster launch (neither mode runs one)."""
    P = prepare(prog, launch)
    if cluster_size(P) > 1:
        raise UsageError(no_clusters, P.L.file)
    regs = regs_per_thread if regs_per_thread is not None else registers_for_occupancy(prog, P.L.kernel, hw)[0]
    return P, regs, layout_of(P, launch, hw, regs)


def simulate_sampled(prog: Program, launch: Launch, hw: HwConfig, n: int, max_instructions: int,
                     regs_per_thread: int | None = None, progress: Progress | None = None,
                     jobs: int = 1) -> SampledResult:
    """About n CTAs: the groups of the CTAs `pick` chooses. Where they are all the CTAs, the run is the
    full simulation (sim.timing.simulate's cycles, bound 0)."""
    with np.errstate(all="ignore"):
        P, regs, lay = _prepared(prog, launch, hw, regs_per_thread,
                                 "--sample-ctas does not sample cluster launches: run the whole grid")
        group_of = {i: gi for gi, g in enumerate(lay.groups) for i in g}
        picked = pick(lay.total, -(-n // lay.per_core), launch.grid[0])
        if lay.total % lay.slots:  # a partial last wave is not like the others: it is always simulated
            picked.append(lay.total - 1)
        chosen = [lay.groups[gi] for gi in sorted({group_of[i] for i in picked})]
        if len(chosen) == len(lay.groups):
            sim = Simulation(prog, launch, hw, False, max_instructions, None, None, regs, prepared=P)
            if progress is not None:
                sim.show_progress(progress)
            sim.run()
            spans = [sim.cta_spans[i] for i in range(lay.total)]
            return SampledResult(sim.end, 0, lay.waves, {}, spans, list(range(lay.total)), lay.total, sim.count,
                                 "not needed (every CTA simulated)", read_outputs(P, launch), core=core_name())
        fp = Footprints(prog, launch, hw.l2.sector, max_instructions)
        r = run_waves(prog, launch, hw, P, lay, chosen, fp, regs, max_instructions, progress, jobs)
        est, bound = estimate(r.cycles, r.groups, lay)
        return SampledResult(est, bound, lay.waves, r.cycles, [d for w in sorted(r.groups) for d in r.groups[w]],
                             sorted(i for g in chosen for i in g), lay.total, r.count, fp.method,
                             read_outputs(r.P or P, launch), r.how, core=r.core)


def simulate_by_waves(prog: Program, launch: Launch, hw: HwConfig, max_instructions: int,
                      regs_per_thread: int | None = None, progress: Progress | None = None,
                      jobs: int = 1) -> SampledResult:
    """Every CTA timed, wave by wave: each wave in its own Simulation, starting with the L2 the earlier
    waves leave (footprints, as a sampled wave does), its cycles the sum of the waves' (the waves do not
    overlap as in one simulation of the grid: docs/sampling.md measures the difference); in `jobs`
    processes."""
    with np.errstate(all="ignore"):
        P, regs, lay = _prepared(prog, launch, hw, regs_per_thread,
                                 "--by-waves does not run cluster launches: run the whole grid")
        fp = Footprints(prog, launch, hw.l2.sector, max_instructions)
        r = run_waves(prog, launch, hw, P, lay, lay.groups, fp, regs, max_instructions, progress, jobs)
        spans = [d for w in sorted(r.groups) for d in r.groups[w]]
        return SampledResult(chained(r.groups), 0, lay.waves, r.cycles, spans, list(range(lay.total)),
                             lay.total, r.count, fp.method, read_outputs(r.P or P, launch), r.how, True, r.core)


def chained(groups: dict[int, list[int]]) -> int:
    """The launch's cycles from every wave's group durations (groups in core order): each core takes its
    next group as its last one ends, as the simulator launches a CTA when a slot frees; the launch ends
    with the last core. (Not the sum of the waves' durations: a wave would wait for its slowest group.)"""
    ends: dict[int, int] = {}
    for w in sorted(groups):
        for c, d in enumerate(groups[w]):
            ends[c] = ends.get(c, 0) + d
    return max(ends.values(), default=0)


def run_waves(prog: Program, launch: Launch, hw: HwConfig, P: Prepared, lay: Layout, chosen: list[list[int]],
              fp: Callable[[tuple[int, int, int]], np.ndarray], regs: int, max_instructions: int,
              progress: Any, jobs: int) -> Waves:
    """The chosen groups' waves: replaying streamed lock-step records where the kernel allows (in `jobs`
    processes when more than one wave), else executing in one process; a replay that meets a conflict
    is run again executing, on a freshly prepared launch. The result's P holds the outputs."""
    if replayable(P):
        try:
            if jobs > 1 and len({lay.wave_of(g) for g in chosen}) > 1:
                r = waves_in_processes(jobs, prog, launch, hw, P, lay, chosen, fp, regs, max_instructions, progress)
                r.how = f"replayed, {min(jobs, len({lay.wave_of(g) for g in chosen}))} processes"
            else:
                r = simulate_waves(prog, launch, hw, P, lay, chosen, fp, regs, max_instructions, progress, True)
                r.how = "replayed"
            r.P = P
            return r
        except Abandon:
            P = prepare(prog, launch)
    r = simulate_waves(prog, launch, hw, P, lay, chosen, fp, regs, max_instructions, progress)
    r.how, r.P = "executed", P
    return r


@dataclass
class Waves:
    """What simulate_waves measured: each simulated wave's duration, its groups' durations, warp
    instructions, and (where the waves replayed streamed records) the global words each wave read and
    wrote, with the bytes it wrote (`written`: (allocation, byte offset, bytes), for the merge)."""

    cycles: dict[int, int]
    groups: dict[int, list[int]]
    count: int
    touched: dict[int, tuple[Intervals, Intervals]]
    written: dict[int, list[tuple[int, int, bytes]]]
    ctas_done: int = 0
    how: str = ""  # "replayed", "replayed, N processes", "executed"
    P: Prepared | None = None
    core: str = ""  # the timing core that ran the waves (core_name; "mixed" if processes differed)


def core_name() -> str:
    """The timing core this process runs: "compiled" (sim/timing/native.py's build) or "python"."""
    from sim.timing.native import active

    return "compiled" if active() else "python"


def simulate_waves(prog: Program, launch: Launch, hw: HwConfig, P: Prepared, lay: Layout, chosen: list[list[int]],
                   fp: Callable[[tuple[int, int, int]], np.ndarray], regs: int, max_instructions: int,
                   progress: Any = None, replay: bool = False, only: set[int] | None = None) -> Waves:
    """Each wave with chosen groups in its own Simulation, the L2 warmed as the grid leaves it (only the
    waves in `only`, when given; the others' footprints still pass through the L2). With `replay` the
    waves replay streamed lock-step records (sim/functional/replay.Stream; Abandon when they conflict)."""
    by_wave: dict[int, list[list[int]]] = {}
    for g in chosen:
        by_wave.setdefault(lay.wave_of(g), []).append(g)
    shadow = SetAssocCache(hw.l2)  # the L2 as the whole grid leaves it after the waves so far
    spl = hw.l2.line // hw.l2.sector
    out = Waves({}, {}, 0, {}, {}, core=core_name())
    last = max(by_wave) if only is None else max(only)
    for w in range(last + 1):
        members = range(w * lay.slots, min(lay.total, (w + 1) * lay.slots))
        sectors = {i: fp(P.ctas[i]) for i in members}
        if w in by_wave and (only is None or w in only):
            sim = Simulation(prog, launch, hw, False, max_instructions - out.count, None, None, regs, prepared=P,
                             deal=by_wave[w])
            stream = Stream(P, sorted(i for g in by_wave[w] for i in g)) if replay else None
            sim.replay = stream
            sim.devmem.l2 = _copy(shadow)
            sampled = {i for g in by_wave[w] for i in g}
            sim.devmem.fetched_by_others = _warm_same_wave(sim.devmem.l2, sectors, sampled, spl, hw,
                                                           hw.cores_used(lay.total))
            for c in sim.cores:
                c.mem.l2 = sim.devmem.l2
            if progress is not None:
                sim.show_progress(progress)
            sim.run()
            if stream is not None:
                stream.close()
                out.touched[w] = (stream.seen.reads, stream.seen.writes)
                out.written[w] = _bytes_of(P, stream.seen.writes)
            out.count += sim.count
            out.ctas_done += len(sim.cta_spans)
            out.cycles[w] = sim.end
            out.groups[w] = [max(sim.cta_spans[i] for i in g) for g in by_wave[w]]
            del sim, stream
        if w < last:
            for i in members:
                _touch(shadow, sectors[i], spl)
    return out


def _bytes_of(P: Prepared, words: Intervals) -> list[tuple[int, int, bytes]]:
    """The bytes of global memory in the word intervals: (allocation index, byte offset, bytes)."""
    out = []
    allocs = P.L.gmem.allocs
    bases = np.array([a.base for a in allocs], dtype=np.int64)
    for s, e in zip(words[0].tolist(), words[1].tolist()):
        lo, hi = s * 4, e * 4 + 4
        while lo < hi:
            k = int(np.searchsorted(bases, lo, side="right")) - 1
            a = allocs[k]
            end = min(hi, a.base + a.data.size)
            out.append((k, lo - a.base, a.data[lo - a.base: end - a.base].tobytes()))
            lo = end
    return out


def waves_in_processes(jobs: int, prog: Program, launch: Launch, hw: HwConfig, P: Prepared, lay: Layout,
                       chosen: list[list[int]], fp: Callable[[tuple[int, int, int]], np.ndarray], regs: int,
                       max_instructions: int, progress: Any = None) -> Waves:
    """simulate_waves with replay, its waves dealt to `jobs` forked processes (each from the same prepared
    launch, the L2 handed over by footprints as in one process), then merged in wave order: durations as
    one process gives them, each wave's written bytes applied to P in wave order. A wave that reads a word
    an earlier wave wrote would have seen it in one process: Abandon."""
    waves = sorted({lay.wave_of(g) for g in chosen})
    ctx = mp.get_context("fork")
    slots = ctx.Array("q", 3 * len(waves), lock=False)  # per wave: CTAs done, warp instructions, cycles
    global _JOB
    _JOB = (prog, launch, hw, P, lay, chosen, fp, regs, max_instructions, slots, waves)
    gc.collect()
    gc.freeze()  # the children's collections need not walk (nor copy) the parent's objects
    try:
        with ctx.Pool(min(jobs, len(waves))) as pool:
            pending = [pool.apply_async(_wave_job, (w,)) for w in waves]
            while not all(r.ready() for r in pending):
                pending[next(i for i, r in enumerate(pending) if not r.ready())].wait(0.25)
                if progress is not None:
                    progress.update(sum(slots[0::3]), sum(slots[1::3]), max(slots[2::3]))
                failed = next((r for r in pending if r.ready() and not r.successful()), None)
                if failed is not None:  # a wave's error (its budget, a fault) ends the run now: the
                    failed.get()  # waves still running or queued are stopped as the pool closes
            parts = [r.get() for r in pending]
    finally:
        _JOB = None
        gc.unfreeze()
    if any(part is None for part in parts):
        raise Abandon("a wave's lock-step records conflicted")
    done = [part for part in parts if part is not None]
    cores = {part.core for part in done}
    out = Waves({}, {}, 0, {}, {}, core=cores.pop() if len(cores) == 1 else "mixed")
    for part in done:
        out.cycles.update(part.cycles)
        out.groups.update(part.groups)
        out.count += part.count
        out.ctas_done += part.ctas_done
        out.touched.update(part.touched)
    for i, w in enumerate(waves):
        for v in waves[i + 1:]:
            if meets(out.touched[w][1], out.touched[v][0]):
                raise Abandon(f"wave {v} reads a word wave {w} wrote")
    allocs = P.L.gmem.allocs
    for part in done:
        for w in sorted(part.written):
            for k, off, data in part.written[w]:
                allocs[k].data[off: off + len(data)] = np.frombuffer(data, dtype=np.uint8)
    return out


_JOB: Any = None  # what the forked wave processes read (waves_in_processes)


class _Slot:
    """A wave process's progress, written where the parent reads it."""

    def __init__(self, slots: Any, j: int):
        self.slots, self.j = slots, j

    def update(self, ctas: int, count: int, cycles: int | None) -> None:
        self.slots[3 * self.j: 3 * self.j + 3] = [ctas, count, cycles or 0]


def _wave_job(w: int) -> Waves | None:
    prog, launch, hw, P, lay, chosen, fp, regs, max_instructions, slots, waves = _JOB
    try:
        return simulate_waves(prog, launch, hw, P, lay, chosen, fp, regs, max_instructions,
                              _Slot(slots, waves.index(w)), replay=True, only={w})
    except Abandon:
        return None


def _copy(c: SetAssocCache) -> SetAssocCache:
    out = SetAssocCache(c.c)
    out.lines = [s.copy() if s is not None else None for s in c.lines]
    return out


def _touch(l2: SetAssocCache, sectors: np.ndarray, spl: int) -> dict[int, int]:
    """Bring `sectors` into the L2 (LRU order: ascending); line -> sectors missing, for the lines that
    missed some. Each line is SetAssocCache.lookup(line, its sectors) written out in one loop (a
    footprint is tens of thousands of lines; tests/test_replay_stream.py checks it against lookup)."""
    missed: dict[int, int] = {}
    lines, first = np.unique(sectors // spl, return_index=True)
    if lines.size:
        masks = np.bitwise_or.reduceat(np.left_shift(1, sectors % spl), first)
        sets, assoc, widen, table = l2.sets, l2.c.assoc, l2.widen, l2.lines
        victim = None
        for ln, mask in zip(lines.tolist(), masks.tolist()):
            victim = None
            s = table[ln % sets]
            if s is None:  # (SetAssocCache makes a set at its first use)
                s = l2.set_at(ln % sets)
            have = s.get(ln)
            if have is not None:
                s.move_to_end(ln)
                missing = mask & ~have
                if not missing:
                    continue
                if widen is not None:
                    missing = widen[missing] & ~have
                s[ln] = have | missing
                missed[ln] = bin(missing).count("1")
                continue
            if widen is not None:
                mask = widen[mask]
            if len(s) >= assoc:
                victim = s.popitem(last=False)[0]
            s[ln] = mask
            missed[ln] = bin(mask).count("1")
        l2.victim = victim
    l2.hits = l2.misses = 0
    return missed


def _warm_same_wave(l2: SetAssocCache, sectors: dict[int, np.ndarray], sampled: set[int], spl: int,
                    hw: HwConfig, spread: int) -> dict[int, tuple[Dram | DramPort, int]]:
    """Touch what the wave's un-simulated CTAs bring in (launch order). The lines one of them fetches
    first that a sampled CTA touches too are filled through a stand-in for that CTA's core's DRAM
    queue, each charged the bytes of its sectors scaled by (all the bytes the core fetches first in
    this wave) / (those of its lines a sampled CTA touches): its queue as loaded as the whole grid
    loads it."""
    fetcher: dict[int, tuple[int, int]] = {}  # line -> (core, sectors)
    mine: set[int] = set()  # lines a sampled CTA touches first: it fetches them in the simulation
    for i in sorted(sectors):
        if i in sampled:
            mine |= set(np.unique(sectors[i] // spl).tolist()) - fetcher.keys()
            continue
        theirs = sectors[i][~np.isin(sectors[i] // spl, np.fromiter(mine, dtype=np.int64, count=len(mine)))]
        for ln, n in _touch(l2, theirs, spl).items():
            fetcher.setdefault(ln, (i % spread, n))
    wanted: set[int] = set()
    for i in sampled:
        wanted |= set(np.unique(sectors[i] // spl).tolist())
    fetched: dict[int, float] = {}
    used: dict[int, float] = {}
    for ln, (core, n) in fetcher.items():
        fetched[core] = fetched.get(core, 0) + n
        if ln in wanted:
            used[core] = used.get(core, 0) + n
    # the fetcher's core alone: its slice of the device's channels (sim/timing/dram.py), else its private banks
    queues: dict[int, Dram | DramPort] = {
        core: DramPort(DeviceDram(hw, spread, 1)) if hw.dram.channels else Dram(hw, spread) for core in used}
    return {ln: (queues[core], round(n * hw.l2.sector * fetched[core] / used[core]))
            for ln, (core, n) in fetcher.items() if ln in wanted}


def _t(df: int) -> float:
    """Student-t two-sided quantile at CONFIDENCE for df degrees of freedom (scipy-free table)."""
    table = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262,
             10: 2.228, 12: 2.179, 15: 2.131, 20: 2.086, 30: 2.042, 60: 2.000}
    best = max((k for k in table if k <= df), default=1)
    return table[best] if df < 120 else 1.960


def _interval(values: list[int], population: int, scale: int) -> float:
    """Half-width of the CONFIDENCE interval of `scale` x the mean of `values`, a sample of
    `population` items (finite-population correction); 0 when all are sampled."""
    k = len(values)
    if k >= population:
        return 0.0
    if k < 2:
        return math.inf
    s = float(np.std(values, ddof=1))
    return _t(k - 1) * s / math.sqrt(k) * math.sqrt(1 - k / population) * scale


def estimate(wave_cycles: dict[int, int], group_cycles: dict[int, list[int]], lay: Layout) -> tuple[int, int]:
    """(total cycles, bound; -1 when no bound can be computed): the full waves x their sampled mean
    duration, plus the last wave's own duration where it is partial (always sampled). The bound adds
    the interval of that total over the full waves and, for each wave simulated in part (its duration
    the slowest sampled group's), the sampled groups' range x the fraction of the wave's groups not
    simulated: how far an unseen group may lie above the slowest seen one."""
    full = lay.total // lay.slots
    sampled_full = [d for w, d in wave_cycles.items() if w < full]
    est = (sum(sampled_full) / len(sampled_full) * full if sampled_full else 0.0) + wave_cycles.get(full, 0)
    bound = _interval(sampled_full, full, full) if sampled_full else 0.0
    per_wave: dict[int, int] = {}
    for g in lay.groups:
        per_wave[lay.wave_of(g)] = per_wave.get(lay.wave_of(g), 0) + 1
    for w, gs in group_cycles.items():
        if len(gs) < per_wave[w]:
            unseen = (max(gs) - min(gs)) * (1 - len(gs) / per_wave[w])
            bound += unseen * (full / len(sampled_full) if w < full else 1)
    return round(est), round(bound) if math.isfinite(bound) else -1
