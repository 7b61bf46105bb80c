"""Tensor-core emitter: mma.sync.aligned.m16n8k16 (f16/bf16 in, f32 accumulate) or m16n8k32 (s8 in,
s32 accumulate), ldmatrix from shared memory, a ``stages``-deep cp.async pipeline.

One mma step covers 32 bytes of K (16 f16 or 32 s8), so the ldmatrix addressing is the same in bytes;
s8 needs K-contiguous tiles (A row, B col), since ldmatrix moves 16-bit pairs and cannot transpose
bytes.

Warp w of the CTA owns a tm x tn warp tile at (w / grid_n, w % grid_n); it holds mi x ni m16n8
accumulator fragments. Fragment layouts follow /work/shared/hw/ptx-facts.md: lane = 4*g + t owns
C rows g and g+8, columns 2t and 2t+1 of each m16n8 tile.

Pipeline (sync plan): prologue loads tiles 0..S-2 (one commit group each); iteration kt waits until
at most S-2 groups are pending (tile kt landed), barriers (tile kt visible to all, everyone done with
stage (kt-1) % S), issues tile kt+S-1 into that stage, commits, computes on stage kt % S. Tiles past
K are zero-filled (src-size 0), so the group count stays uniform and no branch is needed.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from typing import Any

from kernelgen.counting import Counts, by_pipe, by_stages, count_key, tally, tally_without
from kernelgen.emit_common import (
    Param,
    copy_key,
    emit_copy_tile,
    emit_cta_barrier,
    emit_epilogue,
    emit_profile_setup,
    emit_profile_slot,
    emit_profile_start,
    emit_stage_advance,
    emit_thread_copy_coords,
    header_json,
    kernel_params,
    load_params,
    metadata,
    pow2,
)
from kernelgen.int4 import packed_spec
from kernelgen.models import frozen
from kernelgen.models.movement import site_score
from kernelgen.models.schedule import CycleModel
from kernelgen.models.sync import SyncPlan
from kernelgen.ptxbuild import PtxBuilder, f32_hex, render_kernel
from kernelgen.spec import DTYPE_BYTES, GemmSpec
from kernelgen.tiling import OperandTile, Site, Tiling, lane_ldmatrix_row, log2, operand_tiles, tile_values
from kernelgen.variants import shared_model
from sim.hw import HwConfig, RegisterFile
from sim.layouts import Layout, parse_layout


def _ldmatrix_lane_offset(b: PtxBuilder, tile: OperandTile, lane: str, warp_off: str, x2: bool) -> str:
    """Shared byte offset of the 16-byte row this lane supplies (see tiling.lane_ldmatrix_row)."""
    kb = log2(16 // tile.elem_shared)  # elements of K in 16 bytes: 8 f16, 16 s8
    i, j0, j1 = b.reg("u32"), b.reg("u32"), b.reg("u32")
    b.i(f"and.b32 {i}, {lane}, 7")
    b.i(f"shr.u32 {j0}, {lane}, 3")
    b.i(f"and.b32 {j0}, {j0}, 1")  # j & 1
    if x2:
        b.i(f"mov.u32 {j1}, 0")
    else:
        b.i(f"shr.u32 {j1}, {lane}, 4")  # j >> 1
    row, col = b.reg("u32"), b.reg("u32")
    # (row, col) in global orientation of the shared tile, mirrors tiling.lane_ldmatrix_row
    if tile.name == "a" and tile.row_dim == "m":  # row = warp_off + i + 8(j&1), col = (16 B of K)(j>>1)
        b.i(f"mad.lo.u32 {row}, {j0}, 8, {i}")
        b.i(f"add.u32 {row}, {row}, {warp_off}")
        b.i(f"shl.b32 {col}, {j1}, {kb}")
    elif tile.name == "a":  # row = 8(j>>1) + i, col = warp_off + 8(j&1)
        b.i(f"mad.lo.u32 {row}, {j1}, 8, {i}")
        b.i(f"mad.lo.u32 {col}, {j0}, 8, {warp_off}")
    elif tile.row_dim == "n":  # row = warp_off + 8(j>>1) + i, col = (16 B of K)(j&1)
        b.i(f"mad.lo.u32 {row}, {j1}, 8, {i}")
        b.i(f"add.u32 {row}, {row}, {warp_off}")
        b.i(f"shl.b32 {col}, {j0}, {kb}")
    else:  # row = 8(j&1) + i, col = warp_off + 8(j>>1)
        b.i(f"mad.lo.u32 {row}, {j0}, 8, {i}")
        b.i(f"mad.lo.u32 {col}, {j1}, 8, {warp_off}")
    off = b.reg("u32")
    rs, cs = tile.shared_offset(1, 0), tile.shared_offset(0, 1)
    b.i(f"mul.lo.u32 {off}, {row}, {rs}")
    b.i(f"mad.lo.u32 {off}, {col}, {cs}, {off}")
    return off


def mma_instruction(ab: str, k: int) -> str:
    """The mma.sync form for A/B dtype ab and K (elements) k: f32 += f16/bf16 (k16), s32 += s8 (k32) or
    s4 (k64)."""
    acc = "s32" if ab in ("s8", "s4") else "f32"
    return f"mma.sync.aligned.m16n8k{k}.row.col.{acc}.{ab}.{ab}.{acc}"


def _compute(b: PtxBuilder, t: Tiling, ra: str, rb: str, rb2: str | None, acc: list[list[list[str]]],
             trans_a: str, trans_b: str, ab: str, steps: tuple[int, int, int, int]) -> None:
    """The mma steps of one K tile on the read stage: ldmatrix A and B fragments, mma.sync; with
    unroll_k < k_steps a rolled inner loop whose body runs k_steps / unroll_k times per K tile."""
    k_step_a, k_step_b, m_step, n_step = steps
    afr = [b.regs("u32", 4) for _ in range(t.mi)]
    bfr = [b.regs("u32", 2) for _ in range(t.ni)]
    U = t.unroll
    rolled = U < t.k_steps
    if rolled:
        ki, pk = b.reg("u32"), b.reg("pred")
        inner = b.label("kstep")
        b.comment(f"Rolled inner loop (plan: unroll_k={U}): {t.k_steps // U} trips of {U} k{t.mma_k} steps")
        b.i(f"mov.u32 {ki}, 0")
        b.put_label(inner)
        b.times = t.k_steps // U
    for kk in range(U):
        for mi in range(t.mi):
            imm = kk * k_step_a + mi * m_step
            b.i(f"ldmatrix.sync.aligned.m8n8.x4{trans_a}.shared.b16 {{{', '.join(afr[mi])}}}, [{ra}+{imm}]")
        for ni in range(0, t.ni, 2):
            imm = kk * k_step_b + ni * n_step
            if ni + 1 < t.ni:
                regs = bfr[ni] + bfr[ni + 1]
                b.i(f"ldmatrix.sync.aligned.m8n8.x4{trans_b}.shared.b16 {{{', '.join(regs)}}}, [{rb}+{imm}]")
            else:
                b.i(f"ldmatrix.sync.aligned.m8n8.x2{trans_b}.shared.b16 {{{', '.join(bfr[ni])}}}, [{rb2}+{imm}]")
        for mi in range(t.mi):
            for ni in range(t.ni):
                d = ", ".join(acc[mi][ni])
                b.i(f"{mma_instruction(ab, t.mma_k * (2 if ab == 's4' else 1))} {{{d}}}, {{{', '.join(afr[mi])}}}, "
                    f"{{{', '.join(bfr[ni])}}}, {{{d}}}")

    if rolled:
        b.i(f"add.u32 {ra}, {ra}, {U * k_step_a}")
        b.i(f"add.u32 {rb}, {rb}, {U * k_step_b}")
        if rb2 is not None:
            b.i(f"add.u32 {rb2}, {rb2}, {U * k_step_b}")
        b.i(f"add.u32 {ki}, {ki}, 1")
        b.i(f"setp.lt.u32 {pk}, {ki}, {t.k_steps // U}")
        b.i(f"@{pk} bra {inner}")
    b.times = 1


def _issue_tile(b: PtxBuilder, spec: GemmSpec, tiles: tuple[OperandTile, OperandTile], T: int,
                coords: tuple[tuple[str, str, str], tuple[str, str, str]], P: dict[str, str], bases: tuple[str, str],
                origins: tuple[str, str, str], stage_reg: str) -> None:
    """cp.async of one K tile of A and B into the stage ``stage_reg``, then its commit group; origins: the
    registers of the CTA's m, n and the tile's k."""
    for tile, crd, gbase, base in zip(tiles, coords, (P["A"], P["B"]), bases):
        so, dst = b.reg("u32"), b.reg("u32")
        b.i(f"mad.lo.u32 {so}, {stage_reg}, {tile.stage_bytes}, {base}")
        b.i(f"add.u32 {dst}, {so}, {crd[2]}")
        org = dict(zip("mnk", origins))
        emit_copy_tile(b, tile, T, crd, org[tile.row_dim], org[tile.col_dim],
                       P[tile.row_dim.upper()], P[tile.col_dim.upper()], P[tile.col_dim.upper()],
                       gbase, dst, "async", spec.dtype_a, getattr(spec, "layout_" + tile.name))
    b.i("cp.async.commit_group")


def _iter_head(b: PtxBuilder, spec: GemmSpec, threads: int, tiles: tuple[OperandTile, OperandTile],
               coords: tuple[tuple[str, str, str], tuple[str, str, str]], P: dict[str, str], bases: tuple[str, str],
               origins: tuple[str, str, str], stages: tuple[str, str], lanes: tuple[str, str, str | None],
               note: str) -> tuple[str, str, str | None]:
    """The K-loop body from its barrier to its first ldmatrix: the barrier, tile kt + stages - 1 into the
    write stage, the read stage's ldmatrix bases (A, B, and B's .x2 base when ni is odd; ``note``: the
    comment before them). What counts.head_alu counts; _head_alu runs it alone."""
    ta, tb = tiles
    ws, rs = stages
    la, lb, lb2 = lanes
    sa, sb = bases
    emit_cta_barrier(b, threads)
    b.comment("Issue tile kt + stages - 1 into the write stage (zero-filled past K)")
    _issue_tile(b, spec, tiles, threads, coords, P, bases, origins, ws)

    b.comment(note)
    ra, rb = b.reg("u32"), b.reg("u32")
    b.i(f"mad.lo.u32 {ra}, {rs}, {ta.stage_bytes}, {sa}")
    b.i(f"add.u32 {ra}, {ra}, {la}")
    b.i(f"mad.lo.u32 {rb}, {rs}, {tb.stage_bytes}, {sb}")
    rb2 = None
    if lb2 is not None:
        rb2 = b.reg("u32")
        b.i(f"add.u32 {rb2}, {rb}, {lb2}")
    b.i(f"add.u32 {rb}, {rb}, {lb}")
    return ra, rb, rb2


def _build(spec: GemmSpec, t: Tiling, name: str, profile: bool, counting: bool) -> tuple[PtxBuilder, list[Param]]:
    why = VARIANT.unavailable_dtype(spec)
    if why:
        raise ValueError(why)
    b = PtxBuilder(counting)
    params = kernel_params(spec, name, profile)
    start = emit_profile_start(b) if profile else None
    P = load_params(b, params)
    if spec.packed_s4:
        b.comment("s4: K arrives in elements; the kernel walks packed bytes of two s4 (kernelgen/int4.py)")
        b.i(f"shr.u32 {P['K']}, {P['K']}, 1")
    prof = emit_profile_setup(b, P, start) if start is not None else None
    ta, tb = operand_tiles(spec, t)
    T, S = t.threads, t.stages
    ab = spec.dtype_a
    mma_ab = "s4" if spec.packed_s4 else ab

    # the parts below (PtxBuilder.part: a counting build replays them) are keyed by the spec and what their
    # instructions and registers read of the tiling
    tid, lane, wm, wn, g, t4, bm0, bn0, sa, sb, ca, cb, woa, wob, la, lb, lb2 = b.part(
        ("mma.setup", spec, pow2(t.bm), pow2(t.bn), t.grid_n, ta.chunks_per_row, ta.vec, tb.chunks_per_row, tb.vec,
         ta.row_dim, tb.row_dim, t.ni % 2), lambda: _setup(b, spec, t, name, ta, tb))
    trans_a = "" if ta.row_dim == "m" else ".trans"
    trans_b = "" if tb.row_dim == "n" else ".trans"
    acc = b.part(("mma.acc", spec, t.mi, t.ni), lambda: _accumulators(b, spec, t))

    def issue_tile(kreg: str, stage_reg: str) -> None:
        _issue_tile(b, spec, (ta, tb), T, (ca, cb), P, (sa, sb), (bm0, bn0, kreg), stage_reg)

    kl, ws, rs, kt, ktiles = b.regs("u32", 5)
    b.comment(f"Pipeline prologue (plan: stages={S}): tiles 0..{S - 2} into stages 0..{S - 2}, "
              f"{ta.chunks // T} A + {tb.chunks // T} B copies of {ta.vec}/{tb.vec} elements per thread each")
    for s in range(S - 1):
        if counting and s == S - 2:  # the last prologue tile, what one stage fewer would not write
            b.spans["prologue_tile"] = (dict(b.totals["pre"]), dict(b.counts))
        b.i(f"mov.u32 {kl}, {s * t.bk}")
        b.i(f"mov.u32 {ws}, {s}")
        issue_tile(kl, ws)
        if counting and s == S - 2:
            b.spans["prologue_tile"] += (dict(b.totals["pre"]), dict(b.counts))
    b.comment("Loop state: kt (tile), ktiles = ceil(K / bk), kl = k of the tile to load, ws/rs = write/read stage")
    b.i(f"add.u32 {ktiles}, {P['K']}, {t.bk - 1}")
    b.i(f"shr.u32 {ktiles}, {ktiles}, {log2(t.bk)}" if pow2(t.bk) else f"div.u32 {ktiles}, {ktiles}, {t.bk}")
    b.i(f"mov.u32 {kt}, 0")
    b.i(f"mov.u32 {kl}, {(S - 1) * t.bk}")
    b.i(f"mov.u32 {ws}, {S - 1}")
    b.i(f"mov.u32 {rs}, 0")
    pz = b.reg("pred")
    loop, done = b.label("ktile"), b.label("kdone")
    emit_profile_slot(b, prof, 1, "before the K loop")
    b.i(f"setp.eq.u32 {pz}, {ktiles}, 0")
    b.i(f"@{pz} bra {done}")
    b.put_label(loop)
    b.region = "iter"
    b.comment(f"Tile kt has landed when at most stages-2 = {S - 2} groups are pending; the barrier makes it\n"
              "visible and guarantees stage (kt-1) % stages is no longer read (sync plan: 1 barrier/iteration)")
    b.i(f"cp.async.wait_group {S - 2}")
    ra, rb, rb2 = _iter_head(b, spec, T, (ta, tb), (ca, cb), P, (sa, sb), (bm0, bn0, kl), (ws, rs), (la, lb, lb2),
                             f"Compute on the read stage: {t.k_steps} k{t.mma_k} steps x ({t.mi} A ldmatrix.x4, "
                             f"{(t.ni + 1) // 2} B ldmatrix, {t.mi * t.ni} mma.sync.m16n8k{t.mma_k})")
    kk = t.mma_k
    k_step_a = ta.shared_offset(0, kk) if ta.col_dim == "k" else ta.shared_offset(kk, 0)
    k_step_b = tb.shared_offset(0, kk) if tb.col_dim == "k" else tb.shared_offset(kk, 0)
    m_step = ta.shared_offset(16, 0) if ta.row_dim == "m" else ta.shared_offset(0, 16)
    n_step = tb.shared_offset(8, 0) if tb.row_dim == "n" else tb.shared_offset(0, 8)
    b.part(("mma.compute", t.mi, t.ni, t.k_steps, t.unroll, trans_a, trans_b, mma_ab, rb2 is None),
           lambda: _compute(b, t, ra, rb, rb2, acc, trans_a, trans_b, mma_ab, (k_step_a, k_step_b, m_step, n_step)))
    emit_stage_advance(b, (rs, ws), S, kl, kt, t.bk, ktiles, loop, done, prof)

    b.part(("mma.store", spec, t.mi, t.ni), lambda: _store(b, spec, P, (bm0, bn0, woa, wob, g, t4), acc, t))
    emit_profile_slot(b, prof, 3, "at CTA end")
    b.i("ret")
    return b, params


def _setup(b: PtxBuilder, spec: GemmSpec, t: Tiling, name: str, ta: OperandTile, tb: OperandTile
           ) -> tuple[Any, ...]:
    """_build's thread coordinates, shared bases, copy coordinates and ldmatrix lane offsets."""
    T, S = t.threads, t.stages
    ab = spec.dtype_a
    b.comment(f"Thread coordinates (plan: {T} threads = {t.grid_m}x{t.grid_n} warps, warp tile "
              f"{t.tm}x{t.tn} = {t.mi}x{t.ni} m16n8 tiles):\nlane, warp, wm = warp / {t.grid_n}, "
              f"wn = warp % {t.grid_n}, g = lane / 4, t4 = lane % 4; bm0 = ctaid.y*{t.bm}, bn0 = ctaid.x*{t.bn}")
    tid, lane, warp, wm, wn, g, t4, bm0, bn0 = b.regs("u32", 9)
    b.i(f"mov.u32 {tid}, %tid.x")
    b.i(f"and.b32 {lane}, {tid}, 31")
    b.i(f"shr.u32 {warp}, {tid}, 5")
    b.i(f"shr.u32 {wm}, {warp}, {log2(t.grid_n)}")
    b.i(f"and.b32 {wn}, {warp}, {t.grid_n - 1}")
    b.i(f"shr.u32 {g}, {lane}, 2")
    b.i(f"and.b32 {t4}, {lane}, 3")
    c = b.reg("u32")
    b.i(f"mov.u32 {c}, %ctaid.y")
    b.i(f"shl.b32 {bm0}, {c}, {log2(t.bm)}" if pow2(t.bm) else f"mul.lo.u32 {bm0}, {c}, {t.bm}")
    c = b.reg("u32")
    b.i(f"mov.u32 {c}, %ctaid.x")
    b.i(f"shl.b32 {bn0}, {c}, {log2(t.bn)}" if pow2(t.bn) else f"mul.lo.u32 {bn0}, {c}, {t.bn}")

    b.comment(f"Shared tiles (plan: stages={S}, tile.bk={t.bk}, pad_a={t.pad_a}, pad_b={t.pad_b}):\n"
              f"smem_a: {S} x {ta.stage_bytes} B ({ta.row_dim}-rows of {ta.cols}+{ta.pad} {ab}), "
              f"smem_b: {S} x {tb.stage_bytes} B ({tb.row_dim}-rows of {tb.cols}+{tb.pad} {ab})")
    sa, sb = b.reg("u32"), b.reg("u32")
    b.i(f"mov.u32 {sa}, {name}_smem_a")
    b.i(f"mov.u32 {sb}, {name}_smem_b")
    ca = emit_thread_copy_coords(b, ta, tid)
    cb = emit_thread_copy_coords(b, tb, tid)

    b.comment("ldmatrix row addresses of this lane at k = 0, stage 0 (ptx-facts: lanes 8j..8j+7 supply\n"
              "the rows of matrix j); A .x4 per m16 tile" + ("" if ta.row_dim == "m" else " (.trans: A col)")
              + ", B .x4 per pair of n8 tiles" + ("" if tb.row_dim == "n" else " (.trans: B row)"))
    woa, wob = b.reg("u32"), b.reg("u32")
    b.i(f"mul.lo.u32 {woa}, {wm}, {t.tm}")
    b.i(f"mul.lo.u32 {wob}, {wn}, {t.tn}")
    la = _ldmatrix_lane_offset(b, ta, lane, woa, False)
    lb = _ldmatrix_lane_offset(b, tb, lane, wob, False)
    lb2 = _ldmatrix_lane_offset(b, tb, lane, wob, True) if t.ni % 2 else None
    return tid, lane, wm, wn, g, t4, bm0, bn0, sa, sb, ca, cb, woa, wob, la, lb, lb2


