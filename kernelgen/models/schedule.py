"""ALU scheduling model: work per pipe in lane-operations, the minimum cycles per CTA (a hard lower
bound), occupancy, waves over the cores, predicted cycles and utilization.

A 32-lane FMA is 32 lane-operations (32 MACs); an m16n8k16 mma is 16*8*16 = 2048.
- pipe cycles per CTA = work[pipe] / ([pipes[p].lanes] * [pipes[p].count])
- CTAs per core = min([core.max_ctas], [core.max_threads] / threads, [core.max_warps] / warps,
  [core.registers] / (registers * threads), [shared.size] / smem)
- occupancy = resident threads / [core.max_threads]; waves = ceil(CTAs / (CTAs per core * [core.count]))
- shared-memory passes cost passes / [shared.ports] cycles on the LSU side
- class "wgmma" (a variant's compute_work in MACs) runs on the tensor pipe at [wgmma.f16_macs] (or the
  input type's field) per unit, [pipes[tensor].count] units
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

from kernelgen.counting import Counts
from kernelgen.emit_common import copy_extra_alu
from kernelgen.int4 import emulated_counts, emulated_work
from kernelgen.models import frozen
from kernelgen.models.l1lines import copy_line_latencies
from kernelgen.models.movement import _pad_free_key
from kernelgen.spec import GemmSpec
from kernelgen.tiling import Tiling, operand_tiles
from kernelgen.variants import get
from sim.hw import HwConfig, Pipe


@dataclass(frozen=True)
class Schedule:
    work: dict[str, int]  # pipe name -> lane-operations per CTA
    min_cycles_per_cta: int
    bound_pipe: str
    ctas_per_core: int
    ctas_limited_by: str
    occupancy: float
    waves: int
    ctas: int


def work_per_cta(spec: GemmSpec, t: Tiling, ktiles: int, hw: HwConfig) -> dict[str, int]:
    """Lane-operations per class ("fma", "tensor", "alu", "lsu") for one CTA (an s4 mma as `hw` runs it:
    kernelgen/int4.py)."""
    a, b = operand_tiles(spec, t)
    T = t.threads
    copies = (a.chunks + b.chunks) // T * T  # copy instructions x lanes per K tile
    out = t.bm * t.bn
    w: dict[str, int] = {"alu": 0, "lsu": 0, "fma": 0, "tensor": 0}
    w["alu"] += ktiles * (copies * 9 + T * 8) + out * 8 + T * 40
    w["lsu"] += ktiles * copies * 2 + out * (2 if spec.has_c else 1)
    for cls, n in get(t.variant).compute_work(spec, t, ktiles).items():
        w[cls] = w.get(cls, 0) + n
    w["fma"] += out * (3 + 2 * spec.has_c + (8 if spec.activation == "gelu" else 0))
    return emulated_work(w, spec, t, hw)


_ADDR_DEPTH = 7  # SIMT copy: longest dependence chain of its address (add, add, setp, and, selp, mul.wide, add)

_PIPES: dict[int, tuple[HwConfig, dict[str, Pipe]]] = {}


def _pipes(hw: HwConfig) -> dict[str, Pipe]:
    """class or pipe name -> Pipe (classes without a pipe of their own go to the "alu" pipe)."""
    hit = _PIPES.get(id(hw))
    if hit and hit[0] is hw:
        return hit[1]
    m: dict[str, Pipe] = {p.name: p for p in hw.pipes}
    for cls in ("alu", "fma", "tensor", "lsu", "sfu", "sync", "branch"):
        try:
            m[cls] = hw.pipe_for(cls)
        except KeyError:
            m[cls] = hw.pipe_for("alu")
    m["wgmma"] = m["tensor"]
    _PIPES[id(hw)] = (hw, m)
    return m


_UNITS: dict[int, tuple[HwConfig, dict[str, int]]] = {}


def _units(hw: HwConfig) -> dict[str, int]:
    """pipe name -> units a warp's instructions spread over: max(1, min([pipes[].count], [core.schedulers]))
    (a warp bound to unit scheduler % count)."""
    hit = _UNITS.get(id(hw))
    if hit and hit[0] is hw:
        return hit[1]
    S = hw.core.schedulers
    u = {p.name: max(1, min(p.count, S)) for p in _pipes(hw).values()}
    _UNITS[id(hw)] = (hw, u)
    return u


def wgmma_unit_cycles(spec: GemmSpec, t: Tiling, hw: HwConfig) -> float:
    """Cycles one warp's share of a K tile's wgmmas holds its tensor unit: its 16 x TILE_N x TILE_K MACs
    per m64 block at [wgmma.f16_macs] (the input type's field) per cycle, or [wgmma.issue] per
    wgmma.mma_async (TILE_K / 16 x tm / 64 of them) when that is longer."""
    wg = hw.wgmma
    if wg is None:
        raise ValueError(f"hw(={hw.name}) has no wgmma section; the wgmma variant's unavailable() excludes it")
    n_mma = t.k_steps * (t.tm // 64)
    return max(n_mma * wg.issue, 16 * t.bn * t.bk * (t.tm // 64) / wg.macs(spec.dtype_a))


def tensor_occupancy(spec: GemmSpec, t: Tiling, hw: HwConfig, c: Counts) -> float | None:
    """For compute class "wgmma": the cycles per tensor-class instruction of the loop body (its
    wgmma.mma_async, fence, commit and wait) that spread wgmma_unit_cycles over them; else None
    (an m16n8k16 mma: [pipes[tensor].lanes])."""
    if get(t.variant).compute_class != "wgmma":
        return None
    return wgmma_unit_cycles(spec, t, hw) / max(1, c.iter.get("tensor", 0))


# per hw: schedule()'s work by (spec, shape, tile key less the pads), its residency by (threads, registers,
# shared bytes)
_WORK: dict[int, tuple[HwConfig, dict[tuple[object, ...], tuple[dict[str, int], int, str]],
                       dict[tuple[int, int, int], tuple[int, str, float]]]] = {}


def schedule(spec: GemmSpec, t: Tiling, hw: HwConfig, shape: tuple[int, int, int], regs: int,
             smem: int) -> Schedule:
    hit = _WORK.get(id(hw))
    if hit is None or hit[0] is not hw or len(hit[1]) > 65536 or len(hit[2]) > 65536:
        hit = _WORK[id(hw)] = (hw, {}, {})
    key = (spec, shape, _pad_free_key(t))  # the work reads neither the stages, unroll_k nor the pads
    # (tests/test_plan_memo.py)
    got = hit[1].get(key)
    if got is None:
        got = hit[1][key] = _work(spec, t, hw, shape)
    work, min_cycles, bound = got
    M, N, K = shape
    T = t.threads
    res = hit[2].get((T, regs, smem))  # the residency, by what it reads (a few hundred distinct a plan)
    if res is None:
        lim = hw.resident_limits(T, regs, smem)
        by = min(lim, key=lambda k: lim[k])
        res = hit[2][(T, regs, smem)] = (lim[by], by, lim[by] * T / hw.core.max_threads)
    per_core, by, occ = res
    ctas = -(-M // t.bm) * -(-N // t.bn)
    waves = -(-ctas // max(1, per_core * hw.core.count)) if per_core else 0
    return frozen(Schedule, dict(work), min_cycles, bound, per_core, by, occ, waves, ctas)


def _work(spec: GemmSpec, t: Tiling, hw: HwConfig, shape: tuple[int, int, int]) -> tuple[dict[str, int], int, str]:
    """schedule()'s lane-operations per pipe, the busiest pipe's cycles per CTA and its name."""
    M, N, K = shape
    ktiles = -(-K // t.bk)
    classes = work_per_cta(spec, t, ktiles, hw)
    work: dict[str, int] = {}
    cyc: dict[str, float] = {}
    pipes = _pipes(hw)
    for cls, ops in classes.items():
        if ops and cls != "wgmma":
            p = pipes[cls]
            if cls == "tensor":  # [pipes[tensor].int8_lanes] for s8
                ops = p.tensor_ops(ops, spec.dtype_a)
            work[p.name] = work.get(p.name, 0) + ops
    for name, ops in work.items():
        p = pipes[name]
        cyc[name] = ops / (p.lanes * p.count)  # [pipes[].lanes], [pipes[].count]
    if classes.get("wgmma") and hw.wgmma is not None:
        p = pipes["wgmma"]  # [wgmma.f16_macs] (input type), [pipes[tensor].count]
        work[p.name] = work.get(p.name, 0) + classes["wgmma"]
        cyc[p.name] = cyc.get(p.name, 0.0) + classes["wgmma"] / (hw.wgmma.macs(spec.dtype_a) * p.count)
    bound = max(cyc, key=lambda k: cyc[k])
    return work, int(cyc[bound]), bound


# ------------------------------------------------------------------------------------------------
# Cycle model: per K-tile iteration critical path vs resource demand, from the emitted instruction
# counts (variant.counts). Every term names the HwConfig field it uses.
# ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CycleModel:
    cycles: int  # whole launch
    cycles_per_cta: int
    iter_cycles: float  # one K-tile iteration of one CTA with `resident` CTAs on the core
    pre_cycles: float
    post_cycles: float
    resident: int  # CTAs running at once on the busiest core
    rounds: int  # CTA rounds on the busiest core
    cores_used: int
    sim_ctas_per_core: int  # residency under the PTX-register rule (see occupancy_ptx)
    bound: str  # which term sets the iteration: a pipe, "issue", "shared", "dram", "latency"
    terms: dict[str, float]


def launch_ctas(s: Schedule, m: CycleModel) -> tuple[int, int]:
    """(CTAs launched, waves). A persistent kernel's cycle model names its grid (terms["grid"],
    kernelgen/models/tma_cycles.py): one wave of min(tiles, grid) CTAs, each walking several output tiles.
    Otherwise one CTA per output tile (Schedule.ctas, which pipe_busy also counts as the tiles)."""
    grid = m.terms.get("grid")
    return (int(grid), 1) if grid else (s.ctas, s.waves)


def occupancy_ptx(hw: HwConfig, threads: int, ptx_regs: int, smem: int) -> int:
    """Resident CTAs per core for `ptx_regs` registers per thread (capped at [limits.regs_per_thread]):
    the smallest of HwConfig.resident_limits ([core.max_ctas], [core.max_threads], [core.max_warps],
    [core.registers], [shared.size]), the rule sim.timing applies."""
    regs = max(1, min(ptx_regs, hw.limits.regs_per_thread))
    return max(1, min(hw.resident_limits(threads, regs, smem).values()))


def _occ(p: Pipe, ops: int) -> int:
    """Cycles a warp instruction holds its unit: max([pipes[].interval], ceil(ops / [pipes[].lanes]))."""
    return max(p.interval, -(-ops // p.lanes))


@lru_cache(maxsize=4096)
def _near(gx: int, gy: int, cores: int, conc: int) -> tuple[int, int]:
    """The sharers of CTA 0 on its own core under round-robin dealing (see cycle_model)."""
    return (sum(1 for x in range(gx) if x % cores == 0 and x < conc),
            sum(1 for y in range(gy) if (y * gx) % cores == 0 and y * gx < conc))


def rf_occupancy(rf: dict[str, float], hw: HwConfig) -> dict[str, float]:
    """The register-bank extra cycles (variant.rf_extra) a unit's occupancy carries: none where [arch] names an
    architecture ptxas targets (it allocates the physical registers; the PTX registers' numbers mean nothing
    there, and [pipes[].lanes] are measured throughputs), all of them for a modelled part without one."""
    return {} if hw.arch else rf


def bank_extra(regs: list[int], hw: HwConfig) -> int:
    """sim.timing RegBanks: [registers] conflict cycles of the distinct registers `regs`."""
    return hw.registers.conflict_cycles(set(regs))


def mva_throughput(stations: list[tuple[float, int]], delay: float, n: int) -> float:
    """Warp iterations per cycle of n identical warps cycling through `stations` (per-warp demand in
    cycles, units the warps are spread over) plus a pure delay: exact mean-value analysis of the
    closed product-form network, the n warps split evenly over a station's units."""
    return _mva(tuple(stations), delay, n)


