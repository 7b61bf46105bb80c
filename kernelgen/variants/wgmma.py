"""Hopper warpgroup emitter: wgmma.mma_async.sync.aligned.m64nNk16.f32.{f16,bf16} from shared-memory
descriptors with 128-byte swizzle, a ``stages``-deep cp.async pipeline.

CTA: grid_m = TILE_M / tm warpgroups of 128 threads; warpgroup wg owns rows wg*tm .. wg*tm + tm - 1
and all TILE_N columns, as tm / 64 m64nN wgmmas per k16 step (N = TILE_N).

Shared layout (CUTLASS make_gmma_desc, Swizzle<3,4,3>; sim/functional/ops_wgmma.py): TILE_K = 64
16-bit elements = one 128-byte swizzle row. A K-major tile (A row-major, B column-major) is
mn rows of 128 bytes (SBO 1024 = 8 rows); an MN-major tile (A column-major, B row-major, imm-trans 1)
is mn / 64 blocks of 64 k-rows x 128 bytes (SBO 1024 = 8 k-rows, LBO 8192 = next 64 of mn). Both
store 16-byte chunk e of the tile at swizzle(16 e) = 16 e ^ ((16 e >> 3) & 0x70), so the copies keep
mma.py's thread -> chunk map e = tid + i * threads. The tiles start 1024-byte aligned (the swizzle
atom), in one dynamic shared array (stages x (A, B) exceeds the 48 KiB of static shared memory).

Pipeline (sync plan). stages = 2: mma.py's, the compute of one K tile being wgmma.fence, the k16 steps'
wgmmas, wgmma.commit_group and wgmma.wait_group 0 (the stage is free at the next barrier).
stages >= 3: one wgmma group stays in flight. Iteration kt issues tile kt's wgmmas, waits for tile kt-1's
(wait_group 1), waits for tile kt+1's copies (cp.async.wait_group stages-3), and after one barrier
(tile kt+1 visible, stage (kt-1) % stages read by no warpgroup) copies tile kt+stages-1 into that stage:
the copies and the barrier overlap tile kt's wgmmas. wait_group 0 after the loop, before the epilogue.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from kernelgen.counting import Counts, tally
from kernelgen.emit_common import (
    Param,
    emit_epilogue,
    emit_profile_setup,
    emit_profile_slot,
    emit_profile_start,
    emit_stage_advance,
    header_json,
    kernel_params,
    load_params,
    metadata,
)
from kernelgen.models.schedule import CycleModel
from kernelgen.models.sync import SyncPlan
from kernelgen.ptxbuild import PtxBuilder, f32_hex, render_kernel
from kernelgen.spec import GemmSpec
from kernelgen.tiling import OperandTile, Site, Tiling, log2, operand_tiles
from kernelgen.variants import shared_model
from kernelgen.variants.mma import _check_pipeline
from sim.hw import HwConfig

ROW = 128  # bytes of one swizzle row (TILE_K = 64 16-bit elements)
ATOM = 1024  # 8 rows of the 128-byte swizzle pattern: the descriptors' SBO
BLOCK = 8192  # 64 rows of 128 bytes: an MN-major tile's LBO, and the bytes of 64 rows of mn


#: the wgmma form per A/B dtype: (K of one step, accumulator type, whether the instruction takes the imm-scale-a/b
#: and transpose operands; the integer form takes neither and reads K-major operands only: PTX ISA, wgmma.mma_async)
WGMMA_FORMS = {"f16": (16, "f32", True), "bf16": (16, "f32", True), "s8": (32, "s32", False)}


def kmajor(tile: OperandTile) -> bool:
    return tile.col_dim == "k"


def desc_high(tile: OperandTile) -> int:
    """Descriptor bits above the start address: LBO (16-29), SBO (32-45), 128-byte swizzle (62)."""
    lbo = 0 if kmajor(tile) else BLOCK
    return (lbo >> 4) << 16 | (ATOM >> 4) << 32 | 1 << 62


def k_step_bytes(tile: OperandTile) -> int:
    """Start-address advance of one k16 step: 32 bytes along a K-major row, 16 k-rows MN-major."""
    return 32 if kmajor(tile) else 16 * ROW


def chunk_delta(tile: OperandTile, i: int, threads: int) -> tuple[int, int]:
    """(mn, k) offset of copy i from the thread's first chunk (chunk e = tid + i * threads)."""
    e = i * threads
    if kmajor(tile):  # row = e / 8, k = (e % 8) * 8
        return e >> 3, 0
    return (e >> 9) * 64, (e >> 3) & 63  # MN-major: block e / 512, k-row (e / 8) % 64, mn (e % 8) * 8


