"""Cycle model of the warp-specialised persistent TMA + wgmma GEMM (kernelgen/variants/wgmma_tma.py), from
its mechanisms, with no constant fitted to a measurement.

The grid is min(tiles, the emitter's persistent CTA count), one CTA per core ([core.count]); CTA i walks
tiles i, i + grid, ..., so the slowest CTA runs ceil(tiles / grid) of them and decides the launch. Per
output tile and K tile, two engines work at once:

- tensor: the consumer warpgroups' wgmmas, wgmma_unit_cycles per warp ([wgmma.f16_macs] or the input
  type's field, [wgmma.issue]) for the C x 4 consumer warps over [pipes[tensor].count] units;
- producer: thread 0 of warpgroup 0 issues the stage's TMA boxes (per instruction the longer of the SASS
  sequence that issues it, [tma.warp_issue], and the TMA unit's accept interval, [tma.issue]),
  and the stage's bytes stream into shared memory at [tma.bytes_per_cycle] or this core's share of the
  L2's read bandwidth ([l2.bandwidth_gbps] over the cores loading at once; in one wave each operand at the rate of
  the SMs reading its boxes at once, [tma.l2_read_*], l2_read_cycles), the L2 misses also at its
  share of DRAM ([dram.bandwidth_gbps]). Issue (one thread) and transfer (the TMA unit and the L2) are
  different resources and the ring keeps stages - 1 K tiles in flight, so they overlap: the larger one,
  or the ring's round trip over its stages (bytes in flight: a stage's issue, latency, transfer and
  the two K tiles of wgmmas that hold it), whichever is longest.

A K tile takes the larger of the two. Per CTA, once: the prologue (parameters, barrier init) and the
pipeline fill, the first stage's round trip ([l2.hit_latency] or [dram.latency] by the miss rate,
[tma.latency]) plus its transfer; the producer runs ahead across tiles, so later tiles find their
first stages loaded. Per tile: [wgmma.latency] once (the wait_group 0 that ends the tile) and the
epilogue. Registers -> global (beta != 0, a column-major D): not overlapped with the next tile's wgmmas,
its instructions (the emitter's "post" region, kernelgen/counting.py) issued by the consumer warps
([core.schedulers], [core.issue_width]) or its stores drained at [core.store_bytes_per_cycle] or the
core's share of [l2.write_bandwidth_gbps], whichever is longer, plus [pipes[lsu].latency]. Through shared
staging and TMA stores: the instructions or the staging writes ([shared.banks], [shared.bank_width]), the
named barriers ([pipes[sync].latency]), the store issues ([tma.issue], [tma.warp_issue]), and only the drain the staging
buffers cannot hold ([tma.bytes_per_cycle] or the L2 write share): with a buffer per slab the drain
overlaps the next tile's K loop. H200, 2026-12-01 (docs/wgmma-tma.md 4d): predicted / measured 0.95-0.96 with a
bf16 D (every slab buffered) and 1.06-1.17 with an f32 D (5 of 8 slabs buffered): the L2 write share, measured
for st.global epilogues, is slower than the TMA stores drain; no TMA-store rate is measured yet.
"""

from __future__ import annotations

from kernelgen.counting import Counts
from kernelgen.models.schedule import CycleModel, beyond_l2, wgmma_unit_cycles
from kernelgen.spec import DTYPE_BYTES, GemmSpec
from kernelgen.tiling import Tiling, operand_tiles
from sim.hw import HwConfig