def _accumulators(b: PtxBuilder, spec: GemmSpec, t: Tiling) -> list[list[list[str]]]:
    """_build's mi x ni accumulator fragments, declared and zeroed."""
    integer = spec.dtype_a == "s8"
    b.comment(f"Accumulators: {t.mi}x{t.ni} fragments of 4 {spec.dtype_acc} (plan: warp tile), zeroed")
    acc = [[b.regs("u32" if integer else "f32", 4) for _ in range(t.ni)] for _ in range(t.mi)]

    def zero() -> None:
        for row in acc:
            for frag in row:
                for r in frag:
                    b.i(f"mov.b32 {r}, 0" if integer else f"mov.f32 {r}, {f32_hex(0.0)}")
    b.part(("mma.zero", t.mi, t.ni), zero)
    return acc


def _store(b: PtxBuilder, spec: GemmSpec, P: dict[str, str], regs: tuple[str, ...], acc: list[list[list[str]]],
           t: Tiling) -> None:
    """_build's C fragment coordinates and epilogue."""
    bm0, bn0, woa, wob, g, t4 = regs
    b.comment("C fragment coordinates: rows wm*tm + mi*16 + g (+8), cols wn*tn + ni*8 + 2*t4 (+1)")
    rbase, cbase = b.reg("u32"), b.reg("u32")
    b.i(f"add.u32 {rbase}, {bm0}, {woa}")
    b.i(f"add.u32 {rbase}, {rbase}, {g}")
    b.i(f"add.u32 {cbase}, {bn0}, {wob}")
    b.i(f"mad.lo.u32 {cbase}, {t4}, 2, {cbase}")
    rows, cols = [], []
    for mi in range(t.mi):
        for h in range(2):
            r = b.reg("u32")
            b.i(f"add.u32 {r}, {rbase}, {mi * 16 + 8 * h}")
            rows.append(r)
    for ni in range(t.ni):
        for h in range(2):
            r = b.reg("u32")
            b.i(f"add.u32 {r}, {cbase}, {ni * 8 + h}")
            cols.append(r)
    elems = []
    for mi in range(t.mi):
        for ni in range(t.ni):
            for ci in range(4):
                elems.append((2 * mi + (ci >> 1), 2 * ni + (ci & 1), acc[mi][ni][ci]))
    emit_epilogue(b, spec, P, rows, cols, elems)


