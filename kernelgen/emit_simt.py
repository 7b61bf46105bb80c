"""SIMT emitter: register-blocked FMA GEMM through shared-memory tiles (f32 accumulation).

Thread (tx, ty) of the CTA owns a tm x tn block of D: rows bm0 + ty*tm + i, cols bn0 + tx*tn + j.
Each K tile: every thread copies its share of the A and B tiles (converted to f32) into shared
memory as [k][m] and [k][n], barrier, tk rank-1 updates from shared, barrier.
"""

from __future__ import annotations

from typing import Any

from kernelgen.emit_common import (
    emit_copy_tile,
    emit_epilogue,
    emit_profile_setup,
    emit_profile_slot,
    emit_profile_start,
    emit_thread_copy_coords,
    header_json,
    kernel_params,
    load_params,
    metadata,
)
from kernelgen.ptxbuild import PtxBuilder, f32_hex, render_kernel
from kernelgen.spec import GemmSpec
from kernelgen.tiling import Tiling, log2, operand_tiles


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


def emit_simt(spec: GemmSpec, t: Tiling, prediction: dict[str, Any], name: str | None = None,
              profile: bool = False) -> str:
    name = name or f"{spec.name}_simt"
    b = PtxBuilder()
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
    b.i(f"and.b32 {tx}, {tid}, {t.grid_n - 1}")
    b.i(f"shr.u32 {ty}, {tid}, {log2(t.grid_n)}")
    c = b.reg("u32")
    b.i(f"mov.u32 {c}, %ctaid.y")
    b.i(f"shl.b32 {bm0}, {c}, {log2(t.bm)}")
    c = b.reg("u32")
    b.i(f"mov.u32 {c}, %ctaid.x")
    b.i(f"shl.b32 {bn0}, {c}, {log2(t.bn)}")

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
                       extent(tile.row_dim), extent(tile.col_dim), ld, gbase, sdst, "simt", dtype)
    b.comment("All copies visible before compute (sync plan: barrier 1 of 2 per K tile)")
    b.i("bar.sync 0")

    b.comment(f"Rank-1 updates: for kk < {t.bk}: a[0..{t.tm}) = smem_a[kk][ty*tm..], "
              f"b[0..{t.tn}) = smem_b[kk][tx*tn..]; acc[i][j] += a[i]*b[j] (fma.rn.f32)")
    av = b.regs("f32", t.tm)
    bv = b.regs("f32", t.tn)
    sta_row = ta.shared_offset(*((0, 1) if ta.col_dim == "k" else (1, 0)))  # bytes per k step
    stb_row = tb.shared_offset(*((0, 1) if tb.col_dim == "k" else (1, 0)))
    for kk in range(t.bk):
        _vec_loads(b, rda, kk * sta_row, av)
        _vec_loads(b, rdb, kk * stb_row, bv)
        for i in range(t.tm):
            for j in range(t.tn):
                b.i(f"fma.rn.f32 {acc[i][j]}, {av[i]}, {bv[j]}, {acc[i][j]}")
    b.comment("Everyone done reading before the next tile overwrites shared (barrier 2 of 2)")
    b.i("bar.sync 0")
    pl = b.reg("pred")
    b.i(f"add.u32 {k0}, {k0}, {t.bk}")
    b.i(f"setp.lt.u32 {pl}, {k0}, {P['K']}")
    b.i(f"@{pl} bra {loop}")
    b.put_label(done)
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

    meta = metadata(spec, t, name, params, prediction)
    shared = [(f"{name}_smem_a", ta.stage_bytes), (f"{name}_smem_b", tb.stage_bytes)]
    title = (f"SIMT FMA GEMM {t.key()}: A {spec.dtype_a} {spec.layout_a}, B {spec.dtype_b} {spec.layout_b}, "
             f"D {spec.dtype_out} {spec.layout_c}")
    return render_kernel(header_json(meta), name, [(p.ptx_name, p.ptx_type) for p in params], shared, b,
                         title)
