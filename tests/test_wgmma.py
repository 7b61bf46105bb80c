"""wgmma.mma_async on one warpgroup, checked against a float64 numpy reference.

Operands are laid out in shared memory the way TMA and CUTLASS put them (the layouts below are
written from the TMA swizzle picture, not from the simulator's descriptor decoder): K-major tiles
of 8-row core matrices (no swizzle: LBO between K neighbours, SBO between 8-row groups) or of
rows one swizzle span long (32/64/128 bytes) whose 16-byte chunk c of row r sits at chunk
c XOR (128-byte line of r within its 8-row group); MN-major tiles (imm-trans 1) likewise with the
roles of rows and K swapped. Each kernel is checked by ptxas -arch=sm_90a (PTX 8.4: mixed s8/u8)."""

from __future__ import annotations

import numpy as np
import pytest

from sim.functional.runner import run_functional
from sim.functional.types import FP8_VALUES
from sim.launch import Arg, Launch
from sim.ptx.parser import parse_ptx
from tests.simhelp import HEADER, ptxas_ok

ES = {"f16": 2, "bf16": 2, "tf32": 4, "e4m3": 1, "e5m2": 1, "s8": 1, "u8": 1}
SPAN = {0: 0, 1: 128, 2: 64, 3: 32}  # descriptor swizzle mode -> bytes per swizzled row
SMEM = 65536


