"""Block-scaled fp8 GEMM, DeepGEMM's method, on wgmma_tma's warp-specialised persistent kernel:
D = sum over K blocks kb of (A_kb . B_kb^T) * scale_a[m, kb] * scale_b[n / 128, kb], A (M x K) and B
(N x K, "col") e4m3, K-major; D bf16 (or f32).

Hopper's fp8 wgmma accumulates with reduced precision, so, as DeepGEMM does, each 128-wide K block (one
K tile: TILE_K = 128 e4m3 = one 128-byte swizzle row) is summed by wgmma.m64nNk32.f32.e4m3.e4m3 into a
block accumulator set started fresh (scale-d false on the first k32 step), then promoted on the CUDA
cores: acc[i] = fma(blk[i], scale_a[row(i), kb] * scale_b[n block, kb], acc[i]), per K block.

Reused from wgmma_tma.py unchanged: the producer warpgroup (thread 0, TMA boxes [128, mn] into the ring,
arrive.expect_tx on full[s], waits on empty[s]), the grouped persistent tile order and the ring's
(stage, phase) walk; from wgmma.py: the stage descriptors (128-byte swizzle, K-major: SBO 1024) and the
accumulator epilogue (emit_acc_epilogue: alpha, beta C, bias, activation, cast).

Consumer warpgroup c (rows c*64 .. c*64 + 63 of the tile; TILE_N <= 128, so the tile lies in one 128-wide
N block of scale_b), per K tile: wait full[s]; wgmma.fence, 4 k32 wgmmas, commit; the scales by plain
ld.global (scale_a of the thread's two rows, scale_b one value), issued before the wait so their latency
overlaps the MMAs; wait_group 0; arrive on empty[s] (the stage is read no more); the FMAs. With two
consumer warpgroups, one's promotion overlaps the other's wgmmas (DeepGEMM's overlap).

Scale layouts (row-major f32): scale_a[M][KB], scale_b[NB][KB], KB = ceil(K / 128), NB = ceil(N / 128).
Rows past M read no scale (0: their D is never stored). K past the end is zero-filled by TMA, so a partial
last K block contributes its valid part only.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from kernelgen.counting import Counts, tally
from kernelgen.emit_common import Param, ceil_div, header_json, kernel_params, load_params, metadata
from kernelgen.models.fp8_cycles import fp8_cycle_model
from kernelgen.models.schedule import CycleModel
from kernelgen.ptxbuild import PtxBuilder, f32_hex, render_kernel
from kernelgen.spec import SCALE_BLOCK, GemmSpec
from kernelgen.tiling import Tiling, log2, operand_tiles
from kernelgen.variants.wgmma import ATOM, BLOCK, ROW, desc_high, emit_acc_epilogue, emit_descriptors
from kernelgen.variants.wgmma_tma import (
    CONSUMER_REGS,
    PERSISTENT_CTAS,
    SHARED_LIMIT,
    WgmmaTma,
    _advance_ring,
    _producer,
    _shift,
    _tile_origin,
    _wait,
    emit_setup,
)
from sim.hw import HwConfig

TILE_K = SCALE_BLOCK  # one K tile = one scale block = 128 e4m3 = one 128-byte swizzle row
MMA_K = 32  # wgmma k32 for 8-bit floats: 32 bytes of K, as k16 of 16-bit types


def smem_bytes(spec: GemmSpec, t: Tiling) -> int:
    ta, tb = operand_tiles(spec, t)
    return t.stages * (ta.stage_bytes + tb.stage_bytes) + 16 * t.stages


def tensormaps(spec: GemmSpec, t: Tiling, name: str) -> list[dict[str, Any]]:
    """The "tensormap" params of A (M x K) and B (N x K): one box [128, mn] of bytes per stage each."""
    M, N, K = spec.nominal()
    return [{"name": f"{name}_tmap_{r.lower()}", "kind": "tensormap", "of": r, "dtype": "e4m3", "dims": [K, ext],
             "strides": [K], "box": [TILE_K, mn], "swizzle": 128, "element_strides": [1, 1]}
            for r, ext, mn in (("A", M, t.bm), ("B", N, t.bn))]


def scale_params(name: str) -> list[Param]:
    return [Param("scale_a", f"{name}_scale_a", ".u64", "buffer", "f32"),
            Param("scale_b", f"{name}_scale_b", ".u64", "buffer", "f32")]


def _setup(b: PtxBuilder, name: str, t: Tiling, P: dict[str, str], stage_bytes: tuple[int, int]):
    """Tensor-map addresses, the shared carve-up, the ring's mbarriers (thread 0) and the tile schedule
    (wgmma_tma.emit_setup; t.bk = TILE_K: one K tile per scale block)."""
    su = emit_setup(b, name, t, P, stage_bytes, ktiles_note=f"KB = ceil(K / {TILE_K}) K tiles (= scale blocks)")
    return su.tmap, (su.tid, su.wg), su.smem, su.sched


def _scale_rows(b: PtxBuilder, P: dict[str, str], rows: list[str], nbase: str, ktiles: str) -> tuple[list, str]:
    """Per tile: (address, in-range predicate) of scale_a row r for each of the thread's rows, and the
    address of scale_b[n block] (kb = 0); a K tile adds 4 * kb."""
    out = []
    for r in rows:
        p, idx, a = b.reg("pred"), b.reg("u32"), b.reg("u64")
        b.i(f"setp.lt.u32 {p}, {r}, {P['M']}")
        b.i(f"mul.lo.u32 {idx}, {r}, {ktiles}")
        b.i(f"mul.wide.u32 {a}, {idx}, 4")
        b.i(f"add.u64 {a}, {a}, {P['scale_a']}")
        out.append((a, p))
    nb, ib = b.reg("u32"), b.reg("u64")
    b.i(f"shr.u32 {nb}, {nbase}, {log2(SCALE_BLOCK)}")
    b.i(f"mul.lo.u32 {nb}, {nb}, {ktiles}")
    b.i(f"mul.wide.u32 {ib}, {nb}, 4")
    b.i(f"add.u64 {ib}, {ib}, {P['scale_b']}")
    return out, ib


def _wgmma_block(b: PtxBuilder, blk: list[list[str]], descs: tuple[str, str], BN: int, pzero: str,
                 pone: str) -> None:
    """One K block: fence, TILE_K / 32 k32 steps x len(blk) m64 wgmmas into the block accumulators (the first
    step with scale-d false: D = A.B, no zeroing), commit."""
    da, db = descs

    def compute() -> None:
        b.i("wgmma.fence.sync.aligned")
        for kk in range(TILE_K // MMA_K):
            dbk = db
            if kk:
                dbk = b.reg("u64")
                b.i(f"add.s64 {dbk}, {db}, {kk * MMA_K >> 4}")
            for j, acc in enumerate(blk):
                off = (kk * MMA_K + j * BLOCK) >> 4
                dak = da
                if off:
                    dak = b.reg("u64")
                    b.i(f"add.s64 {dak}, {da}, {off}")
                b.i(f"wgmma.mma_async.sync.aligned.m64n{BN}k32.f32.e4m3.e4m3 {{{', '.join(acc)}}}, {dak}, {dbk}, "
                    f"{pzero if kk == 0 else pone}, 1, 1")
        b.i("wgmma.commit_group.sync.aligned")
    b.comment(f"K block: {TILE_K // MMA_K} k32 steps x {len(blk)} wgmma m64n{BN}k32 e4m3 into the block accumulators")
    b.part(("wgmma_fp8.compute", len(blk), BN), compute)


def _promote(b: PtxBuilder, acc: list[list[str]], blk: list[list[str]], scales: list[str]) -> None:
    """acc[j][i] += blk[j][i] * scales[2j + half(i)]: one FFMA per accumulator."""
    def fmas() -> None:
        for j, (aj, bj) in enumerate(zip(acc, blk, strict=True)):
            for i, (a, x) in enumerate(zip(aj, bj, strict=True)):
                b.i(f"fma.rn.f32 {a}, {x}, {scales[2 * j + ((i >> 1) & 1)]}, {a}")
    b.comment("Promotion: acc += blk * scale_a[row, kb] * scale_b[n block, kb] (f32 FMAs on the CUDA cores)")
    b.part(("wgmma_fp8.promote", len(acc), len(acc[0])), fmas)


def _build(spec: GemmSpec, t: Tiling, name: str, counting: bool) -> tuple[PtxBuilder, list[Param]]:
    b = PtxBuilder(counting)
    params = [p for p in kernel_params(spec, name) if p.role not in ("A", "B")] + scale_params(name)
    P = load_params(b, params)
    ta, tb = operand_tiles(spec, t)
    S, C = t.stages, t.grid_m
    ms, BN = t.tm // 64, t.bn
    tmap, (tid, wg), smem, sched = _setup(b, name, t, P, (ta.stage_bytes, tb.stage_bytes))
    sa, sb, full0, empty0 = smem
    tiles_m, tiles_n, ntiles, ktiles, nct = sched
    pz = b.reg("pred")
    b.i(f"setp.eq.u32 {pz}, {ktiles}, 0")
    consumer = b.label("consumer")
    pc = b.reg("pred")
    b.i(f"setp.ne.u32 {pc}, {wg}, 0")
    b.i(f"@{pc} bra {consumer}")

    _producer(b, spec, t, (ta, tb), smem, tmap, sched, pz)

    b.put_label(consumer)
    if C == 2:
        b.i(f"setmaxnreg.inc.sync.aligned.u32 {CONSUMER_REGS}")
    b.comment(f"Consumers: warpgroup c = wg - 1 owns rows c*{t.tm}.. of each tile; q = warp % 4, g = lane / 4, "
              "t4 = lane % 4")
    cw, lane, q, g, t4, wga = b.regs("u32", 6)
    b.i(f"sub.u32 {cw}, {wg}, 1")
    b.i(f"and.b32 {lane}, {tid}, 31")
    b.i(f"shr.u32 {q}, {tid}, 5")
    b.i(f"and.b32 {q}, {q}, 3")
    b.i(f"shr.u32 {g}, {lane}, 2")
    b.i(f"and.b32 {t4}, {lane}, 3")
    b.i(f"mul.lo.u32 {wga}, {cw}, {t.tm * ROW}")
    pone, pzero = b.reg("pred"), b.reg("pred")
    b.i(f"mov.pred {pone}, -1")
    b.i(f"mov.pred {pzero}, 0")
    acc = [b.regs("f32", BN // 2) for _ in range(ms)]
    blk = [b.regs("f32", BN // 2) for _ in range(ms)]
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
    b.comment("This thread's rows (accumulator map of ops_wgmma: 64j + 16q + g + 8h) and their scale addresses")
    rbase = b.reg("u32")
    b.i(f"mad.lo.u32 {rbase}, {cw}, {t.tm}, {bm0}")
    b.i(f"mad.lo.u32 {rbase}, {q}, 16, {rbase}")
    b.i(f"add.u32 {rbase}, {rbase}, {g}")
    rows = []
    for j in range(ms):
        for h in range(2):
            r = b.reg("u32")
            b.i(f"add.u32 {r}, {rbase}, {64 * j + 8 * h}")
            rows.append(r)
    sa_rows, sb_addr = _scale_rows(b, P, rows, bn0, ktiles)

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
    da, db = emit_descriptors(b, s, (ta.stage_bytes, tb.stage_bytes), (sa, sb), wga, (desc_high(ta), desc_high(tb)))
    _wgmma_block(b, blk, (da, db), BN, pzero, pone)
    b.comment("The K block's scales (ld.global, in flight during the wgmmas): scale_a of each row, scale_b")
    koff = b.reg("u64")
    b.i(f"mul.wide.u32 {koff}, {kt}, 4")
    sbv = b.reg("f32")
    ab = b.reg("u64")
    b.i(f"add.u64 {ab}, {sb_addr}, {koff}")
    b.i(f"ld.global.nc.f32 {sbv}, [{ab}]")
    svals = []
    for a, p in sa_rows:
        v, aa = b.reg("f32"), b.reg("u64")
        b.i(f"mov.f32 {v}, {f32_hex(0.0)}")
        b.i(f"add.u64 {aa}, {a}, {koff}")
        b.i(f"@{p} ld.global.nc.f32 {v}, [{aa}]")
        svals.append(v)
    b.comment("wait_group 0: the block accumulators are final and stage s is read no more: release it")
    b.i("wgmma.wait_group.sync.aligned 0")
    eb = b.reg("u32")
    b.i(f"mad.lo.u32 {eb}, {s}, 8, {empty0}")
    b.i(f"mbarrier.arrive.shared::cta.b64 _, [{eb}]")
    _advance_ring(b, s, ph, S)
    for v in svals:
        b.i(f"mul.f32 {v}, {v}, {sbv}")
    _promote(b, acc, blk, svals)
    pl = b.reg("pred")
    b.i(f"add.u32 {kt}, {kt}, 1")
    b.i(f"setp.lt.u32 {pl}, {kt}, {ktiles}")
    b.i(f"@{pl} bra {kloop}")
    b.region = "post"
    b.put_label(kdone)
    emit_acc_epilogue(b, spec, P, acc, (cw, q, g, t4), (bm0, bn0), t.tm)
    b.i(f"add.u32 {tile}, {tile}, {nct}")
    b.i(f"bra {tloop}")
    b.put_label(cend)
    b.i("ret")
    return b, params


def fp8_metadata(spec: GemmSpec, t: Tiling, name: str, params: list[Param], prediction: dict[str, Any]) -> dict:
    """emit_common.metadata of D, M, N, K, alpha (beta, C, bias), then scale_a and scale_b (random f32: fresh
    scales, not ones), A and B hidden behind the two tensor maps, the persistent grid, the producer
    warpgroup, the dynamic shared bytes and the check's block_scale."""
    base = [p for p in params if p.role not in ("scale_a", "scale_b")]
    meta = metadata(spec, t, name, base, prediction)
    M, N, K = spec.nominal()
    idx = {p.role: i for i, p in enumerate(base)}
    pm, pn, pk = (f"p{idx[r]}" for r in ("M", "N", "K"))
    kb = f"(({pk}+{SCALE_BLOCK - 1})/{SCALE_BLOCK})"
    for i, (p, cnt, expr) in enumerate(((params[-2], M * ceil_div(K, SCALE_BLOCK), f"{pm}*{kb}"),
                                        (params[-1], ceil_div(N, SCALE_BLOCK) * ceil_div(K, SCALE_BLOCK),
                                         f"(({pn}+{SCALE_BLOCK - 1})/{SCALE_BLOCK})*{kb}"))):
        meta["params"].append({"name": p.ptx_name, "kind": "buffer", "dtype": "f32", "role": p.role, "count": cnt,
                               "init": "random"})
        meta["extents"][f"p{len(base) + i}"] = f"{expr}*4"
    hidden = [{"name": f"{name}_{r}", "kind": "buffer", "dtype": "e4m3", "role": r, "count": n, "init": "random",
               "hidden": True} for r, n in (("A", M * K), ("B", K * N))]
    meta["params"] = hidden + tensormaps(spec, t, name) + meta["params"]
    for key in ("ranges", "extents"):
        meta[key] = {_shift(k): _shift(v) if isinstance(v, str) else v for k, v in meta[key].items()}
    meta["grid"] = [min(ceil_div(M, t.bm) * ceil_div(N, t.bn), PERSISTENT_CTAS), 1, 1]
    meta["block"] = [t.threads + 128, 1, 1]
    meta["dynamic_shared"] = smem_bytes(spec, t)
    meta["check"]["block_scale"] = SCALE_BLOCK
    return meta


