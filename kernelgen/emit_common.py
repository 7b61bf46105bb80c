"""Pieces both emitters share: parameters, global->shared tile copies, the epilogue, metadata."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import partial
from typing import Any

from kernelgen.ptxbuild import PtxBuilder, f32_hex
from kernelgen.spec import DTYPE_BYTES, GemmSpec
from kernelgen.tiling import OperandTile, Tiling, log2
from sim.layouts import Layout, parse_layout

CVT_TO_F32 = {"f16": "cvt.f32.f16", "bf16": "cvt.f32.bf16"}
CVT_FROM_F32 = {"f16": "cvt.rn.f16.f32", "bf16": "cvt.rn.bf16.f32"}
GELU_C = 0.7978845608028654  # sqrt(2/pi)


@dataclass(frozen=True)
class Param:
    role: str
    ptx_name: str
    ptx_type: str  # ".u64" | ".u32" | ".f32"
    kind: str  # "buffer" | "scalar"
    dtype: str


PROFILE_SLOTS = 4  # clock64 at CTA start, before the K loop, after it, at CTA end


def kernel_params(spec: GemmSpec, name: str, profile: bool = False) -> list[Param]:
    ps = [Param("A", f"{name}_A", ".u64", "buffer", spec.dtype_a),
          Param("B", f"{name}_B", ".u64", "buffer", spec.dtype_b)]
    if spec.has_c:
        ps.append(Param("C", f"{name}_C", ".u64", "buffer", spec.dtype_out))
    if spec.has_bias:
        ps.append(Param("bias", f"{name}_bias", ".u64", "buffer", "f32"))
    if spec.has_scale:
        ps.append(Param("scale", f"{name}_scale", ".u64", "buffer", "f32"))
    ps.append(Param("D", f"{name}_D", ".u64", "buffer", spec.dtype_out))
    for r in ("M", "N", "K"):
        ps.append(Param(r, f"{name}_{r}", ".u32", "scalar", "u32"))
    ps.append(Param("alpha", f"{name}_alpha", ".f32", "scalar", "f32"))
    if spec.has_c:
        ps.append(Param("beta", f"{name}_beta", ".f32", "scalar", "f32"))
    if profile:
        ps.append(Param("profile", f"{name}_profile", ".u64", "buffer", "u64"))
    return ps


def emit_profile_start(b: PtxBuilder) -> str:
    """First instruction of the kernel: clock64 at CTA start (slot 0), stored once the buffer is known."""
    b.comment("Profile (--profile): clock64 at CTA start")
    r = b.reg("u64")
    b.i(f"mov.u64 {r}, %clock64")
    return r


def emit_profile_setup(b: PtxBuilder, P: dict[str, str], start: str) -> tuple[str, str]:
    """(thread-0 predicate, this CTA's slot address) and store slot 0; buffer index
    cta_linear * slots + slot, cta_linear = ctaid.y * nctaid.x + ctaid.x."""
    b.comment(f"Profile: thread 0 writes {PROFILE_SLOTS} u64 clock64 values per CTA at "
              f"[(ctaid.y * nctaid.x + ctaid.x) * {PROFILE_SLOTS} + slot]")
    t, y, nx, x = b.regs("u32", 4)
    p = b.reg("pred")
    b.i(f"mov.u32 {t}, %tid.x")
    b.i(f"setp.eq.u32 {p}, {t}, 0")
    b.i(f"mov.u32 {y}, %ctaid.y")
    b.i(f"mov.u32 {nx}, %nctaid.x")
    b.i(f"mov.u32 {x}, %ctaid.x")
    b.i(f"mad.lo.u32 {y}, {y}, {nx}, {x}")
    off, a = b.reg("u64"), b.reg("u64")
    b.i(f"mul.wide.u32 {off}, {y}, {8 * PROFILE_SLOTS}")
    b.i(f"add.u64 {a}, {P['profile']}, {off}")
    b.i(f"@{p} st.global.u64 [{a}], {start}")
    return p, a


def emit_cta_barrier(b: PtxBuilder, threads: int) -> None:
    """``bar.sync 0``, or ``bar.warp.sync -1`` when one warp is the whole CTA (seed 000 §3.4: a warp
    barrier where one warp owns the tile). Both order the participating threads' shared-memory accesses
    (PTX ISA, bar.warp.sync: "guarantees memory ordering among threads participating in the barrier")."""
    b.i("bar.warp.sync -1" if threads == 32 else "bar.sync 0")


def emit_profile_slot(b: PtxBuilder, prof: tuple[str, str] | None, slot: int, what: str) -> None:
    if prof is None:
        return
    p, a = prof
    if slot == PROFILE_SLOTS - 1:  # the CTA ends when its last warp does: wait for all of them
        b.comment("Profile: every warp of the CTA reaches the end before the last clock64 read")
        b.i("bar.sync 0")
    b.comment(f"Profile slot {slot}: clock64 {what}")
    r = b.reg("u64")
    b.i(f"mov.u64 {r}, %clock64")
    b.i(f"@{p} st.global.u64 [{a}+{8 * slot}], {r}")


def load_params(b: PtxBuilder, params: list[Param]) -> dict[str, str]:
    """ld.param every parameter; buffers converted to global addresses (cvta.to.global)."""
    b.comment("Parameters: buffers -> global addresses; M, N, K, alpha (beta) are runtime scalars,\n"
              "so one kernel serves every shape in the spec's ranges.")
    regs: dict[str, str] = {}
    for p in params:
        if p.kind == "buffer":
            r = b.reg("u64")
            b.i(f"ld.param.u64 {r}, [{p.ptx_name}]")
            b.i(f"cvta.to.global.u64 {r}, {r}")
        elif p.ptx_type == ".f32":
            r = b.reg("f32")
            b.i(f"ld.param.f32 {r}, [{p.ptx_name}]")
        else:
            r = b.reg("u32")
            b.i(f"ld.param.u32 {r}, [{p.ptx_name}]")
        regs[p.role] = r
    return regs


def shared_strides(tile: OperandTile) -> tuple[int, int]:
    """Byte offset of one row / one column step in the shared tile (the layout is linear)."""
    return tile.shared_offset(1, 0), tile.shared_offset(0, 1)


def emit_thread_copy_coords(b: PtxBuilder, tile: OperandTile, tid: str) -> tuple[str, str, str]:
    """Per-thread (row0, col0 in elements, shared byte offset) of its first chunk of ``tile``.

    chunk e = tid + i*threads; row = e / chunks_per_row, col = (e % chunks_per_row) * vec. When
    tile.linear_copies(threads) (always for powers of two), row = row0 + dr_i and col = col0 + dc_i with
    compile-time dr_i, dc_i; else _copy_tile carries (row, column) from copy to copy (from row0, col0).
    """
    cpr = tile.chunks_per_row
    row0, col0, soff = b.reg("u32"), b.reg("u32"), b.reg("u32")
    if cpr & (cpr - 1) == 0:
        b.i(f"shr.u32 {row0}, {tid}, {log2(cpr)}")
        b.i(f"and.b32 {col0}, {tid}, {cpr - 1}")
    else:  # a non-power-of-two row of chunks (e.g. TILE_K 24 of 8-element chunks: 3)
        b.i(f"div.u32 {row0}, {tid}, {cpr}")
        b.i(f"rem.u32 {col0}, {tid}, {cpr}")
    if tile.vec > 1:
        b.i(f"shl.b32 {col0}, {col0}, {log2(tile.vec)}")
    rs, cs = shared_strides(tile)
    b.i(f"mul.lo.u32 {soff}, {row0}, {rs}")
    b.i(f"mad.lo.u32 {soff}, {col0}, {cs}, {soff}")
    return row0, col0, soff


def emit_copy_tile(b: PtxBuilder, tile: OperandTile, threads: int, coords: tuple[str, str, str],
                   origin_row: str, origin_col: str, ext_row: str, ext_col: str, ld: str, gbase: str,
                   sdst: str, mode: str, dtype: str, layout: str = "row") -> None:
    """Copy one block tile global -> shared, predicated on the problem edges (out of range -> 0).

    mode "f32": scalar ld.global, convert to f32, st.shared.f32 (shared tile is [k][m|n]).
    mode "async": cp.async of tile.vec elements with src-size 0 for out-of-range chunks (zero fill);
    a 1-element chunk (unaligned extents) falls back to ld.global.b16 + st.shared.b16 (b8 for s8).
    layout: the operand's global layout (sim/layouts.py). row and col address ``row * ld + col`` in the
    tile's orientation; blocked-PxQ and striped-N take their formula (emit_layout_index) on the logical
    (r, c): the tile's (row, col) for a row-like layout, (col, row) for a col-like one.
    """
    b.part(copy_key(tile, threads, mode, dtype, layout),
           lambda: _copy_tile(b, tile, threads, coords, origin_row, origin_col, ext_row, ext_col, ld, gbase, sdst,
                              mode, dtype, parse_layout(layout)))


def copy_key(tile: OperandTile, threads: int, mode: str, dtype: str, layout: str) -> tuple[object, ...]:
    """What emit_copy_tile's instructions and registers depend on (its PtxBuilder.part key)."""
    lay = parse_layout(layout)
    formula = "" if lay.kind in ("row", "col") else lay.name
    nonlinear = () if tile.linear_copies(threads) else (("nonlinear", tile.vec > 1),)
    return ("copy", mode, dtype, tile.chunks // threads, tile.vec == 1) + ((formula,) if formula else ()) + nonlinear


def _copy_tile(b: PtxBuilder, tile: OperandTile, threads: int, coords: tuple[str, str, str],
               origin_row: str, origin_col: str, ext_row: str, ext_col: str, ld: str, gbase: str,
               sdst: str, mode: str, dtype: str, lay: Layout) -> None:
    row0, col0, soff0 = coords
    n = tile.chunks // threads
    linear = tile.linear_copies(threads)
    rb, cb = b.reg("u32"), b.reg("u32")
    b.i(f"add.u32 {rb}, {origin_row}, {row0}")
    b.i(f"add.u32 {cb}, {origin_col}, {col0}")
    es = DTYPE_BYTES[dtype]
    cpr = tile.chunks_per_row
    if not linear:
        # chunk e = tid + i*threads as (row, chunk col) carried from copy to copy: + (threads / cpr,
        # threads % cpr), a carry when the column passes cpr (no division per copy); the tile's base
        q, rm = divmod(threads, cpr)
        rr, cc, sbase = row0, col0, b.reg("u32")
        if tile.vec > 1:
            cc = b.reg("u32")
            b.i(f"shr.u32 {cc}, {col0}, {log2(tile.vec)}")
        b.i(f"sub.u32 {sbase}, {sdst}, {soff0}")
        rs, cs = shared_strides(tile)
    else:
        rr = cc = sbase = ""
        rs = cs = 0

    def one(i: int, rr: str, cc: str) -> tuple[str, str]:
        """Copy i (its registers and instructions the same for every copy of a linear tile, and for every
        copy but the first of one that is not): a part (PtxBuilder.part)."""
        e = i * threads
        gr, gc = b.reg("u32"), b.reg("u32")
        if linear:
            dr, dc = e // cpr, (e % cpr) * tile.vec
            dst = f"{sdst}+{tile.shared_offset(dr, dc)}"
            b.i(f"add.u32 {gr}, {rb}, {dr}")
            b.i(f"add.u32 {gc}, {cb}, {dc}")
        else:
            if i:
                r2, c2, pc = b.reg("u32"), b.reg("u32"), b.reg("pred")
                b.i(f"add.u32 {c2}, {cc}, {rm}")
                b.i(f"add.u32 {r2}, {rr}, {q}")
                b.i(f"setp.ge.u32 {pc}, {c2}, {cpr}")
                b.i(f"@{pc} sub.u32 {c2}, {c2}, {cpr}")
                b.i(f"@{pc} add.u32 {r2}, {r2}, 1")
                rr, cc = r2, c2
            c, sa = cc, b.reg("u32")
            if tile.vec > 1:
                c = b.reg("u32")
                b.i(f"shl.b32 {c}, {cc}, {log2(tile.vec)}")
            b.i(f"mad.lo.u32 {sa}, {rr}, {rs}, {sbase}")
            b.i(f"mad.lo.u32 {sa}, {c}, {cs}, {sa}")
            dst = f"{sa}+0"
            b.i(f"add.u32 {gr}, {origin_row}, {rr}")
            b.i(f"add.u32 {gc}, {origin_col}, {c}")
        p1, p2, p = b.reg("pred"), b.reg("pred"), b.reg("pred")
        b.i(f"setp.lt.u32 {p1}, {gr}, {ext_row}")
        b.i(f"setp.lt.u32 {p2}, {gc}, {ext_col}")
        b.i(f"and.pred {p}, {p1}, {p2}")
        if lay.kind in ("row", "col"):
            idx = b.reg("u32")
            b.i(f"mad.lo.u32 {idx}, {gr}, {ld}, {gc}")
        elif lay.row_like:
            idx = emit_layout_index(b, lay, gr, gc, ext_row, ext_col)
        else:
            idx = emit_layout_index(b, lay, gc, gr, ext_col, ext_row)
        b.i(f"selp.b32 {idx}, {idx}, 0, {p}")  # out of range: address the buffer start, never beyond
        off, ga = b.reg("u64"), b.reg("u64")
        b.i(f"mul.wide.u32 {off}, {idx}, {es}")
        b.i(f"add.u64 {ga}, {gbase}, {off}")
        if mode == "f32":
            v = b.reg("f32")
            if dtype == "f32":
                b.i(f"mov.f32 {v}, {f32_hex(0.0)}")
                b.i(f"@{p} ld.global.f32 {v}, [{ga}]")
            else:
                h = b.reg("b16")
                b.i(f"mov.b16 {h}, 0")
                b.i(f"@{p} ld.global.b16 {h}, [{ga}]")
                b.i(f"{CVT_TO_F32[dtype]} {v}, {h}")
            b.i(f"st.shared.f32 [{dst}], {v}")
        elif tile.vec == 1:
            h, w = b.reg("b16"), 8 * es
            b.i(f"mov.b16 {h}, 0")
            b.i(f"@{p} ld.global.b{w} {h}, [{ga}]")
            b.i(f"st.shared.b{w} [{dst}], {h}")
        else:
            nbytes = tile.vec * es
            sz = b.reg("u32")
            b.i(f"selp.b32 {sz}, {nbytes}, 0, {p}")
            cache = "cg" if nbytes == 16 else "ca"
            b.i(f"cp.async.{cache}.shared.global [{dst}], [{ga}], {nbytes}, {sz}")
        return rr, cc

    if linear:  # every copy the same instructions and registers
        b.repeat(("copy.one", mode, dtype, lay, linear, True, tile.vec, b.times), n, lambda i: one(i, rr, cc))
        return
    for i in range(n):
        rr, cc = b.part(("copy.one", mode, dtype, lay, linear, i > 0, tile.vec, b.times), partial(one, i, rr, cc))


def pow2(x: int) -> bool:
    """Is x a power of two (a shift or a mask serves it; else div.u32 / rem.u32 / mul.lo.u32)?"""
    return x > 0 and x & (x - 1) == 0


def _udiv(b: PtxBuilder, x: str, d: int) -> str:
    """x / d (a shift for a power of two)."""
    if d == 1:
        return x
    r = b.reg("u32")
    b.i(f"shr.u32 {r}, {x}, {d.bit_length() - 1}" if d & (d - 1) == 0 else f"div.u32 {r}, {x}, {d}")
    return r


def _urem(b: PtxBuilder, x: str, d: int) -> str | None:
    """x % d (a mask for a power of two); None when d == 1 (always 0)."""
    if d == 1:
        return None
    r = b.reg("u32")
    b.i(f"and.b32 {r}, {x}, {d - 1}" if d & (d - 1) == 0 else f"rem.u32 {r}, {x}, {d}")
    return r


def copy_extra_alu(tile: OperandTile, threads: int, layout: str) -> tuple[int, int]:
    """(per copy, once per K tile) address instructions the copies of ``tile`` issue beyond row/col linear
    copies (the cycle model's copy chain reads them): the layout formula (emit_layout_index) in place of
    one mad; when the copies are not linear, a (row, column) carried from copy to copy (add, add, setp,
    two predicated updates after copy 0; shl, two mads per copy; sub (, shr) once)."""
    lay = parse_layout(layout)
    extra, once = 0, 0
    if lay.kind == "blocked":
        P, Q = lay.p, lay.q
        extra = 3 + (Q > 1) + (P > 1) + (Q > 1) + 2 * (P > 1) + 2 * (Q > 1) - 1
    elif lay.kind == "striped":
        extra = 2 + 3 * (lay.p > 1) - 1
    if not tile.linear_copies(threads):  # per copy: shl, 2 mads, and (after copy 0) the 5-op carry
        extra += (tile.vec > 1) + 2 + 5
        once = (tile.vec > 1) + 1 - 5
    return extra, once


def emit_layout_index(b: PtxBuilder, lay: Layout, r: str, c: str, rows: str, cols: str) -> str:
    """The element index of logical (r, c) of a rows x cols matrix stored ``lay`` (blocked-PxQ or striped-N;
    the formulas of sim/layouts.py): blocked ((r/P)*ceil(cols/Q) + c/Q)*P*Q + (r%P)*Q + c%Q,
    striped ((r/N)*cols + c)*N + r%N."""
    idx = b.reg("u32")
    if lay.kind == "blocked":
        P, Q = lay.p, lay.q
        nbc = b.reg("u32")
        b.i(f"add.u32 {nbc}, {cols}, {Q - 1}")
        nbc = _udiv(b, nbc, Q)
        b.i(f"mad.lo.u32 {idx}, {_udiv(b, r, P)}, {nbc}, {_udiv(b, c, Q)}")
        b.i(f"mul.lo.u32 {idx}, {idx}, {P * Q}")
        rr, cc = _urem(b, r, P), _urem(b, c, Q)
        if rr is not None:
            b.i(f"mad.lo.u32 {idx}, {rr}, {Q}, {idx}")
        if cc is not None:
            b.i(f"add.u32 {idx}, {idx}, {cc}")
        return idx
    if lay.kind != "striped":
        raise ValueError(f"layout(={lay.name}) has no formula here (row and col are a single mad)")
    N = lay.p
    b.i(f"mad.lo.u32 {idx}, {_udiv(b, r, N)}, {cols}, {c}")
    b.i(f"mul.lo.u32 {idx}, {idx}, {N}")
    rr = _urem(b, r, N)
    if rr is not None:
        b.i(f"add.u32 {idx}, {idx}, {rr}")
    return idx


def emit_epilogue(b: PtxBuilder, spec: GemmSpec, P: dict[str, str], rows: list[str], cols: list[str],
                  elems: list[tuple[int, int, str]]) -> None:
    """D[m, n] = act(alpha * acc + beta * C[m, n] + bias[n]) cast to dtype.out, for m < M and n < N.
    s32 accumulators (s8 GEMM) are converted to f32 first (the dequantising epilogue: alpha is the
    scale), or stored as they are when dtype.out is s32."""
    flavour = (spec.has_c, spec.has_bias, spec.activation, spec.dtype_out, spec.layout_c, spec.dtype_acc,
               spec.has_scale)
    b.part(("epilogue", flavour, len(rows), len(cols), len(elems)),
           lambda: _epilogue(b, spec, P, rows, cols, elems, flavour))


def _epilogue(b: PtxBuilder, spec: GemmSpec, P: dict[str, str], rows: list[str], cols: list[str],
              elems: list[tuple[int, int, str]], flavour: tuple[object, ...]) -> None:
    b.comment("Epilogue (spec: alpha, beta, epilogue, dtype.out, layout.c): per-row and per-column\n"
              "edge predicates, then each accumulator is scaled, combined, activated, cast, stored.")
    rp = []
    for r in rows:
        p = b.reg("pred")
        b.i(f"setp.lt.u32 {p}, {r}, {P['M']}")
        rp.append(p)
    cp = []
    for c in cols:
        p = b.reg("pred")
        b.i(f"setp.lt.u32 {p}, {c}, {P['N']}")
        cp.append(p)
    bias = _column_vector(b, spec.has_bias, "bias", P, cols, cp)
    scale = _column_vector(b, spec.has_scale, "scale", P, cols, cp)
    def element(i: int) -> None:
        ri, ci, acc = elems[i]
        _epilogue_element(b, spec, P, (rows[ri], cols[ci]), (rp[ri], cp[ci]), acc, bias[ci] if bias else None,
                          scale[ci] if scale else None)

    b.repeat(("epilogue.element", flavour), len(elems), element)  # each element the same instructions, registers


def _epilogue_element(b: PtxBuilder, spec: GemmSpec, P: dict[str, str], rc: tuple[str, str], preds: tuple[str, str],
                      acc: str, bias: str | None, scale: str | None) -> None:
    """One accumulator of _epilogue: its edge predicate, address, alpha (beta C, scale, bias, activation), store."""
    row, col = rc
    prow, pcol = preds
    es = DTYPE_BYTES[spec.dtype_out]
    bits = 8 * es
    p = b.reg("pred")
    b.i(f"and.pred {p}, {prow}, {pcol}")
    lay = parse_layout(spec.layout_c)
    if lay.kind == "row":
        idx = b.reg("u32")
        b.i(f"mad.lo.u32 {idx}, {row}, {P['N']}, {col}")
    elif lay.kind == "col":
        idx = b.reg("u32")
        b.i(f"mad.lo.u32 {idx}, {col}, {P['M']}, {row}")
    else:
        idx = emit_layout_index(b, lay, row, col, P["M"], P["N"])
    b.i(f"selp.b32 {idx}, {idx}, 0, {p}")
    off = b.reg("u64")
    b.i(f"mul.wide.u32 {off}, {idx}, {es}")
    if spec.dtype_out == "s32":
        da = b.reg("u64")
        b.i(f"add.u64 {da}, {P['D']}, {off}")
        b.i(f"@{p} st.global.b32 [{da}], {acc}")
        return
    if spec.dtype_acc == "s32":
        f = b.reg("f32")
        b.i(f"cvt.rn.f32.s32 {f}, {acc}")
        acc = f
    v = b.reg("f32")
    b.i(f"mul.f32 {v}, {acc}, {P['alpha']}")
    if spec.has_c:
        ca, cv = b.reg("u64"), b.reg("f32")
        b.i(f"add.u64 {ca}, {P['C']}, {off}")
        if spec.dtype_out == "f32":
            b.i(f"mov.f32 {cv}, {f32_hex(0.0)}")
            b.i(f"@{p} ld.global.f32 {cv}, [{ca}]")
        else:
            h = b.reg("b16")
            b.i(f"mov.b16 {h}, 0")
            b.i(f"@{p} ld.global.b16 {h}, [{ca}]")
            b.i(f"{CVT_TO_F32[spec.dtype_out]} {cv}, {h}")
        b.i(f"fma.rn.f32 {v}, {cv}, {P['beta']}, {v}")
    if scale:
        b.i(f"mul.f32 {v}, {v}, {scale}")
    if bias:
        b.i(f"add.f32 {v}, {v}, {bias}")
    emit_activation(b, spec, v)
    da = b.reg("u64")
    b.i(f"add.u64 {da}, {P['D']}, {off}")
    if bits == 32:
        b.i(f"@{p} st.global.f32 [{da}], {v}")
    else:
        h = b.reg("b16")
        b.i(f"{CVT_FROM_F32[spec.dtype_out]} {h}, {v}")
        b.i(f"@{p} st.global.b16 [{da}], {h}")


def _column_vector(b: PtxBuilder, present: bool, role: str, P: dict[str, str], cols: list[str],
                   cp: list[str]) -> list[str]:
    """The f32 values vec[n] (bias or scale) of the columns this thread writes, 0 past N."""
    out: list[str] = []
    if not present:
        return out
    b.comment(f"{role}[n] (f32), one per column this thread writes")
    for c, p in zip(cols, cp):
        v, off, a = b.reg("f32"), b.reg("u64"), b.reg("u64")
        b.i(f"mov.f32 {v}, {f32_hex(0.0)}")
        b.i(f"mul.wide.u32 {off}, {c}, 4")
        b.i(f"add.u64 {a}, {P[role]}, {off}")
        b.i(f"@{p} ld.global.f32 {v}, [{a}]")
        out.append(v)
    return out


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def metadata(spec: GemmSpec, t: Tiling, name: str, params: list[Param],
             prediction: dict[str, Any]) -> dict[str, Any]:
    M, N, K = spec.nominal()
    idx = {p.role: i for i, p in enumerate(params)}
    pm, pn, pk = (f"p{idx[r]}" for r in ("M", "N", "K"))
    gx, gy = ceil_div(N, t.bn), ceil_div(M, t.bm)
    la, lb, lc = (parse_layout(x) for x in (spec.layout_a, spec.layout_b, spec.layout_c))
    counts = {"A": (la.size(M, K), la.size_expr(pm, pk)), "B": (lb.size(K, N), lb.size_expr(pk, pn)),
              "C": (lc.size(M, N), lc.size_expr(pm, pn)),
              "D": (lc.size(M, N), lc.size_expr(pm, pn)), "bias": (N, pn), "scale": (N, pn),
              "profile": (gx * gy * PROFILE_SLOTS,
                          f"(({pn}+{t.bn - 1})/{t.bn})*(({pm}+{t.bm - 1})/{t.bm})*{PROFILE_SLOTS}")}
    values = {"M": M, "N": N, "K": K, "alpha": spec.alpha, "beta": spec.beta}
    plist, ranges, extents = [], {}, {}
    for i, p in enumerate(params):
        if p.kind == "buffer":
            cnt, expr = counts[p.role]
            init = "poison" if p.role == "D" else ("zeros" if p.role == "profile" else "random")
            plist.append({"name": p.ptx_name, "kind": "buffer", "dtype": p.dtype, "role": p.role,
                          "count": cnt, "init": init})
            extents[f"p{i}"] = f"{expr}*{8 if p.dtype == 'u64' else DTYPE_BYTES[p.dtype]}"
        else:
            plist.append({"name": p.ptx_name, "kind": "scalar", "dtype": p.dtype, "role": p.role,
                          "value": values[p.role]})
            if p.role in ("M", "N", "K"):
                d = getattr(spec, p.role)
                ranges[f"p{i}"] = [d.lo, d.hi]
    ep = [e for e in spec.epilogue if e in ("scale", "bias", "relu", "gelu")]
    rtol = 0.0 if spec.dtype_out == "s32" else 1e-2 if spec.dtype_out == "f32" else 2e-2
    check = {"op": "gemm", "M": M, "N": N, "K": K, "layout_a": spec.layout_a, "layout_b": spec.layout_b,
             "layout_c": spec.layout_c, "alpha": spec.alpha, "beta": spec.beta, "epilogue": ep,
             "out_dtype": spec.dtype_out, "rtol": rtol}
    meta = {"version": 1, "kernel": name, "grid": [gx, gy, 1],
            "block": [t.threads, 1, 1], "dynamic_shared": 0, "params": plist, "check": check,
            "prediction": prediction, "ranges": ranges, "extents": extents}
    if "profile" in idx:
        meta["profile"] = {"param": idx["profile"], "slots": PROFILE_SLOTS}
    return meta


def header_json(meta: dict[str, Any]) -> str:
    return json.dumps(meta, separators=(", ", ": "))


def emit_stage_advance(b: Any, stage_regs: tuple[str, str], stages: int, kl: str, kt: str, bk: int, ktiles: str,
                       loop: str, done: str, prof: Any) -> None:
    """The cp.async pipeline's K-loop tail: rotate the read/write stages, advance kl and kt, branch back,
    then (after the loop) the profile slot and the drain of copies still in flight."""
    b.comment("Advance: kt++, kl += bk, stages rotate modulo stages")
    for r in stage_regs:
        p = b.reg("pred")
        b.i(f"add.u32 {r}, {r}, 1")
        b.i(f"setp.eq.u32 {p}, {r}, {stages}")
        b.i(f"selp.b32 {r}, 0, {r}, {p}")
    b.i(f"add.u32 {kl}, {kl}, {bk}")
    b.i(f"add.u32 {kt}, {kt}, 1")
    pl = b.reg("pred")
    b.i(f"setp.lt.u32 {pl}, {kt}, {ktiles}")
    b.i(f"@{pl} bra {loop}")
    b.put_label(done)
    b.region = "post"
    emit_profile_slot(b, prof, 2, "after the K loop")
    b.comment("Drain the (zero-fill) copies still in flight before the CTA exits")
    b.i("cp.async.wait_group 0")


def emit_activation(b: PtxBuilder, spec: GemmSpec, v: str) -> None:
    """The spec's activation on the f32 register v in place: relu, or gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi)
    (x + 0.044715 x^3))) with tanh.approx."""
    if spec.activation == "relu":
        b.i(f"max.f32 {v}, {v}, {f32_hex(0.0)}")
    elif spec.activation == "gelu":
        u = b.reg("f32")
        b.i(f"mul.f32 {u}, {v}, {v}")
        b.i(f"fma.rn.f32 {u}, {u}, {f32_hex(0.044715)}, {f32_hex(1.0)}")
        b.i(f"mul.f32 {u}, {u}, {v}")
        b.i(f"mul.f32 {u}, {u}, {f32_hex(GELU_C)}")
        b.i(f"tanh.approx.f32 {u}, {u}")
        b.i(f"add.f32 {u}, {u}, {f32_hex(1.0)}")
        b.i(f"mul.f32 {v}, {v}, {u}")
        b.i(f"mul.f32 {v}, {v}, {f32_hex(0.5)}")