def emit(spec: GemmSpec, t: Tiling, prediction: dict[str, Any], name: str | None = None,
         profile: bool = False) -> str:
    name = name or f"{spec.name}_mma"
    s4 = spec.dtype_a == "s4"
    run = packed_spec(spec) if s4 else spec
    b, params = _build(run, t, name, profile, False)
    ta, tb = operand_tiles(run, t)
    S = t.stages
    ab = spec.dtype_a
    meta = metadata(spec, t, name, params, prediction)
    if s4:
        _s4_buffers(meta)
    shared = [(f"{name}_smem_a", S * ta.stage_bytes), (f"{name}_smem_b", S * tb.stage_bytes)]
    title = (f"Tensor-core GEMM {t.key()}: mma.sync m16n8k{t.mma_k} {ab}, A {spec.layout_a}, B {spec.layout_b}, "
             f"D {spec.dtype_out} {spec.layout_c}")
    return render_kernel(header_json(meta), name, [(p.ptx_name, p.ptx_type) for p in params], shared, b,
                         title)


def _s4_buffers(meta: dict[str, Any]) -> None:
    """A and B of an s4 kernel are packed bytes ("s4x2": two values each, sim.launch): half the count
    and half the extent of the elements the shared metadata wrote."""
    for i, p in enumerate(meta["params"]):
        if p.get("role") in ("A", "B"):
            p["dtype"] = "s4x2"
            p["count"] //= 2
            expr = meta["extents"][f"p{i}"]
            meta["extents"][f"p{i}"] = f"({expr.removesuffix('*1')})/2"