def tma_cycle_model(spec: GemmSpec, t: Tiling, hw: HwConfig, shape: tuple[int, int, int], dram_cycles: float,
                    miss_rate: float, c: Counts, grid_cap: int, boxes: int,
                    store: tuple[int, int] | None = None, loaded_dram: bool = False) -> CycleModel:
    """grid_cap: the emitter's persistent CTA count; boxes: TMA boxes per stage (A and B); store: (slabs,
    buffers) per consumer of the TMA-store epilogue, None for the registers -> global one; loaded_dram: take the
    DRAM side of the TMA loads as measured with every SM loading ([tma.dram_round_trip],
    [tma.dram_bandwidth_gbps]) rather than idle ([dram.latency], [dram.bandwidth_gbps]). wgmma_tma passes True;
    wgmma_fp8's model (kernelgen/models/fp8_cycles.py) still takes the idle figures (its plans unchanged here)."""
    assert hw.wgmma is not None and hw.tma is not None
    M, N, K = shape
    # with a cluster the schedule's tiles are cluster tiles (cluster_m TILE_M x cluster_n TILE_N), walked by
    # whole clusters: grid_cap // cluster of them at most
    tiles = -(-M // (t.bm * t.cluster_m)) * -(-N // (t.bn * t.cluster_n))
    clusters = min(tiles, grid_cap // t.cluster)
    grid = clusters * t.cluster
    cores = hw.cores_used(grid)  # [core.count]
    tiles_per_cta = -(-tiles // clusters)
    ktiles = -(-K // t.bk)
    ta, tb = operand_tiles(spec, t)
    pipes = {p.name: p for p in hw.pipes}
    tens, lsu = pipes[hw.pipe_for("tensor").name], pipes[hw.pipe_for("lsu").name]

    consumer_warps = t.bm // t.tm * 4
    units = max(1, min(tens.count, hw.core.schedulers))  # [pipes[tensor].count], [core.schedulers]
    tensor = wgmma_unit_cycles(spec, t, hw) * -(-consumer_warps // units)
    queued = loaded_dram and bool(hw.tma.dram_trip_inflight and hw.tma.dram_peak_gbps)
    if queued and t.bm // t.tm == 1 and hw.wgmma.lone_gap:
        # one consumer warpgroup: its back-to-back wgmmas are spaced [wgmma.lone_gap] beyond their MACs (two
        # warpgroups alternate and hide it: benchmarks/tma_mech.py's wgmma part)
        tensor += t.k_steps * (t.tm // 64) * hw.wgmma.lone_gap

    stage_bytes = ta.stage_bytes + tb.stage_bytes
    # TMA multicast (cluster): the operand the cluster shares is read from the L2 once per cluster, each CTA
    # issuing its part (1 / cluster of every box) to all; each CTA still receives the whole stage. So a CTA's
    # share of the L2 reads shrinks by (cluster - 1) / cluster of that operand, its TMA issues do not (as many
    # boxes, smaller), and the DRAM misses stay the tensor's unique bytes (the movement layer's miss rate)
    shared = (tb if t.cluster_m > 1 else ta).stage_bytes if t.clustered else 0
    l2_bytes = stage_bytes - shared + shared / t.cluster
    per_box = max(hw.tma.issue, hw.tma.warp_issue)  # [tma.issue], [tma.warp_issue]
    issue = boxes * per_box
    transfer = stage_bytes / hw.tma.bytes_per_cycle  # [tma.bytes_per_cycle]: into this SM's shared memory
    if loaded_dram and tiles <= clusters and not t.clustered and hw.tma.l2_read_gbps:
        # one wave: every CTA walks K in step from the launch, so the CTAs of a tile row read its A boxes at once
        # (those of a tile column its B boxes), and the L2 serves a line several SMs read at once faster than a line
        # one reads ([tma.l2_read_*], measured in that pattern by benchmarks/tma_l2rate). Several waves: the
        # device share below (not measured for a persistent walk's readers, which drift apart)
        rows, cols = -(-M // t.bm), -(-N // t.bn)
        transfer = max(transfer, l2_read_cycles(hw, cores, cols, ta.stage_bytes)
                       + l2_read_cycles(hw, cores, rows, tb.stage_bytes))
    elif hw.l2_bytes_per_cycle:
        transfer = max(transfer, l2_bytes / (hw.l2_bytes_per_cycle / cores))  # [l2.bandwidth_gbps]
    transfer_l2 = transfer
    # the misses: at this core's share of what TMA loads reach from DRAM with every SM loading
    # ([tma.dram_bandwidth_gbps], measured 3.1-3.6 TB/s), else of [dram.bandwidth_gbps]
    dram_rate = (hw.tma.dram_bandwidth_gbps * 1e3 / hw.clock_mhz if loaded_dram and hw.tma.dram_bandwidth_gbps
                 else hw.dram_bytes_per_cycle)
    transfer = max(transfer, stage_bytes * miss_rate / (dram_rate / cores))
    # a stage's round trip: the producer's issue, the access latency (the misses at [dram.latency], the
    # rest at [l2.hit_latency]) and [tma.latency], the transfer, then two K tiles of wgmmas (the stage is
    # released after the next K tile's wait_group 1); `stages` of them are in flight at once. With a cluster
    # the release reaches the partner's empty[s] across the SM-to-SM network ([shared.remote_extra], the
    # measured DSMEM trip; the remote mbarrier arrive is assumed to cost the same)
    # a DRAM box's round trip under load ([tma.dram_round_trip], measured with every SM loading) where given,
    # else the idle [dram.latency]
    dram_lat = (hw.tma.dram_round_trip if loaded_dram else None) or hw.dram.latency
    if loaded_dram and miss_rate > 0:
        # a stage is full when its last box has landed: it waits the DRAM round trip when any of its boxes
        # misses. With every tile in one wave (tiles <= grid) each K step's lines are read first by CTAs that run
        # together and walk K in step, and the readers of a line wait on the same miss: every stage misses.
        # Over several waves each box misses at the movement layer's rate, and a stage waits for either operand
        p_stage = 1.0 if tiles <= clusters else 1.0 - (1.0 - miss_rate) ** 2
    else:
        p_stage = miss_rate
    lat = p_stage * dram_lat + (1 - p_stage) * hw.l2.hit_latency + hw.tma.latency
    if t.clustered:
        lat += hw.shared.remote_extra
    if queued:
        ring, trip, hold, p_stage, transfer = _queued_ring(spec, t, hw, shape, c, cores, consumer_warps, tensor,
                                                           issue, transfer_l2, stage_bytes, miss_rate, p_stage)
    elif loaded_dram:
        # [tma.dram_round_trip] is a box's issue-to-landed time measured with every SM loading: its latency,
        # queueing and transfer at that load (and the mbarrier signal); an L2-served stage takes [l2.hit_latency],
        # [tma.latency] and its transfer
        trip = issue + p_stage * dram_lat + (1 - p_stage) * (hw.l2.hit_latency + hw.tma.latency + transfer)
        if t.clustered:
            trip += hw.shared.remote_extra
        # the ring: a consumer releases stage s only in the next K tile, after that tile's wgmmas are issued and
        # its wait_group 1 returned (the wgmmas reading s are done), so one landed stage is always held and
        # stages - 1 load at once. A stage's cycle: the trip (issue, latency, transfer), one K tile held, the
        # consumer's issue of the next tile ([core.issue_width]: its K-loop instructions, or the tensor pipe when
        # the wgmmas reading s are still running), the producer's wake and reissue
        hold = max(sum(c.iter.values()) * -(-consumer_warps // hw.core.schedulers) / hw.core.issue_width,
                   tensor + hw.wgmma.latency - max(tensor, transfer))
        ring = (trip + hold) / max(1, t.stages - 1)
    else:
        trip, hold = issue + lat + transfer, 2 * tensor
        ring = (trip + hold) / t.stages
    # the producer thread per stage: the boxes' issues and, measured, its waits and loop ([tma.stage_overhead])
    producer = max(issue + ((hw.tma.stage_overhead or 0) if queued else 0), transfer, ring)
    k_tile = max(tensor, producer)

    first_lat = hw.dram.latency if miss_rate > 0 else hw.l2.hit_latency  # [dram.latency], [l2.hit_latency]
    fill = first_lat + hw.tma.latency + issue + transfer  # [tma.latency]
    W = -(-(t.threads + 128) // hw.warp_size)  # the consumers and the producer warpgroup ([warp_size])
    per_sched = -(-W // hw.core.schedulers)  # [core.schedulers]
    # [branch.frontend_depth], then the prologue's instructions issued by every warp ([core.issue_width])
    pre = hw.branch.frontend_depth + sum(c.pre.values()) * per_sched / hw.core.issue_width + fill

    cw = -(-consumer_warps // hw.core.schedulers)  # [core.schedulers]
    epi_issue = sum(c.post.values()) * cw / hw.core.issue_width  # [core.issue_width]
    out_bytes = t.bm * t.bn * DTYPE_BYTES[spec.dtype_out]
    l2_w = hw.l2.write_bandwidth_gbps
    l2_share = l2_w * 1e3 / hw.clock_mhz / cores if l2_w else None  # [l2.write_bandwidth_gbps]
    tail = 0.0
    if store is None:
        store_rates = [x for x in (hw.core.store_bytes_per_cycle, l2_share) if x]  # [core.store_bytes_per_cycle]
        drain = out_bytes / min(store_rates) if store_rates else 0.0
        epilogue = max(epi_issue, drain) + lsu.latency  # [pipes[lsu].latency]
        exposed = drain
    else:
        # registers -> shared staging (swizzled; an f32 pair store puts two lanes of different rows on one
        # bank pair: 2 ways, a 16-bit pair store none) at [shared.banks] x [shared.bank_width] per cycle, two
        # named barriers per round of buffers ([pipes[sync].latency]), the TMA store issues ([tma.issue]; with
        # a buffer per slab spread over the 4 warps' lane 0, else all by thread 0); the stores drain at the
        # TMA unit's rate or the core's share of the L2 writes ([tma.bytes_per_cycle],
        # [l2.write_bandwidth_gbps]) while the consumers run on: a slab waits only for the store `buffers`
        # slabs back, so (slabs - buffers) slabs of drain stay on the critical path, and the last `buffers`
        # overlap the next tile's K loop (exposed only past it, and once at the CTA's end)
        slabs, nb = store
        ways = 2 if DTYPE_BYTES[spec.dtype_out] == 4 else 1
        smem_write = out_bytes * ways / (hw.shared.banks * hw.shared.bank_width)
        rounds = 1 if nb == slabs else slabs
        sync = hw.pipe_for("sync").latency  # [pipes[sync].latency]
        # the drain: [tma.store_bandwidth_gbps] (measured TMA stores, all SMs) when given, else the L2 write
        # share measured for st.global epilogues ([l2.write_bandwidth_gbps])
        # and one SM's TMA stores alone ([tma.store_bytes_per_cycle], else [tma.bytes_per_cycle])
        tma_w = hw.tma.store_bandwidth_gbps
        share = tma_w * 1e3 / hw.clock_mhz / cores if tma_w else l2_share
        rate = min(x for x in (float(hw.tma.store_bytes_per_cycle or hw.tma.bytes_per_cycle), share) if x)
        drain = out_bytes / rate
        exposed = drain * (slabs - nb) / slabs
        overlap = drain * nb / slabs
        hidden = ktiles * k_tile + hw.wgmma.latency
        exposed += max(0.0, overlap - hidden)
        tail = overlap
        issuers = min(4, slabs) if nb == slabs else 1  # lane 0 of each consumer warp, or thread 0 alone
        epilogue = max(epi_issue, smem_write) + 2 * rounds * sync + -(-slabs // issuers) * per_box + exposed
    per_tile = ktiles * k_tile + hw.wgmma.latency + epilogue  # [wgmma.latency]

    cta = pre + tiles_per_cta * per_tile + tail
    total = max(cta, dram_cycles)
    bound = "tensor" if tensor >= producer else max(
        (("tma_issue", issue), ("tma_transfer", transfer), ("tma_ring", ring)), key=lambda x: x[1])[0]
    if dram_cycles > cta:
        bound = "dram"
    terms = {"tensor": tensor, "tma_issue": float(issue), "tma_transfer": transfer, "tma_ring": ring, "k_tile": k_tile,
             "fill": fill, "epilogue": epilogue, "store_drain": drain,
             "store_exposed": exposed, "store_tail": tail, "tiles_per_cta": float(tiles_per_cta),
             "grid": float(grid), "per_tile": per_tile, "tma_trip": trip, "tma_hold": hold, "p_stage": p_stage,
             **({"l2_bytes": l2_bytes} if t.clustered else {})}
    return CycleModel(int(total), int(cta), k_tile, pre, epilogue, 1, tiles_per_cta, cores, 1, bound, terms)


def l2_read_cycles(hw: HwConfig, cores: int, readers: float, nbytes: float) -> float:
    """Cycles a core's `nbytes` of TMA boxes that `readers` SMs read at once take from the L2 with `cores` SMs
    loading (benchmarks/tma_l2rate, docs/wgmma-tma.md section 14): one reader at its share of the device's
    [tma.l2_read_gbps], two or three at that of [tma.l2_pair_gbps] (measured at 2), [tma.l2_multi_readers] or more
    at [tma.l2_multi_bytes_per_cycle] into each SM; none faster than that. The rates by SMs loading
    ([tma.l2_read_cores]) are in GB/s (the L2's clock), the SM's in SM cycles (95-94 B/cycle at 112-132 SMs, 102.5 at
    64)."""
    tma = hw.tma
    assert tma is not None and tma.l2_read_gbps and tma.l2_multi_bytes_per_cycle and tma.l2_multi_readers
    cap = _interp(tma.l2_read_cores, tma.l2_multi_bytes_per_cycle, cores)
    if readers >= tma.l2_multi_readers or nbytes <= 0:
        return nbytes / cap
    table = tma.l2_pair_gbps if readers >= 2 and tma.l2_pair_gbps else tma.l2_read_gbps
    gbps = _interp(tma.l2_read_cores, table, cores)
    return nbytes / min(cap, gbps * 1e3 / hw.clock_mhz / cores)


def _interp(xs: tuple[int, ...], ys: tuple[int, ...] | tuple[float, ...], x: float) -> float:
    """ys at x, linear between the measured points xs (ascending), the last segment's slope beyond, the first
    point's value below."""
    if x <= xs[0]:
        return float(ys[0])
    for (x0, y0), (x1, y1) in zip(zip(xs, ys), zip(xs[1:], ys[1:])):
        if x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    x0, y0, x1, y1 = xs[-2], ys[-2], xs[-1], ys[-1]
    return y1 + (y1 - y0) * (x - x1) / (x1 - x0)


def consumer_step(t: Tiling, hw: HwConfig, c: Counts, tensor: float = 0.0) -> float:
    """Cycles from a stage's full wait to its release of the previous stage by the later consumer warpgroup when
    the ring starves the tensor pipe (benchmarks/tma_trace.py / tma_step.py: release - full): its K-loop
    instructions ([core.issue_width]) and the longer of
    - its wgmmas at the measured issue spacing, [wgmma.issue_lone] alone or, with two consumers issuing at once,
      twice [wgmma.issue_shared] each (the SM's issue slot taken in turns);
    - the tensor pipe's queue ([wgmma.queue]): the pipe accepts a wgmma while at most `queue` of the SM's wait to
      start, and the group's issue returns (then its wait_group 1 and the release) only once the last of the SM's
      `parts` wgmmas of this K tile is accepted, i.e. when the pipe starts the (parts - queue)-th: [wgmma.latency]
      after the stage lands, then parts - queue - 1 wgmmas of `tensor` / parts cycles each (`tensor`: the K tile's
      wgmmas on the unit). 16 m64n128 per K tile (256x128 t128) wait for 11 of them, 8 m64n256 (128x256 t64) for
      3: measured 819-839 vs 572-634 cycles full-to-release, the same L2-resident and from DRAM."""
    assert hw.wgmma is not None
    consumers = t.bm // t.tm
    per = hw.wgmma.issue_lone or 0.0
    if consumers > 1:
        per = max(per, consumers * (hw.wgmma.issue_shared or 0.0))
    n_mma = t.k_steps * (t.tm // 64)  # one consumer's wgmmas per K tile
    instr = sum(c.iter.values()) * -(-4 // hw.core.schedulers) / hw.core.issue_width
    issue = n_mma * per
    if hw.wgmma.queue and tensor > 0:
        parts = consumers * n_mma  # the SM's wgmmas per K tile
        issue = max(issue, hw.wgmma.latency + max(0, parts - hw.wgmma.queue - 1) * tensor / parts)
    return instr + issue


def _queued_ring(spec: GemmSpec, t: Tiling, hw: HwConfig, shape: tuple[int, int, int], c: Counts, cores: int,
                 consumer_warps: int, tensor: float, issue: float, transfer_l2: float, stage_bytes: float,
                 miss_rate: float, p_stage: float) -> tuple[float, float, float, float, float]:
    """(ring interval, mean trip, consumer step, P(stage waits for DRAM), transfer floor) of the wgmma_tma ring
    (docs/wgmma-tma.md section 10). Back-to-back launches find the inputs the L2 holds (schedule.beyond_l2's
    complement: [l2.held_footprints] / [l2.held_fractions]) still there; a stage that
    waits for DRAM takes the measured trip at the device's DRAM bytes in flight ([tma.dram_trip_inflight] /
    [tma.dram_trip_cycles]: every core with stages - 1 stages loading, their misses), an L2-served one its issue,
    [l2.hit_latency], [tma.latency] and its transfer. Per stage (the ring identity, traced): stages x K step =
    trip + hold + reissue, hold = one K step + the consumer's step (consumer_step), reissue = [tma.release_wake];
    so the K step is (trip + consumer step + wake) / (stages - 1). The misses are also bounded by the device's
    [tma.dram_peak_gbps] shared by the cores."""
    from kernelgen.spec import DTYPE_BYTES

    assert hw.tma is not None and hw.tma.dram_trip_inflight and hw.tma.dram_peak_gbps
    M, N, K = shape
    held = 1.0 - beyond_l2(spec, hw, shape)  # the inputs the L2 holds from the previous launch ([l2.held_*])
    p = p_stage * (1.0 - held)
    s1 = max(1, t.stages - 1)
    foot = (M * K + N * K) * DTYPE_BYTES[spec.dtype_a]
    tiles = -(-M // (t.bm * t.cluster_m)) * -(-N // (t.bn * t.cluster_n))
    dram_stage = stage_bytes * miss_rate
    if tiles <= cores // t.cluster:
        # one wave: TMA moves whole lines and every input line is read from DRAM once per launch, so a core's DRAM
        # bytes per stage are the footprint over the CTAs' K steps (the movement layer's miss rate also counts
        # partial bursts, which a TMA box does not make)
        dram_stage = min(dram_stage, foot / (tiles * -(-K // t.bk)))
    dram_stage *= 1.0 - held  # a core's DRAM bytes per stage
    trip_d = _interp(hw.tma.dram_trip_inflight, hw.tma.dram_trip_cycles, cores * s1 * dram_stage)
    # an L2-served stage: its issue, [l2.hit_latency], [tma.latency] and its transfer at the L2 share, at least
    # [tma.l2_round_trip] where given (h200: null; a trip traced in a ring that steps at another engine's rate holds
    # the landed stages' wait, docs/wgmma-tma.md section 13)
    trip_l2 = max(float(hw.tma.l2_round_trip or 0), issue + hw.l2.hit_latency + hw.tma.latency + transfer_l2)
    trip = p * trip_d + (1.0 - p) * trip_l2 + (hw.shared.remote_extra if t.clustered else 0)
    step = consumer_step(t, hw, c, tensor)
    ring = (trip + step + (hw.tma.release_wake or 0)) / s1
    peak = hw.tma.dram_peak_gbps * 1e3 / hw.clock_mhz  # bytes per cycle, the device
    return ring, trip, step, p, max(transfer_l2, cores * dram_stage / peak, oob_fill(spec, t, hw, shape, cores))


def oob_fill(spec: GemmSpec, t: Tiling, hw: HwConfig, shape: tuple[int, int, int], cores: int) -> float:
    """The K step's floor from the zero fill ([tma.oob_fill_gbps], device-wide): the tiles overhanging M (N) load
    A (B) boxes whose rows beyond the tensor the TMA fills with zeros, and the device fills them at that rate
    whatever the number of SMs loading them (benchmarks/tma_step.py --set cta / cta2: 128x64 at M = 64, 64 CTAs
    486-525 cycles per K step, 112 CTAs 843, i.e. 8 KiB x CTAs per K step at ~1,070 B/cycle). Per K step the cores
    zero-fill their mean tile's outside rows: the last tile row's A boxes, the last tile column's B boxes."""
    from kernelgen.spec import DTYPE_BYTES

    assert hw.tma is not None
    if not hw.tma.oob_fill_gbps:
        return 0.0
    M, N, _ = shape
    tm_, tn_ = -(-M // t.bm), -(-N // t.bn)
    out_m, out_n = (-M) % t.bm, (-N) % t.bn  # rows of the last tile row's A boxes / last column's B boxes outside
    outside = (tn_ * out_m * DTYPE_BYTES[spec.dtype_a] + tm_ * out_n * DTYPE_BYTES[spec.dtype_b]) * t.bk
    return cores * outside / (tm_ * tn_) / (hw.tma.oob_fill_gbps * 1e3 / hw.clock_mhz)
