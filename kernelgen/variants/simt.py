"""SIMT emitter: register-blocked FMA GEMM through shared-memory tiles (f32 accumulation).

Thread (tx, ty) of the CTA owns a tm x tn block of D: rows bm0 + ty*tm + i, cols bn0 + tx*tn + j.
Each K tile: every thread copies its share of the A and B tiles (converted to f32) into shared
memory as [k][m] and [k][n], barrier, tk rank-1 updates from shared, barrier.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from kernelgen.counting import Counts, count_key, tally
from kernelgen.emit_common import (
    Param,
    emit_copy_tile,
    emit_cta_barrier,
    emit_epilogue,
    emit_profile_setup,
    emit_profile_slot,
    emit_profile_start,
    emit_thread_copy_coords,
    header_json,
    kernel_params,
    load_params,
    metadata,
    pow2,
)
from kernelgen.models.movement import site_score
from kernelgen.models.schedule import CycleModel
from kernelgen.models.sync import SyncPlan
from kernelgen.ptxbuild import PtxBuilder, f32_hex, render_kernel
from kernelgen.spec import FP8, GemmSpec
from kernelgen.tiling import OperandTile, Site, Tiling, log2, operand_tiles, tile_values
from kernelgen.variants import shared_model
from sim.hw import HwConfig, RegisterFile


def _vec_loads(b: PtxBuilder, base: str, imm: int, dst: list[str]) -> None:
    """ld.shared of len(dst) consecutive f32 in v4/v2/scalar pieces."""
    j = 0
    while j < len(dst):
        w = 4 if (len(dst) - j) >= 4 else (2 if (len(dst) - j) >= 2 else 1)
        if w == 1:
            b.i(f"ld.shared.f32 {dst[j]}, [{base}+{imm + 4 * j}]")
        else:
            b.i(f"ld.shared.v{w}.f32 {{{', '.join(dst[j:j + w])}}}, [{base}+{imm + 4 * j}]")
        j += w


def _build(spec: GemmSpec, t: Tiling, name: str, profile: bool, counting: bool) -> tuple[PtxBuilder, list[Param]]:
    b = PtxBuilder(counting)
    params = kernel_params(spec, name, profile)
    start = emit_profile_start(b) if profile else None
    P = load_params(b, params)
    prof = emit_profile_setup(b, P, start) if start is not None else None
    ta, tb = operand_tiles(spec, t)
    T = t.threads

    b.comment(f"Thread coordinates (plan: threads={T}, tile.tm={t.tm}, tile.tn={t.tn}):\n"
              f"tx = tid % {t.grid_n}, ty = tid / {t.grid_n}; block origin bm0 = ctaid.y*{t.bm}, "
              f"bn0 = ctaid.x*{t.bn}")
    tid, tx, ty, bm0, bn0 = b.regs("u32", 5)
    b.i(f"mov.u32 {tid}, %tid.x")
    if pow2(t.grid_n):
        b.i(f"and.b32 {tx}, {tid}, {t.grid_n - 1}")
        b.i(f"shr.u32 {ty}, {tid}, {log2(t.grid_n)}")
    else:  # a non-power-of-two TILE_N (e.g. 96 = 12 threads x 8)
        b.i(f"rem.u32 {tx}, {tid}, {t.grid_n}")
        b.i(f"div.u32 {ty}, {tid}, {t.grid_n}")
    c = b.reg("u32")
    b.i(f"mov.u32 {c}, %ctaid.y")
    b.i(f"shl.b32 {bm0}, {c}, {log2(t.bm)}" if pow2(t.bm) else f"mul.lo.u32 {bm0}, {c}, {t.bm}")
    c = b.reg("u32")
    b.i(f"mov.u32 {c}, %ctaid.x")
    b.i(f"shl.b32 {bn0}, {c}, {log2(t.bn)}" if pow2(t.bn) else f"mul.lo.u32 {bn0}, {c}, {t.bn}")

    b.comment(f"Shared tiles (plan: tile.bk={t.bk}, pad_a={t.pad_a}, pad_b={t.pad_b}): "
              f"smem_a[k][m] {ta.stage_bytes} B, smem_b[k][n] {tb.stage_bytes} B, f32")
    sa, sb = b.reg("u32"), b.reg("u32")
    b.i(f"mov.u32 {sa}, {name}_smem_a")
    b.i(f"mov.u32 {sb}, {name}_smem_b")
    ca = emit_thread_copy_coords(b, ta, tid)
    cb = emit_thread_copy_coords(b, tb, tid)
    sta, stb = b.reg("u32"), b.reg("u32")
    b.i(f"add.u32 {sta}, {sa}, {ca[2]}")
    b.i(f"add.u32 {stb}, {sb}, {cb[2]}")
    b.comment("Compute-side shared addresses: this thread's tm rows of A and tn columns of B at k = 0")
    rda, rdb, tmp = b.reg("u32"), b.reg("u32"), b.reg("u32")
    b.i(f"mul.lo.u32 {tmp}, {ty}, {t.tm * 4}")
    b.i(f"add.u32 {rda}, {sa}, {tmp}")
    tmp = b.reg("u32")
    b.i(f"mul.lo.u32 {tmp}, {tx}, {t.tn * 4}")
    b.i(f"add.u32 {rdb}, {sb}, {tmp}")

    b.comment(f"Accumulators: {t.tm}x{t.tn} f32 per thread (plan: tile.tm x tile.tn), zeroed")
    acc = [[b.reg("f32") for _ in range(t.tn)] for _ in range(t.tm)]
    for row in acc:
        for r in row:
            b.i(f"mov.f32 {r}, {f32_hex(0.0)}")

    k0 = b.reg("u32")
    pz = b.reg("pred")
    loop, done = b.label("ktile"), b.label("kdone")
    b.comment("K loop over tiles of tile.bk: k0 = 0, bk, ... while k0 < K (skipped when K == 0)")
    b.i(f"mov.u32 {k0}, 0")
    emit_profile_slot(b, prof, 1, "before the K loop")
    b.i(f"setp.eq.u32 {pz}, {P['K']}, 0")
    b.i(f"@{pz} bra {done}")
    b.put_label(loop)
    b.region = "iter"

    def origin(tile, dim):  # register holding the tile origin of a problem dim
        return {"m": bm0, "n": bn0, "k": k0}[dim]

    def extent(dim):
        return P[dim.upper()]

    for tile, coords, gbase, sdst, dtype in ((ta, ca, P["A"], sta, spec.dtype_a),
                                             (tb, cb, P["B"], stb, spec.dtype_b)):
        ld = extent(tile.col_dim)
        b.comment(f"Copy the {tile.name.upper()} tile ({tile.rows}x{tile.cols}, layout.{tile.name}="
                  f"{getattr(spec, 'layout_' + tile.name)}: {tile.col_dim} contiguous) to shared as f32, "
                  f"{tile.chunks // T} per thread;\nout-of-range elements read as 0 (predicated edges)")
        emit_copy_tile(b, tile, T, coords, origin(tile, tile.row_dim), origin(tile, tile.col_dim),
                       extent(tile.row_dim), extent(tile.col_dim), ld, gbase, sdst, "f32", dtype,
                       getattr(spec, "layout_" + tile.name))
    b.comment("All copies visible before compute (sync plan: barrier 1 of 2 per K tile)")
    emit_cta_barrier(b, T)

    b.comment(f"Rank-1 updates: for kk < {t.bk}: a[0..{t.tm}) = smem_a[kk][ty*tm..], "
              f"b[0..{t.tn}) = smem_b[kk][tx*tn..]; acc[i][j] += a[i]*b[j] (fma.rn.f32)")
    sta_row = ta.shared_offset(*((0, 1) if ta.col_dim == "k" else (1, 0)))  # bytes per k step
    stb_row = tb.shared_offset(*((0, 1) if tb.col_dim == "k" else (1, 0)))

    def rank1_updates() -> None:
        av = b.regs("f32", t.tm)
        bv = b.regs("f32", t.tn)
        for kk in range(t.bk):
            _vec_loads(b, rda, kk * sta_row, av)
            _vec_loads(b, rdb, kk * stb_row, bv)
            for i in range(t.tm):
                for j in range(t.tn):
                    b.i(f"fma.rn.f32 {acc[i][j]}, {av[i]}, {bv[j]}, {acc[i][j]}")
    b.part(("simt.rank1", t.bk, t.tm, t.tn), rank1_updates)
    b.comment("Everyone done reading before the next tile overwrites shared (barrier 2 of 2)")
    emit_cta_barrier(b, T)
    pl = b.reg("pred")
    b.i(f"add.u32 {k0}, {k0}, {t.bk}")
    b.i(f"setp.lt.u32 {pl}, {k0}, {P['K']}")
    b.i(f"@{pl} bra {loop}")
    b.put_label(done)
    b.region = "post"
    emit_profile_slot(b, prof, 2, "after the K loop")

    rows, cols = [], []
    for i in range(t.tm):
        r = b.reg("u32")
        b.i(f"mad.lo.u32 {r}, {ty}, {t.tm}, {bm0}")
        if i:
            b.i(f"add.u32 {r}, {r}, {i}")
        rows.append(r)
    for j in range(t.tn):
        r = b.reg("u32")
        b.i(f"mad.lo.u32 {r}, {tx}, {t.tn}, {bn0}")
        if j:
            b.i(f"add.u32 {r}, {r}, {j}")
        cols.append(r)
    elems = [(i, j, acc[i][j]) for i in range(t.tm) for j in range(t.tn)]
    emit_epilogue(b, spec, P, rows, cols, elems)
    emit_profile_slot(b, prof, 3, "at CTA end")
    b.i("ret")
    return b, params


def emit(spec: GemmSpec, t: Tiling, prediction: dict[str, Any], name: str | None = None,
         profile: bool = False) -> str:
    name = name or f"{spec.name}_simt"
    b, params = _build(spec, t, name, profile, False)
    ta, tb = operand_tiles(spec, t)
    meta = metadata(spec, t, name, params, prediction)
    shared = [(f"{name}_smem_a", ta.stage_bytes), (f"{name}_smem_b", tb.stage_bytes)]
    title = (f"SIMT FMA GEMM {t.key()}: A {spec.dtype_a} {spec.layout_a}, B {spec.dtype_b} {spec.layout_b}, "
             f"D {spec.dtype_out} {spec.layout_c}")
    return render_kernel(header_json(meta), name, [(p.ptx_name, p.ptx_type) for p in params], shared, b,
                         title)


def _vec(per: int) -> int:
    """Width of the shared loads of ``per`` consecutive f32 (v4, v2 or scalar)."""
    return 4 if per % 4 == 0 else (2 if per % 2 == 0 else 1)


@lru_cache(maxsize=65536)
def _ld_banks(per: int, grid_n: int, tm: int, tn: int, is_a: bool, lanes: int, banks: int,
              width: int) -> tuple[float, int, int]:
    addrs = tuple(((l // grid_n) * tm if is_a else (l % grid_n) * tn) * 4 for l in range(lanes))
    return site_score(Site("", "ld", 4 * _vec(per), addrs, 1), banks, width)


class Simt:
    name = "simt"
    cell_threads = 1
    shared_f32 = True
    compute_class = "fma"
    tile_label = "thread_tile"
    async_copies = False
    calibrate_by_grid = True  # the thread grid's shape changes ptxas's scheduling
    opt_in = False

    def unavailable(self, spec: GemmSpec, hw: HwConfig) -> str | None:
        if spec.dtype_a == "s8":
            return "s8 GEMMs run on the tensor-core path only (variant mma: mma.sync m16n8k32)"
        if spec.dtype_a in FP8:
            return f"block-scaled {spec.dtype_a} GEMMs run on wgmma only (--variant wgmma_fp8)"
        return None

    def tilings(self, spec: GemmSpec) -> list[Tiling]:
        out = []
        # powers of two; a spec range with a divisor or one value adds other multiples of 4 (M, N: whole
        # 16-byte shared rows) and 4 (K) (tiling.tile_values)
        for bm in tile_values(spec, "TILE_M", (16, 32, 64, 128), 4):
            for bn in tile_values(spec, "TILE_N", (16, 32, 64, 128), 4):
                for bk in tile_values(spec, "TILE_K", (8, 16, 32), 4):
                    for tm in (1, 2, 4, 8):
                        for tn in (1, 2, 4, 8):
                            if tm > bm or tn > bn or bm % tm or bn % tn:
                                continue
                            T = (bm // tm) * (bn // tn)
                            if T < 32 or T > 1024 or (bm * bk) % T or (bn * bk) % T:
                                continue
                            for pad in (0, 4):
                                out.append(Tiling("simt", bm, bn, bk, tm, tn, 1, pad, pad, 1, 1))
        return out

    def unroll_k(self, t: Tiling) -> int:
        return 1

    def emit(self, spec: GemmSpec, t: Tiling, prediction: dict[str, Any], name: str | None = None,
             profile: bool = False) -> str:
        return emit(spec, t, prediction, name, profile)

    def counts(self, spec: GemmSpec, t: Tiling) -> Counts:
        return _counts(spec, count_key(t))

    def live_ranges(self, t: Tiling) -> tuple[int, int, int]:
        return t.tm * t.tn, t.tm + t.tn, 10  # tid, tx, ty, bm0, bn0, k0, 2 copy bases, 2 compute bases

    def compute_sites(self, spec: GemmSpec, t: Tiling) -> list[Site]:
        lanes = min(32, t.threads)
        sites = []
        for name, per, grid_n_shift in (("a", t.tm, True), ("b", t.tn, False)):
            vec = _vec(per)
            addrs = []
            for l in range(lanes):
                tx, ty = l % t.grid_n, l // t.grid_n
                mn = (ty * t.tm) if grid_n_shift else (tx * t.tn)
                addrs.append(mn * 4)
            sites.append(Site(f"ld_{name}", "ld", 4 * vec, tuple(addrs), t.bk * (per // vec)))
        return sites

    def compute_banks(self, spec: GemmSpec, t: Tiling, banks: int, width: int) -> tuple[float, int, int]:
        lanes = min(32, t.threads)
        out: list[tuple[float, int, int]] = []
        for per, is_a in ((t.tm, True), (t.tn, False)):
            sc = _ld_banks(per, t.grid_n, t.tm, t.tn, is_a, lanes, banks, width)
            m = t.bk * (per // _vec(per))
            out.append((sc[0] * m, sc[1] * m, sc[2] * m))
        return (sum(o[0] for o in out), sum(o[1] for o in out), sum(o[2] for o in out))

    def shared_traffic(self, t: Tiling, ktiles: int, ein: int) -> tuple[int, int]:
        sh_read = ktiles * t.bk * (t.bm + t.bn) * 4 * (t.threads // max(1, min(t.grid_m, t.grid_n)))
        return sh_read, ktiles * t.bk * (t.tm + t.tn) * 4 * t.threads

    def compute_work(self, spec: GemmSpec, t: Tiling, ktiles: int) -> dict[str, int]:
        vec = lambda n: -(-n // 4)  # noqa: E731
        return {"fma": ktiles * t.bk * t.bm * t.bn, "lsu": ktiles * t.bk * t.threads * (vec(t.tm) + vec(t.tn))}

    def copy_stores_shared(self, tile: OperandTile) -> bool:
        return True

    def compute_load_sites(self, c: Counts) -> int:
        return c.iter["lsu"] - (c.copies_a + c.copies_b) * 2  # ld.global + st.shared per copy

    def rf_extra(self, spec: GemmSpec, t: Tiling, hw: HwConfig, c: Counts) -> dict[str, float]:
        return {"fma": _rf_fma(spec.has_c, t.tm, t.tn, c.copies_a + c.copies_b, hw.registers)}

    @shared_model
    def cycle_model(self, spec: GemmSpec, t: Tiling, hw: HwConfig, shape: tuple[int, int, int], dram_cycles: float,
                    miss_rate: float) -> CycleModel | None:
        return None  # the shared model (kernelgen/models/schedule.py)

    def sync_plan(self, t: Tiling, ktiles: int, sync_lat: int, mem_lat: float, compute_cycles_per_tile: float,
                  ctas_per_core: int) -> SyncPlan:
        why = "two bar.sync per K tile in uniform control flow; no async copies"
        # no prefetch: the copy latency is exposed, except for what other resident CTAs overlap
        exposed = max(0.0, mem_lat - (ctas_per_core - 1) * compute_cycles_per_tile)
        return SyncPlan(2, 0, 0, 0, 2 * sync_lat, exposed, True, why)


@lru_cache(maxsize=4096)
def _rf_fma(has_c: bool, tm: int, tn: int, copies: int, rf: RegisterFile) -> float:
    """Mean register-bank extra cycles of the inner loop's fma (acc, a value, b value): what
    models.schedule.bank_extra charges ([registers] conflict cycles of the distinct registers)."""
    acc0 = 1 + has_c  # %f0 = alpha (%f1 = beta)
    av0 = acc0 + tm * tn + copies
    bv0 = av0 + tm
    tot = sum(rf.conflict_cycles({acc0 + i * tn + j, av0 + i, bv0 + j}) for i in range(tm) for j in range(tn))
    return tot / (tm * tn)


@lru_cache(maxsize=65536)
def _counts(spec: GemmSpec, t: Tiling) -> Counts:
    a, b = operand_tiles(spec, t)
    return tally(_build(spec, t, "k", False, True)[0], (a.chunks // t.threads, b.chunks // t.threads))


VARIANT = Simt()
