"""Hopper warp-specialised persistent GEMM: TMA (cp.async.bulk.tensor.2d, 128-byte swizzle) into a ring of
``stages`` shared stages guarded by full/empty mbarriers, wgmma.mma_async m64nNk16 from shared-memory
descriptors, one wgmma group kept in flight.

CTA: warpgroup 0 is the producer (setmaxnreg.dec to 40 with two consumers; its thread 0 issues every
TMA load, the other 127 threads exit), warpgroups 1..C the consumers (C = TILE_M / tm; setmaxnreg.inc
to 232 with C = 2, the CUTLASS 168/40/232 split of 384 threads' 64 Ki registers). Consumer c owns rows
c*tm .. c*tm + tm - 1 of the tile and all TILE_N columns, as wgmma.py's warpgroups do.

Persistent: grid = min(tiles, PERSISTENT_CTAS); CTA i walks tiles i, i + nctaid.x, ... in grouped order
(GROUP_M tile rows side by side, column by column, so the B tiles of a group stay in the L2). Producer
and consumers walk the same sequence and share one running (stage, phase) across tiles.

Shared layout (wgmma.py's descriptors, unchanged): a K-major tile (A row-major, B column-major) is one
TMA box [64, mn] = mn rows of 128 bytes; an MN-major tile (A column-major, B row-major) is mn / 64 boxes
[64, 64] = 64 k-rows of 128 bytes each, 8192 bytes apart (LBO). TMA's 128-byte swizzle (chunk ^= row % 8
within the 1024-byte aligned atom, docs/tensormap-contract) is the layout the descriptors' swizzle mode
reads. Out-of-range boxes are zero-filled by TMA, so M, N, K are arbitrary; the row strides must be
multiples of 16 bytes (unavailable() routes other shapes to mma).

Ring: full[s] (count 1: the producer's arrive.expect_tx of the stage's box bytes, then the TMA
complete_tx), empty[s] (count 128 C: every consumer thread arrives once the wgmmas that read stage s have
completed, i.e. after the wait_group 1 of the next K tile, or the wait_group 0 that ends a tile).
Tensor maps (docs/kernel-metadata.md, "tensormap" params): A and B reach the kernel only through them
(hidden buffers).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from kernelgen.counting import Counts, tally
from kernelgen.emit_common import Param, ceil_div, header_json, kernel_params, load_params, metadata
from kernelgen.models.schedule import CycleModel
from kernelgen.models.sync import SyncPlan
from kernelgen.models.tma_cycles import tma_cycle_model
from kernelgen.ptxbuild import PtxBuilder, f32_hex, render_kernel
from kernelgen.spec import DTYPE_BYTES, GemmSpec
from kernelgen.tiling import OperandTile, Tiling, log2, operand_tiles
from kernelgen.variants.wgmma import (
    ATOM,
    BLOCK,
    ROW,
    Wgmma,
    desc_high,
    emit_acc_epilogue,
    emit_descriptors,
    emit_wgmma_tile,
    kmajor,
)
from sim.hw import HwConfig

PERSISTENT_CTAS = 132  # H200 SMs ([core.count] of hwconfigs/h200.yaml); the launch may override the grid
GROUP_M = 8  # tile rows per group of the persistent tile order
SHARED_LIMIT = 227 * 1024  # sm_90 dynamic shared memory per CTA (opt-in maximum)
PRODUCER_REGS, CONSUMER_REGS = 40, 232  # setmaxnreg with two consumer warpgroups (384 threads x 168)


def box(tile: OperandTile, mn: int) -> tuple[list[int], int]:
    """(TMA box innermost first, boxes per stage): K-major [64, mn] once, MN-major [64, 64] mn / 64 times."""
    return ([64, mn], 1) if kmajor(tile) else ([64, 64], mn // 64)


def smem_bytes(spec: GemmSpec, t: Tiling) -> int:
    ta, tb = operand_tiles(spec, t)
    return t.stages * (ta.stage_bytes + tb.stage_bytes) + 16 * t.stages


def tensormaps(spec: GemmSpec, t: Tiling, name: str) -> list[dict[str, Any]]:
    """The "tensormap" metadata params of A and B (dims innermost first, byte strides of dims[1:])."""
    M, N, K = spec.nominal()
    out = []
    for role, tile, mn, ext in (("A", operand_tiles(spec, t)[0], t.bm, M), ("B", operand_tiles(spec, t)[1], t.bn, N)):
        es = DTYPE_BYTES[spec.dtype_a]
        dims = [K, ext] if kmajor(tile) else [ext, K]
        out.append({"name": f"{name}_tmap_{role.lower()}", "kind": "tensormap", "of": role,
                    "dtype": spec.dtype_a, "dims": dims, "strides": [dims[0] * es], "box": box(tile, mn)[0],
                    "swizzle": 128, "element_strides": [1, 1]})
    return out


def _tile_origin(b: PtxBuilder, tile: str, tiles: tuple[str, str], t: Tiling) -> tuple[str, str]:
    """(bm0, bn0) of linear tile index `tile` in grouped order: GROUP_M tile rows, column-major inside."""
    tiles_m, tiles_n = tiles
    width, grp, first, gsz, r, im, jn, bm0, bn0 = b.regs("u32", 9)
    p = b.reg("pred")
    b.i(f"mul.lo.u32 {width}, {tiles_n}, {GROUP_M}")
    b.i(f"div.u32 {grp}, {tile}, {width}")
    b.i(f"mul.lo.u32 {first}, {grp}, {GROUP_M}")
    b.i(f"sub.u32 {gsz}, {tiles_m}, {first}")
    b.i(f"setp.gt.u32 {p}, {gsz}, {GROUP_M}")
    b.i(f"selp.b32 {gsz}, {GROUP_M}, {gsz}, {p}")
    b.i(f"mul.lo.u32 {r}, {grp}, {width}")
    b.i(f"sub.u32 {r}, {tile}, {r}")
    b.i(f"rem.u32 {im}, {r}, {gsz}")
    b.i(f"add.u32 {im}, {im}, {first}")
    b.i(f"div.u32 {jn}, {r}, {gsz}")
    b.i(f"shl.b32 {bm0}, {im}, {log2(t.bm)}")
    b.i(f"shl.b32 {bn0}, {jn}, {log2(t.bn)}")
    return bm0, bn0


def _advance_ring(b: PtxBuilder, s: str, phase: str, stages: int) -> None:
    p = b.reg("pred")
    b.i(f"add.u32 {s}, {s}, 1")
    b.i(f"setp.eq.u32 {p}, {s}, {stages}")
    b.i(f"selp.b32 {s}, 0, {s}, {p}")
    b.i(f"@{p} xor.b32 {phase}, {phase}, 1")


def _wait(b: PtxBuilder, bar: str, phase: str, stem: str) -> None:
    """Spin on mbarrier.try_wait.parity until the phase of parity `phase` of `bar` has completed."""
    lab, p = b.label(stem), b.reg("pred")
    b.put_label(lab)
    b.i(f"mbarrier.try_wait.parity.shared::cta.b64 {p}, [{bar}], {phase}")
    b.i(f"@!{p} bra {lab}")


def _build(spec: GemmSpec, t: Tiling, name: str, counting: bool) -> tuple[PtxBuilder, list[Param]]:
    b = PtxBuilder(counting)
    params = [p for p in kernel_params(spec, name) if p.role not in ("A", "B")]
    P = load_params(b, params)
    ta, tb = operand_tiles(spec, t)
    S, C, ab = t.stages, t.grid_m, spec.dtype_a
    ms, BN = t.tm // 64, t.bn
    a_bytes, b_bytes = ta.stage_bytes, tb.stage_bytes

    b.comment(f"Tensor maps: generic addresses of the {name}_tmap_a / _b kernel parameters")
    tmap = {}
    for role in ("a", "b"):
        r = b.reg("u64")
        b.i(f"mov.b64 {r}, {name}_tmap_{role}")
        b.i(f"cvta.param.u64 {r}, {r}")
        tmap[role] = r

    b.comment(f"Shared: {S} A stages of {a_bytes} B, {S} B stages of {b_bytes} B, then full[{S}] and empty[{S}] "
              "mbarriers (8 B each)")
    tid, wg, sa, sb, full0, empty0 = b.regs("u32", 6)
    b.i(f"mov.u32 {tid}, %tid.x")
    b.i(f"shr.u32 {wg}, {tid}, 7")
    b.i(f"mov.u32 {sa}, {name}_smem")
    b.i(f"add.u32 {sb}, {sa}, {S * a_bytes}")
    b.i(f"add.u32 {full0}, {sb}, {S * b_bytes}")
    b.i(f"add.u32 {empty0}, {full0}, {8 * S}")
    b.comment(f"Thread 0 initialises the barriers (full: 1 arrival + bytes, empty: {128 * C} consumer arrivals)")
    p0, pinit = b.reg("pred"), b.label("init_done")
    b.i(f"setp.ne.u32 {p0}, {tid}, 0")
    b.i(f"@{p0} bra {pinit}")
    for i in range(S):
        b.i(f"mbarrier.init.shared::cta.b64 [{full0}+{8 * i}], 1")
        b.i(f"mbarrier.init.shared::cta.b64 [{empty0}+{8 * i}], {128 * C}")
    b.i("fence.mbarrier_init.release.cluster")
    b.put_label(pinit)
    b.i("bar.sync 0")

    b.comment("Tile schedule: tiles_m x tiles_n tiles, ktiles = ceil(K / 64) K tiles each")
    tiles_m, tiles_n, ntiles, ktiles, nct = b.regs("u32", 5)
    b.i(f"add.u32 {tiles_m}, {P['M']}, {t.bm - 1}")
    b.i(f"shr.u32 {tiles_m}, {tiles_m}, {log2(t.bm)}")
    b.i(f"add.u32 {tiles_n}, {P['N']}, {t.bn - 1}")
    b.i(f"shr.u32 {tiles_n}, {tiles_n}, {log2(t.bn)}")
    b.i(f"mul.lo.u32 {ntiles}, {tiles_m}, {tiles_n}")
    b.i(f"add.u32 {ktiles}, {P['K']}, {t.bk - 1}")
    b.i(f"shr.u32 {ktiles}, {ktiles}, {log2(t.bk)}")
    b.i(f"mov.u32 {nct}, %nctaid.x")
    pz = b.reg("pred")
    b.i(f"setp.eq.u32 {pz}, {ktiles}, 0")
    consumer = b.label("consumer")
    pc = b.reg("pred")
    b.i(f"setp.ne.u32 {pc}, {wg}, 0")
    b.i(f"@{pc} bra {consumer}")

    _producer(b, spec, t, (ta, tb), (sa, sb, full0, empty0), tmap, (tiles_m, tiles_n, ntiles, ktiles, nct), pz)

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
    pone = b.reg("pred")
    b.i("mov.pred " + pone + ", -1")
    acc = [b.regs("f32", BN // 2) for _ in range(ms)]
    tile, s, ph, ps, kt = b.regs("u32", 5)
    b.i(f"mov.u32 {tile}, %ctaid.x")
    b.i(f"mov.u32 {s}, 0")
    b.i(f"mov.u32 {ph}, 0")
    b.i(f"mov.u32 {ps}, 0")
    tloop, cend, kloop, kdone = b.label("c_tile"), b.label("c_end"), b.label("c_k"), b.label("c_kdone")
    b.put_label(tloop)
    pe = b.reg("pred")
    b.i(f"setp.ge.u32 {pe}, {tile}, {ntiles}")
    b.i(f"@{pe} bra {cend}")
    bm0, bn0 = _tile_origin(b, tile, (tiles_m, tiles_n), t)

    def zero() -> None:
        for blk in acc:
            for r in blk:
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
    da, db = emit_descriptors(b, s, (a_bytes, b_bytes), (sa, sb), wga, (desc_high(ta), desc_high(tb)))
    emit_wgmma_tile(b, acc, (da, db), (ta, tb), t.k_steps, ab, 1, pone)
    b.comment("wait_group 1: the previous K tile's wgmmas are done, so its stage goes back to the producer")
    pk, eb = b.reg("pred"), b.reg("u32")
    b.i(f"setp.ne.u32 {pk}, {kt}, 0")
    b.i(f"mad.lo.u32 {eb}, {ps}, 8, {empty0}")
    b.i(f"@{pk} mbarrier.arrive.shared::cta.b64 _, [{eb}]")
    b.i(f"mov.u32 {ps}, {s}")
    _advance_ring(b, s, ph, S)
    pl = b.reg("pred")
    b.i(f"add.u32 {kt}, {kt}, 1")
    b.i(f"setp.lt.u32 {pl}, {kt}, {ktiles}")
    b.i(f"@{pl} bra {kloop}")
    b.region = "post"
    b.i("wgmma.wait_group.sync.aligned 0")
    eb2 = b.reg("u32")
    b.i(f"mad.lo.u32 {eb2}, {ps}, 8, {empty0}")
    b.i(f"mbarrier.arrive.shared::cta.b64 _, [{eb2}]")
    b.put_label(kdone)
    emit_acc_epilogue(b, spec, P, acc, (cw, q, g, t4), (bm0, bn0), t.tm)
    b.i(f"add.u32 {tile}, {tile}, {nct}")
    b.i(f"bra {tloop}")
    b.put_label(cend)
    b.i("ret")
    return b, params


def _producer(b: PtxBuilder, spec: GemmSpec, t: Tiling, tiles: tuple[OperandTile, OperandTile],
              smem: tuple[str, str, str, str], tmap: dict[str, str], sched: tuple[str, str, str, str, str],
              pz: str) -> None:
    """Warpgroup 0: thread 0 walks the tiles and their K tiles, waiting on empty[s] and issuing the TMA
    boxes of A and B into stage s with arrive.expect_tx on full[s]; the other threads exit."""
    ta, tb = tiles
    sa, sb, full0, empty0 = smem
    tiles_m, tiles_n, ntiles, ktiles, nct = sched
    a_bytes, b_bytes = ta.stage_bytes, tb.stage_bytes
    b.comment(f"Producer warpgroup: {'setmaxnreg.dec to ' + str(PRODUCER_REGS) + ', ' if t.grid_m == 2 else ''}"
              "thread 0 issues every TMA load; the others exit")
    if t.grid_m == 2:
        b.i(f"setmaxnreg.dec.sync.aligned.u32 {PRODUCER_REGS}")
    tid, tile, s, ph, kt, kl = b.regs("u32", 6)
    b.i(f"mov.u32 {tid}, %tid.x")
    pn, pend = b.reg("pred"), b.label("p_end")
    b.i(f"setp.ne.u32 {pn}, {tid}, 0")
    b.i(f"@{pn} bra {pend}")
    b.i(f"mov.u32 {tile}, %ctaid.x")
    b.i(f"mov.u32 {s}, 0")
    b.i(f"mov.u32 {ph}, 1")
    tloop, knext, kloop = b.label("p_tile"), b.label("p_next"), b.label("p_k")
    b.put_label(tloop)
    pe = b.reg("pred")
    b.i(f"setp.ge.u32 {pe}, {tile}, {ntiles}")
    b.i(f"@{pe} bra {pend}")
    bm0, bn0 = _tile_origin(b, tile, (tiles_m, tiles_n), t)
    b.i(f"mov.u32 {kt}, 0")
    b.i(f"mov.u32 {kl}, 0")
    b.i(f"@{pz} bra {knext}")
    b.put_label(kloop)
    eb, fb = b.reg("u32"), b.reg("u32")
    b.i(f"mad.lo.u32 {eb}, {s}, 8, {empty0}")
    b.i(f"mad.lo.u32 {fb}, {s}, 8, {full0}")
    _wait(b, eb, ph, "p_empty")
    b.i(f"mbarrier.arrive.expect_tx.shared::cta.b64 _, [{fb}], {a_bytes + b_bytes}")
    for tile_op, base, nbytes, org, mn, role in ((ta, sa, a_bytes, bm0, t.bm, "a"), (tb, sb, b_bytes, bn0, t.bn, "b")):
        dst = b.reg("u32")
        b.i(f"mad.lo.u32 {dst}, {s}, {nbytes}, {base}")
        n = box(tile_op, mn)[1]
        for j in range(n):
            if kmajor(tile_op):
                c0, c1 = kl, org
            else:
                c0, c1 = org, kl
                if j:
                    c0 = b.reg("u32")
                    b.i(f"add.u32 {c0}, {org}, {64 * j}")
            d = dst if not j else f"{dst}+{BLOCK * j}"
            b.i(f"cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [{d}], "
                f"[{tmap[role]}, {{{c0}, {c1}}}], [{fb}]")
    _advance_ring(b, s, ph, t.stages)
    pl = b.reg("pred")
    b.i(f"add.u32 {kl}, {kl}, {t.bk}")
    b.i(f"add.u32 {kt}, {kt}, 1")
    b.i(f"setp.lt.u32 {pl}, {kt}, {ktiles}")
    b.i(f"@{pl} bra {kloop}")
    b.put_label(knext)
    b.i(f"add.u32 {tile}, {tile}, {nct}")
    b.i(f"bra {tloop}")
    b.put_label(pend)
    b.i("ret")


def emit(spec: GemmSpec, t: Tiling, prediction: dict[str, Any], name: str | None = None,
         profile: bool = False) -> str:
    if profile:
        raise ValueError("wgmma_tma.py: --profile is not supported (persistent CTAs have no single K loop to "
                         "time); profile with --variant wgmma")
    name = name or f"{spec.name}_wgmma_tma"
    b, params = _build(spec, t, name, False)
    meta = tma_metadata(spec, t, name, params, prediction)
    title = (f"Warp-specialised persistent GEMM {t.key()}: TMA 128B swizzle, {t.stages}-stage mbarrier ring, wgmma "
             f"m64n{t.bn}k16 {spec.dtype_a}, A {spec.layout_a}, B {spec.layout_b}, D {spec.dtype_out} {spec.layout_c}")
    tm_params = [(f"{m['name']}[128]", ".align 64 .b8") for m in tensormaps(spec, t, name)]
    ptx = render_kernel(header_json(meta), name, tm_params + [(p.ptx_name, p.ptx_type) for p in params], [], b,
                        title)
    # a launch bound fixes the entry register count (384 threads: 168), the pool setmaxnreg redistributes
    ptx = ptx.replace(")\n{", f")\n.maxntid {t.threads + 128}, 1, 1\n.minnctapersm 1\n{{", 1)
    decl = f".extern .shared .align {ATOM} .b8 {name}_smem[];\n\n.visible .entry"
    return ptx.replace(".visible .entry", decl, 1)


def _shift(expr: str) -> str:
    return re.sub(r"\bp(\d+)\b", lambda m: f"p{int(m.group(1)) + 2}", expr)


def tma_metadata(spec: GemmSpec, t: Tiling, name: str, params: list[Param], prediction: dict[str, Any]) -> dict:
    """emit_common.metadata for the passed params, then: A and B as hidden buffers and the two tensor maps
    first in the list (PTX param i of ranges/extents shifts by the 2 maps), the persistent grid, the
    producer warpgroup in the block and the dynamic shared bytes."""
    meta = metadata(spec, t, name, params, prediction)
    M, N, K = spec.nominal()
    hidden = [{"name": f"{name}_{r}", "kind": "buffer", "dtype": dt, "role": r, "count": n, "init": "random",
               "hidden": True} for r, dt, n in (("A", spec.dtype_a, M * K), ("B", spec.dtype_b, K * N))]
    meta["params"] = hidden + tensormaps(spec, t, name) + meta["params"]
    for key in ("ranges", "extents"):
        meta[key] = {_shift(k): _shift(v) if isinstance(v, str) else v for k, v in meta[key].items()}
    meta["grid"] = [min(ceil_div(M, t.bm) * ceil_div(N, t.bn), PERSISTENT_CTAS), 1, 1]
    meta["block"] = [t.threads + 128, 1, 1]
    meta["dynamic_shared"] = smem_bytes(spec, t)
    return meta


class WgmmaTma(Wgmma):
    name = "wgmma_tma"
    opt_in = True

    def unavailable(self, spec: GemmSpec, hw: HwConfig) -> str | None:
        why = super().unavailable(spec, hw)
        if why and "multiple of 8" in why:
            return why.replace("cp.async chunks", "TMA row strides") + "; use --variant mma"
        return why

    def tilings(self, spec: GemmSpec) -> list[Tiling]:
        out = []
        for bm, tm in ((64, 64), (128, 64), (128, 128), (256, 128)):
            for bn in (64, 128, 256):
                if tm // 64 * bn // 2 > 128:
                    continue
                for stages in (3, 4, 5, 6):
                    t = Tiling("wgmma_tma", bm, bn, 64, tm, bn, stages, 0, 0, 8, 8, 0)
                    if smem_bytes(spec, t) <= SHARED_LIMIT:
                        out.append(t)
        return out

    def emit(self, spec: GemmSpec, t: Tiling, prediction: dict[str, Any], name: str | None = None,
             profile: bool = False) -> str:
        return emit(spec, t, prediction, name, profile)

    def counts(self, spec: GemmSpec, t: Tiling) -> Counts:
        return _counts(spec, t)

    def cycle_model(self, spec: GemmSpec, t: Tiling, hw: HwConfig, shape: tuple[int, int, int], dram_cycles: float,
                    miss_rate: float) -> CycleModel | None:
        ta, tb = operand_tiles(spec, t)
        boxes = box(ta, t.bm)[1] + box(tb, t.bn)[1]
        return tma_cycle_model(spec, t, hw, shape, dram_cycles, miss_rate, _counts(spec, t), PERSISTENT_CTAS, boxes)

    def sync_plan(self, t: Tiling, ktiles: int, sync_lat: int, mem_lat: float, compute_cycles_per_tile: float,
                  ctas_per_core: int) -> SyncPlan:
        exposed = max(0.0, mem_lat - (t.stages - 1) * compute_cycles_per_tile * ctas_per_core)
        return SyncPlan(0, 0, 0, 0, sync_lat, exposed, True,
                        "full/empty mbarrier ring: the producer waits only on stages the consumers released")


@lru_cache(maxsize=65536)
def _counts(spec: GemmSpec, t: Tiling) -> Counts:
    return tally(_build(spec, t, "k", True)[0], (0, 0))


VARIANT = WgmmaTma()
