"""A lower bound of the shared cycle model's predicted cycles (models/schedule.py) that needs no emitted
instruction count (analytic_bound), and one for mma pipelines from a few of the model's terms over its
counts (fill_bound), for the planner's branch and bound (kernelgen/planner.py ``_bounded``): a candidate
whose bound is above the score of a timed candidate that uses no more registers and no more shared memory
cannot be on the Pareto frontier, so it is never timed. tests/test_plan_bound.py checks bound <= cycles
for every candidate of several shapes, dtypes and hwconfigs."""

from __future__ import annotations

from typing import Any

from kernelgen.counting import Counts
from kernelgen.int4 import emulated_counts
from kernelgen.models.movement import SpecMemo, _copy_banks, _pad_free_key, compute_banks, spec_memo, tile_key
from kernelgen.models.schedule import (
    _drain,
    _occ,
    _pipes,
    dram_share,
    occupancy_ptx,
    pipe_busy,
    resident_inputs,
    rf_occupancy,
    wgmma_unit_cycles,
)
from kernelgen.spec import DTYPE_BYTES, GemmSpec
from kernelgen.tiling import Tiling, operand_tiles
from kernelgen.variants import get
from sim.hw import HwConfig


def uses_shared_model(variant: str) -> bool:
    """Does the variant time its kernels with the shared cycle model below (its ``cycle_model`` is
    marked by kernelgen.variants.shared_model)? A subclass that overrides it unmarked does not."""
    return bool(getattr(type(get(variant)).cycle_model, "shared_model", False))