@lru_cache(maxsize=65536)
def _mva(stations: tuple[tuple[float, int], ...], delay: float, n: int) -> float:
    ds = [d for d, _ in stations if d > 0]
    us = [u for d, u in stations if d > 0]
    q = [0.0] * len(ds)
    busy = [0.0] * len(ds)
    x = 0.0
    for k in range(1, n + 1):
        # an arriving warp waits for the queue ahead; the one in service has half its (fixed, not
        # memoryless) occupancy left on average
        r = [d * (1.0 + qi - bi / 2) for d, qi, bi in zip(ds, q, busy)]
        x_new = k / max(1e-9, sum(r) + delay)
        if x_new - x < 1e-5 * x_new:  # saturated: more warps add nothing
            return x_new
        x = x_new
        m = [k if k < u else u for u in us]
        q = [x * ri / mi for ri, mi in zip(r, m)]
        busy = [min(1.0, x * d / mi) for d, mi in zip(ds, m)]
    return x


def pipe_busy(spec: GemmSpec, t: Tiling, hw: HwConfig, ktiles: int, ctas: int,
              extra_passes: float) -> dict[str, float]:
    """Busy cycles of each pipe for the whole launch as sim.timing counts them: every warp
    instruction of the emitted kernel (variant.counts: prologue, K tiles x loop body, epilogue)
    holds its unit max([pipes[].interval], ceil(lane-ops / [pipes[].lanes])) cycles; shared-memory
    replays hold the LSU [shared.pass_cycles] each."""
    c = emulated_counts(get(t.variant).counts(spec, t), spec, hw)  # s4 mmas as ptxas emulates them
    pipes = _pipes(hw)
    busy = {p.name: 0.0 for p in hw.pipes}
    t_occ = tensor_occupancy(spec, t, hw, c)
    for region, times in ((c.pre, 1), (c.iter, ktiles), (c.post, 1)):
        for cls, n in region.items():
            p = pipes[cls]
            occ = t_occ if cls == "tensor" and t_occ is not None else \
                _occ(p, p.tensor_ops(t.mma_macs, spec.dtype_a) if cls == "tensor" else hw.warp_size)
            busy[p.name] = busy.get(p.name, 0.0) + n * times * occ
    lsu = pipes["lsu"].name
    busy[lsu] += extra_passes * ktiles * hw.shared.pass_cycles
    warps = -(-t.threads // hw.warp_size)
    return {k: v * warps * ctas for k, v in busy.items()}


@dataclass(frozen=True)
class SharedPasses:
    """Shared-memory passes per warp per K tile as sim.timing charges them: every pass beyond the
    first of a warp access costs [shared.pass_cycles] on the LSU and in latency (cp.async writes are
    not shared-array accesses there)."""
    comp_extra: int  # extra passes of the compute-side loads (ld.shared / ldmatrix)
    copy_extra: int  # extra passes of the copies' st.shared
    copy_passes: int
    passes: int  # all passes (compute side + copies)


def shared_passes(spec: GemmSpec, t: Tiling, hw: HwConfig) -> SharedPasses:
    from kernelgen.models.movement import _copy_banks, compute_banks

    v = get(t.variant)
    c = v.counts(spec, t)
    banks, bw = hw.shared.banks, hw.shared.bank_width
    _, passes, _ = compute_banks(spec, t, banks, bw)
    comp_extra = max(0, passes - v.compute_load_sites(c))
    copy_passes = copy_sites = 0
    for tile in operand_tiles(spec, t):
        if v.copy_stores_shared(tile):
            copy_passes += _copy_banks(tile, t.threads, banks, bw)[1]
            copy_sites += tile.chunks // t.threads
    return SharedPasses(comp_extra, max(0, copy_passes - copy_sites), copy_passes, passes + copy_passes)


_PLANNER_HW: dict[int, tuple[HwConfig, HwConfig]] = {}


def planner_hw(hw: HwConfig) -> HwConfig:
    """`hw` as the planner counts cycles: at [planner_clock_mhz], the SM clock measured under load, where given
    (the H200 runs the tensor-bound GEMMs power-limited at ~1,550 MHz, not its 1,980 MHz maximum: the bandwidth
    shares, bytes per second, are fewer cycles at it, so ranking at clock_mhz hides tensor and ring differences
    behind the L2 share). The simulator keeps clock_mhz. One object per `hw` (the models memoise by identity)."""
    f = hw.planner_clock_mhz
    if f is None or f == hw.clock_mhz:
        return hw
    hit = _PLANNER_HW.get(id(hw))
    if hit is None or hit[0] is not hw:
        import dataclasses

        hit = _PLANNER_HW[id(hw)] = (hw, dataclasses.replace(hw, clock_mhz=f))
    return hit[1]


_RESOURCES: dict[int, tuple[HwConfig, dict[tuple, tuple[float, str]]]] = {}


def _resources_memo(hw: HwConfig) -> dict[tuple, tuple[float, str]]:
    """cycle_model's resources() results for `hw` (by identity: a loaded HwConfig is not mutated)."""
    hit = _RESOURCES.get(id(hw))
    if hit is None or hit[0] is not hw:
        hit = _RESOURCES[id(hw)] = (hw, {})
    return hit[1]


def cycle_model(spec: GemmSpec, t: Tiling, hw: HwConfig, shape: tuple[int, int, int], smem: int,
                dram_cycles: float, miss_rate: float, regs: int) -> CycleModel:
    """regs: the predicted registers per thread (models/registers.py, calibrated on ptxas). Residency
    uses them where [arch] names an architecture ptxas targets, as the GPU and sim.timing do; for a
    modelled part without one, the simulator's estimate from the PTX-declared registers."""
    own = get(t.variant).cycle_model(spec, t, hw, shape, dram_cycles, miss_rate)
    if own is not None:
        return own
    out = _shared_model(spec, t, hw, shape, smem, dram_cycles, miss_rate, regs, False)
    assert isinstance(out, CycleModel)
    return out


def counted_bound(spec: GemmSpec, t: Tiling, hw: HwConfig, shape: tuple[int, int, int], smem: int,
                  dram_cycles: float, miss_rate: float, regs: int) -> float:
    """A lower bound of cycle_model(...).cycles for a variant of the shared model (models/bound.py's
    uses_shared_model), from the emitted counts but without the latency terms (the L1 line walk, the
    copy chains, the queueing network): the launch with each K tile at max(its resource demand, DRAM)
    (the model's iteration is max(latency, resources, DRAM)) and the prologue and epilogue without
    their async-copy waits (non-negative addends). The same operations in the same order as the model,
    so the bound is <= its cycles in floating point too."""
    out = _shared_model(spec, t, hw, shape, smem, dram_cycles, miss_rate, regs, True)
    assert isinstance(out, float)
    return out


def _shared_model(spec: GemmSpec, t: Tiling, hw: HwConfig, shape: tuple[int, int, int], smem: int,
                  dram_cycles: float, miss_rate: float, regs: int, bound_only: bool) -> CycleModel | float:
    """The shared cycle model (cycle_model), or with bound_only its counted_bound."""
    from kernelgen.spec import DTYPE_BYTES
    from kernelgen.tiling import operand_tiles

    M, N, K = shape
    v = get(t.variant)
    c = emulated_counts(v.counts(spec, t), spec, hw)  # s4 mmas as ptxas emulates them (kernelgen/int4.py)
    pipes = _pipes(hw)
    ws = hw.warp_size
    W = -(-t.threads // ws)
    S = hw.core.schedulers  # [core.schedulers]
    ktiles = -(-K // t.bk)
    ctas = -(-M // t.bm) * -(-N // t.bn)
    per_core = occupancy_ptx(hw, t.threads, regs if hw.arch else c.ptx_regs, smem)  # [arch]
    cores = hw.cores_used(ctas)  # [core.count]: CTAs spread breadth-first (docs/placement.md)
    on_core = -(-ctas // cores)
    R = max(1, min(per_core, on_core))
    rounds = -(-on_core // R)
    lsu, alu, fma, syn, br = pipes["lsu"], pipes["alu"], pipes["fma"], pipes["sync"], pipes["branch"]
    tens = pipes["tensor"]

    # Register-bank cycles of the PTX registers (variant.rf_extra, [registers]) in the dependent chains:
    # [pipes[].latency] plus them is the measured chain (h200: the m16n8k16 chain's 24 cycles). Where [arch]
    # names a part ptxas targets, ptxas allocates the registers and the pipes' rates are measured throughputs,
    # so the units' occupancy has none (rf_occupancy)
    rf = v.rf_extra(spec, t, hw, c)
    rf_occ = rf_occupancy(rf, hw)

    occ_tab: dict[str, float] = {}
    wg_occ = tensor_occupancy(spec, t, hw, c)
    if wg_occ is not None:
        occ_tab["tensor"] = wg_occ + rf_occ.get("tensor", 0)

    def occ_of(cls: str) -> float:
        v = occ_tab.get(cls)
        if v is None:  # an m16n8kK mma is 16 * 8 * K MACs (m16n8k16: 2048)
            p = pipes[cls]
            v = occ_tab[cls] = _occ(p, p.tensor_ops(t.mma_macs, spec.dtype_a) if cls == "tensor" else ws) \
                + rf_occ.get(cls, 0)
        return v

    def demand(region: Mapping[str, float]) -> dict[str, float]:
        """Per-warp cycles on each pipe (by pipe name) for a region's instructions."""
        d: dict[str, float] = {}
        for cls, n in region.items():
            name = pipes[cls].name
            d[name] = d.get(name, 0.0) + n * occ_of(cls)
        return d

    sp = shared_passes(spec, t, hw)
    comp_extra, copy_extra, copy_passes, passes = sp.comp_extra, sp.copy_extra, sp.copy_passes, sp.passes
    extra_passes = comp_extra + copy_extra

    # resources() by its arguments and what demand() reads of this candidate (its cycles per
    # instruction class: the mma's MACs, the input type, the register-bank extras, a wgmma's
    # occupancy), shared by every candidate of this hw that agrees on them
    seen = _resources_memo(hw)
    occ_key = (t.mma_macs, spec.dtype_a, tuple(rf_occ.items()), wg_occ)

    def resources(region: Mapping[str, float], warps: int, extra: float = 0.0, shared_passes: float = 0.0
                  ) -> tuple[float, str]:
        """Cycles `warps` warps need on the core's shared resources for one pass over `region`:
        issue ([core.schedulers] x [core.issue_width] per cycle), each pipe ([pipes[].count] units,
        a warp bound to unit scheduler % count), the shared array ([shared.ports])."""
        key = (occ_key, tuple(region.items()), warps, extra, shared_passes)
        hit = seen.get(key)
        if hit is None:
            hit = seen[key] = _resources(region, warps, extra, shared_passes)
        return hit

    units = _units(hw)
    issue_width, pass_cycles, shared_ports = hw.core.issue_width, hw.shared.pass_cycles, hw.shared.ports

    def _resources(region: Mapping[str, float], warps: int, extra: float, shared_passes: float
                   ) -> tuple[float, str]:
        terms = {"issue": sum(region.values()) * -(-warps // S) / issue_width}
        for name, cyc in demand(region).items():
            if name == lsu.name:
                cyc += extra * pass_cycles  # [shared.pass_cycles]: replays hold the LSU
            terms[name] = cyc * -(-warps // units[name])
        terms["shared"] = shared_passes * warps / shared_ports  # [shared.ports]
        k = max(terms, key=terms.__getitem__)
        return terms[k], k

    ein = DTYPE_BYTES[spec.dtype_a]
    ta, tb = operand_tiles(spec, t)
    ext = {"m": M, "n": N, "k": K}
    l2_lat = hw.l2.hit_latency
    miss_rate, dram_lat = resident_inputs(spec, hw, shape, miss_rate)
    per_core_bw = dram_share(hw, cores)
    bar = syn.latency + 1  # [pipes[sync].latency]: release after the last arrival, then refetch
    if hw.branch.predictor == "none":  # [branch.predictor], [pipes[branch].latency], [branch.flush_penalty]
        loop_br = alu.latency + br.latency + hw.branch.flush_penalty
    else:
        loop_br = alu.latency + 1
    terms: dict[str, float] = {}
    it = c.iter
    tile_bytes = (ta.rows * ta.cols + tb.rows * tb.cols) * ein
    dram_iter = R * tile_bytes * miss_rate / max(1e-9, per_core_bw)
    # what one core receives per cycle of the copies: its L2 port ([core.fill_bytes_per_cycle]) or its share
    # of the L2's read bandwidth ([l2.bandwidth_gbps] over the `cores` copying at once), the smaller
    ports = [x for x in (hw.core.fill_bytes_per_cycle,
                         hw.l2_bytes_per_cycle / cores if hw.l2_bytes_per_cycle else None) if x]
    fill_port = min(ports) if ports else 0.0
    l2_tile = R * tile_bytes / fill_port if fill_port else 0.0  # one K tile of the R resident CTAs through it
    # CTAs that run at once and copy the same lines: a block row shares A, a block column B (grid
    # ceil(N / TILE_N) x ceil(M / TILE_M), capped by the CTAs resident on the device: `cores` x R)
    conc = cores * R
    gx, gy = -(-N // t.bn), -(-M // t.bm)
    sharers = (max(1, min(gx, conc)), max(1, min(gy, conc)))  # A, B
    if bound_only:  # counted_bound: the terms below that need no latency, computed as they are there
        res_b = resources(it, R * W, extra_passes, passes)[0]
        pre_b = hw.branch.frontend_depth + lsu.latency + resources(c.pre, R * W)[0]
        post_b = max(resources(c.post, R * W)[0], _drain(spec, t, hw, R, cores)) \
            + (l2_lat if c.post_loads else 0) + lsu.latency
        return float(max(rounds * (pre_b + ktiles * max(res_b, dram_iter) + post_b), dram_cycles))
    if not v.async_copies:  # copies, barrier, compute, barrier
        n_a, n_b = c.copies_a, c.copies_b
        # The copies run one after another in every warp (a copy's st.shared waits for its load); the
        # W warps of the CTA share the schedulers, so the address arithmetic before each load is paid
        # at the throughput of all W warps (resources), or its dependence chain ([pipes[alu].latency])
        # when that is longer. While a load is outstanding, the fetch window (sim.timing lookahead)
        # holds its dependents (cvt, st.shared) and lets up to lookahead - dependents younger
        # address instructions of the next copy issue under the latency.
        lookahead = int(hw.core.lookahead)  # [core.lookahead]: sim.timing fetch window
        RW = R * W  # the resident CTAs start together and keep in step (same instruction stream)
        ncopy = max(1, n_a + n_b)

        # each copy's issue cost (the larger of its address arithmetic's throughput and dependence
        # chain) before its load's latency, and the last copy's cvt + st.shared after it
        steps: list[float] = []
        prev_dep = 0
        for n, dt, tl in ((n_a, spec.dtype_a, ta), (n_b, spec.dtype_b, tb)):
            dep = 1 + (dt != "f32")  # (cvt +) st.shared after the load
            # a blocked/striped layout's formula, run-time chunk division: emit_common.copy_extra_alu
            lay_alu, lay_once = copy_extra_alu(tl, t.threads, getattr(spec, "layout_" + tl.name))
            for j in range(n):
                # variants/simt.py: 9 address ops + mov zero (+2 per operand)
                pre_alu = 10 + (2 + lay_once if j == 0 else 0) + lay_alu
                rem = pre_alu - (max(0, lookahead - prev_dep) if prev_dep else 0)
                after = (prev_dep - 1) if prev_dep else 0  # the previous copy's cvt (ALU)
                thr = resources({"alu": max(0, rem) + after, "lsu": 1 + (1 if prev_dep else 0)}, RW,
                                copy_extra / ncopy if prev_dep else 0)[0]
                steps.append(max(thr, min(max(0, rem), _ADDR_DEPTH) * alu.latency))
                prev_dep = dep
        copy_tail = resources({"alu": prev_dep - 1, "lsu": 1}, RW, copy_extra / ncopy)[0] + alu.latency

        def copy_chain(lats: tuple[float, ...]) -> float:
            if hw.arch:
                # ptxas issues a K tile's independent global loads back to back and converts and stores
                # them after (the SASS of the simt kernel: LDG, LDG, HADD2.F32, HADD2.F32, STS, STS): the
                # copies' issue, then the longest of their latencies
                return sum(steps) + max(lats[:len(steps)] or lats[-1:]) + copy_tail
            cc = 0.0
            for idx, step in enumerate(steps):
                cc += step + (lats[idx] if idx < len(lats) else lats[-1])
            return cc + copy_tail

        # Which loads wait for DRAM, the L2 or the L1 (h200: ld.global without .cg allocates in the L1 in
        # sim.timing): counted from the copy addresses of CTA 0's first and second K tile, per warp
        # (l1lines.copy_line_latencies); without an L1, from which lines are new (below).
        near, follow_copy = (1, 1), 0.0
        if hw.l1 is not None:
            # sim.timing deals the first wave round robin (CTA i on core i % cores, R per core): the
            # sharers of CTA 0 on its own core (same L1) are the linear ids < cores x R that are
            # multiples of `cores`: x of its block row, y x gx of its block column
            near = _near(gx, gy, cores, conc)
            geo = tuple((tl.rows, tl.cols, tl.vec, tl.chunks_per_row, tl.elem_global, tl.col_dim == "k",
                         getattr(spec, "layout_" + tl.name)) for tl in (ta, tb))
            lims = tuple((ext[tl.col_dim], ext[tl.row_dim], ext[tl.col_dim]) for tl in (ta, tb))
            # a co-resident sharer that is not first finds the new lines in the core's L1
            big = 1 << 20
            (lat_first, lat_later), (f_first, f_later) = copy_line_latencies(
                geo, t.threads, ws, lims, t.bk, ktiles, hw.l1.line, hw.l1.size // (hw.l1.line * hw.l1.assoc),
                hw.l1.assoc, float(dram_lat), float(l2_lat), float(hw.l1.hit_latency),
                ((sharers, near), ((big, big), (big, big))))
            first_copy, later_copy = copy_chain(lat_first), copy_chain(lat_later)
            follow_copy = (copy_chain(f_first) + (ktiles - 1) * copy_chain(f_later)) / ktiles
        else:
            # no L1: a copy waits [dram.latency] when its lines are new, else [l2.hit_latency]. A
            # K-contiguous row brings a new line every line / (TILE_K x element) K tiles; a line of a
            # block row (A) / column (B) is new only for the first of the CTAs running at once that
            # share it (sim.timing tags a line at its first access)
            lat_f, lat_l = [], []
            for tl, n, ns in ((ta, n_a, sharers[0]), (tb, n_b, sharers[1])):
                run = tl.cols * ein
                p_new = min(1.0, run / hw.l2.line) if tl.col_dim == "k" and ext["k"] * ein > run else 1.0
                lat_f += [dram_lat / ns + l2_lat * (1 - 1 / ns)] * n
                lat_l += [(p_new * dram_lat + (1 - p_new) * l2_lat) / ns + l2_lat * (1 - 1 / ns)] * n
            first_copy, later_copy = copy_chain(tuple(lat_f)), copy_chain(tuple(lat_l))
        chain_copy = (first_copy + (ktiles - 1) * later_copy) / ktiles
        copy_region = {"alu": it.get("alu", 0) - 2, "lsu": 2 * (n_a + n_b)}
        comp_region = {"lsu": it["lsu"] - 2 * (n_a + n_b), "fma": it["fma"]}
        nv = comp_region["lsu"] // t.bk
        per_kk = nv * occ_of("lsu") + hw.shared.latency + comp_extra / max(1, t.bk) * hw.shared.pass_cycles \
            + t.tm * t.tn * occ_of("fma")
        chain_comp = t.bk * per_kk + fma.latency + rf.get("fma", 0)
        ph_copy = max(chain_copy, resources(copy_region, RW, copy_extra, copy_passes)[0])
        ph_comp = max(chain_comp, resources(comp_region, RW, comp_extra, passes - copy_passes)[0])
        # The RW warps leave the barrier together and all share the LSU ([pipes[lsu].count]) for their
        # ld.shared (+ replays, [shared.pass_cycles]) and the FMA unit of their scheduler; the phase
        # ends when the last one is done. The same closed network as the mma path (mva_throughput):
        # per-warp unit demands, the rest of the lone warp's chain as a delay; RW / throughput is
        # the time for every warp to pass once.
        st_comp = []
        for name, cyc in demand(comp_region).items():
            if name == lsu.name:
                cyc += comp_extra * hw.shared.pass_cycles
            st_comp.append((cyc, max(1, min(pipes[name].count, S))))
        st_comp.append(((passes - copy_passes) / hw.shared.ports, 1))
        x1 = mva_throughput(st_comp, 0.0, 1)
        xn = mva_throughput(st_comp, max(0.0, chain_comp - 1.0 / x1), RW)
        ph_comp = max(ph_comp, RW / xn)
        if R > 1 and max(near) > 1:
            # Co-resident sharers of a line get different copy latencies (the first pays [dram.latency],
            # the others hit the core's L1), so the resident CTAs do not stay in step: a CTA's compute
            # phase shares the units with its own W warps and with each other CTA's warps for the
            # fraction f of the iteration that CTA computes, its copy phase being a follower's (L1 hits;
            # fixed point); the demand of all R x W warps (res_all below) still bounds the iteration.
            ph_one = max(chain_comp, resources(comp_region, W, comp_extra, passes - copy_passes)[0])
            ph_follow = max(follow_copy, resources(copy_region, RW, copy_extra, copy_passes)[0])
            pc = ph_comp
            for _ in range(8):
                f = pc / max(1e-9, ph_follow + pc)
                n_eff = W + (R - 1) * W * f
                xe = mva_throughput(st_comp, max(0.0, chain_comp - 1.0 / x1), max(1, round(n_eff)))
                pc = max(ph_one, n_eff / xe)
            ph_comp = pc
        lat_iter = ph_copy + ph_comp + 2 * bar + loop_br
        terms.update(copy=ph_copy, compute=ph_comp)
    else:  # a cp.async pipeline of t.stages buffers
        S_ = t.stages
        kk = t.k_steps
        if wg_occ is not None:
            # wgmma: no fragment loads; the K tile's wgmmas queue on the unit back to back. With 2 stages
            # the wait_group 0 that ends the tile waits for the last one's MACs and [wgmma.latency]; with
            # 3 or more, wait_group 1 waits for the previous tile's group, so that latency runs under
            # the next tile's issue and only the unit time chains
            nldm = 0
            assert hw.wgmma is not None
            chain_comp = wgmma_unit_cycles(spec, t, hw) + (hw.wgmma.latency if S_ < 3 else 0)
        else:
            nldm = t.mi + (t.ni + 1) // 2
            t_occ = occ_of("tensor")
            chain_comp = hw.shared.latency + nldm * occ_of("lsu") \
                + extra_passes * hw.shared.pass_cycles / max(1, kk) \
                + kk * max(t.mi * t.ni * t_occ, tens.latency + rf["tensor"]) + tens.latency + rf["tensor"]
        issue_alu = it.get("alu", 0) * occ_of("alu")
        # A lone warp: barrier, the next tile's copy arithmetic (`head`), then the ldmatrix -> mma chain,
        # which the rest of its ALU issue (inner-loop pointers, advance) and ldmatrix overlap (an mma
        # holds the tensor unit while the warp issues on)
        head = c.head_alu * occ_of("alu")
        lat_nowait = bar + loop_br + head + max(chain_comp, issue_alu - head + kk * nldm * occ_of("lsu")
                                                + hw.shared.latency)
        # Latency hiding by the resident warps (R CTAs x W warps): a closed queueing network solved
        # by mean-value analysis. Every warp loops over one K tile: it holds the LSU (one unit per
        # core, [pipes[lsu].count]) for its copies and ldmatrix (+ replays, [shared.pass_cycles]),
        # the shared array ([shared.ports]), and the tensor / ALU unit of its scheduler
        # ([pipes[].count] units, [core.schedulers]) for its mma / address arithmetic; what a lone
        # warp waits beyond its own unit time (ldmatrix/mma latency, barrier, branch) is a delay.
        # With one warp this is the latency path; with many it tends to the busiest unit, and in
        # between it charges the queueing that the strict ldmatrix -> mma alternation of every warp
        # (the fragments are reused per k16 step) costs when the LSU and the tensor units are both
        # near saturation.
        stations = []
        for name, cyc in demand(it).items():
            p = pipes[name]
            if name == lsu.name:
                cyc += extra_passes * hw.shared.pass_cycles
            stations.append((cyc, max(1, min(p.count, S))))
        stations.append((passes / hw.shared.ports, 1))
        n_warps = R * W
        x_1 = mva_throughput(stations, 0.0, 1)
        delay = max(0.0, lat_nowait - 1.0 / x_1)
        x_n = mva_throughput(stations, delay, n_warps)
        t_n = n_warps / x_n
        if 1.0 / x_1 > lat_nowait:
            # the network holds a warp at one station at a time, so a lone warp's unit times add up;
            # but its mma occupancy overlaps its own later issue: the lone warp takes lat_nowait, and
            # the correction fades as the units saturate
            t_n = max(t_n - (1.0 / x_1 - lat_nowait) * (1.0 / x_1) / t_n, lat_nowait)
        # The network treats the warps as independent; the per-tile barrier releases a CTA's warps
        # together, and each tensor unit waits for its first warp's first fragments: the barrier
        # ([pipes[sync].latency]), that warp's ldmatrix of one k16 step on the LSU (with replays) and
        # [shared.latency]. Another resident CTA keeps the units busy meanwhile: 1/R of it shows.
        ldm_occ = nldm * occ_of("lsu") + extra_passes / max(1, kk) * hw.shared.pass_cycles
        fill = bar + ldm_occ + hw.shared.latency + extra_passes / max(1, kk * nldm) * hw.shared.pass_cycles
        # Before its first ldmatrix a warp issues the next tile's copy address arithmetic on its
        # scheduler's ALU ([pipes[alu].count]); under round robin ([core.policy] lrr) the warps of that
        # scheduler interleave, so all of theirs comes first; greedy (gto) runs one warp ahead.
        share = -(-W // max(1, min(alu.count, S))) if hw.core.policy == "lrr" else 1
        fill += head * share
        # One K tile of every resident CTA: the network's time, or the fill followed by the busiest
        # unit's work for all resident warps, whichever is longer (a lone warp's network time already
        # holds its fill; with many warps the fill shows before the units saturate).
        res_w = resources(it, W, extra_passes, passes)[0]
        # (the units' work after the fill: the copy arithmetic the fill holds is not counted twice)
        wpu = -(-n_warps // max(1, min(alu.count, S)))
        tail = {**it, "alu": max(0.0, it.get("alu", 0) - c.head_alu * share / wpu)}
        base = max(t_n, fill / R + resources(tail, n_warps, extra_passes, passes)[0], res_w)
        # K tiles in flight while a warp waits for one (the emitted pipelines): the mma variant and a 2-stage
        # wgmma wait for tile kt, then issue tile kt + S - 1, so S - 1 tiles are in flight; a wgmma of 3+
        # stages (kernelgen/variants/wgmma.py) issues tile kt's wgmmas, waits for tile kt + 1 and only then
        # issues tile kt + S - 1 into the stage tile kt - 1 held: S - 2 in flight
        ahead = max(1, S_ - 2 if wg_occ is not None and S_ >= 3 else S_ - 1)
        # A K tile has landed when its slowest line has (cp.async.wait_group waits for all its copies): its
        # round trip is the first touch of its slowest line (tile_first_touch: a far-homed line of the L2, or a
        # far-homed DRAM miss for the tiles the L2 does not hold, beyond_l2), then the tile's transfer through
        # the core's L2 port ([core.fill_bytes_per_cycle]) or its share of the L2's read bandwidth
        # ([l2.bandwidth_gbps] over the `cores` copying at once) (the R resident CTAs drift apart: the R
        # tiles' port time is the floor
        # `l2_tile` below), and, for its misses, the wait behind the misses of the tiles issued before it and
        # still in flight, `ahead` - 1 of every core, issued one an iteration apart and so half served on
        # average, at the rate cp.async streams reach from DRAM with every core loading
        # ([dram.stream_bandwidth_gbps], dram_share). Measured on the H200 by
        # benchmarks/cpasync_stream (docs/fidelity.md, session 9): the cp.async wgmma at 64x7168x4096 takes
        # 1,237 / 690 / 542 / 442 cycles per K tile with 1 / 2 / 3 / 4 tiles in flight (3 to 6 stages), a round
        # trip of ~1,190 / 1,330 / 1,580 / 1,720.
        # With every CTA in one wave (rounds 1) the sharers of a block row (A) / column (B) start together
        # and walk K in step, so the readers of a line wait on the same fill (as wgmma_tma's model,
        # kernelgen/models/tma_cycles.py p_stage); over several rounds they drift apart and race for the
        # lines: a CTA first on either operand waits the first touch, the others an L2 hit ([l2.hit_latency])
        p_first = 1.0 if rounds == 1 else 1.0 - (1.0 - 1.0 / sharers[0]) * (1.0 - 1.0 / sharers[1])
        own = l2_tile / R
        queue = (ahead - 1) / 2 * R * tile_bytes * miss_rate / max(1e-9, per_core_bw)
        out = beyond_l2(spec, hw, shape) if miss_rate > 0 else 0.0
        trip = p_first * (tile_first_touch(hw, out) + own + queue) + (1.0 - p_first) * (l2_lat + own)
        # Little's law: `ahead` tiles are in flight, each for its round trip plus the barrier and the copy
        # arithmetic before its copies issue (they issue after the wait of the iteration `ahead` back), so
        # an iteration takes at least (round trip + barrier + head) / ahead; the first tile's wait is in
        # `pre`, so the excess shows in ktiles - 1 of the ktiles iterations
        exposed = max(0.0, (trip + bar + head * share) / ahead - base) * (ktiles - 1) / ktiles
        lat_iter = base + exposed
        terms.update(exposed=exposed, compute=chain_comp, mva=t_n, fill=fill / R, trip=trip, ahead=float(ahead))
    res_all, res_key = resources(it, R * W, extra_passes, passes)
    # The L2 side is a throughput floor too, not only a latency to hide: the R resident CTAs' K tiles pass
    # the core's L2 port ([core.fill_bytes_per_cycle]) or its share of the L2's read bandwidth
    # ([l2.bandwidth_gbps] over the `cores` copying at once), `l2_tile`, once per iteration (H200,
    # benchmarks/data/gpu_bench_auto_2026-12-01b.json: the cp.async wgmma 128x128x64 tiles at 4096^3 read
    # 2 MiB a CTA from the L2 and ran 0.282 ms, about the L2's read rate)
    terms.update(latency=lat_iter, dram=dram_iter, l2=l2_tile, extra_passes=float(extra_passes),
                 **{"res_" + res_key: res_all})
    iter_c = max(lat_iter, res_all, dram_iter, l2_tile)
    bound = "latency" if iter_c == lat_iter else ("dram" if iter_c == dram_iter else
                                                  ("l2" if iter_c == l2_tile else res_key))
    pre_issue = resources(c.pre, R * W)[0]
    pre = hw.branch.frontend_depth + lsu.latency + pre_issue  # [branch.frontend_depth]
    if v.async_copies:
        # The prologue's S - 1 tiles of async copies: the core accepts them no faster than it receives
        # the bytes ([core.fill_bytes_per_cycle] or its share of [l2.bandwidth_gbps], `fill_port`), so
        # the warps issue them for (S - 1) x one tile's transfer (H200, docs/top4.md: the prologue of the
        # 128x256x64 tiles takes ~1,000-1,500 cycles with 2 stages, ~2,000-2,800 with 3); the first wait
        # ends when tile 0 has arrived: its first touch ([l2.hit_latency], [l2.far_latency] or
        # [dram.latency], resident_inputs) and transfer after its copies issued
        pre += max(0.0, (t.stages - 1) * l2_tile - pre_issue,
                   dram_lat + l2_tile - resources(c.pre_after, R * W)[0])
    # The epilogue's stores drain at the core's store rate ([core.store_bytes_per_cycle]) or its share
    # of what the L2 absorbs from every core storing at once ([l2.write_bandwidth_gbps]): measured on the
    # H200 for this store pattern in docs/micro-store.md (a 128x256 f32 tile: 16k cycles alone, 27k
    # with 128 CTAs), where issuing them ([pipes[lsu]]) takes a few hundred cycles
    drain = _drain(spec, t, hw, R, cores)
    post = max(resources(c.post, R * W)[0], drain) + (l2_lat if c.post_loads else 0) + lsu.latency
    terms["store_drain"] = drain
    if v.async_copies:
        # the last iteration's copies (zero-filled past K, from a clamped address the L2 holds) are
        # drained by the wait_group 0 after the loop: what of their latency the rest of that iteration
        # (after its wait and barrier) does not cover (H200, docs/top4.md: the 128^3 kernels' whole
        # epilogue, wait_group 0, 1 KiB of stores and the barrier, takes 81-88 cycles)
        post += max(0.0, l2_lat - (iter_c - bar))
    cta = pre + ktiles * iter_c + post
    total = max(rounds * cta, dram_cycles)
    return CycleModel(int(total), int(cta), iter_c, pre, post, R, rounds, cores, per_core, bound, terms)


def dram_share(hw: HwConfig, cores: int) -> float:
    """Bytes per cycle of DRAM one of the `cores` copying at once gets: where [arch] names a real part, what
    cp.async streams reach from DRAM with every core loading ([dram.stream_bandwidth_gbps], else
    [dram.bandwidth_gbps]) over them; for a modelled part without one (npu7nm: the simulator is its hardware)
    [dram.bandwidth_gbps] over them times [dram.burst] / [l2.line], sim.timing's DRAM bank occupancy. (Until
    session 9 the H200 had that fraction too: not its mechanism; the cp.async kernels it fitted at M = 64/128,
    N = 7168 are latency-bound, their tiles' round trip under load over the tiles in flight: cycle_model's
    `trip` / `ahead`, benchmarks/cpasync_stream.)"""
    if not hw.arch:
        return hw.dram_bytes_per_cycle / cores * hw.dram.burst / hw.l2.line
    bw = hw.dram.stream_bandwidth_gbps or hw.dram.bandwidth_gbps
    return bw * 1e3 / hw.clock_mhz / cores


def tile_first_touch(hw: HwConfig, out: float) -> float:
    """Cycles until the slowest line of a K tile a core touches first has arrived (its copies wait for all),
    `out` of the tiles missing in the L2 (beyond_l2: the lines beyond its capacity are the oldest written, a
    contiguous part of the inputs, so whole K tiles miss): a resident tile waits for a far-homed line,
    [l2.hit_latency] + [l2.far_latency] (half its lines are far-homed, [l2.partition_bits]; H200
    benchmarks/data/micro_fill_2026-11-30.json: one SM's 2 KiB cp.async batch from the L2 lands in 463 cycles =
    278 + 187 - 2), a missing one for a far-homed DRAM miss, [dram.latency] + [l2.far_latency] / 2
    ([dram.latency] is the mean of near- and far-homed misses)."""
    far = hw.l2.far_latency or 0
    return out * (hw.dram.latency + far / 2) + (1 - out) * (hw.l2.hit_latency + far)


def resident_inputs(spec: GemmSpec, hw: HwConfig, shape: tuple[int, int, int], miss_rate: float
                    ) -> tuple[float, float]:
    """(miss rate, latency of a line's first touch) when the launch starts with its inputs in the L2, as
    right after they were written (the host upload or the kernel that produced them; the write-back L2
    keeps the lines written: benchmarks/data/gpu_l2_2026-11-30b.json, 64x4096x4096 59.8k cycles per CTA
    as uploaded vs 111.6k after a 256 MiB flush). The inputs' footprint up to [l2.size] is resident: the
    movement model's miss rate counts only the part beyond it. A resident line's first touch by a core
    costs [l2.hit_latency] near its home partition and [l2.far_latency] more far (half the lines,
    [l2.partition_bits]), a missing one [dram.latency]. With [l2.partition_bits] set the capacity is half
    of [l2.size]: a line every core reads is copied into the far partition on its first far touch
    ([l2.far_latency]'s source, benchmarks/data/first_touch_2026-12-01.json: far lines are all near on the
    second pass), so a GEMM's inputs, read from both partitions, take two lines each (H200 back-to-back
    launches, docs/wgmma-tma.md section 9: 35 MB of inputs stay, 59 MB stream from DRAM; 31.5 MB = half).
    Where the L2's hold is measured ([l2.held_footprints] / [l2.held_fractions]) that part: beyond_l2."""
    out = beyond_l2(spec, hw, shape)
    first = hw.l2.hit_latency + (hw.l2.far_latency or 0) / 2
    return miss_rate * out, out * hw.dram.latency + (1 - out) * first


def beyond_l2(spec: GemmSpec, hw: HwConfig, shape: tuple[int, int, int]) -> float:
    """The fraction of the inputs' footprint the L2 does not hold at the launch's start (resident_inputs). Where
    [l2.held_footprints] / [l2.held_fractions] are measured (H200: benchmarks/tma_l2res, back-to-back launches
    hold all of up to ~42 MB, a third at 51-54 MB, nothing from 58 MB: lines read in the order they were written
    are evicted before they are read again, LRU), 1 - that fraction (linear between the points, flat beyond);
    else the part beyond [l2.size], halved where [l2.partition_bits] is set."""
    from kernelgen.spec import DTYPE_BYTES

    M, N, K = shape
    foot = (M * K + K * N) * DTYPE_BYTES[spec.dtype_a]
    xs, ys = hw.l2.held_footprints, hw.l2.held_fractions
    if xs and len(xs) == len(ys):
        held = float(ys[-1])
        if foot <= xs[0]:
            held = float(ys[0])
        else:
            for (x0, y0), (x1, y1) in zip(zip(xs, ys), zip(xs[1:], ys[1:])):
                if foot <= x1:
                    held = y0 + (y1 - y0) * (foot - x0) / (x1 - x0)
                    break
        return min(1.0, max(0.0, 1.0 - held))
    cap = hw.l2.size / 2 if hw.l2.partition_bits else hw.l2.size
    return max(0.0, 1.0 - cap / max(1, foot))


def _drain(spec: GemmSpec, t: Tiling, hw: HwConfig, R: int, cores: int) -> float:
    """Cycles the R resident CTAs' epilogue waits for its output tiles to drain (cycle_model's epilogue): a
    store is done for the warp when the core accepts it, and the core accepts [core.store_buffer_bytes]
    ahead of the drain, so the CTAs end when all but that much has drained."""
    from kernelgen.spec import DTYPE_BYTES

    out_bytes = max(0.0, R * t.bm * t.bn * DTYPE_BYTES[spec.dtype_out] - (hw.core.store_buffer_bytes or 0))
    l2_w = hw.l2.write_bandwidth_gbps
    rates = [x for x in (hw.core.store_bytes_per_cycle, l2_w * 1e3 / hw.clock_mhz / cores if l2_w else None) if x]
    return out_bytes / min(rates) if rates else 0.0