def emit(spec: GemmSpec, t: Tiling, prediction: dict[str, Any], name: str | None = None,
         profile: bool = False) -> str:
    if profile:
        raise ValueError("wgmma_fp8.py: --profile is not supported (persistent CTAs have no single K loop to time)")
    name = name or f"{spec.name}_wgmma_fp8"
    b, params = _build(spec, t, name, False)
    meta = fp8_metadata(spec, t, name, params, prediction)
    title = (f"Block-scaled fp8 GEMM (DeepGEMM) {t.key()}: TMA 128B swizzle, {t.stages}-stage mbarrier ring, wgmma "
             f"m64n{t.bn}k32 e4m3 per 128-K block, promoted with f32 FMAs; D {spec.dtype_out} {spec.layout_c}")
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

    def unavailable(self, spec: GemmSpec, hw: HwConfig) -> str | None:
        if hw.wgmma is None or hw.tma is None:
            return f"{hw.name} has no wgmma/tma section (the fp8 variant needs sm_90a's wgmma and TMA)"
        if spec.scale != "block128" or spec.dtype_a != "e4m3":
            return "wgmma_fp8 computes block-scaled e4m3 GEMMs only (dtype: e4m3 with scale: block128)"
        if spec.K.align(16) < 16:
            return "K must be a multiple of 16 (16-byte TMA row strides of the e4m3 A and B)"
        return None

    def tilings(self, spec: GemmSpec) -> list[Tiling]:
        out = []
        for bm, tm in ((64, 64), (128, 64), (256, 128)):
            for bn in (64, 128):  # <= 128: one scale_b per tile and K block
                if 2 * (tm // 64) * bn // 2 > 128:  # block + promoted accumulators per thread
                    continue
                for stages in (3, 4, 5, 6):
                    t = fp8_tiling(bm, bn, tm, stages)
                    if smem_bytes(spec, t) <= SHARED_LIMIT:
                        out.append(t)
        return out

    def live_ranges(self, t: Tiling) -> tuple[int, int, int]:
        # the block and the promoted accumulators; addressing as wgmma plus the scale pointers
        return 2 * (t.tm // 64) * t.bn // 2, 0, 16 + 4 * (t.tm // 64 + 1) + 6 * (t.tm // 64) + 2

    def emit(self, spec: GemmSpec, t: Tiling, prediction: dict[str, Any], name: str | None = None,
             profile: bool = False) -> str:
        return emit(spec, t, prediction, name, profile)

    def counts(self, spec: GemmSpec, t: Tiling) -> Counts:
        return _counts(spec, t)

    def cycle_model(self, spec: GemmSpec, t: Tiling, hw: HwConfig, shape: tuple[int, int, int], dram_cycles: float,
                    miss_rate: float) -> CycleModel | None:
        return fp8_cycle_model(spec, t, hw, shape, dram_cycles, miss_rate, _counts(spec, t), PERSISTENT_CTAS, 2)


@lru_cache(maxsize=65536)
def _counts(spec: GemmSpec, t: Tiling) -> Counts:
    return tally(_build(spec, t, "k", True)[0], (0, 0))


VARIANT = WgmmaFp8()