def _elements(rng, t: str, shape) -> tuple[np.ndarray, np.ndarray]:
    """(raw bits, float64 values) of random non-zero elements of type t."""
    n = int(np.prod(shape))
    if t in ("f16", "bf16", "tf32"):
        x = (rng.uniform(0.5, 2.0, n) * rng.choice([-1.0, 1.0], n)).astype(np.float32)
        u = x.view(np.uint32)
        if t == "f16":
            bits = x.astype(np.float16).view(np.uint16)
            vals = bits.view(np.float16).astype(np.float64)
        elif t == "bf16":
            bits = (u >> 16).astype(np.uint16)
            vals = (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        else:
            bits = u & np.uint32(0xFFFFE000)
            vals = bits.view(np.float32).astype(np.float64)
    elif t in FP8_VALUES:
        mag = np.abs(FP8_VALUES[t])
        ok = [b for b in range(256) if 1 / 16 <= mag[b] <= 16]  # finite, non-zero, no f16 overflow
        bits = rng.choice(np.array(ok, dtype=np.uint8), n)
        vals = FP8_VALUES[t][bits]
    else:
        lo, hi = (-128, 128) if t == "s8" else (1, 256)
        v = rng.integers(lo, hi, n)
        v[v == 0] = 1
        bits = (v & 0xFF).astype(np.uint8)
        vals = v.astype(np.float64)
    return bits.reshape(shape), vals.reshape(shape)


def _place(img: np.ndarray, base: int, bits: np.ndarray, es: int, mode: int, mn_major: bool,
           lbo: int, sbo: int, koff: int) -> None:
    """Write tile bits (rows x K, rows = M or N) into the shared-memory image as TMA/CUTLASS would."""
    raw = np.ascontiguousarray(bits).view(np.uint8).reshape(bits.shape[0], bits.shape[1], es)
    rows, kdim = bits.shape
    span = SPAN[mode]
    per = 16 // es  # elements per 16-byte chunk
    for r in range(rows):
        for k in range(kdim):
            if not mn_major:
                c, e = k // per, k % per
                if mode == 0:
                    a = base + (r // 8) * sbo + c * lbo + (r % 8) * 16 + e * es
                else:
                    chunk = koff // 16 + c
                    phys = chunk ^ (((r % 8) * span // 128) % (span // 16))
                    a = base + (r // 8) * sbo + (r % 8) * span + 16 * phys + e * es
            else:
                if mode == 0:
                    a = base + (r // per) * sbo + (k // 8) * lbo + (k % 8) * 16 + (r % per) * es
                else:
                    width = span // es  # MN elements in one swizzled row
                    c = (r % width) // per
                    phys = c ^ (((k % 8) * span // 128) % (span // 16))
                    a = base + (r // width) * lbo + (k // 8) * sbo + (k % 8) * span + 16 * phys + (r % per) * es
            img[a: a + es] = raw[r, k]


def _layout(rng, rows: int, kdim: int, es: int, mode: int, mn_major: bool) -> tuple[int, int, int]:
    """(LBO, SBO, K byte offset of the slice within a swizzled row) for a dense tile."""
    if mode == 0 and not mn_major:
        if rng.random() < 0.5:
            return 128, 256, 0  # core matrices K-adjacent
        return (rows // 8) * 128, 128, 0  # core matrices MN-adjacent
    if mode == 0:  # MN-major: core matrices (8 MN x 8 k-rows) MN-adjacent (SBO), K groups after them (LBO)
        return (rows // (16 // es)) * 128, 128, 0
    span = SPAN[mode]
    if not mn_major:
        return 16, 8 * span, int(rng.integers(0, span // 32)) * 32
    width = span // es
    lbo = 8 * span * (kdim // 8)  # MN blocks after all of K
    return lbo if rows > width else 16, 8 * span, 0


def _desc(start: int, lbo: int, sbo: int, mode: int) -> int:
    return (start >> 4) | (lbo >> 4) << 16 | (sbo >> 4) << 32 | mode << 62


def _kernel(shape: str, dt: str, at: str, bt: str, nacc: int, a_regs: bool, tail: str) -> str:
    acc_t = "f32" if dt == "f32" else "b32"
    accs = ", ".join(f"%acc{i}" for i in range(nacc))
    loads = "\n".join(f"    ld.global.{acc_t} %acc{i}, [%rd8+{4 * i}];" for i in range(nacc))
    stores = "\n".join(f"    st.global.{acc_t} [%rd9+{4 * i}], %acc{i};" for i in range(nacc))
    a_op = "{%a0, %a1, %a2, %a3}" if a_regs else "%rd10"
    return HEADER.replace("8.0", "8.4") + f""".visible .entry k(.param .u64 k_out, .param .u64 k_smem,
    .param .u64 k_acc, .param .u64 k_areg, .param .u64 k_da, .param .u64 k_db, .param .u32 k_sd)
{{
    .reg .b32 %r<16>;
    .reg .b32 %a<4>;
    .reg .{acc_t} %acc<{nacc}>;
    .reg .b64 %rd<16>;
    .reg .pred %p<4>;
    .shared .align 1024 .b8 smem[{SMEM}];
    ld.param.u64 %rd1, [k_out];
    ld.param.u64 %rd2, [k_smem];
    ld.param.u64 %rd3, [k_acc];
    ld.param.u64 %rd4, [k_areg];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
    cvta.to.global.u64 %rd3, %rd3;
    cvta.to.global.u64 %rd4, %rd4;
    mov.u32 %r0, %tid.x;
    mov.u32 %r6, smem;
    shl.b32 %r1, %r0, 4;
COPY:
    setp.ge.u32 %p1, %r1, {SMEM};
    @%p1 bra COPIED;
    cvt.u64.u32 %rd5, %r1;
    add.s64 %rd6, %rd2, %rd5;
    ld.global.v4.u32 {{%r2, %r3, %r4, %r5}}, [%rd6];
    add.u32 %r7, %r6, %r1;
    st.shared.v4.u32 [%r7], {{%r2, %r3, %r4, %r5}};
    add.u32 %r1, %r1, 2048;
    bra COPY;
COPIED:
    bar.sync 0;
    fence.proxy.async.shared::cta;
    mul.wide.u32 %rd7, %r0, {4 * nacc};
    add.s64 %rd8, %rd3, %rd7;
    add.s64 %rd9, %rd1, %rd7;
{loads}
    mul.wide.u32 %rd11, %r0, 16;
    add.s64 %rd11, %rd4, %rd11;
    ld.global.v4.u32 {{%a0, %a1, %a2, %a3}}, [%rd11];
    shr.u32 %r8, %r6, 4;
    cvt.u64.u32 %rd12, %r8;
    ld.param.u64 %rd10, [k_da];
    add.s64 %rd10, %rd10, %rd12;
    ld.param.u64 %rd13, [k_db];
    add.s64 %rd13, %rd13, %rd12;
    ld.param.u32 %r9, [k_sd];
    setp.ne.u32 %p2, %r9, 0;
    wgmma.fence.sync.aligned;
    wgmma.mma_async.sync.aligned.{shape}.{dt}.{at}.{bt} {{{accs}}}, {a_op}, %rd13, %p2{tail};
    wgmma.commit_group.sync.aligned;
    wgmma.wait_group.sync.aligned 0;
{stores}
    ret;
}}
"""


def _acc_pos(tid: np.ndarray, i: int) -> tuple[np.ndarray, np.ndarray]:
    """PTX ISA wgmma D fragment: thread tid's value i is at row 16*warp + lane/4 (+8 for the second
    pair of each group of four), column 8*(i/4) + 2*(lane%4) + i%2."""
    warp, lane = tid // 32, tid % 32
    return 16 * warp + lane // 4 + 8 * ((i // 2) % 2), 8 * (i // 4) + 2 * (lane % 4) + i % 2


def _a_reg_pos(tid: np.ndarray, es: int, r: int, x: int) -> tuple[np.ndarray, np.ndarray]:
    """PTX ISA wgmma A-in-registers fragment (as mma.sync's A per warp of 16 rows)."""
    warp, lane = tid // 32, tid % 32
    g, t = lane // 4, lane % 4
    row = 16 * warp + g + 8 * (r % 2)
    if es == 2:
        return row, 2 * t + x + 8 * (r // 2)
    if es == 4:
        return row, t + 4 * (r // 2)
    return row, 4 * t + x + 16 * (r // 2)


def run_wgmma(rng, n: int, dt: str, at: str, bt: str, mode_a: int, mode_b: int, trans_a: bool = False,
              trans_b: bool = False, a_regs: bool = False, scale_d: bool = True, sa: int = 1, sb: int = 1,
              tmp_path=None):
    es = ES[at]
    kdim = 32 // es
    half = es == 2
    nacc = n // 4 if dt == "f16" else n // 2
    ab, av = _elements(rng, at, (64, kdim))
    bb, bv = _elements(rng, bt, (n, kdim))
    img = rng.integers(0, 256, SMEM).astype(np.uint8)  # junk everywhere the tiles do not cover
    a_base, b_base = 0, 16384
    da = 0
    if not a_regs:
        la, sa_, ka = _layout(rng, 64, kdim, es, mode_a, trans_a)
        _place(img, a_base, ab, es, mode_a, trans_a, la, sa_, ka)
        da = _desc(a_base + ka, la, sa_, mode_a)
    lb, sb_, kb = _layout(rng, n, kdim, es, mode_b, trans_b)
    _place(img, b_base, bb, es, mode_b, trans_b, lb, sb_, kb)
    db = _desc(b_base + kb, lb, sb_, mode_b)
    tid = np.arange(128)
    areg = np.zeros((128, 4), dtype=np.uint32)
    if a_regs:
        per = 4 // es
        for r in range(4):
            for x in range(per):
                row, col = _a_reg_pos(tid, es, r, x)
                areg[:, r] |= ab[row, col].astype(np.uint32) << np.uint32(8 * es * x)
    if dt == "s32":
        c = rng.integers(-1000, 1000, (64, n)).astype(np.float64)
    else:
        c = (rng.uniform(0.5, 2.0, (64, n)) * rng.choice([-1.0, 1.0], (64, n)))
        c = c.astype(np.float16 if dt == "f16" else np.float32).astype(np.float64)
    acc_in = np.zeros((128, nacc), dtype=np.uint32)
    for i in range(nacc):
        if dt == "f16":
            lo = c[_acc_pos(tid, 2 * i)].astype(np.float16).view(np.uint16).astype(np.uint32)
            hi = c[_acc_pos(tid, 2 * i + 1)].astype(np.float16).view(np.uint16).astype(np.uint32)
            acc_in[:, i] = lo | (hi << 16)
        elif dt == "f32":
            acc_in[:, i] = c[_acc_pos(tid, i)].astype(np.float32).view(np.uint32)
        else:
            acc_in[:, i] = c[_acc_pos(tid, i)].astype(np.int32).view(np.uint32)
    tail = ""
    if dt != "s32":
        tail = f", {sa}, {sb}"
        if half:
            tail += (f", {int(trans_a)}" if not a_regs else "") + f", {int(trans_b)}"
    shape = f"m64n{n}k{kdim}"
    ptx = _kernel(shape, dt, at, bt, nacc, a_regs, tail)
    if tmp_path is not None:
        ptxas_ok(ptx, tmp_path)
    out = np.full(128 * nacc, 0x7FC00000, dtype=np.uint32)  # NaN-poisoned
    args = [Arg("buffer", "uint32", array=out), Arg("buffer", "uint8", array=img),
            Arg("buffer", "uint32", array=acc_in.reshape(-1)), Arg("buffer", "uint32", array=areg.reshape(-1)),
            Arg("scalar", "u64", value=da), Arg("scalar", "u64", value=db), Arg("scalar", "u32", value=int(scale_d))]
    res = run_functional(parse_ptx(ptx, "wgmma.ptx"), Launch("k", (1, 1, 1), (128, 1, 1), args))
    got_raw = res.outputs[0].reshape(128, nacc)
    got = np.zeros((64, n))
    for i in range(nacc):
        if dt == "f16":
            got[_acc_pos(tid, 2 * i)] = (got_raw[:, i] & 0xFFFF).astype(np.uint16).view(np.float16)
            got[_acc_pos(tid, 2 * i + 1)] = (got_raw[:, i] >> 16).astype(np.uint16).view(np.float16)
        elif dt == "f32":
            got[_acc_pos(tid, i)] = got_raw[:, i].view(np.float32)
        else:
            got[_acc_pos(tid, i)] = got_raw[:, i].view(np.int32)
    want = (sa * av) @ (sb * bv).T + (c if scale_d else 0)
    return got, want


def _rel(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


CASES = [  # n, dtype, atype, btype, swizzle A, swizzle B, trans A, trans B, A in registers
    (64, "f32", "f16", "f16", 0, 0, False, False, False),
    (64, "f32", "f16", "f16", 1, 1, False, False, False),
    (64, "f32", "f16", "f16", 2, 3, False, False, False),
    (64, "f32", "f16", "f16", 3, 2, False, False, False),
    (128, "f32", "bf16", "bf16", 1, 1, True, True, False),
    (128, "f32", "f16", "f16", 2, 3, True, True, False),
    (128, "f32", "bf16", "bf16", 0, 0, True, True, False),
    (256, "f32", "bf16", "bf16", 1, 1, False, False, False),
    (8, "f32", "f16", "f16", 1, 0, False, True, False),
    (32, "f16", "f16", "f16", 1, 1, False, False, False),
    (64, "f32", "f16", "f16", 0, 1, False, False, True),
    (128, "f32", "tf32", "tf32", 1, 1, False, False, False),
    (40, "f32", "tf32", "tf32", 0, 3, False, False, False),
    (16, "f32", "tf32", "tf32", 0, 2, False, False, True),
    (128, "f32", "e4m3", "e4m3", 1, 1, False, False, False),
    (96, "f32", "e5m2", "e4m3", 2, 0, False, False, False),
    (24, "f16", "e4m3", "e5m2", 3, 3, False, False, True),
    (48, "s32", "s8", "s8", 1, 1, False, False, False),
    (16, "s32", "u8", "s8", 0, 2, False, False, True),
    (256, "s32", "s8", "u8", 0, 1, False, False, False),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"n{c[0]}-{c[1]}-{c[2]}-{c[3]}-sw{c[4]}{c[5]}"
                         f"{'-tA' if c[6] else ''}{'-tB' if c[7] else ''}{'-rA' if c[8] else ''}")
def test_wgmma_matches_numpy(case, tmp_path):
    n, dt, at, bt, ma, mb, ta, tb, ra = case
    rng = np.random.default_rng()
    got, want = run_wgmma(rng, n, dt, at, bt, ma, mb, ta, tb, ra, tmp_path=tmp_path)
    if dt == "s32":
        assert np.array_equal(got, want)
    else:
        assert _rel(got, want) < (2e-3 if dt == "f16" else 1e-6), _rel(got, want)


def test_wgmma_scale_d_and_negated_inputs(tmp_path):
    rng = np.random.default_rng()
    got, want = run_wgmma(rng, 64, "f32", "bf16", "bf16", 1, 1, scale_d=False, sa=-1, sb=1, tmp_path=tmp_path)
    assert _rel(got, want) < 1e-6
    got, want = run_wgmma(rng, 32, "f32", "e4m3", "e4m3", 2, 2, sa=1, sb=-1, tmp_path=tmp_path)
    assert _rel(got, want) < 1e-6


def test_fp8_tables_known_values():
    e4, e5 = FP8_VALUES["e4m3"], FP8_VALUES["e5m2"]
    assert (e4[0x38], e4[0x7E], e4[0x01], e4[0x08], e4[0xB8]) == (1.0, 448.0, 2.0**-9, 2.0**-6, -1.0)
    assert np.isnan(e4[0x7F]) and np.isnan(e4[0xFF]) and np.isfinite(e4[0x7E])
    assert (e5[0x3C], e5[0x7B], e5[0x01], e5[0x04], e5[0xC0]) == (1.0, 57344.0, 2.0**-16, 2.0**-14, -2.0)
    assert e5[0x7C] == np.inf and e5[0xFC] == -np.inf and np.isnan(e5[0x7D])
    assert np.array_equal(e4[:128], -e4[128:], equal_nan=True)