def _copy(b: PtxBuilder, tile: OperandTile, threads: int, coords: tuple[str, str], org_mn: str, kl: str,
          ext_mn: str, K: str, ld: str, gbase: str, sdst: str) -> None:
    """cp.async 16-byte chunks of one operand tile, zero-filled (src-size 0) outside the problem."""
    mn0, k0 = coords
    n = tile.chunks // threads
    rb, cb = b.reg("u32"), b.reg("u32")
    b.i(f"add.u32 {rb}, {org_mn}, {mn0}")
    b.i(f"add.u32 {cb}, {kl}, {k0}")
    for i in range(n):
        dmn, dk = chunk_delta(tile, i, threads)
        gm, gk = b.reg("u32"), b.reg("u32")
        b.i(f"add.u32 {gm}, {rb}, {dmn}")
        b.i(f"add.u32 {gk}, {cb}, {dk}")
        p1, p2, p = b.reg("pred"), b.reg("pred"), b.reg("pred")
        b.i(f"setp.lt.u32 {p1}, {gm}, {ext_mn}")
        b.i(f"setp.lt.u32 {p2}, {gk}, {K}")
        b.i(f"and.pred {p}, {p1}, {p2}")
        idx = b.reg("u32")
        if kmajor(tile):
            b.i(f"mad.lo.u32 {idx}, {gm}, {ld}, {gk}")
        else:
            b.i(f"mad.lo.u32 {idx}, {gk}, {ld}, {gm}")
        b.i(f"selp.b32 {idx}, {idx}, 0, {p}")  # out of range: address the buffer start, never beyond
        off, ga, sz = b.reg("u64"), b.reg("u64"), b.reg("u32")
        b.i(f"mul.wide.u32 {off}, {idx}, 2")
        b.i(f"add.u64 {ga}, {gbase}, {off}")
        b.i(f"selp.b32 {sz}, 16, 0, {p}")
        b.i(f"cp.async.cg.shared.global [{sdst}+{16 * i * threads}], [{ga}], 16, {sz}")


def emit_copy(b: PtxBuilder, tile: OperandTile, threads: int, coords: tuple[str, str], org_mn: str, kl: str,
              ext_mn: str, K: str, ld: str, gbase: str, sdst: str) -> None:
    b.part(("wgmma.copy", tile, threads),
           lambda: _copy(b, tile, threads, coords, org_mn, kl, ext_mn, K, ld, gbase, sdst))


def _thread_coords(b: PtxBuilder, tile: OperandTile, tid: str) -> tuple[str, str, str]:
    """(mn0, k0, swizzled shared byte offset) of the thread's first chunk e = tid."""
    mn0, k0, so, x = b.regs("u32", 4)
    if kmajor(tile):
        b.i(f"shr.u32 {mn0}, {tid}, 3")
        b.i(f"and.b32 {k0}, {tid}, 7")
        b.i(f"shl.b32 {k0}, {k0}, 3")
    else:
        b.i(f"and.b32 {mn0}, {tid}, 7")
        b.i(f"shl.b32 {mn0}, {mn0}, 3")
        b.i(f"shr.u32 {k0}, {tid}, 3")
    b.i(f"shl.b32 {so}, {tid}, 4")
    b.i(f"shr.u32 {x}, {so}, 3")
    b.i(f"and.b32 {x}, {x}, 112")
    b.i(f"xor.b32 {so}, {so}, {x}")
    return mn0, k0, so


