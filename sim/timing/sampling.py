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
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from sim.errors import UsageError
from sim.functional.runner import Prepared, cluster_size, prepare, read_outputs
from sim.hw import HwConfig
from sim.launch import Launch
from sim.ptx.ir import Program
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

    def to_json(self) -> dict[str, Any]:
        return {"cycles": self.cycles, "sampled": {
            "estimate": self.cycles, "bound": self.bound, "confidence": CONFIDENCE, "waves": self.waves,
            "wave_cycles": {str(k): v for k, v in self.wave_cycles.items()}, "group_cycles": self.group_cycles,
            "ctas_simulated": len(self.ctas_simulated), "ctas_total": self.ctas_total,
            "footprint": self.footprint}, "warp_instructions": self.warp_instructions,
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


def simulate_sampled(prog: Program, launch: Launch, hw: HwConfig, n: int, max_instructions: int,
                     regs_per_thread: int | None = None, progress: Progress | None = None) -> SampledResult:
    """About n CTAs: the groups of the CTAs `pick` chooses. Where they are all the CTAs, the run is the
    full simulation (sim.timing.simulate's cycles, bound 0)."""
    with np.errstate(all="ignore"):
        P = prepare(prog, launch)
        if cluster_size(P) > 1:
            raise UsageError("--sample-ctas does not sample cluster launches: run the whole grid", P.L.file)
        regs = regs_per_thread if regs_per_thread is not None else registers_for_occupancy(prog, P.L.kernel, hw)[0]
        lay = layout_of(P, launch, hw, regs)
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
                                 "not needed (every CTA simulated)", read_outputs(P, launch))
        fp = Footprints(prog, launch, hw.l2.sector, max_instructions)
        wave_cycles, group_cycles, count = simulate_waves(prog, launch, hw, P, lay, chosen, fp, regs,
                                                          max_instructions, progress)
        est, bound = estimate(wave_cycles, group_cycles, lay)
        return SampledResult(est, bound, lay.waves, wave_cycles, [d for w in sorted(group_cycles)
                                                                  for d in group_cycles[w]],
                             sorted(i for g in chosen for i in g),
                             lay.total, count, fp.method, read_outputs(P, launch))


def simulate_waves(prog: Program, launch: Launch, hw: HwConfig, P: Prepared, lay: Layout, chosen: list[list[int]],
                   fp: Callable[[tuple[int, int, int]], np.ndarray], regs: int, max_instructions: int,
                   progress: Progress | None = None) -> tuple[dict[int, int], dict[int, list[int]], int]:
    """Each wave with chosen groups in its own Simulation, the L2 warmed as the grid leaves it:
    (wave -> duration, wave -> its chosen groups' durations, warp instructions)."""
    by_wave: dict[int, list[list[int]]] = {}
    for g in chosen:
        by_wave.setdefault(lay.wave_of(g), []).append(g)
    shadow = SetAssocCache(hw.l2)  # the L2 as the whole grid leaves it after the waves so far
    spl = hw.l2.line // hw.l2.sector
    wave_cycles: dict[int, int] = {}
    group_cycles: dict[int, list[int]] = {}
    count = 0
    for w in range(max(by_wave) + 1):
        members = range(w * lay.slots, min(lay.total, (w + 1) * lay.slots))
        sectors = {i: fp(P.ctas[i]) for i in members}
        if w in by_wave:
            sim = Simulation(prog, launch, hw, False, max_instructions - count, None, None, regs, prepared=P,
                             deal=by_wave[w])
            sim.devmem.l2 = _copy(shadow)
            sampled = {i for g in by_wave[w] for i in g}
            sim.devmem.fetched_by_others = _warm_same_wave(sim.devmem.l2, sectors, sampled, spl, hw,
                                                           hw.cores_used(lay.total))
            for c in sim.cores:
                c.mem.l2 = sim.devmem.l2
            if progress is not None:
                sim.show_progress(progress)
            sim.run()
            count += sim.count
            wave_cycles[w] = sim.end
            group_cycles[w] = [max(sim.cta_spans[i] for i in g) for g in by_wave[w]]
        for i in members:
            _touch(shadow, sectors[i], spl)
    return wave_cycles, group_cycles, count


def _copy(c: SetAssocCache) -> SetAssocCache:
    out = SetAssocCache(c.c)
    out.lines = [s.copy() for s in c.lines]
    return out


def _touch(l2: SetAssocCache, sectors: np.ndarray, spl: int) -> dict[int, int]:
    """Bring `sectors` into the L2 (LRU order: ascending); line -> sectors missing, for the lines that
    missed some."""
    missed: dict[int, int] = {}
    lines, first = np.unique(sectors // spl, return_index=True)
    bounds = list(first[1:]) + [sectors.size]
    for ln, a, b in zip(lines.tolist(), first.tolist(), bounds):
        mask = 0
        for s in sectors[a:b].tolist():
            mask |= 1 << (s % spl)
        missing = l2.lookup(ln, mask)
        if missing:
            missed[ln] = bin(missing).count("1")
    l2.hits = l2.misses = 0
    return missed


def _warm_same_wave(l2: SetAssocCache, sectors: dict[int, np.ndarray], sampled: set[int], spl: int,
                    hw: HwConfig, spread: int) -> dict[int, tuple[Dram, int]]:
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
    queues = {core: Dram(hw, spread) for core in used}
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
