"""Block-scaled fp8 GEMM, DeepGEMM's method, on wgmma_tma's warp-specialised persistent kernel:
D = sum over K blocks kb of (A_kb . B_kb^T) * scale_a[m, kb] * scale_b[n / 128, kb], A (M x K) and B
(N x K, "col") fp8 (e4m3 or e5m2, each operand either), K-major; D bf16 (or f32).

Hopper's fp8 wgmma accumulates with reduced precision, so, as DeepGEMM does, each 128-wide K block (one
K tile: TILE_K = 128 fp8 = one 128-byte swizzle row) is summed by wgmma.m64nNk32.f32.<a>.<b> into a
block accumulator set started fresh (scale-d false on the first k32 step), then promoted on the CUDA
cores: acc[i] = fma(blk[i], scale_a[row(i), kb] * scale_b[n block, kb], acc[i]), per K block.

Reused from wgmma_tma.py unchanged: the producer warpgroup (thread 0, TMA boxes [128, mn] into the ring,
arrive.expect_tx on full[s], waits on empty[s]), the grouped persistent tile order and the ring's
(stage, phase) walk; from wgmma.py: the stage descriptors (128-byte swizzle, K-major: SBO 1024) and the
accumulator epilogue (emit_acc_epilogue: alpha, beta C, bias, activation, cast).

Consumer warpgroup c (rows c*64 .. c*64 + 63 of the tile; TILE_N <= 128, so the tile lies in one 128-wide
N block of scale_b), per K tile: wait full[s]; wgmma.fence, 4 k32 wgmmas, commit; the scales by ld.shared from
stage s's scale slots (scale_a of the thread's two rows, scale_b one value per N half), which the producer fills
with two more TMA boxes per stage as DeepGEMM stages scale_a, issued before the wait so their latency overlaps
the MMAs; wait_group 0; arrive on empty[s] (the stage is read no more); the FMAs. With two consumer warpgroups,
one's promotion overlaps the other's wgmmas (DeepGEMM's overlap).

--profile: wgmma_tma's record per persistent CTA (its _profile_setup / _profile_slot: clock64 at CTA start, tile
walk start, after the last K loop, CTA end after the last TMA stores) and the %globaltimer pair (the "timer" param);
benchmarks/fp8_cta.py reads it as benchmarks/top4.py does.

Scale layouts (f32, KB = ceil(K / 128), NB = ceil(N / 128); both read through tensor maps, whose rows are 16-byte
multiples): scale_a MN-major [KB][scale_rows(M)] (M rounded up to 4: DeepGEMM's TMA-aligned form), scale_b
[NB][scale_rows(KB)]. Rows past M and halves past N read 0 (TMA's out-of-bounds fill; their D is never
stored). K past the end is zero-filled by TMA, so a partial last K block contributes its valid part only.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any

from kernelgen.counting import Counts, tally
from kernelgen.emit_common import (
    PROFILE_SLOTS,
    Param,
    ceil_div,
    header_json,
    metadata,
)
from kernelgen.models.fp8_cycles import fp8_cycle_model
from kernelgen.models.schedule import CycleModel
from kernelgen.ptxbuild import PtxBuilder, f32_hex, render_kernel
from kernelgen.spec import FP8, SCALE_BLOCK, GemmSpec
from kernelgen.tiling import Tiling, log2, operand_tiles
from kernelgen.variants import wgmma_tma as tma_lib  # its TMA-store epilogue: store_slabs, emit_store_epilogue, ...
from kernelgen.variants.wgmma import ATOM, BLOCK, desc_high, emit_acc_epilogue, emit_descriptors
from kernelgen.variants.wgmma_tma import (
    PERSISTENT_CTAS,
    SHARED_LIMIT,
    WgmmaTma,
    _advance_ring,
    _producer,
    _profile_setup,
    _profile_slot,
    _shift,
    _tile_origin,
    _trace_base,
    _wait,
    build_start,
    consumer_entry,
    emit_setup,
)
from sim.hw import HwConfig

TILE_K = SCALE_BLOCK  # one K tile = one scale block = 128 fp8 = one 128-byte swizzle row
# sim/reference.py's scale layouts: scale_a stored [KB][scale_rows(M)] (MN-major, DeepGEMM's TMA-aligned form),
# scale_b [NB][scale_rows(KB)] (DeepGEMM's [N/128][K/128] when K is a multiple of 512)
SCALE_LAYOUTS = ("mn4", "k4")
MMA_K = 32  # wgmma k32 for 8-bit floats: 32 bytes of K, as k16 of 16-bit types
# --trace (benchmarks/fp8_step.py), per K block g: the producer's wake on empty[s] and the end of its TMA issues
# (wgmma_tma's), then per consumer warpgroup c (its thread 0): full[s] seen, N half 0's wgmmas committed, its
# wait_group 0 returned, N half 1's committed and waited (TILE_N 256 only), the last promotion done
CONSUMER_SLOTS = 6
TRACE_SLOTS = ("issue", "issued") + tuple(f"{x}{c}" for c in range(2) for x in (
    "full", "commit0_", "waited0_", "commit1_", "waited1_", "promoted"))


SCALE_SLOT = 128  # bytes: a TMA destination's alignment (CUTLASS aligns every TMA shared buffer to 128 bytes)


def scale_slots(spec: GemmSpec, t: Tiling) -> int:
    """The shared byte of the scale slots, the first 128-byte boundary after the full/empty mbarriers: per stage
    one scale_a slot (TILE_M f32 of one K block: 4 x TILE_M bytes) and after the stages' scale_a slots
    (scale_b_slots) one 128-byte scale_b slot per stage (a [4, halves] f32 box), each a TMA box without swizzle."""
    return -(-tma_lib.ring_and_barriers(spec, t) // SCALE_SLOT) * SCALE_SLOT


def scale_b_slots(t: Tiling) -> int:
    """Bytes from the first scale_a slot to the first scale_b slot (the stages' scale_a slots)."""
    return t.stages * 4 * t.bm


def ring_end(spec: GemmSpec, t: Tiling) -> int:
    """Bytes of the stage ring, its full/empty mbarriers (8 B each) and the scale slots after them: the shared
    byte after the last scale_b slot."""
    return scale_slots(spec, t) + scale_b_slots(t) + t.stages * SCALE_SLOT


def staging_offset(spec: GemmSpec, t: Tiling) -> int:
    """Where the TMA-store staging slabs start: after the ring, its mbarriers and the scale slots, 1024-byte
    aligned (the 128-byte swizzle's atom; WgmmaFp8.ring_bytes, from which wgmma_tma.store_slabs counts the room
    left)."""
    return -(-ring_end(spec, t) // ATOM) * ATOM


def scale_rows(m: int) -> int:
    """The leading dimension of scale_a's MN-major storage: M rounded up to 4 (a tensor map's 16-byte row
    stride; DeepGEMM's get_tma_aligned_size(M, 4)); also scale_b's row length, KB rounded up to 4."""
    return -(-m // 4) * 4


def smem_bytes(spec: GemmSpec, t: Tiling) -> int:
    """The ring, its mbarriers and, with the TMA-store epilogue (wgmma_tma.tma_store: beta 0, a row-major D), the
    consumers' staging slabs (wgmma_tma.store_slabs' buffers)."""
    slabs, nb, slab = tma_lib.store_slabs(spec, t)
    if not slabs:
        return ring_end(spec, t)
    return staging_offset(spec, t) + t.grid_m * nb * slab


def tensormaps(spec: GemmSpec, t: Tiling, name: str) -> list[dict[str, Any]]:
    """The "tensormap" params of A (M x K) and B (N x K): one box [128, mn] of bytes per stage each; of scale_a
    (MN-major f32, [KB][scale_rows(M)]): one box [TILE_M, 1] per stage (rows past M read 0); of scale_b (f32,
    [NB][scale_rows(KB)]): one box [4, halves] per stage, K blocks kb & ~3 .. +3 of the tile's N blocks (a box's
    innermost coordinate must be 16-byte aligned; past KB or N: 0); no swizzle; with the TMA-store epilogue,
    D's (wgmma_tma.store_tensormap: one staging slab per box)."""
    M, N, K = spec.nominal()
    maps = [{"name": f"{name}_tmap_{r.lower()}", "kind": "tensormap", "of": r, "dtype": dt, "dims": [K, ext],
             "strides": [K], "box": [TILE_K, mn], "swizzle": 128, "element_strides": [1, 1]}
            for r, dt, ext, mn in (("A", spec.dtype_a, M, t.bm), ("B", spec.dtype_b, N, t.bn))]
    KB, NB = ceil_div(K, SCALE_BLOCK), ceil_div(N, SCALE_BLOCK)
    maps += [{"name": f"{name}_tmap_sa", "kind": "tensormap", "of": "scale_a", "dtype": "f32", "dims": [M, KB],
              "strides": [4 * scale_rows(M)], "box": [t.bm, 1], "swizzle": 0, "element_strides": [1, 1]},
             {"name": f"{name}_tmap_sb", "kind": "tensormap", "of": "scale_b", "dtype": "f32", "dims": [KB, NB],
              "strides": [4 * scale_rows(KB)], "box": [4, halves_of(t)], "swizzle": 0, "element_strides": [1, 1]}]
    lib = tma_lib
    return maps + ([lib.store_tensormap(spec, t, name)] if lib.tma_store(spec) else [])


def _setup(b: PtxBuilder, name: str, t: Tiling, P: dict[str, str], stage_bytes: tuple[int, int]):
    """Tensor-map addresses, the shared carve-up, the ring's mbarriers (thread 0) and the tile schedule
    (wgmma_tma.emit_setup; t.bk = TILE_K: one K tile per scale block)."""
    su = emit_setup(b, name, t, P, stage_bytes, ("a", "b", "sa", "sb"),
                    ktiles_note=f"KB = ceil(K / {TILE_K}) K tiles (= scale blocks)")
    return su.tmap, (su.tid, su.wg), su.smem, su.sched


def _types(a: str, b: str) -> str:
    """The operand types in comments: "e4m3", or "e4m3.e5m2" when A's and B's differ."""
    return a if a == b else f"{a}.{b}"


def _wgmma_block(b: PtxBuilder, blk: list[list[str]], descs: tuple[str, str], ab: tuple[str, str], BN: int,
                 half: int, pzero: str, pone: str) -> None:
    """One K block of one 128-wide N half (BN = the wgmma's N, half: which N half of the tile's B, ab: A's and
    B's fp8 types): fence, TILE_K / 32 k32 steps x len(blk) m64 wgmmas into the block accumulators (the first
    step with scale-d false: D = A.B, no zeroing), commit."""
    da, db = descs

    def compute() -> None:
        b.i("wgmma.fence.sync.aligned")
        for kk in range(TILE_K // MMA_K):
            dbk = db
            boff = (kk * MMA_K + half * 2 * BLOCK) >> 4  # N half h starts 128 rows of 128 bytes on
            if boff:
                dbk = b.reg("u64")
                b.i(f"add.s64 {dbk}, {db}, {boff}")
            for j, acc in enumerate(blk):
                off = (kk * MMA_K + j * BLOCK) >> 4
                dak = da
                if off:
                    dak = b.reg("u64")
                    b.i(f"add.s64 {dak}, {da}, {off}")
                b.i(f"wgmma.mma_async.sync.aligned.m64n{BN}k32.f32.{ab[0]}.{ab[1]} {{{', '.join(acc)}}}, {dak}, {dbk}, "
                    f"{pzero if kk == 0 else pone}, 1, 1")
        b.i("wgmma.commit_group.sync.aligned")
    b.comment(f"K block{f' (N half {half})' if half else ''}: {TILE_K // MMA_K} k32 steps x {len(blk)} wgmma "
              f"m64n{BN}k32 {_types(*ab)} into the block accumulators")
    b.part(("wgmma_fp8.compute", len(blk), BN, half, ab), compute)


def _promote(b: PtxBuilder, acc: list[list[str]], blk: list[list[str]], scales: list[str]) -> None:
    """acc[j][i] += blk[j][i] * scales[2j + half(i)]: one FFMA per block accumulator (acc: the slice of the
    promoted accumulators that blk's N half covers)."""
    def fmas() -> None:
        for j, (aj, bj) in enumerate(zip(acc, blk, strict=True)):
            for i, (a, x) in enumerate(zip(aj, bj, strict=True)):
                b.i(f"fma.rn.f32 {a}, {x}, {scales[2 * j + ((i >> 1) & 1)]}, {a}")
    b.comment("Promotion: acc += blk * scale_a[row, kb] * scale_b[n block, kb] (f32 FMAs on the CUDA cores)")
    b.part(("wgmma_fp8.promote", len(acc), len(blk[0])), fmas)


def halves_of(t: Tiling) -> int:
    """128-wide N halves of a tile, each one wgmma N and one scale_b block: TILE_N 256 runs as two n128 passes
    through one block accumulator set (a second set does not fit beside 128 promoted accumulators)."""
    return max(1, t.bn // SCALE_BLOCK)


def _scales(b: PtxBuilder, slots: tuple[str, list[int], str], halves: int) -> tuple[list[str], list[str]]:
    """The K block's scales (issued while the first half's wgmmas run), by ld.shared from stage s's scale slots
    (what TMA wrote with A's and B's boxes; 0 past M, N and KB): slots = (the thread's address in the scale_a
    slot, each row's byte offset from it, the K block's word in the scale_b slot: N half h's value 16 h on).
    Returns (scale_b per N half, scale_a per row)."""
    base, offs, sbp = slots

    def lds(addr: str, off: int) -> str:
        v = b.reg("f32")
        b.i(f"ld.shared.f32 {v}, [{addr}+{off}]" if off else f"ld.shared.f32 {v}, [{addr}]")
        return v
    b.comment("scale_b of each N half")
    sbv = [lds(sbp, 16 * h) for h in range(halves)]
    b.comment("scale_a of each row")
    sav = [lds(base, off) for off in offs]
    return sbv, sav


def _products(b: PtxBuilder, scales: tuple[list[str], list[str]], pin: tuple[str, str]) -> list[list[str]]:
    """Per N half, scale_a[row, kb] * scale_b[half's n block, kb] for each of the thread's rows, written after the
    first half's wait_group and pinned there: each scale_a goes through selp(block accumulator, scale_a, p) with p
    false at run time (M == 0) but not to ptxas, so no product (and no wgmma issue behind it in program order)
    waits for the shared loads while the wgmmas are being issued."""
    sbv, sav = scales
    acc0, pm0 = pin
    ys = []
    for v in sav:
        y = b.reg("f32")
        b.i(f"selp.f32 {y}, {acc0}, {v}, {pm0}")
        ys.append(y)
    out = []
    for h in range(len(sbv)):
        prods = []
        for y in ys:
            x = b.reg("f32")
            b.i(f"mul.f32 {x}, {y}, {sbv[h]}")
            prods.append(x)
        out.append(prods)
    return out


def _k_block(b: PtxBuilder, acc: list[list[str]], blk: list[list[str]], descs: tuple[str, str],
             ab: tuple[str, str], preds: tuple[str, str], scale_src: tuple[str, list[int], str], pm0: str,
             release: Callable[[], None], mark: Callable[[int], None] | None = None) -> None:
    """One K block, N half by N half through the block accumulators `blk` (ab: A's and B's fp8 types): the
    half's wgmmas, (first half) the scale loads, wait_group 0, (last half) `release` of the stage, (first half)
    the scale products pinned on the run-time-false predicate `pm0` (_products), the promotion into the half's
    slice of `acc`. `mark(j)` (the trace): after half h's commit (j = 1 + 2h), after its wait_group 0
    (j = 2 + 2h), after the last promotion (j = 5)."""
    WN, H = 2 * len(blk[0]), len(acc[0]) // len(blk[0])
    prods: list[list[str]] = []
    scales: tuple[list[str], list[str]] = ([], [])
    for h in range(H):
        _wgmma_block(b, blk, descs, ab, WN, h, *preds)
        if mark:
            mark(1 + 2 * h)
        if h == 0:
            b.comment("The K block's scales from stage s's scale slots (TMA wrote them with A's and B's boxes)")
            scales = _scales(b, scale_src, H)
        if h == H - 1:
            b.comment("wait_group 0: the block accumulators are final and stage s is read no more: release it")
            b.i("wgmma.wait_group.sync.aligned 0")
            if mark:
                mark(2 + 2 * h)
            release()
        else:
            b.comment(f"wait_group 0: N half {h}'s block accumulators are final (stage s is read by the next half)")
            b.i("wgmma.wait_group.sync.aligned 0")
            if mark:
                mark(2 + 2 * h)
        if h == 0:
            b.comment("The scale products, pinned after the first wait_group (_products)")
            prods = _products(b, scales, (blk[0][0], pm0))
        _promote(b, [a[h * WN // 2:(h + 1) * WN // 2] for a in acc], blk, prods[h])
    if mark:
        mark(5)


def _build(spec: GemmSpec, t: Tiling, name: str, counting: bool, profile: bool = False,
           trace: int = 0) -> tuple[PtxBuilder, list[Param]]:
    """The kernel's instructions; `profile`: wgmma_tma's per-CTA record (wgmma_tma._profile_setup, written by thread
    128: clock64 at CTA start, at the consumers' tile walk start, after the last tile's K loop, at CTA end after
    the last epilogue) and the %globaltimer pair at CTA start and end (the last param, "timer"); `trace` > 0 (a
    measurement tool, benchmarks/fp8_step.py): the record and, for the CTA's first `trace` K blocks, TRACE_SLOTS
    clock64 values per K block after the records."""
    b, start, params, P = build_start(spec, name, counting, profile or bool(trace))
    ta, tb = operand_tiles(spec, t)
    S, C = t.stages, t.grid_m
    ms, BN, H = t.tm // 64, t.bn, halves_of(t)
    WN = BN // H  # the wgmma's N
    tmap, (tid, wg), smem, sched = _setup(b, name, t, P, (ta.stage_bytes, tb.stage_bytes))
    sa, sb, full0, empty0 = smem
    tiles_m, tiles_n, ntiles, ktiles, nct = sched
    lib = tma_lib
    slabs = lib.store_slabs(spec, t)[0]
    if slabs:
        b.comment(f"TMA-store epilogue: the D tensor map; staging slabs from shared byte {staging_offset(spec, t)}")
        tmap_d, sst = b.reg("u64"), b.reg("u32")
        b.i(f"mov.b64 {tmap_d}, {name}_tmap_d")
        b.i(f"cvta.param.u64 {tmap_d}, {tmap_d}")
        b.i(f"add.u32 {sst}, {sa}, {staging_offset(spec, t)}")
    sc0 = b.reg("u32")
    b.comment(f"Scale slots from shared byte {scale_slots(spec, t)}: {S} x {t.bm} f32 of scale_a, then {S} x "
              f"{SCALE_SLOT} B of scale_b (one TMA box each per stage)")
    b.i(f"add.u32 {sc0}, {sa}, {scale_slots(spec, t)}")
    pz, pm0 = b.reg("pred"), b.reg("pred")
    b.i(f"setp.eq.u32 {pz}, {ktiles}, 0")
    b.i(f"setp.eq.u32 {pm0}, {P['M']}, 0")  # false wherever a K loop runs; ptxas cannot fold it (_products)
    consumer = b.label("consumer")
    pc = b.reg("pred")
    b.i(f"setp.ne.u32 {pc}, {wg}, 0")
    b.i(f"@{pc} bra {consumer}")

    ns = len(TRACE_SLOTS)
    def scale_boxes(s: str, fb: str, kt: str, bm0: str, bn0: str) -> None:
        da, db, nb, k4 = b.reg("u32"), b.reg("u32"), b.reg("u32"), b.reg("u32")
        b.i(f"mad.lo.u32 {da}, {s}, {t.bm * 4}, {sc0}")
        b.i(f"cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [{da}], "
            f"[{tmap['sa']}, {{{bm0}, {kt}}}], [{fb}]")
        b.i(f"mad.lo.u32 {db}, {s}, {SCALE_SLOT}, {sc0}")
        b.i(f"add.u32 {db}, {db}, {scale_b_slots(t)}")
        b.i(f"shr.u32 {nb}, {bn0}, {log2(SCALE_BLOCK)}")
        b.i(f"and.b32 {k4}, {kt}, -4")  # a box's innermost coordinate: 16-byte aligned (the H200 faults otherwise)
        b.i(f"cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [{db}], "
            f"[{tmap['sb']}, {{{k4}, {nb}}}], [{fb}]")
    _producer(b, spec, t, (ta, tb), smem, tmap, sched, pz, "",
              (_trace_base(b, P, trace, ns), trace, ns) if trace else None, (t.bm * 4 + 16 * H, scale_boxes))

    cw, lane, q, g, t4, wga = consumer_entry(b, t, consumer, (tid, wg), C)
    b.comment("This thread's rows in the tile (accumulator map of ops_wgmma: c*TILE_M/C + 64j + 16q + g + 8h): "
              "their scale_a words in a slot")
    sab = b.reg("u32")
    b.i(f"mad.lo.u32 {sab}, {cw}, {t.tm}, {g}")
    b.i(f"mad.lo.u32 {sab}, {q}, 16, {sab}")
    b.i(f"mad.lo.u32 {sab}, {sab}, 4, {sc0}")
    sa_offs = [4 * (64 * j + 8 * h) for j in range(ms) for h in range(2)]
    store = lib._store_setup(b, spec, t, (tid, cw, q, g, t4), sst, tmap_d) if slabs else None
    prof = _profile_setup(b, P, start, tid, trace, ns) if start is not None else None
    _profile_slot(b, prof, 1, "as the consumers start their tile walk")
    mark: Callable[[int], None] | None = None
    if prof is not None and prof.steps:
        gc, tw, tsh, tl = b.reg("u32"), b.reg("pred"), b.reg("u64"), b.reg("u32")
        b.i(f"mov.u32 {gc}, 0")
        b.comment(f"Trace: thread 0 of each consumer warpgroup writes its own {CONSUMER_SLOTS} slots (+ 8 x "
                  f"{CONSUMER_SLOTS} x c bytes)")
        b.i(f"and.b32 {tl}, {tid}, 127")
        b.i(f"setp.eq.u32 {tw}, {tl}, 0")
        b.i(f"mul.wide.u32 {tsh}, {cw}, {8 * CONSUMER_SLOTS}")

        def trace_mark(j: int) -> None:
            assert prof is not None
            prof.trace_step(b, gc, 2 + j, tw, tsh)
        mark = trace_mark
    pone, pzero = b.reg("pred"), b.reg("pred")
    b.i(f"mov.pred {pone}, -1")
    b.i(f"mov.pred {pzero}, 0")
    acc = [b.regs("f32", BN // 2) for _ in range(ms)]
    blk = [b.regs("f32", WN // 2) for _ in range(ms)]
    tile, s, ph, kt = b.regs("u32", 4)
    b.i(f"mov.u32 {tile}, %ctaid.x")
    b.i(f"mov.u32 {s}, 0")
    b.i(f"mov.u32 {ph}, 0")
    tloop, cend, kloop, kdone = b.label("c_tile"), b.label("c_end"), b.label("c_k"), b.label("c_kdone")
    b.put_label(tloop)
    pe = b.reg("pred")
    b.i(f"setp.ge.u32 {pe}, {tile}, {ntiles}")
    b.i(f"@{pe} bra {cend}")
    bm0, bn0 = _tile_origin(b, tile, (tiles_m, tiles_n), t)

    def zero() -> None:
        for blk_j in acc:
            for r in blk_j:
                b.i(f"mov.f32 {r}, {f32_hex(0.0)}")
    b.part(("wgmma.zero", ms, BN), zero)
    b.i(f"mov.u32 {kt}, 0")
    b.i(f"@{pz} bra {kdone}")
    b.put_label(kloop)
    b.region = "iter"
    b.comment("Wait until stage s is full (its TMA bytes have landed)")
    fb = b.reg("u32")
    b.i(f"mad.lo.u32 {fb}, {s}, 8, {full0}")
    _wait(b, fb, ph, "c_full")
    if mark:
        mark(0)
    da, db = emit_descriptors(b, s, (ta.stage_bytes, tb.stage_bytes), (sa, sb), wga, (desc_high(ta), desc_high(tb)))

    def release() -> None:
        eb = b.reg("u32")
        b.i(f"mad.lo.u32 {eb}, {s}, 8, {empty0}")
        b.i(f"mbarrier.arrive.shared::cta.b64 _, [{eb}]")
        _advance_ring(b, s, ph, S)
    sap, sbp = b.reg("u32"), b.reg("u32")
    b.i(f"mad.lo.u32 {sap}, {s}, {t.bm * 4}, {sab}")
    k3 = b.reg("u32")
    b.i(f"and.b32 {k3}, {kt}, 3")
    b.i(f"mad.lo.u32 {sbp}, {s}, {SCALE_SLOT}, {sc0}")
    b.i(f"mad.lo.u32 {sbp}, {k3}, 4, {sbp}")
    b.i(f"add.u32 {sbp}, {sbp}, {scale_b_slots(t)}")
    _k_block(b, acc, blk, (da, db), (spec.dtype_a, spec.dtype_b), (pzero, pone), (sap, sa_offs, sbp), pm0, release,
             mark)
    if mark:
        b.i(f"add.u32 {gc}, {gc}, 1")
    pl = b.reg("pred")
    b.i(f"add.u32 {kt}, {kt}, 1")
    b.i(f"setp.lt.u32 {pl}, {kt}, {ktiles}")
    b.i(f"@{pl} bra {kloop}")
    b.region = "post"
    b.put_label(kdone)
    _profile_slot(b, prof, 2, "after this tile's K loop (the last tile's value stays)")
    if store is None:
        emit_acc_epilogue(b, spec, P, acc, (cw, q, g, t4), (bm0, bn0), t.tm)
    else:
        lib.emit_store_epilogue(b, spec, P, acc, store, (bm0, bn0), t)
    b.i(f"add.u32 {tile}, {tile}, {nct}")
    b.i(f"bra {tloop}")
    b.put_label(cend)
    tma_lib.emit_cta_end(b, store, prof, C)
    return b, params


def fp8_metadata(spec: GemmSpec, t: Tiling, name: str, params: list[Param], prediction: dict[str, Any],
                 trace: int = 0) -> dict:
    """emit_common.metadata of D, M, N, K, alpha (beta, C, bias); A, B, scale_a and scale_b (random f32: fresh
    scales, not ones) hidden behind their tensor maps (the scales' padded layouts: the check's scale_a_layout
    and scale_b_layout), the persistent grid, the producer warpgroup, the dynamic shared bytes and the check's
    block_scale; with --profile (wgmma_tma.tma_metadata's form) one record per persistent CTA, each CTA's tile
    count, and the timer buffer last."""
    base = [p for p in params if p.role != "timer"]
    sc = {p.role: p for p in params}
    meta = metadata(spec, t, name, base, prediction)
    M, N, K = spec.nominal()
    KB = ceil_div(K, SCALE_BLOCK)
    hidden = [{"name": f"{name}_{r}", "kind": "buffer", "dtype": dt, "role": r, "count": n, "init": "random",
               "hidden": True} for r, dt, n in (("A", spec.dtype_a, M * K), ("B", spec.dtype_b, K * N),
                                                ("scale_a", "f32", scale_rows(M) * KB),
                                                ("scale_b", "f32", ceil_div(N, SCALE_BLOCK) * scale_rows(KB)))]
    maps = tensormaps(spec, t, name)
    meta["params"] = hidden + maps + meta["params"]
    for key in ("ranges", "extents"):
        meta[key] = {_shift(k, len(maps)): _shift(v, len(maps)) if isinstance(v, str) else v
                     for k, v in meta[key].items()}
    meta["grid"] = [min(ceil_div(M, t.bm) * ceil_div(N, t.bn), PERSISTENT_CTAS), 1, 1]
    if "timer" in sc:  # the last PTX param: two %globaltimer values (ns) per persistent CTA
        meta["params"].append({"name": sc["timer"].ptx_name, "kind": "buffer", "dtype": "u64", "role": "timer",
                               "count": 2 * meta["grid"][0], "init": "zeros"})
        meta["extents"][f"p{len(params) - 1 + len(maps)}"] = str(16 * meta["grid"][0])
    if "profile" in meta:  # one record per persistent CTA; the param index counts the hidden buffers and the maps
        meta["profile"] = {**meta["profile"], "param": meta["profile"]["param"] + len(hidden) + len(maps),
                           "records": meta["grid"][0], "slots": PROFILE_SLOTS,
                           "tiles_per_cta": tma_lib.profile_tiles(t, (M, N)),
                           "timer": {"param": len(meta["params"]) - 1, "per_cta": ["start_ns", "end_ns"]}}
        if trace:  # the buffer: the records, then every CTA's trace
            i = meta["profile"]["param"]
            n = meta["grid"][0] * (PROFILE_SLOTS + len(TRACE_SLOTS) * trace)
            meta["params"][i] = {**meta["params"][i], "count": n}
            meta["extents"][f"p{i - len(hidden)}"] = str(8 * n)
            meta["profile"]["trace"] = {"steps": trace, "slots": list(TRACE_SLOTS)}
    meta["block"] = [t.threads + 128, 1, 1]
    meta["dynamic_shared"] = smem_bytes(spec, t)
    meta["check"]["block_scale"] = SCALE_BLOCK
    meta["check"]["scale_a_layout"], meta["check"]["scale_b_layout"] = SCALE_LAYOUTS
    return meta


def emit(spec: GemmSpec, t: Tiling, prediction: dict[str, Any], name: str | None = None,
         profile: bool = False, trace: int = 0) -> str:
    """The kernel; `profile`: one clock64 record per persistent CTA and its %globaltimer pair (_build); `trace`
    > 0: the record and TRACE_SLOTS clock64 values per K block for the CTA's first `trace` K blocks."""
    name = name or f"{spec.name}_wgmma_fp8"
    b, params = _build(spec, t, name, False, profile, trace)
    meta = fp8_metadata(spec, t, name, params, prediction, trace)
    title = (f"Block-scaled fp8 GEMM (DeepGEMM) {t.key()}: TMA 128B swizzle, {t.stages}-stage mbarrier ring, wgmma "
             f"m64n{t.bn}k32 {_types(spec.dtype_a, spec.dtype_b)} per 128-K block, promoted with f32 FMAs; "
             f"D {spec.dtype_out} {spec.layout_c}")
    tm_params = [(f"{m['name']}[128]", ".align 64 .b8") for m in tensormaps(spec, t, name)]
    ptx = render_kernel(header_json(meta), name, tm_params + [(p.ptx_name, p.ptx_type) for p in params], [], b,
                        title)
    ptx = ptx.replace(")\n{", f")\n.maxntid {t.threads + 128}, 1, 1\n.minnctapersm 1\n{{", 1)
    decl = f".extern .shared .align {ATOM} .b8 {name}_smem[];\n\n.visible .entry"
    return ptx.replace(".visible .entry", decl, 1)


def fp8_tiling(bm: int, bn: int, tm: int, stages: int) -> Tiling:
    return Tiling("wgmma_fp8", bm, bn, TILE_K, tm, bn, stages, 0, 0, 16, 16, 0, MMA_K)


class WgmmaFp8(WgmmaTma):
    name = "wgmma_fp8"
    opt_in = True
    profiles = True  # --profile: wgmma_tma's record per persistent CTA (_build)

    def ring_bytes(self, spec: GemmSpec, t: Tiling) -> int:
        """The ring, its mbarriers and the scale slots, 1024-byte aligned (staging_offset)."""
        return staging_offset(spec, t)

    def unavailable(self, spec: GemmSpec, hw: HwConfig) -> str | None:
        if hw.wgmma is None or hw.tma is None:
            return f"{hw.name} has no wgmma/tma section (the fp8 variant needs sm_90a's wgmma and TMA)"
        if spec.scale != "block128" or spec.dtype_a not in FP8 or spec.dtype_b not in FP8:
            return "wgmma_fp8 computes block-scaled fp8 GEMMs only (dtype: e4m3 or e5m2 with scale: block128)"
        if spec.K.align(16) < 16:
            return "K must be a multiple of 16 (16-byte TMA row strides of the fp8 A and B)" + (
                "" if spec.K.fixed else f"; give the range as K: {{range: [{spec.K.lo}, {spec.K.hi}], "
                                        "multiple_of: 16}")
        return None

    def tilings(self, spec: GemmSpec) -> list[Tiling]:
        out = []
        for bm, tm in ((64, 64), (128, 64), (256, 128)):
            for bn in (64, 128, 256):  # 256: two 128-wide N halves through one block accumulator set
                if self.live_ranges(fp8_tiling(bm, bn, tm, 3))[0] > 192:  # block + promoted accumulators
                    continue
                for stages in (3, 4, 5, 6):
                    t = fp8_tiling(bm, bn, tm, stages)
                    slabs, nb, _ = tma_lib.store_slabs(spec, t)
                    if smem_bytes(spec, t) <= SHARED_LIMIT and (nb or not slabs):  # the staging counts too
                        out.append(t)
        return out

    def shared_bytes(self, spec: GemmSpec, t: Tiling) -> int:
        return smem_bytes(spec, t)

    def live_ranges(self, t: Tiling) -> tuple[int, int, int]:
        # the block and the promoted accumulators; addressing as wgmma plus the scale pointers
        ms, h = t.tm // 64, halves_of(t)
        return ms * (t.bn // 2 + t.bn // h // 2), 0, 16 + 4 * (ms + h) + 6 * ms * h + 2 * h

    def emit(self, spec: GemmSpec, t: Tiling, prediction: dict[str, Any], name: str | None = None,
             profile: bool = False) -> str:
        return emit(spec, t, prediction, name, profile)

    def counts(self, spec: GemmSpec, t: Tiling) -> Counts:
        return _counts(spec, t)

    def cycle_model(self, spec: GemmSpec, t: Tiling, hw: HwConfig, shape: tuple[int, int, int], dram_cycles: float,
                    miss_rate: float) -> CycleModel | None:
        slabs, nb, _ = tma_lib.store_slabs(spec, t)
        return fp8_cycle_model(spec, t, hw, shape, dram_cycles, miss_rate, _counts(spec, t), PERSISTENT_CTAS, 2,
                               halves_of(t), (slabs, nb) if slabs else None)


@lru_cache(maxsize=65536)
def _counts(spec: GemmSpec, t: Tiling) -> Counts:
    return tally(_build(spec, t, "k", True)[0], (0, 0))


VARIANT = WgmmaFp8()