@lru_cache(maxsize=4096)
def _check_pipeline(stages: int, ktiles: int) -> tuple[bool, str]:
    """Replay the commit/wait schedule: at iteration kt, tile kt must be complete after the wait."""
    if stages < 2:
        return False, f"stages(={stages}) must be >= 2 for the cp.async pipeline"
    committed = stages - 1
    for kt in range(min(ktiles, 4 * stages)):
        done = committed - (stages - 2)  # wait_group stages-2 leaves at most that many pending
        if done < kt + 1:
            return False, f"tile {kt} not complete after wait_group {stages - 2}"
        committed += 1  # this iteration issues and commits tile kt + stages - 1
    return True, "every wait is reached by all threads (uniform loop), each waited tile was committed"


def _ldmatrix_banks(tile: OperandTile, banks: int, width: int) -> tuple[float, int, int]:
    """site_score of warp 0's ldmatrix of ``tile`` (warp offset 0): its lane rows (lane_ldmatrix_row reads the
    operand, its orientation and element bytes) at the shared offsets (a row of cols + pad elements; mma
    tiles are never stored f32), memoised by those (a few dozen distinct a plan, not one per tile)."""
    if tile.f32:
        return _ldmatrix_score(tile, banks, width)
    return _ldmatrix_row_banks(tile.name, tile.row_dim, tile.col_dim, tile.cols + tile.pad, tile.elem_shared, banks,
                               width)


