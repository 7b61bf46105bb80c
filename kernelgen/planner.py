"""The planner: enumerate tilings, evaluate them through the four models, prune layer by layer,
keep the Pareto frontier, choose the best.

Layers, in order: spec tiling ranges -> data movement (shared memory) -> registers (spill, limits)
-> ALU scheduling (threads, residency, occupancy, utilization) -> synchronization (deadlock).
"""

from __future__ import annotations

import gc
import heapq
import math
import time
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from typing import Any

from kernelgen.constraints import evaluate, first_violated
from kernelgen.models.bound import analytic_bound, busy_bound, fill_bound, uses_shared_model, utilization_bound
from kernelgen.models.movement import Movement, movement
from kernelgen.models.registers import RegisterEstimate, estimate
from kernelgen.models.schedule import (
    CycleModel,
    Schedule,
    counted_bound,
    cycle_model,
    launch_ctas,
    pipe_busy,
    planner_hw,
    schedule,
)
from kernelgen.models.sync import SyncPlan, sync_plan
from kernelgen.spec import CONSTRAINTS, Constraint, GemmSpec, TileRange
from kernelgen.tiling import Tiling, operand_tiles
from kernelgen.variants import get, names
from sim.errors import UsageError
from sim.hw import HwConfig


def enumerate_tilings(spec: GemmSpec, variant: str) -> list[Tiling]:
    """Structurally valid tilings (powers of two, whole copies per thread) of one variant."""
    return get(variant).tilings(spec)


@dataclass
class Evaluated:
    """A candidate that passed the movement and registers layers and has all four models' results."""
    tiling: Tiling
    movement: Movement
    registers: RegisterEstimate
    schedule: Schedule
    sync: SyncPlan
    model: CycleModel
    cycles: int
    cycles_per_cta: int
    utilization: dict[str, float] = field(default_factory=dict)
    penalty: float = 0.0
    pareto: bool = False

    @property
    def score(self) -> float:
        return self.cycles * (1.0 + self.penalty)


@dataclass
class Rejection:
    layer: str
    constraint: str  # e.g. "registers_per_thread <= 255"
    metric: float  # the candidate's value of the metric (on_bound: an upper bound of it)
    tiling: Tiling
    on_bound: bool = False  # rejected untimed: an upper bound of the metric already violates the constraint


@dataclass
class Bounded:
    """A candidate the bounded search did not time: a lower bound of its cycles is above the score of an
    evaluated survivor (``by``) with no more registers and no more shared memory, so it is on neither
    the Pareto frontier nor the top of the ranking."""
    tiling: Tiling
    movement: Movement
    registers: RegisterEstimate
    schedule: Schedule
    bound: int  # its cycles are >= this
    by: Evaluated


@dataclass
class Plan:
    spec: GemmSpec
    hw: HwConfig
    shape: tuple[int, int, int]
    best: Evaluated
    survivors: list[Evaluated]  # timed, ranked by score (bounded search: the ones not bounded out)
    pruned: dict[str, dict[str, int]]  # layer -> constraint -> count
    candidates: int
    seconds: float
    log: list[str]
    rejected: list[Rejection] = field(default_factory=list)  # the layers' rejections, in order
    bounded: list[Bounded] = field(default_factory=list)  # bounded search: not timed, by bound
    exhaustive: bool = True  # every candidate that passed the layers was timed


def _movement_metric(mv: Movement, key: str) -> float:
    return {"shared_memory_per_block": mv.smem_bytes, "l2_hit_rate": mv.l2_hit_rate,
            "bank_conflict_score": mv.bank_conflict_score, "dram_bytes": mv.dram_bytes}[key]


def _metric(ev: Evaluated, key: str, hw: HwConfig) -> float:
    """The value of observable ``key`` (spec.CONSTRAINTS) for an evaluated candidate."""
    if CONSTRAINTS[key][0] == "movement":
        return _movement_metric(ev.movement, key)
    if key == "registers_per_thread":
        return ev.registers.per_thread
    if key == "occupancy":
        return ev.schedule.occupancy
    if key == "alu_utilization":
        return max((ev.utilization.get(p, 0.0) for p in ("tensor", "fma")), default=0.0) if ev.utilization else 0.0
    if key == "tensor_utilization":
        return ev.utilization.get("tensor", 0.0)
    if key == "cycles":
        return ev.cycles
    if key == "bandwidth_demand_gbps":  # DRAM bytes over the predicted time: the cycles at [planner_clock_mhz]
        return ev.movement.dram_bytes * planner_hw(hw).clock_mhz * 1e6 / max(1, ev.cycles) / 1e9
    raise KeyError(key)