def emit_descriptors(b: PtxBuilder, stage: str, stage_bytes: tuple[int, int], bases: tuple[str, str], wga: str,
                     highs: tuple[int, int]) -> tuple[str, str]:
    """The A and B shared-memory descriptors of stage `stage` (start address >> 4 in the low bits, the
    layout's LBO/SBO/swizzle `highs` above); A is offset by this warpgroup's rows `wga`."""
    ra, rb, ra4, rb4 = b.regs("u32", 4)
    da, db = b.reg("u64"), b.reg("u64")
    b.i(f"mad.lo.u32 {ra}, {stage}, {stage_bytes[0]}, {bases[0]}")
    b.i(f"add.u32 {ra}, {ra}, {wga}")
    b.i(f"mad.lo.u32 {rb}, {stage}, {stage_bytes[1]}, {bases[1]}")
    b.i(f"shr.u32 {ra4}, {ra}, 4")
    b.i(f"shr.u32 {rb4}, {rb}, 4")
    b.i(f"cvt.u64.u32 {da}, {ra4}")
    b.i(f"cvt.u64.u32 {db}, {rb4}")
    b.i(f"or.b64 {da}, {da}, {highs[0]}")
    b.i(f"or.b64 {db}, {db}, {highs[1]}")
    return da, db


def emit_wgmma_tile(b: PtxBuilder, acc: list[list[str]], descs: tuple[str, str], tiles: tuple[OperandTile, OperandTile],
                    k_steps: int, ab: str, pending: int, pone: str) -> None:
    """One K tile: wgmma.fence, k_steps x len(acc) m64nNk16 wgmmas from the stage descriptors, commit, and
    wait until at most `pending` groups are in flight (pending < 0: no wait; the caller's, e.g. a trace's)."""
    ta, tb = tiles
    da, db = descs
    BN = 2 * len(acc[0])
    ms = len(acc)
    kk_, dt, imm = WGMMA_FORMS[ab]

    def compute() -> None:
        tra, trb = int(not kmajor(ta)), int(not kmajor(tb))
        tail = f", 1, 1, {tra}, {trb}" if imm else ""
        b.i("wgmma.fence.sync.aligned")
        for kk in range(k_steps):
            dbk = db
            if kk:
                dbk = b.reg("u64")
                b.i(f"add.s64 {dbk}, {db}, {kk * k_step_bytes(tb) >> 4}")
            for j in range(ms):
                off = (kk * k_step_bytes(ta) + j * BLOCK) >> 4
                dak = da
                if off:
                    dak = b.reg("u64")
                    b.i(f"add.s64 {dak}, {da}, {off}")
                b.i(f"wgmma.mma_async.sync.aligned.m64n{BN}k{kk_}.{dt}.{ab}.{ab} {{{', '.join(acc[j])}}}, {dak}, "
                    f"{dbk}, {pone}{tail}")
        b.i("wgmma.commit_group.sync.aligned")
        if pending >= 0:
            b.i(f"wgmma.wait_group.sync.aligned {pending}")
    b.comment(f"Compute on the read stage: {k_steps} k16 steps x {ms} wgmma m64n{BN}k16, one group, "
              f"then at most {pending} group(s) in flight")
    b.part(("wgmma.compute", ms, BN, k_steps, ab, kmajor(ta), kmajor(tb), pending), compute)