@lru_cache(maxsize=4096)
def _ldmatrix_row_banks(name: str, row_dim: str, col_dim: str, row_elems: int, elem: int, banks: int,
                        width: int) -> tuple[float, int, int]:
    """_ldmatrix_score of a stand-in tile with the same shared rows (one row of row_elems, no pad)."""
    return _ldmatrix_score(OperandTile(name, 1, row_elems, row_dim, col_dim, 1, 0, elem, elem, False, 0), banks, width)


def _ldmatrix_score(tile: OperandTile, banks: int, width: int) -> tuple[float, int, int]:
    addrs = tuple(tile.shared_offset(*lane_ldmatrix_row(tile, l, 0)) for l in range(32))
    return site_score(Site("", "ldmatrix", 16, addrs, 1), banks, width)


class Mma:
    name = "mma"
    cell_threads = 32
    shared_f32 = False
    compute_class = "tensor"
    tile_label = "warp_tile"
    async_copies = True
    calibrate_by_grid = False
    opt_in = False

    def unavailable_dtype(self, spec: GemmSpec) -> str | None:
        if spec.dtype_a == "s4":
            return self.unavailable_dtype(packed_spec(spec))
        if spec.dtype_a not in ("f16", "bf16", "s8"):
            return f"dtype {spec.dtype_a} has no mma.sync form here (f16/bf16 m16n8k16, s8 m16n8k32)"
        if spec.dtype_a == "s8" and (not parse_layout(spec.layout_a).row_like or parse_layout(spec.layout_b).row_like):
            return (f"s8 mma needs A row-major and B col-major (K contiguous), got layout a={spec.layout_a} "
                    f"b={spec.layout_b}: ldmatrix moves 16-bit pairs and cannot transpose 8-bit elements")
        return None

    def unavailable(self, spec: GemmSpec, hw: HwConfig) -> str | None:
        why = self.unavailable_dtype(spec)
        if why:
            return why
        if not any("tensor" in p.classes for p in hw.pipes):
            return f"{hw.name} has no pipe of class 'tensor'"
        return None

    def tilings(self, spec: GemmSpec) -> list[Tiling]:
        la, lb = parse_layout(spec.layout_a), parse_layout(spec.layout_b)
        ca = "k" if la.row_like else "m"
        cb = "n" if lb.row_like else "k"
        es = DTYPE_BYTES[spec.dtype_a]
        # a chunk is contiguous in global memory: it divides the extent along the contiguous dim and
        # the layout's run (blocked-PxQ: Q, striped-N: N), so it never crosses a tile or stripe edge
        va, vb = (_vector(min(getattr(spec, d.upper()).align(16 // es), _run_align(lay, 16 // es)), es)
                  for d, lay in ((ca, la), (cb, lb)))
        kk = 32 // es  # K of one mma: 16 (f16/bf16), 32 (s8)
        ur = spec.tile_range("UNROLL_K")

        def unrolls(bk: int) -> list[int]:
            # default: every mma step unrolled (0); a spec UNROLL_K range asks for a rolled inner loop
            if ur is None:
                return [0]
            return [u for u in (1, 2, 4) if u < bk // kk and bk // kk % u == 0 and ur.allows(u)] + \
                ([0] if ur.allows(bk // kk) else [])
        out = []
        # powers of two; a spec range with a divisor or one value adds other multiples of the mma shape
        # (m16, n8, one k step) (tiling.tile_values)
        for bm in tile_values(spec, "TILE_M", (16, 32, 64, 128, 256), 16):
            for bn in tile_values(spec, "TILE_N", (8, 16, 32, 64, 128, 256), 8):
                for bk in tile_values(spec, "TILE_K", (kk, 2 * kk, 4 * kk), kk):
                    for gm in (1, 2, 4, 8):
                        for gn in (1, 2, 4, 8):
                            if gm * gn > 16 or bm % (16 * gm) or bn % (8 * gn):
                                continue
                            tm, tn = bm // gm, bn // gn
                            if tm * tn > 64 * 64:
                                continue
                            T = 32 * gm * gn
                            if ((bm * bk) // va) % T or ((bn * bk) // vb) % T:
                                continue
                            for stages in (2, 3, 4):
                                for pad in (0, 16 // es):  # 16 bytes keep ldmatrix rows aligned
                                    for u in unrolls(bk):  # Tiling(..., u, kk) made faster (models.frozen)
                                        out.append(frozen(Tiling, "mma", bm, bn, bk, tm, tn, stages, pad, pad, va,
                                                          vb, u, kk, 1, 1))
        return out

    def unroll_k(self, t: Tiling) -> int:
        return t.unroll

    def emit(self, spec: GemmSpec, t: Tiling, prediction: dict[str, Any], name: str | None = None,
             profile: bool = False) -> str:
        return emit(spec, t, prediction, name, profile)

    def counts(self, spec: GemmSpec, t: Tiling) -> Counts:
        return _staged_counts(spec, count_key(t))

    def fill_counts(self, spec: GemmSpec, t: Tiling) -> tuple[int, int]:
        """(counts.head_alu, counts.iter["tensor"]) of ``t`` without building the kernel (models/bound.py
        fill_bound): the K-loop body's head run alone (_iter_head, by the copy tiles it reads) and its
        mma.sync, k_steps x mi x ni per K tile however the inner loop is rolled. tests/test_fill_counts.py
        compares both with the counts of whole spaces; the planner checks every candidate it times."""
        key = (spec, t.bm, t.bn, t.bk, t.tm, t.tn, t.vec_a, t.vec_b, t.mma_k)  # all but stages, pads, unroll
        hit = _FILL.get(key)
        if hit is None:
            if len(_FILL) > 65536:
                _FILL.clear()
            ta, tb = operand_tiles(spec, count_key(t))
            # _iter_head's instructions: the barrier's form, the copies' part keys, B's .x2 base
            head = (spec.dtype_a, t.threads == 32, t.ni % 2 == 1) + tuple(
                copy_key(x, t.threads, "async", spec.dtype_a, getattr(spec, "layout_" + x.name)) for x in (ta, tb))
            alu = _HEAD.get(head)
            if alu is None:
                alu = _HEAD[head] = _head_alu(spec, ta, tb, t.threads, t.ni % 2 == 1)
            hit = _FILL[key] = (alu, t.k_steps * t.mi * t.ni)
        return hit

    def live_ranges(self, t: Tiling) -> tuple[int, int, int]:
        # fragments: current + next k step; addressing: lane coords, stage/loop counters, ldmatrix and
        # cp.async bases
        return t.mi * t.ni * 4, 2 * (t.mi * 4 + t.ni * 2), 14 + (t.ni % 2)

    def compute_sites(self, spec: GemmSpec, t: Tiling) -> list[Site]:
        a, b = operand_tiles(spec, t)
        sites = []
        for tile, per_warp in ((a, t.mi), (b, (t.ni + 1) // 2)):
            addrs = tuple(tile.shared_offset(*lane_ldmatrix_row(tile, l, 0)) for l in range(32))
            sites.append(Site(f"ldmatrix_{tile.name}", "ldmatrix", 16, addrs, t.k_steps * per_warp))
        return sites

    def compute_banks(self, spec: GemmSpec, t: Tiling, banks: int, width: int) -> tuple[float, int, int]:
        a, b = operand_tiles(spec, t)
        out: list[tuple[float, int, int]] = []
        for tile, per_warp in ((a, t.mi), (b, (t.ni + 1) // 2)):
            sc = _ldmatrix_banks(tile, banks, width)
            m = t.k_steps * per_warp
            out.append((sc[0] * m, sc[1] * m, sc[2] * m))
        return (sum(o[0] for o in out), sum(o[1] for o in out), sum(o[2] for o in out))

    def shared_traffic(self, t: Tiling, ktiles: int, ein: int) -> tuple[int, int]:
        reg_bytes = ktiles * t.bk * (t.tm + t.tn) * ein * (t.threads // 32)
        return reg_bytes, reg_bytes

    def compute_work(self, spec: GemmSpec, t: Tiling, ktiles: int) -> dict[str, int]:
        warps = t.threads // 32
        return {"tensor": ktiles * t.k_steps * t.mi * t.ni * warps * t.mma_macs,
                "lsu": ktiles * t.k_steps * (t.mi + (t.ni + 1) // 2) * t.threads}

    def copy_stores_shared(self, tile: OperandTile) -> bool:
        return tile.vec == 1  # 1-element chunks: ld.global + st.shared; wider ones cp.async

    def compute_load_sites(self, c: Counts) -> int:
        return c.iter["lsu"] - (c.copies_a + c.copies_b) - 1

    def rf_extra(self, spec: GemmSpec, t: Tiling, hw: HwConfig, c: Counts) -> dict[str, float]:
        return {"tensor": _rf_tensor(hw.registers)}

    @shared_model
    def cycle_model(self, spec: GemmSpec, t: Tiling, hw: HwConfig, shape: tuple[int, int, int], dram_cycles: float,
                    miss_rate: float) -> CycleModel | None:
        return None  # the shared model (kernelgen/models/schedule.py)

    def sync_plan(self, t: Tiling, ktiles: int, sync_lat: int, mem_lat: float, compute_cycles_per_tile: float,
                  ctas_per_core: int) -> SyncPlan:
        ok, why = _check_pipeline(t.stages, ktiles)
        exposed = max(0.0, mem_lat - (t.stages - 1) * compute_cycles_per_tile * ctas_per_core)
        return frozen(SyncPlan, 1, 1, t.stages - 2, 1, sync_lat, exposed, ok, why)


def _run_align(lay: Layout, cap: int) -> int:
    """Largest power of two <= cap dividing the layout's contiguous run (cap for row and col)."""
    run, a = lay.run, 1
    if run is None:
        return cap
    while a < cap and run % (a * 2) == 0:
        a *= 2
    return a


def _vector(v: int, es: int) -> int:
    """Elements per copy: cp.async moves 4, 8 or 16 bytes; narrower chunks copy one element at a time."""
    return v if v * es >= 4 else 1


@lru_cache(maxsize=64)
def _rf_tensor(rf: RegisterFile) -> int:
    """The mma's register-bank extra cycles: 4 consecutive A registers, 2 consecutive B, 4 consecutive
    accumulators (bases aligned), once per register file (the planner asks per candidate)."""
    return rf.conflict_cycles((0, 1, 2, 3, 0, 1, 0, 1, 2, 3))


_FILL: dict[tuple[object, ...], tuple[int, int]] = {}  # Mma.fill_counts by tiling less stages, pads and unroll
_HEAD: dict[tuple[object, ...], int] = {}  # _head_alu by what its instructions depend on


def _head_alu(spec: GemmSpec, ta: OperandTile, tb: OperandTile, threads: int, odd: bool) -> int:
    """The ALU instructions of _iter_head (counts.head_alu) for these copy tiles: the head run alone in a
    counting builder (register names stand in for the ones the kernel has set up before it)."""
    b = PtxBuilder(True)
    b.region = "iter"
    P = {k: f"%{k}" for k in ("A", "B", "M", "N", "K")}
    _iter_head(b, spec, threads, (ta, tb), (("%ra0", "%ca0", "%sa0"), ("%rb0", "%cb0", "%sb0")), P, ("%sa", "%sb"),
               ("%bm0", "%bn0", "%kl"), ("%ws", "%rs"), ("%la", "%lb", "%lb2" if odd else None), "")
    return by_pipe(b.totals["iter"]).get("alu", 0)


@lru_cache(maxsize=65536)
def _staged_counts(spec: GemmSpec, t: Tiling) -> Counts:
    return by_stages(lambda u: _counts(spec, u), t)


@lru_cache(maxsize=65536)
def _counts(spec: GemmSpec, t: Tiling) -> Counts:
    """The counts of a 2-stage pipeline come from the 3-stage build (one build for both, see
    _counts_2_3); other depths are built."""
    if t.stages in (2, 3):
        return _counts_2_3(spec, replace(t, stages=3))[t.stages - 2]
    return _own_counts(spec, t)


@lru_cache(maxsize=65536)
def _own_counts(spec: GemmSpec, t: Tiling) -> Counts:
    a, b = operand_tiles(spec, t)
    return tally(_build(spec, t, "k", False, True)[0], (a.chunks // t.threads, b.chunks // t.threads))


@lru_cache(maxsize=65536)
def _counts_2_3(spec: GemmSpec, t: Tiling) -> tuple[Counts, Counts]:
    """(2-stage, 3-stage) counts of ``t`` (3 stages): a stage adds one prologue tile, the same
    instructions and registers each time and nothing else, so the 2-stage kernel is the 3-stage one
    without its last prologue tile (tests/test_count_key.py compares both with their own builds)."""
    a, b = operand_tiles(spec, t)
    copies = (a.chunks // t.threads, b.chunks // t.threads)
    built = _build(spec, t, "k", False, True)[0]
    return tally_without(built, copies, built.spans["prologue_tile"]), tally(built, copies)


VARIANT = Mma()