# layer 0's tiling variables (spec.TILE_KEYS) of a tiling
TILE_VARS: dict[str, Any] = {
    "TILE_M": lambda t: t.bm, "TILE_N": lambda t: t.bn, "TILE_K": lambda t: t.bk, "STAGES": lambda t: t.stages,
    "THREADS": lambda t: t.threads, "PAD": lambda t: t.pad_a, "UNROLL_K": lambda t: get(t.variant).unroll_k(t),
    "CLUSTER": lambda t: t.cluster}


def register_key(t: Tiling) -> tuple[object, ...]:
    """The fields of ``t`` the registers layer (models/registers.py estimate: the variant's live ranges, the
    calibration keys, the threads and grid) reads: all but the stages and pads, so the tilings that differ only
    in those share one estimate (tests/test_plan_memo.py compares each with its own on whole spaces)."""
    return (t.variant, t.bm, t.bn, t.bk, t.tm, t.tn, t.vec_a, t.vec_b, t.unroll_k, t.mma_k, t.cluster_m, t.cluster_n)


def _variables(e: tuple[Any, ...]) -> set[str]:
    """The tiling variables a constraints.evaluate expression reads."""
    if e[0] == "var":
        return {e[1]}
    return set().union(*(_variables(x) for x in e[1:] if isinstance(x, tuple)))


def _violates(c: Constraint, v: float) -> bool:
    if c.op == "==":
        return abs(v - c.value) > 1e-9 * max(1.0, abs(c.value))
    return (c.op == "<=" and v > c.value) or (c.op == ">=" and v < c.value)


def _soft_penalty(c: Constraint, v: float) -> float:
    excess = (v - c.value) if CONSTRAINTS[c.key][1] == "higher" else (c.value - v)
    return max(0.0, excess) / max(abs(c.value), 1e-9)


def plan(spec: GemmSpec, hw: HwConfig, variant: str | None = None, verbose: bool = False,
         only: list[Tiling] | None = None, exhaustive: bool = True) -> Plan:
    """``only``: evaluate these tilings instead of enumerating every variant's (kernelgen.krange).
    ``exhaustive=False``: branch and bound (``_bounded``): the same choice, Pareto frontier and ranking
    of the frontier, with the candidates that provably cannot join the frontier left untimed
    (``Plan.bounded``); ``survivors`` then holds the timed ones only.

    The cyclic garbage collector is paused while it runs: the search allocates some 250,000 objects that
    live on in its memos, and each full collection they trigger walks every live object of the process
    (three during the seed's search: ~10% of it, benchmarks/plan_speed.md); nothing it allocates needs the
    collector (reference counting frees it), and what cyclic garbage there is waits for the next one."""
    paused = gc.isenabled()
    gc.disable()
    try:
        return _plan(spec, hw, variant, verbose, only, exhaustive)
    finally:
        if paused:
            gc.enable()