def emit_acc_epilogue(b: PtxBuilder, spec: GemmSpec, P: dict[str, str], acc: list[list[str]],
                      lane: tuple[str, str, str, str], origin: tuple[str, str], tm: int) -> None:
    """Registers -> global of a warpgroup's tm x TILE_N accumulators (lane = (warpgroup, warp % 4, lane / 4,
    lane % 4), origin = (bm0, bn0)), through emit_epilogue (alpha, beta C, bias, activation, cast)."""
    wg, q, g, t4 = lane
    bm0, bn0 = origin
    ms, BN = len(acc), 2 * len(acc[0])
    b.comment("Accumulator coordinates (ops_wgmma.accumulator_map): value i of m64 block j is row\n"
              "wg*tm + 64j + 16q + g + 8((i>>1)&1), column 8(i>>2) + 2*t4 + (i&1)")
    rbase, cbase = b.reg("u32"), b.reg("u32")
    b.i(f"mad.lo.u32 {rbase}, {wg}, {tm}, {bm0}")
    b.i(f"mad.lo.u32 {rbase}, {q}, 16, {rbase}")
    b.i(f"add.u32 {rbase}, {rbase}, {g}")
    b.i(f"mad.lo.u32 {cbase}, {t4}, 2, {bn0}")
    rows = []
    for j in range(ms):
        for h in range(2):
            r = b.reg("u32")
            b.i(f"add.u32 {r}, {rbase}, {64 * j + 8 * h}")
            rows.append(r)
    group = min(8, BN // 8)
    b.comment(f"The epilogue in column groups of {8 * group} (column registers, predicates and bias of one\n"
              "group live at a time: with all TILE_N of them beside the accumulators ptxas spills)")
    for n0 in range(0, BN // 8, group):
        cols = []
        for n8 in range(n0, n0 + group):
            for h in range(2):
                r = b.reg("u32")
                b.i(f"add.u32 {r}, {cbase}, {8 * n8 + h}")
                cols.append(r)
        elems = [(2 * j + ((i >> 1) & 1), 2 * ((i >> 2) - n0) + (i & 1), acc[j][i]) for j in range(ms)
                 for i in range(4 * n0, 4 * (n0 + group))]
        emit_epilogue(b, spec, P, rows, cols, elems)


def _build(spec: GemmSpec, t: Tiling, name: str, profile: bool, counting: bool) -> tuple[PtxBuilder, list[Param]]:
    b = PtxBuilder(counting)
    params = kernel_params(spec, name, profile)
    start = emit_profile_start(b) if profile else None
    P = load_params(b, params)
    prof = emit_profile_setup(b, P, start) if start is not None else None
    ta, tb = operand_tiles(spec, t)
    T, S, ab = t.threads, t.stages, spec.dtype_a
    ms, BN = t.tm // 64, t.bn
    a_bytes, b_bytes = ta.stage_bytes, tb.stage_bytes

    b.comment(f"Thread coordinates (plan: {T} threads = {t.grid_m} warpgroup(s) of 128, each {t.tm}x{BN} = "
              f"{ms} m64n{BN}k16 wgmma per k16 step):\nwg = tid / 128, q = warp % 4 (rows 16q.. of each m64), "
              "g = lane / 4, t4 = lane % 4; bm0 = ctaid.y*TILE_M, bn0 = ctaid.x*TILE_N")
    tid, lane, wg, q, g, t4, bm0, bn0 = b.regs("u32", 8)
    b.i(f"mov.u32 {tid}, %tid.x")
    b.i(f"and.b32 {lane}, {tid}, 31")
    b.i(f"shr.u32 {wg}, {tid}, 7")
    b.i(f"shr.u32 {q}, {tid}, 5")
    b.i(f"and.b32 {q}, {q}, 3")
    b.i(f"shr.u32 {g}, {lane}, 2")
    b.i(f"and.b32 {t4}, {lane}, 3")
    c = b.reg("u32")
    b.i(f"mov.u32 {c}, %ctaid.y")
    b.i(f"shl.b32 {bm0}, {c}, {log2(t.bm)}")
    c = b.reg("u32")
    b.i(f"mov.u32 {c}, %ctaid.x")
    b.i(f"shl.b32 {bn0}, {c}, {log2(t.bn)}")

    b.comment(f"Shared tiles (plan: stages={S}): {name}_smem = {S} A stages of {a_bytes} B "
              f"({'K' if kmajor(ta) else 'M'}-major), then {S} B stages of {b_bytes} B "
              f"({'K' if kmajor(tb) else 'N'}-major), 128-byte swizzle")
    sa, sb = b.reg("u32"), b.reg("u32")
    b.i(f"mov.u32 {sa}, {name}_smem")
    b.i(f"add.u32 {sb}, {sa}, {S * a_bytes}")
    ca, cb = _thread_coords(b, ta, tid), _thread_coords(b, tb, tid)
    wga = b.reg("u32")
    b.i(f"mul.lo.u32 {wga}, {wg}, {t.tm * ROW}")
    pone = b.reg("pred")
    b.i("mov.pred " + pone + ", -1")

    b.comment(f"Accumulators: {ms} x {BN // 2} f32 per thread (wgmma m64n{BN} f32 fragments), zeroed")
    acc = [b.regs("f32", BN // 2) for _ in range(ms)]

    def zero() -> None:
        for blk in acc:
            for r in blk:
                b.i(f"mov.f32 {r}, {f32_hex(0.0)}")
    b.part(("wgmma.zero", ms, BN), zero)

    def issue_tile(kreg: str, stage_reg: str) -> None:
        for tile, co, gbase, base, nbytes, org in ((ta, ca, P["A"], sa, a_bytes, bm0),
                                                   (tb, cb, P["B"], sb, b_bytes, bn0)):
            dst = b.reg("u32")
            b.i(f"mad.lo.u32 {dst}, {stage_reg}, {nbytes}, {base}")
            b.i(f"add.u32 {dst}, {dst}, {co[2]}")
            mn = tile.row_dim if tile.col_dim == "k" else tile.col_dim
            ld = P["K"] if kmajor(tile) else P[mn.upper()]
            emit_copy(b, tile, T, (co[0], co[1]), org, kreg, P[mn.upper()], P["K"], ld, gbase, dst)
        b.i("cp.async.commit_group")

    kl, ws, rs, kt, ktiles = b.regs("u32", 5)
    b.comment(f"Pipeline prologue (plan: stages={S}): tiles 0..{S - 2} into stages 0..{S - 2}, "
              f"{ta.chunks // T} A + {tb.chunks // T} B 16-byte cp.async per thread each")
    for s in range(S - 1):
        b.i(f"mov.u32 {kl}, {s * t.bk}")
        b.i(f"mov.u32 {ws}, {s}")
        issue_tile(kl, ws)
    b.comment("Loop state: kt (tile), ktiles = ceil(K / 64), kl = k of the tile to load, ws/rs = write/read stage")
    b.i(f"add.u32 {ktiles}, {P['K']}, {t.bk - 1}")
    b.i(f"shr.u32 {ktiles}, {ktiles}, {log2(t.bk)}")
    b.i(f"mov.u32 {kt}, 0")
    b.i(f"mov.u32 {kl}, {(S - 1) * t.bk}")
    b.i(f"mov.u32 {ws}, {S - 1}")
    b.i(f"mov.u32 {rs}, 0")
    pz = b.reg("pred")
    loop, done = b.label("ktile"), b.label("kdone")
    overlap = S >= 3
    if overlap:
        b.comment(f"Tile 0 has landed when at most stages-2 = {S - 2} groups are pending; the proxy fence orders\n"
                  "the cp.async writes before the wgmmas' async-proxy reads, the barrier makes them visible")
        b.i(f"cp.async.wait_group {S - 2}")
        b.i("fence.proxy.async.shared::cta")
        b.i("bar.sync 0")
    emit_profile_slot(b, prof, 1, "before the K loop")
    b.i(f"setp.eq.u32 {pz}, {ktiles}, 0")
    b.i(f"@{pz} bra {done}")
    b.put_label(loop)
    b.region = "iter"
    if not overlap:
        b.comment(f"Tile kt has landed when at most stages-2 = {S - 2} groups are pending; the proxy fence orders\n"
                  "these generic-proxy (cp.async) writes before the wgmmas' async-proxy reads, the barrier makes\n"
                  "them visible and guarantees stage (kt-1) % stages is no longer read (its wgmmas were waited for)")
        b.i(f"cp.async.wait_group {S - 2}")
        b.i("fence.proxy.async.shared::cta")
        b.i("bar.sync 0")
        b.comment("Issue tile kt + stages - 1 into the write stage (zero-filled past K)")
        issue_tile(kl, ws)

    ha, hb = desc_high(ta), desc_high(tb)
    b.comment(f"Descriptors of the read stage: start >> 4 | LBO/SBO | 128B swizzle (A {ha:#x}, B {hb:#x});\n"
              f"k16 step: +{k_step_bytes(ta)} B (A), +{k_step_bytes(tb)} B (B); m64 block: +{BLOCK} B")
    da, db = emit_descriptors(b, rs, (a_bytes, b_bytes), (sa, sb), wga, (ha, hb))
    pending = 1 if overlap else 0
    emit_wgmma_tile(b, acc, (da, db), (ta, tb), t.k_steps, ab, pending, pone)

    if overlap:
        b.comment(f"wait_group 1 above: tile kt-1's wgmmas are done, tile kt's run on. Tile kt+1 has landed when at\n"
                  f"most stages-3 = {S - 3} groups are pending; after the barrier it is visible and no warpgroup\n"
                  "reads stage (kt-1) % stages any more, so tile kt + stages - 1 goes there (zero-filled past K)")
        b.i(f"cp.async.wait_group {S - 3}")
        b.i("fence.proxy.async.shared::cta")
        b.i("bar.sync 0")
        issue_tile(kl, ws)

    emit_stage_advance(b, (rs, ws), S, kl, kt, t.bk, ktiles, loop, done, prof)
    if overlap:
        b.i("wgmma.wait_group.sync.aligned 0")

    emit_acc_epilogue(b, spec, P, acc, (wg, q, g, t4), (bm0, bn0), t.tm)
    emit_profile_slot(b, prof, 3, "at CTA end")
    b.i("ret")
    return b, params


def smem_bytes(spec: GemmSpec, t: Tiling) -> int:
    ta, tb = operand_tiles(spec, t)
    return t.stages * (ta.stage_bytes + tb.stage_bytes)


def emit(spec: GemmSpec, t: Tiling, prediction: dict[str, Any], name: str | None = None,
         profile: bool = False) -> str:
    name = name or f"{spec.name}_wgmma"
    b, params = _build(spec, t, name, profile, False)
    meta = metadata(spec, t, name, params, prediction)
    meta["dynamic_shared"] = smem_bytes(spec, t)
    title = (f"Warpgroup GEMM {t.key()}: wgmma m64n{t.bn}k16 {spec.dtype_a}, 128B swizzle, A {spec.layout_a}, "
             f"B {spec.layout_b}, D {spec.dtype_out} {spec.layout_c}")
    ptx = render_kernel(header_json(meta), name, [(p.ptx_name, p.ptx_type) for p in params], [], b, title)
    decl = f".extern .shared .align {ATOM} .b8 {name}_smem[];\n\n.visible .entry"
    return ptx.replace(".visible .entry", decl, 1)


class Wgmma:
    name = "wgmma"
    cell_threads = 128  # a cell of the tiling's grid is a warpgroup
    shared_f32 = False
    compute_class = "wgmma"
    tile_label = "warpgroup_tile"
    async_copies = True
    calibrate_by_grid = False
    opt_in = False

    def unavailable(self, spec: GemmSpec, hw: HwConfig) -> str | None:
        if hw.wgmma is None:
            return f"{hw.name} has no wgmma (hwconfig has no 'wgmma' section; wgmma needs sm_90a)"
        if spec.dtype_a not in ("f16", "bf16") or spec.dtype_b != spec.dtype_a:
            return f"dtype {spec.dtype_a}/{spec.dtype_b}: this wgmma variant takes f16 or bf16 A and B"
        lays = {x: getattr(spec, "layout_" + x) for x in "abc"}
        odd = [f"{x} {lay}" for x, lay in lays.items() if lay not in ("row", "col")]
        if odd:
            return (f"variant {self.name} takes row or col layouts only (got {', '.join(odd)}); blocked-PxQ and "
                    "striped-N run on --variant mma or simt")
        contiguous = {"k" if spec.layout_a == "row" else "m", "n" if spec.layout_b == "row" else "k"}
        for d in sorted(contiguous):
            if getattr(spec, d.upper()).align(8) < 8:
                return (f"{d.upper()} must be a multiple of 8 (16-byte cp.async chunks along the contiguous "
                        f"dimension of a {spec.layout_a}/{spec.layout_b} operand)")
        return None

    def tilings(self, spec: GemmSpec) -> list[Tiling]:
        out = []
        for bm in (64, 128, 256):
            for tm in (64, 128):
                if bm % tm or bm // tm > 2:
                    continue
                for bn in (64, 128, 256):
                    if tm // 64 * bn // 2 > 128:  # f32 accumulators per thread
                        continue
                    for stages in (2, 3, 4):
                        out.append(Tiling("wgmma", bm, bn, 64, tm, bn, stages, 0, 0, 8, 8, 0))
        return out

    def unroll_k(self, t: Tiling) -> int:
        return t.k_steps

    def emit(self, spec: GemmSpec, t: Tiling, prediction: dict[str, Any], name: str | None = None,
             profile: bool = False) -> str:
        return emit(spec, t, prediction, name, profile)

    def counts(self, spec: GemmSpec, t: Tiling) -> Counts:
        # each tiling from its own build: counts are affine in the stages only from 3 on (2 stages keep
        # wait_group 0 each tile), and wgmma has at most 4
        return _counts(spec, t)

    def live_ranges(self, t: Tiling) -> tuple[int, int, int]:
        # fragments: none (A and B stay in shared memory); addressing: lane coords, stage/loop
        # counters, cp.async bases, two 64-bit descriptors and their per-step sums
        return t.tm // 64 * t.bn // 2, 0, 16 + 4 * (t.tm // 64 + 1)

    def compute_sites(self, spec: GemmSpec, t: Tiling) -> list[Site]:
        return []  # wgmma reads shared memory through descriptors, not by per-lane loads

    def compute_banks(self, spec: GemmSpec, t: Tiling, banks: int, width: int) -> tuple[float, int, int]:
        return 0.0, 0, 0

    def shared_traffic(self, t: Tiling, ktiles: int, ein: int) -> tuple[int, int]:
        # each warpgroup reads its rows of A and all of B per K tile; nothing is moved to registers
        return ktiles * t.bk * (t.bm + t.grid_m * t.bn) * ein, 0

    def compute_work(self, spec: GemmSpec, t: Tiling, ktiles: int) -> dict[str, int]:
        return {"wgmma": ktiles * t.bm * t.bn * t.bk}  # MACs

    def copy_stores_shared(self, tile: OperandTile) -> bool:
        return False

    def compute_load_sites(self, c: Counts) -> int:
        return 0

    def rf_extra(self, spec: GemmSpec, t: Tiling, hw: HwConfig, c: Counts) -> dict[str, float]:
        return {"tensor": 0.0}  # the operands are descriptors; accumulators stay in the unit's registers

    @shared_model
    def cycle_model(self, spec: GemmSpec, t: Tiling, hw: HwConfig, shape: tuple[int, int, int], dram_cycles: float,
                    miss_rate: float) -> CycleModel | None:
        return None  # the shared model (kernelgen/models/schedule.py)

    def sync_plan(self, t: Tiling, ktiles: int, sync_lat: int, mem_lat: float, compute_cycles_per_tile: float,
                  ctas_per_core: int) -> SyncPlan:
        ok, why = _check_pipeline(t.stages, ktiles)
        exposed = max(0.0, mem_lat - (t.stages - 1) * compute_cycles_per_tile * ctas_per_core)
        if t.stages >= 3:  # tile kt+1 is waited for one iteration after its copy's tile kt+1-(stages-1)
            return SyncPlan(1, 1, t.stages - 3, 1, sync_lat, exposed, ok, why)
        return SyncPlan(1, 1, t.stages - 2, 1, sync_lat, exposed, ok, why)


@lru_cache(maxsize=65536)
def _counts(spec: GemmSpec, t: Tiling) -> Counts:
    a, b = operand_tiles(spec, t)
    return tally(_build(spec, t, "k", False, True)[0], (a.chunks // t.threads, b.chunks // t.threads))


VARIANT = Wgmma()