def analytic_bound(spec: GemmSpec, t: Tiling, hw: HwConfig, shape: tuple[int, int, int], smem: int,
                   dram_cycles: float, miss_rate: float, regs: int) -> float:
    """A lower bound of cycle_model(...).cycles before any instruction is counted (no emitter run), for
    a variant of the shared model (else 0).

    The shared model's launch is rounds x (pre + K tiles x iteration + post), the iteration at least
    each resource term of its R x W warps (a pipe: ceil(R W / units) x per-warp demand; issue; the
    shared array's passes; DRAM), pre at least [branch.frontend_depth] + [pipes[lsu].latency], post
    at least the drain of R output tiles + [pipes[lsu].latency]. R is known where [arch] makes the
    residency follow the predicted registers; elsewhere (PTX-declared registers, not counted yet)
    rounds x R >= the CTAs on the busiest core bounds every R-proportional term.
    Per-warp demand from what the emitted GEMM issues per K tile at least: its MACs (bm bn bk over
    [warp_size] per FMA warp instruction, mma_macs per mma, or the wgmma unit time), the variant's
    compute-side shared loads (compute_work "lsu" per thread), one LSU instruction per global copy
    chunk, the shared-memory replays the model charges beyond one pass per load (at least what the
    fewest loads leave), each at the unit occupancy the model charges, with the variant's
    register-bank extra (rf_extra reads only the copies per thread of the counts). Scaled by 1 - 1e-9:
    its arithmetic is not the model's, so rounding may differ."""
    memo = spec_memo(_PARTS, spec, hw)
    key = (shape, tile_key(t))
    pt: Any = memo.get(key)  # (_parts, by residency: _analytic_terms), () outside the shared model
    if pt is None:
        pt = memo[key] = (_parts(spec, t, hw, shape), {}) if uses_shared_model(t.variant) else ()
    if not pt:
        return 0.0
    parts: Parts = pt[0]
    by_residency: dict[int | None, tuple[float, float]] = pt[1]
    _, _, _, tile_bytes, W, ktiles, _, on_core, T, per_core_bw, resident, fixed = parts
    occ = _occupancy(hw)
    R = max(1, min(occ(T, regs, smem), on_core)) if hw.arch else None  # [arch]
    rounds = -(-on_core // R) if R else -(-on_core // max(1, min(occ(T, 1, smem), on_core)))  # residency falls
    fig = by_residency.get(R)  # as registers grow
    if fig is None:
        fig = by_residency[R] = _analytic_terms(spec, t, hw, parts, R)
    most, drain = fig
    # the DRAM term, the one term that reads the stages (miss_rate): schedule.resident_inputs
    most = max(most, (R or 1) * tile_bytes * (miss_rate * resident) / max(1e-9, per_core_bw))
    if R:
        launch = rounds * (fixed + ktiles * most + drain)
    else:
        launch = rounds * fixed + on_core * (ktiles * most + drain)
    return max(launch, dram_cycles) * (1.0 - 1e-9)


def _analytic_terms(spec: GemmSpec, t: Tiling, hw: HwConfig, parts: Parts, R: int | None) -> tuple[float, float]:
    """analytic_bound's largest term of the iteration but the DRAM one, and the drain, for R resident CTAs
    (None: [arch] unset, R x rounds >= the CTAs on the busiest core)."""
    demand, n_all, passes, _, W, _, cores, _, _, _, _, _ = parts
    S = hw.core.schedulers  # [core.schedulers]
    warps, share = (R * W, R) if R else (W, 1)
    if R:
        terms = [d * -(-warps // units) for units, d in demand]  # [pipes[].count]
        terms.append(n_all * -(-warps // S) / hw.core.issue_width)  # [core.issue_width]
    else:
        terms = [d * (warps / units) for units, d in demand]
        terms.append(n_all * (warps / S) / hw.core.issue_width)
    terms.append(passes * warps / hw.shared.ports)  # [shared.ports]
    return max(terms), _drain(spec, t, hw, share, cores)


_OCC: dict[int, tuple[HwConfig, Any]] = {}


def _occupancy(hw: HwConfig) -> Any:
    """schedule.occupancy_ptx for ``hw`` as a function of (threads, registers, shared bytes), memoised by them
    (the bounds ask it per candidate, for a few hundred distinct arguments)."""
    hit = _OCC.get(id(hw))
    if hit is None or hit[0] is not hw:
        memo: dict[tuple[int, int, int], int] = {}

        def occ(threads: int, regs: int, smem: int) -> int:
            k = (threads, regs, smem)
            r = memo.get(k)
            if r is None:
                r = memo[k] = occupancy_ptx(hw, threads, regs, smem)
            return r

        hit = _OCC[id(hw)] = (hw, occ)
    return hit[1]


Parts = tuple[Any, ...]
_PARTS: SpecMemo = {}


def _parts(spec: GemmSpec, t: Tiling, hw: HwConfig, shape: tuple[int, int, int]) -> Parts:
    """analytic_bound's figures that read neither the stages nor the residency, shared by the tilings of one
    movement.tile_key: per-warp demand by pipe name, instructions and shared passes per K tile, the operand
    tiles' bytes, warps per CTA, K tiles, cores used and CTAs on the busiest core, then what analytic_bound
    reads of the hardware: the threads, a core's DRAM share, the inputs' part beyond the L2
    (resident_inputs) and the fixed latencies. The shared-memory passes read the pads; the rest (_parts_free)
    is shared by the tilings that differ only in them."""
    memo = spec_memo(_PARTS_FREE, spec, hw)
    key = (shape, _pad_free_key(t))
    free = memo.get(key)
    if free is None:
        free = memo[key] = _parts_free(spec, t, hw, shape)
    v = get(t.variant)
    (demand0, n_all, tile_bytes, W, ktiles, cores, on_core, T, per_core_bw, resident, fixed, lsu, copies, occ_l,
     loads) = free
    tiles = operand_tiles(spec, t)
    banks, bw = hw.shared.banks, hw.shared.bank_width
    comp_passes = compute_banks(spec, t, banks, bw)[1]
    copy_passes = copy_sites = 0
    for x in tiles:
        if v.copy_stores_shared(x):
            copy_passes += _copy_banks(x, T, banks, bw)[1]
            copy_sites += x.chunks // T
    # LSU: (loads + copies) x occupancy + replays x [shared.pass_cycles], replays = passes - loads
    # (at least 0); the fewest loads or as many as the passes, whichever costs less
    pc = hw.shared.pass_cycles
    d_lsu = min((n_ld + sum(copies)) * occ_l + max(0, comp_passes - n_ld) * pc
                for n_ld in (loads, max(loads, comp_passes))) + max(0, copy_passes - copy_sites) * pc
    demand = dict(demand0)
    demand[lsu.name] = demand.get(lsu.name, 0.0) + d_lsu
    S = hw.core.schedulers  # [core.schedulers]
    pipes = _pipes(hw)
    units = tuple((max(1, min(pipes[name].count, S)), d) for name, d in demand.items())  # [pipes[].count]
    return (units, n_all, comp_passes + copy_passes, tile_bytes, W, ktiles, cores, on_core, T, per_core_bw, resident,
            fixed)


_PARTS_FREE: SpecMemo = {}


def _parts_free(spec: GemmSpec, t: Tiling, hw: HwConfig, shape: tuple[int, int, int]) -> tuple[Any, ...]:
    """_parts' figures that read no pad (tests/test_plan_memo.py compares every tiling with its own bound): the
    demand of the compute pipe, the instructions per K tile, then the figures _parts returns from the tile
    bytes on, and the LSU, copies per thread, the LSU occupancy and the compute-side loads per thread."""
    M, N, K = shape
    v = get(t.variant)
    pipes = _pipes(hw)
    ws, T = hw.warp_size, t.threads
    W = -(-T // ws)
    ktiles = -(-K // t.bk)
    ctas = -(-M // t.bm) * -(-N // t.bn)
    cores = hw.cores_used(ctas)  # [core.count]
    on_core = -(-ctas // cores)
    lsu = pipes["lsu"]
    tiles = operand_tiles(spec, t)
    copies = [x.chunks // T for x in tiles]
    rf = rf_occupancy(v.rf_extra(spec, t, hw, Counts(copies_a=copies[0], copies_b=copies[1])), hw)
    demand: dict[str, float] = {}
    n_all = 0.0
    if v.compute_class == "wgmma":
        demand[pipes["tensor"].name] = wgmma_unit_cycles(spec, t, hw)
        n_all += 1
    else:
        cp = pipes[v.compute_class]
        per_instr = t.mma_macs if v.compute_class == "tensor" else ws
        n = t.bm * t.bn * t.bk / (W * per_instr)
        occ = _occ(cp, cp.tensor_ops(t.mma_macs, spec.dtype_a) if v.compute_class == "tensor" else ws)
        demand[cp.name] = n * (occ + rf.get(v.compute_class, 0))
        n_all += n
    occ_l = _occ(lsu, ws) + rf.get("lsu", 0)
    loads = v.compute_work(spec, t, 1).get("lsu", 0) / T
    n_all += loads + sum(copies)
    ein = DTYPE_BYTES[spec.dtype_a]
    tile_bytes = sum(x.rows * x.cols for x in tiles) * ein
    fixed = hw.branch.frontend_depth + 2 * lsu.latency  # [branch.frontend_depth], [pipes[lsu].latency]
    return (demand, n_all, tile_bytes, W, ktiles, cores, on_core, T, dram_share(hw, cores),
            resident_inputs(spec, hw, shape, 1.0)[0], fixed, lsu, copies, occ_l, loads)


def fill_bound(spec: GemmSpec, t: Tiling, hw: HwConfig, shape: tuple[int, int, int], smem: int,
               dram_cycles: float, miss_rate: float, regs: int) -> float:
    """A lower bound of the shared model's cycles for an mma cp.async pipeline (0 for other variants) from
    its emitted counts, cheaper than counted_bound: the launch with each K tile at least the model's fill
    and tail (``base >= fill / R + resources(tail)``): the barrier ([pipes[sync].latency] + 1), one k step's
    ldmatrix on the LSU, [shared.latency] and the next tile's copy address arithmetic of the warps sharing
    an ALU (head_alu, [core.policy] lrr), spread over the R resident CTAs, then the tensor pipe's work of
    all R x W warps (the tail keeps every mma); the prologue and epilogue at least their fixed latencies
    and the store drain. Replays and queueing (>= 0) are left out. R as the model sets it: the predicted
    registers where [arch] is set, else the PTX-declared ones (counts.ptx_regs). The bound mirrors those
    terms of models/schedule.py: tests/test_plan_bound.py checks it <= cycles over whole spaces, and the
    planner checks every candidate it times."""
    memo = spec_memo(_FILL, spec, hw)
    key = (shape, t.variant, t.bm, t.bn, t.bk, t.tm, t.tn, t.vec_a, t.vec_b, t.mma_k)
    hit = memo.get(key)
    if hit is None:
        hit = memo[key] = (_fill_static(spec, t, hw, shape), {})
    st, by_residency = hit
    if st is None:
        return 0.0
    counted, T, W, ktiles, cores, on_core, fill, mo, units, fixed = st
    # the PTX registers (a counting build) only where [arch] is unset and they move the residency (else any
    # count gives the same R); with them, or without fill_counts, from the counts
    residency = _occupancy(hw)
    occ = residency(T, regs, smem) if hw.arch else residency(T, 1, smem)  # [arch]
    if counted or (not hw.arch and occ != residency(T, hw.limits.regs_per_thread, smem)):
        return _fill_counted(spec, t, hw, shape, smem, dram_cycles, regs)
    R = max(1, min(occ, on_core))
    launch = by_residency.get(R)  # the launch reads the stages, pads and registers only through R
    if launch is None:
        rounds = -(-on_core // R)
        tail = mo * -(-(R * W) // units)  # [pipes[tensor].count]
        launch = by_residency[R] = rounds * (fixed + ktiles * (fill / R + tail) + _drain(spec, t, hw, R, cores))
    return max(launch, dram_cycles) * (1.0 - 1e-9)


_FILL: SpecMemo = {}


def _fill_static(spec: GemmSpec, t: Tiling, hw: HwConfig, shape: tuple[int, int, int]) -> tuple[Any, ...] | None:
    """fill_bound's figures that read neither the stages, pads, unroll, shared bytes nor registers: None for
    a variant it does not bound; first whether the counts are needed (no fill_counts, s4); the threads,
    warps, K tiles, cores used, CTAs on the busiest core, the fill (head_alu from fill_counts), the tail's
    mmas x occupancy, the tensor units a warp spreads over and the fixed latencies."""
    v = get(t.variant)
    if not (v.async_copies and v.compute_class == "tensor" and uses_shared_model(t.variant)):
        return None
    M, N, K = shape
    ws, T = hw.warp_size, t.threads
    W = -(-T // ws)
    ktiles = -(-K // t.bk)
    ctas = -(-M // t.bm) * -(-N // t.bn)
    cores = hw.cores_used(ctas)  # [core.count]
    on_core = -(-ctas // cores)
    cheap = None if spec.packed_s4 else getattr(v, "fill_counts", None)
    if cheap is None:
        return True, T, W, ktiles, cores, on_core, 0.0, 0, 1, 0
    head_alu, mmas = cheap(spec, t)  # head_alu and the mmas per K tile (tests/test_fill_counts.py)
    ta, tb = operand_tiles(spec, t)
    c = Counts(copies_a=ta.chunks // T, copies_b=tb.chunks // T)  # what rf_extra reads of the counts
    fill, occ_t, units, fixed = _fill_terms(spec, t, hw, c, head_alu)
    return False, T, W, ktiles, cores, on_core, fill, mmas * occ_t, units, fixed


def _fill_terms(spec: GemmSpec, t: Tiling, hw: HwConfig, c: Counts, head_alu: int) -> tuple[float, float, int, int]:
    """(fill, tensor occupancy, tensor units a warp spreads over, fixed latencies) of fill_bound."""
    v = get(t.variant)
    pipes = _pipes(hw)
    ws = hw.warp_size
    W = -(-t.threads // ws)
    S = hw.core.schedulers  # [core.schedulers]
    lsu, alu, syn, tens = pipes["lsu"], pipes["alu"], pipes["sync"], pipes["tensor"]
    rf = rf_occupancy(v.rf_extra(spec, t, hw, c), hw)  # occupancy only: fill and tail have no chain latency
    occ_lsu = _occ(lsu, ws) + rf.get("lsu", 0)
    occ_alu = _occ(alu, ws) + rf.get("alu", 0)
    occ_t = _occ(tens, tens.tensor_ops(t.mma_macs, spec.dtype_a)) + rf.get("tensor", 0)
    share = -(-W // max(1, min(alu.count, S))) if hw.core.policy == "lrr" else 1  # [core.policy]
    fill = (syn.latency + 1) + (t.mi + (t.ni + 1) // 2) * occ_lsu + hw.shared.latency + head_alu * occ_alu * share
    fixed = hw.branch.frontend_depth + 2 * lsu.latency  # [branch.frontend_depth], [pipes[lsu].latency]
    return fill, occ_t, max(1, min(tens.count, S)), fixed


def _fill_counted(spec: GemmSpec, t: Tiling, hw: HwConfig, shape: tuple[int, int, int], smem: int,
                  dram_cycles: float, regs: int) -> float:
    """fill_bound from the counts: head_alu, the mmas per K tile and (where [arch] is unset) the PTX registers."""
    M, N, K = shape
    v = get(t.variant)
    T = t.threads
    W = -(-T // hw.warp_size)
    ktiles = -(-K // t.bk)
    ctas = -(-M // t.bm) * -(-N // t.bn)
    cores = hw.cores_used(ctas)  # [core.count]
    on_core = -(-ctas // cores)
    c = emulated_counts(v.counts(spec, t), spec, hw)  # s4 mmas as ptxas emulates them
    R = max(1, min(occupancy_ptx(hw, T, regs if hw.arch else c.ptx_regs, smem), on_core))  # [arch]
    rounds = -(-on_core // R)
    fill, occ_t, units, fixed = _fill_terms(spec, t, hw, c, c.head_alu)
    tail = c.iter.get("tensor", 0) * occ_t * -(-(R * W) // units)  # [pipes[tensor].count]
    launch = rounds * (fixed + ktiles * (fill / R + tail) + _drain(spec, t, hw, R, cores))
    return max(launch, dram_cycles) * (1.0 - 1e-9)


# Instructions of a MAC-only pipe's classes (fma, tensor) that the prologue and epilogue may issue per
# accumulator a thread holds, and per warp besides: the epilogue's per-element f32 arithmetic (alpha's mul,
# beta's fma, scale, bias, activation, converts) is at most a few; 16 leaves room, and the planner checks
# the bound against the counts of every candidate it times (BoundAbove).
EPILOGUE_PER_ACC = 16
EPILOGUE_PER_WARP = 64


def busy_bound(spec: GemmSpec, t: Tiling, hw: HwConfig, shape: tuple[int, int, int]) -> dict[str, float] | None:
    """Upper bounds of schedule.pipe_busy's busy cycles of the pipes that serve only the multiply-add classes
    (fma, tensor), before any instruction is counted, for an fma or mma variant of the shared model (else
    None): the K loop issues exactly the MACs (bm bn bk over [warp_size] per FMA, over mma_macs per mma,
    at the occupancy pipe_busy charges) and nothing else of those classes; the prologue and epilogue no mma
    and at most EPILOGUE_PER_ACC fma-class instructions per accumulator of a thread (bm bn / threads) +
    EPILOGUE_PER_WARP. Whole spaces against pipe_busy: tests/test_plan_upper.py. Memoised by the fields it
    reads (not the stages, pads or unroll): the returned dict is shared, not to be changed."""
    memo = spec_memo(_BUSY, spec, hw)
    key = (shape, t.variant, t.bm, t.bn, t.bk, t.tm, t.tn, t.mma_k)
    if key in memo:
        return memo[key]
    out = memo[key] = _busy_bound(spec, t, hw, shape)
    return out


_BUSY: SpecMemo = {}


def _busy_bound(spec: GemmSpec, t: Tiling, hw: HwConfig, shape: tuple[int, int, int]) -> dict[str, float] | None:
    v = get(t.variant)
    if v.compute_class not in ("fma", "tensor") or not uses_shared_model(t.variant):
        return None
    _, N, K = shape
    pipes = _pipes(hw)
    ws, T = hw.warp_size, t.threads
    W = -(-T // ws)
    ctas = -(-shape[0] // t.bm) * -(-N // t.bn)
    ktiles = -(-K // t.bk)
    cp = pipes[v.compute_class]
    per_instr = t.mma_macs if v.compute_class == "tensor" else ws
    occ_c = _occ(cp, cp.tensor_ops(t.mma_macs, spec.dtype_a) if v.compute_class == "tensor" else ws)
    out: dict[str, float] = {}
    for p in hw.pipes:
        if not set(p.classes) <= {"fma", "tensor"}:
            continue
        busy = 0.0
        if "fma" in p.classes:
            busy += (EPILOGUE_PER_ACC * -(-(t.bm * t.bn) // T) + EPILOGUE_PER_WARP) * _occ(p, ws)
        if p.name == cp.name:
            busy += ktiles * (t.bm * t.bn * t.bk / (W * per_instr)) * occ_c
        out[p.name] = busy * W * ctas
    return out


def utilization_bound(spec: GemmSpec, t: Tiling, hw: HwConfig, shape: tuple[int, int, int], cycles_lb: float,
                      pipe_names: tuple[str, ...], counted: bool = False) -> dict[str, float]:
    """Upper bounds of the utilization the planner computes for a timed candidate of the shared model
    (kernelgen/planner.py ``timed``: min(1, busy / max(1, cycles x [pipes[].count] x cores used))) of the
    pipes named, from a lower bound of its cycles: the busy cycles of a pipe other than the LSU do not
    depend on the timing (schedule.pipe_busy: every emitted instruction times its occupancy; only the
    LSU adds the model's shared-memory replays), and utilization falls as cycles rise, so cycles >=
    cycles_lb gives utilization <= busy / max(1, cycles_lb x count x cores); busy from the counts where
    ``counted`` (they are built already) or busy_bound does not cover the pipes, else from busy_bound.
    Raises KeyError for the LSU (its busy reads the model's replays) and for a variant outside the shared
    model (its cores differ)."""
    memo = spec_memo(_UTIL, spec, hw)
    key = (shape, t.variant, t.bm, t.bn, t.bk, t.tm, t.tn, t.mma_k, pipe_names)
    st = memo.get(key)
    if st is None:
        st = memo[key] = _util_static(spec, t, hw, shape, pipe_names)
    cores, counts, bounds = st
    busy = pipe_busy(spec, t, hw, -(-shape[2] // t.bk), -(-shape[0] // t.bm) * -(-shape[1] // t.bn), 0.0) \
        if counted or bounds is None else bounds  # counted, or a pipe that serves other classes too
    return {n: min(1.0, busy.get(n, 0.0) / max(1.0, cycles_lb * count * cores)) for n, count in counts}


_UTIL: SpecMemo = {}


def _util_static(spec: GemmSpec, t: Tiling, hw: HwConfig, shape: tuple[int, int, int],
                 pipe_names: tuple[str, ...]) -> tuple[int, tuple[tuple[str, int], ...], dict[str, float] | None]:
    """utilization_bound's figures that read no cycles: the cores used, each named pipe's [pipes[].count],
    busy_bound where it covers the pipes (else None: busy from the counts); KeyError as utilization_bound."""
    if not uses_shared_model(t.variant):
        raise KeyError(t.variant)
    M, N, _ = shape
    ctas = -(-M // t.bm) * -(-N // t.bn)
    cores = hw.cores_used(ctas)  # [core.count]
    pipes = {p.name: p for p in hw.pipes}
    if any(pipes[n].name == _pipes(hw)["lsu"].name for n in pipe_names):
        raise KeyError("lsu")
    busy = busy_bound(spec, t, hw, shape) or {}
    return (cores, tuple((n, pipes[n].count) for n in pipe_names),
            busy if all(n in busy for n in pipe_names) else None)