def _plan(spec: GemmSpec, hw: HwConfig, variant: str | None, verbose: bool, only: list[Tiling] | None,
          exhaustive: bool) -> Plan:
    if spec.dtype_a == "s4":  # planned as the s8 GEMM over packed bytes (kernelgen/int4.py)
        from kernelgen.int4 import packed_spec, s4_note

        p = plan(packed_spec(spec), hw, variant, verbose, only, exhaustive)
        p.log.insert(0, s4_note(p.spec, hw))
        return p
    hw = planner_hw(hw)  # cycles at [planner_clock_mhz] where given (models/schedule.py)
    shape = spec.nominal()
    M, N, K = shape
    if variant:
        why = get(variant).unavailable(spec, hw)
        if why:
            others = [n for n in names() if n != variant and not get(n).unavailable(spec, hw)]  # opt-in ones too
            hint = f"; use --variant {' or '.join(others)}" if others and "use --variant" not in why else ""
            raise UsageError(f"--variant {variant} impossible: {why}{hint}")
    variants = [variant] if variant else [n for n in names() if not (get(n).opt_in or get(n).unavailable(spec, hw))]
    # the search's clock (Plan.seconds) starts here: after the variant plug-ins are loaded (get imports each
    # module the first time it is asked: 0.07 s of the seed's first plan where no bytecode is cached, 0.005 s
    # where it is), which is loading code, not searching
    t0 = time.perf_counter()
    if not variants and only is None:
        opt = [n for n in names() if get(n).opt_in and not get(n).unavailable(spec, hw)]
        if opt:
            raise UsageError(f"only opt-in variants serve this spec: use --variant {' or '.join(opt)}")
        why = "; ".join(f"{n}: {get(n).unavailable(spec, hw)}" for n in names()
                        if not get(n).opt_in and get(n).unavailable(spec, hw))
        raise UsageError(f"no kernel variant serves this spec ({why})")
    tilings: list[Tiling] = list(only) if only is not None else []
    for v in variants if only is None else []:
        tilings += get(v).tilings(spec)
    total = len(tilings)
    pruned: dict[str, dict[str, int]] = {}
    rejections: list[Rejection] = []
    hard = [c for c in spec.constraints if c.hard]
    soft = [c for c in spec.constraints if not c.hard]

    def reject(layer: str, constraint: str, metric: float, t: Tiling, on_bound: bool = False) -> None:
        why = constraint + (ON_BOUND if on_bound else "")
        pruned.setdefault(layer, {}).setdefault(why, 0)
        pruned[layer][why] += 1
        rejections.append(Rejection(layer, constraint, metric, t, on_bound))

    # layer 0: spec tiling ranges
    ranged: list[Tiling] = []
    violated: dict[tuple[int, ...], Any] = {}  # the expressions' verdict by the values of the variables they read
    used = sorted({v for x in spec.expressions for side in (x.lhs, x.rhs) for v in _variables(side)})
    read = [(k, TILE_VARS[k]) for k in dict.fromkeys([r.key for r in spec.tiling] + used)]  # what is checked
    for t in tilings:
        vals = {k: f(t) for k, f in read}
        bad = next((r for r in spec.tiling if not r.allows(vals[r.key])), None) if spec.tiling else None
        if bad:
            reject("tiling", bad.text(), vals[bad.key], t)
            continue
        if spec.expressions:
            key = tuple(vals[v] for v in used)
            if key not in violated:
                expr = first_violated(spec.expressions, vals)
                violated[key] = (expr, expr and evaluate(expr.lhs, vals))
            expr, lhs = violated[key]
            if expr is not None:
                reject("tiling", expr.text, lhs, t)
                continue
        ranged.append(t)
    if tilings and not ranged and spec.tiling:
        # a range that no candidate meets on its own is the one to name (each candidate was rejected by the first
        # range it failed, so the most frequent rejection may be another range)
        alone = next((r for r in spec.tiling if not any(r.allows(TILE_VARS[r.key](t)) for t in tilings)), None)
        if alone is not None:
            have = sorted({TILE_VARS[alone.key](t) for t in tilings})
            raise UsageError(f"no feasible kernel: {alone.text()}, but no {' or '.join(variants)} candidate has such "
                             f"a {alone.key} (they have {', '.join(map(str, have))}): relax it")
    layers_log = [("tiling", total, len(ranged))]

    # layer 1: data movement
    smem_cap = min(hw.limits.smem_per_block, hw.shared.size)  # [limits.smem_per_block], [shared.size]
    moved: list[tuple[Tiling, Movement]] = []
    hard_movement = [c for c in hard if CONSTRAINTS[c.key][0] == "movement"]
    for t in ranged:
        mv = movement(spec, t, hw, shape)
        sm = mv.smem_bytes
        if sm > smem_cap:
            reject("movement", f"shared_memory_per_block <= {smem_cap} (hw limits.smem_per_block)", sm, t)
            continue
        c = next((c for c in hard_movement if _violates(c, _movement_metric(mv, c.key))), None) \
            if hard_movement else None
        if c:
            reject("movement", c.text(), _movement_metric(mv, c.key), t)
            continue
        moved.append((t, mv))
    layers_log.append(("movement", len(ranged), len(moved)))

    # layer 2: registers
    reg_cap = min(hw.limits.regs_per_thread, hw.registers.per_thread)  # [limits.regs_per_thread]
    fitted: list[tuple[Tiling, Movement, RegisterEstimate]] = []
    hard_registers = [c for c in hard if c.key == "registers_per_thread"]
    estimated: dict[tuple[object, ...], RegisterEstimate] = {}  # by what the estimate reads (register_key)
    for t, mv in moved:
        rk = register_key(t)
        got = estimated.get(rk)
        rg = got if got is not None else estimated.setdefault(rk, estimate(spec, t, reg_cap))
        r = rg.per_thread
        if rg.spill:
            reject("registers", f"registers_per_thread <= {reg_cap} (hw limits.regs_per_thread: spill)", r, t)
            continue
        if r * t.threads > hw.core.registers:  # [core.registers]
            reject("registers", f"registers_per_block <= {hw.core.registers} (hw core.registers)",
                   r * t.threads, t)
            continue
        c = next((c for c in hard_registers if _violates(c, r)), None) if hard_registers else None
        if c:
            reject("registers", c.text(), r, t)
            continue
        fitted.append((t, mv, rg))
    layers_log.append(("registers", len(moved), len(fitted)))

    # layer 3: ALU scheduling (+ the prediction), layer 4: synchronization
    staged: list[tuple[Tiling, Movement, RegisterEstimate, Schedule, SyncPlan]] = []
    for t, mv, rg in fitted:
        if t.threads > hw.limits.threads_per_block:
            reject("schedule", f"threads <= {hw.limits.threads_per_block} (hw limits.threads_per_block)",
                   t.threads, t)
            continue
        s = schedule(spec, t, hw, shape, rg.per_thread, mv.smem_bytes)
        if s.ctas_per_core < 1:
            reject("schedule", f"one CTA fits a core (hw {s.ctas_limited_by})", 0, t)
            continue
        ktiles = -(-K // t.bk)
        per_tile = s.min_cycles_per_cta / max(1, ktiles)
        y = sync_plan(t, hw, ktiles, per_tile, mv.l2_hit_rate, s.ctas_per_core)
        staged.append((t, mv, rg, s, y))

    # hard constraints ">=" over observables that fall as the cycles rise: the bounded search rejects on their
    # upper bounds (over_bound) and checks the busy bound against the counts of every candidate it times
    upper = [] if exhaustive else [c for c in hard if c.op == ">=" and c.key in UPPER_KEYS]

    def timed(t: Tiling, mv: Movement, rg: RegisterEstimate, s: Schedule, y: SyncPlan) -> Evaluated | None:
        """The candidate with its prediction and utilization, or None if a hard constraint rejects it."""
        ktiles = -(-K // t.bk)
        cm = cycle_model(spec, t, hw, shape, mv.smem_bytes, mv.dram_cycles, 1.0 - mv.l2_hit_rate, rg.per_thread)
        ev = Evaluated(t, mv, rg, s, y, cm, cm.cycles, cm.cycles_per_cta)
        busy = pipe_busy(spec, t, hw, ktiles, s.ctas, cm.terms.get("extra_passes", 0.0))
        if not exhaustive:  # the counts fill_bound took without a build (variant fill_counts), never silently
            _check_fill_counts(spec, t)
        if upper:  # the count-free busy bound that rejections on an upper bound rely on, never silently
            over = next((n for n, b in (busy_bound(spec, t, hw, shape) or {}).items() if b < busy[n]), None)
            if over is not None:
                raise BoundAbove(f"{t.key()}: pipe {over} busy {busy[over]:g} above its bound (models/bound.py "
                                 "busy_bound)")
        ev.utilization = {p.name: min(1.0, busy.get(p.name, 0.0) / max(1.0, ev.cycles * p.count * cm.cores_used))
                          for p in hw.pipes}
        ev.utilization["dram"] = min(1.0, mv.dram_cycles / max(1, ev.cycles))
        # utilization by class for constraints
        for cls in ("tensor", "fma"):
            try:
                ev.utilization.setdefault(cls, ev.utilization[hw.pipe_for(cls).name])
            except KeyError:
                pass
        c = next((c for c in hard if CONSTRAINTS[c.key][0] == "schedule" and _violates(c, _metric(ev, c.key, hw))),
                 None)
        if c:
            reject("schedule", c.text(), _metric(ev, c.key, hw), t)
            return None
        return ev

    def over_bound(t: Tiling, mv: Movement, cycles_lb: float, counted: bool) -> bool:
        """Reject t untimed (True) where an upper bound of a hard constraint's observable, from a lower bound
        of its cycles, already violates it (_upper_metric); the bounded search only."""
        for c in upper:
            v = _upper_metric(spec, t, hw, shape, mv, cycles_lb, c.key, counted)
            if v is not None and _violates(c, v):
                reject("schedule", c.text(), v, t, on_bound=True)
                return True
        return False

    bounded: list[Bounded] = []
    extra_log: list[str] = []
    if exhaustive:
        nxt: list[Evaluated] = []
        for cand in staged:
            ev = timed(*cand)
            if ev is not None:
                nxt.append(ev)
        layers_log.append(("schedule", len(fitted), len(nxt)))
        alive = nxt
        nxt = []
        for ev in alive:
            if not ev.sync.deadlock_free:
                reject("sync", f"deadlock-free pipeline ({ev.sync.reason})", 0, ev.tiling)
                continue
            ev.penalty = sum(_soft_penalty(c, _metric(ev, c.key, hw)) for c in soft)
            nxt.append(ev)
        layers_log.append(("sync", len(alive), len(nxt)))
        alive = nxt
    else:
        # the deadlock check needs no timing: before the bound, so no deadlocking candidate is timed
        free = []
        for cand in staged:
            if not cand[4].deadlock_free:
                reject("sync", f"deadlock-free pipeline ({cand[4].reason})", 0, cand[0])
            else:
                free.append(cand)
        try:
            alive, bounded, n_rejected = _bounded(spec, hw, shape, free, timed, soft, over_bound)
        except BoundAbove as above:  # a bound above a model's cycles: no pruning can be trusted, time them all
            p = plan(spec, hw, variant, verbose, only, exhaustive=True)
            p.log.insert(0, f"branch and bound refused, searched exhaustively: {above} (a cycle-model term that "
                            "models/bound.py mirrors has changed: tests/test_plan_bound.py fails too)")
            return p
        if not alive and any(r.on_bound for r in rejections):  # nothing timed checked the busy bound: confirm
            p = plan(spec, hw, variant, verbose, only, exhaustive=True)
            p.log.insert(0, "every candidate rejected or rejected on an upper bound: searched exhaustively to confirm")
            return p
        layers_log.append(("schedule", len(fitted), len(free) + len(staged) - len(free) - n_rejected))
        layers_log.append(("sync", len(staged) - n_rejected, len(free) - n_rejected))
        layers_log.append(("bound", len(free) - n_rejected, len(alive)))
        if bounded:
            pruned.setdefault("bound", {})[BOUND_REASON] = len(bounded)
        n_upper = sum(1 for r in rejections if r.on_bound)
        if n_upper:
            texts = ", ".join(sorted({r.constraint for r in rejections if r.on_bound}))
            extra_log.append(f"schedule: {n_upper} candidates rejected untimed: at their lower bound of the cycles "
                             f"(busy cycles or DRAM bytes over it: an upper bound) they already violate {texts} "
                             "(candidates.csv: <=bound)")

    log = []
    for layer, before, after in layers_log:
        why = "; ".join(f"{n} by {k}" for k, n in pruned.get(layer, {}).items())
        log.append(f"layer {layer}: {before} -> {after} candidates" + (f" ({before - after} removed: {why})"
                                                                        if before != after else ""))
    log += extra_log
    if not alive:
        raise UsageError(_infeasible(rejections, layers_log, spec.tiling))

    # Pareto frontier: predicted cycles vs registers vs shared memory
    pts = sorted(alive, key=lambda e: (e.score, e.registers.per_thread, e.movement.smem_bytes))
    front: list[Evaluated] = []
    min_smem: dict[int, int] = {}  # registers -> least shared memory among earlier (faster) points
    for e in pts:
        r, sm = e.registers.per_thread, e.movement.smem_bytes
        if not any(rr <= r and ss <= sm for rr, ss in min_smem.items()):
            e.pareto = True
            front.append(e)
        if sm < min_smem.get(r, 1 << 62):
            min_smem[r] = sm
    best = pts[0]
    secs = time.perf_counter() - t0
    log.append(f"chose {best.tiling.key()}: {best.cycles} cycles predicted, {len(front)} on the Pareto frontier")
    return Plan(spec, hw, shape, best, pts, pruned, total, secs, log, rejections, bounded, exhaustive)


ON_BOUND = " (on an upper bound, untimed)"
# hard constraints ">=" over observables that fall as the cycles rise: an upper bound from a cycles lower bound
UPPER_KEYS = ("alu_utilization", "tensor_utilization", "bandwidth_demand_gbps")


def _upper_metric(spec: GemmSpec, t: Tiling, hw: HwConfig, shape: tuple[int, int, int], mv: Movement,
                  cycles_lb: float, key: str, counted: bool = False) -> float | None:
    """An upper bound of _metric(ev, key) for the candidate t of any timing with cycles >= cycles_lb, or None
    where there is none: utilization from bound.utilization_bound (the pipes' busy cycles over the cycles'
    lower bound; the keys as ``timed`` fills ev.utilization: a pipe named like the class, else the pipe that
    serves it), bandwidth demand from the DRAM bytes over it."""
    if key == "bandwidth_demand_gbps":
        return mv.dram_bytes * hw.clock_mhz * 1e6 / max(1.0, cycles_lb) / 1e9
    pick = _picks(hw, key)
    if not pick:
        return 0.0
    try:
        u = utilization_bound(spec, t, hw, shape, cycles_lb, pick, counted)
    except KeyError:
        return None
    return max(u.values())


def _check_fill_counts(spec: GemmSpec, t: Tiling) -> None:
    """Raise BoundAbove where the variant's fill_counts (models/bound.py fill_bound's head_alu and mmas per K
    tile, taken without a counting build) differ from the counts of a candidate being timed."""
    v = get(t.variant)
    cheap = getattr(v, "fill_counts", None)
    if cheap is None or spec.packed_s4:
        return
    c = v.counts(spec, t)
    if cheap(spec, t) != (c.head_alu, c.iter.get("tensor", 0)):
        raise BoundAbove(f"{t.key()}: fill_counts {cheap(spec, t)} differ from its counts' head_alu and mmas per K "
                         f"tile {(c.head_alu, c.iter.get('tensor', 0))}")


_PICKS: dict[tuple[int, str], tuple[HwConfig, tuple[str, ...]]] = {}


def _picks(hw: HwConfig, key: str) -> tuple[str, ...]:
    """The pipes whose utilization _metric reads for ``key`` (alu_ or tensor_utilization), once per hw."""
    hit = _PICKS.get((id(hw), key))
    if hit is not None and hit[0] is hw:
        return hit[1]
    names = {p.name for p in hw.pipes}
    classes = ("tensor", "fma") if key == "alu_utilization" else ("tensor",)
    pick: list[str] = []
    for cls in classes:
        try:
            pick.append(cls if cls in names else hw.pipe_for(cls).name)
        except KeyError:
            pass
    _PICKS[(id(hw), key)] = (hw, tuple(pick))
    return tuple(pick)


BOUND_REASON = "cycles lower bound > the score of a timed survivor with no more registers and shared memory"


class BoundAbove(Exception):
    """A candidate the bounded search timed has fewer cycles than its lower bound (plan() then searches
    exhaustively and says so in its log)."""

Staged = tuple[Tiling, Movement, RegisterEstimate, Schedule, SyncPlan]


class _Staircase:
    """The timed survivors' (registers, shared memory) pairs that no other one dominates, by registers
    (shared memory falling): does one of them use no more of either than a candidate?"""

    def __init__(self) -> None:
        self.regs: list[int] = []
        self.smem: list[int] = []
        self.evs: list[Evaluated] = []

    def below(self, regs: int, smem: int) -> Evaluated | None:
        i = bisect_right(self.regs, regs) - 1
        return self.evs[i] if i >= 0 and self.smem[i] <= smem else None

    def add(self, ev: Evaluated) -> None:
        r, sm = ev.registers.per_thread, ev.movement.smem_bytes
        if self.below(r, sm) is not None:
            return
        i = bisect_left(self.regs, r)
        j = i
        while j < len(self.regs) and self.smem[j] >= sm:
            j += 1
        self.regs[i:j], self.smem[i:j], self.evs[i:j] = [r], [sm], [ev]


def _counted_first(t: Tiling) -> bool:
    """Bound t with the counts before timing it? Where the shared model's latency terms are dear: the
    copies-then-barrier path (no async copies) walks the L1 lines and chains every copy (counted_bound);
    an mma cp.async pipeline takes models/bound.py's fill_bound, a few terms from its counts (counted_bound
    costs about half its timing there and prunes too few to pay: npu7nm 8192^3 1,828 -> 1,509 timed, no
    faster; benchmarks/plan_speed.md)."""
    v = get(t.variant)
    return uses_shared_model(t.variant) and (not v.async_copies or v.compute_class == "tensor")


def _bounded(spec: GemmSpec, hw: HwConfig, shape: tuple[int, int, int], staged: list[Staged], timed: Any,
             soft: list[Constraint], over_bound: Any = None) -> tuple[list[Evaluated], list[Bounded], int]:
    """Branch and bound over the candidates that passed every layer but the timing: (the timed survivors
    in the order given, the candidates left untimed, the timed ones a hard constraint rejected).

    A candidate c is left untimed when a lower bound B of its cycles is above the score of a timed
    survivor e with no more registers and no more shared memory:
    then score(c) >= cycles(c) >= B > score(e), so e ranks before c and dominates it, c is not on the
    Pareto frontier (cycles x registers x shared memory), and whatever c would dominate e dominates too:
    the frontier, its order and the choice are the exhaustive search's. Two bounds, the cheaper first:
    models/bound.py's analytic_bound (no instruction counted), then where it pays (_counted_first) one
    from the emitted counts: schedule.counted_bound for SIMT (the model's terms but its latency ones),
    bound.fill_bound for mma (the K-tile fill and the tensor work of all resident warps); max of both.
    Candidates are visited by rising bound (one heap; a key pushed is never below the key popped): a
    timed survivor joins the staircase of dominators when the heap passes its score, so every dominator
    has a score below the bound it prunes by. tests/test_plan_bound.py checks both bounds <= cycles and
    the outputs against the exhaustive search."""
    heap: list[tuple[float, int, int, int]] = []  # (key, 0 candidate / 1 dominator, index, bounds taken)
    # per variant: is it bounded with the counts before timing (_counted_first), and by which bound
    second_of = {v: (_counted_first(t), counted_bound if not get(v).async_copies else fill_bound)
                 for v, t in {t.variant: t for t, *_ in staged}.items()}
    for i, (t, mv, rg, *_) in enumerate(staged):
        b = analytic_bound(spec, t, hw, shape, mv.smem_bytes, mv.dram_cycles, 1.0 - mv.l2_hit_rate, rg.per_thread)
        heap.append((float(math.floor(b)), 0, i, 1 if second_of[t.variant][0] else 2))
    heapq.heapify(heap)
    stairs = _Staircase()
    out: dict[int, Evaluated] = {}
    untimed: list[Bounded] = []
    rejected = 0
    while heap:
        key, kind, i, taken = heapq.heappop(heap)
        if kind == 1:
            stairs.add(out[i])
            continue
        t, mv, rg, s, y = staged[i]
        by = stairs.below(rg.per_thread, mv.smem_bytes)
        if by is not None:
            untimed.append(Bounded(t, mv, rg, s, int(key), by))
            continue
        # a hard constraint fails on its bound: busy from the counts once the second bound has built them
        counted_first, second = second_of[t.variant]
        if over_bound is not None and key > 0 and over_bound(t, mv, key, taken == 2 and counted_first):
            rejected += 1
            continue
        if taken == 1:
            b = second(spec, t, hw, shape, mv.smem_bytes, mv.dram_cycles, 1.0 - mv.l2_hit_rate, rg.per_thread)
            if math.floor(b) > key:
                heapq.heappush(heap, (float(math.floor(b)), 0, i, 2))
                continue
        ev = timed(t, mv, rg, s, y)
        if ev is None:
            rejected += 1
            continue
        if ev.cycles < key:  # the bound's invariant (tests/test_plan_bound.py), never relied on silently
            raise BoundAbove(f"{t.key()}: cycles {ev.cycles} below its lower bound {key:.0f}")
        ev.penalty = sum(_soft_penalty(c, _metric(ev, c.key, hw)) for c in soft)
        out[i] = ev
        heapq.heappush(heap, (ev.score, 1, i, 0))
    return [out[i] for i in sorted(out)], untimed, rejected


def _infeasible(rej: list[Rejection], layers_log: list[tuple[str, int, int]],
                ranges: tuple[TileRange, ...] = ()) -> str:
    """The one-line reason no candidate survived: the layer that removed the last ones, its most frequent
    rejection and the nearest candidate to it (for a tiling range: the value closest to the range, then the
    fewest of the spec's `ranges` missed)."""
    last = next((layer for layer, b, a in layers_log if b and not a), layers_log[0][0])
    here = [r for r in rej if r.layer == last] or rej
    if not here:
        return "no candidate tiling exists for this spec"
    counts: dict[str, list[Rejection]] = {}
    for r in here:
        counts.setdefault(r.constraint, []).append(r)
    binding = max(counts, key=lambda k: len(counts[k]))
    lower_is_better = not any(s in binding for s in (">=", "occupancy", "utilization"))
    exact = [r for r in counts[binding] if not r.on_bound] or counts[binding]  # on_bound: metric is a bound
    near = (min if lower_is_better else max)(exact, key=lambda r: r.metric)
    if last == "tiling" and binding.split()[0] in TILE_VARS:  # a range or an expression over tile variables
        rng = next((x for x in ranges if x.text() == binding), None)
        if rng is not None:  # the nearest: the candidate whose value lies closest to the range
            near = min(counts[binding], key=lambda r: (max(rng.lo - r.metric, r.metric - rng.hi, 0),
                                                       sum(not x.allows(TILE_VARS[x.key](r.tiling)) for x in ranges)))
        has = f"has {rng.key} = {near.metric:g}" if rng is not None else f"gives {near.metric:g}"
        return (f"no feasible kernel: {binding}, but the nearest candidate ({near.tiling.key()}) {has}: relax it, "
                "or widen the tiling ranges")
    what = {"tiling": "value", "movement": "bytes", "registers": "registers"}.get(last, "value")
    if binding.startswith("bank_conflict_score"):
        what = "(bank-conflict score)"
    return (f"no feasible kernel: {binding}, but the nearest candidate ({near.tiling.key()}) needs "
            f"{near.metric:g} {what}: relax it, or widen the tiling ranges")


def prediction_dict(p: Plan) -> dict[str, Any]:
    e = p.best
    return {
        "cycles": e.cycles,
        "cycles_per_cta": e.cycles_per_cta,
        "min_cycles_per_cta": e.schedule.min_cycles_per_cta,
        "registers_per_thread": e.registers.per_thread,
        "shared_memory_per_block": e.movement.smem_bytes,
        "utilization": {k: round(v, 4) for k, v in e.utilization.items()},
        "occupancy": round(e.schedule.occupancy, 4),
        # the residency the cycle model assumes for sim.timing (PTX-declared registers, not ptxas')
        "occupancy_simulator": round(min(1.0, e.model.sim_ctas_per_core * -(-e.tiling.threads // p.hw.warp_size)
                                         * p.hw.warp_size / p.hw.core.max_threads), 4),
        "waves": launch_ctas(e.schedule, e.model)[1],
        "ctas": launch_ctas(e.schedule, e.model)[0],
        "bound": e.schedule.bound_pipe,
        "dram_bytes": e.movement.dram_bytes,
        "l2_hit_rate": round(e.movement.l2_hit_rate, 4),
        "bandwidth_utilization": round(e.utilization.get("dram", 0.0), 4),
        "bank_conflict_score": e.movement.bank_conflict_score,
    }


def tiling_json(t: Tiling, spec: GemmSpec) -> dict[str, Any]:
    a, b = operand_tiles(spec, t)
    v = get(t.variant)
    return {"variant": t.variant, "TILE_M": t.bm, "TILE_N": t.bn, "TILE_K": t.bk,
            v.tile_label: [t.tm, t.tn],
            "threads": t.threads, "stages": t.stages, "pad": [t.pad_a, t.pad_b],
            "vector": [t.vec_a, t.vec_b],
            "unroll_k": v.unroll_k(t),
            "smem_stage_bytes": [a.stage_bytes, b.stage_bytes], "key": t.key(),
            **({"mma_k": t.mma_k} if t.mma_k != 16 else {}),
            **({"cluster": [t.cluster_m, t.cluster_n]} if t.clustered else {})}
