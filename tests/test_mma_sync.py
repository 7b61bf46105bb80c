"""mma.sync.aligned.m16n8kK.row.col for every A/B type the simulator models, on one warp with random
non-zero fragments, checked against numpy. The expected placement of each lane's elements comes from
CUTLASS's CuTe traits (include/cute/atom/mma_traits_sm80.hpp for f16, tf32 and s8; mma_traits_sm89.hpp
for e4m3/e5m2 m16n8k32, the same layouts as s8 k32: (thread, value) -> column-major index of the 16xK
A, 8xK B and 16x8 C tiles), written out below and evaluated here, not from the simulator's maps;
s4 k64 (no CuTe trait there) follows the PTX ISA's m16n8k64 fragment rule. ptxas -arch=sm_90a must
accept each kernel (PTX .version 8.4: fp8 mma needs it)."""

from __future__ import annotations

import numpy as np
import pytest

from sim.functional.runner import run_functional
from sim.launch import Arg, Launch
from sim.ptx.parser import parse_ptx
from tests.simhelp import HEADER, ptxas_ok

# CuTe layouts as (lane strides (t%4, t//4), value shape, value strides); the s4 k64 layouts are the
# s8 k32 ones with 8 elements per register (PTX ISA "mma.m16n8k64" fragments: col = 8t + (i & 7) (+32))
_C = ((32, 1), (2, 2), (16, 8))
_LAYOUTS = {
    ("f16", 16): (((32, 1), (2, 2, 2), (16, 8, 128)), ((16, 1), (2, 2), (8, 64))),
    ("tf32", 8): (((16, 1), (2, 2), (8, 64)), ((8, 1), (2,), (32,))),
    ("tf32", 4): (((16, 1), (2,), (8,)), ((8, 1), (1,), (0,))),
    ("s8", 32): (((64, 1), (4, 2, 2), (16, 8, 256)), ((32, 1), (4, 2), (8, 128))),
    ("s8", 16): (((64, 1), (4, 2), (16, 8)), ((32, 1), (4,), (8,))),
    ("s4", 64): (((128, 1), (8, 2, 2), (16, 8, 512)), ((64, 1), (8, 2), (8, 256))),
}
_BITS = {"f16": 16, "tf32": 32, "s8": 8, "u8": 8, "e4m3": 8, "e5m2": 8, "s4": 4, "u4": 4}
_FAMILY = {"f16": "f16", "tf32": "tf32", "s8": "s8", "u8": "s8", "e4m3": "s8", "e5m2": "s8", "s4": "s4", "u4": "s4"}


def _index(layout: tuple, lane: int, v: int) -> int:
    (s0, s1), shape, strides = layout
    idx = (lane % 4) * s0 + (lane // 4) * s1
    for n, s in zip(shape, strides):
        idx += (v % n) * s
        v //= n
    return idx


def _fp8(code: np.ndarray, ebits: int, mbits: int) -> np.ndarray:
    c = code.astype(np.int64)
    sign = np.where(c >> 7, -1.0, 1.0)
    e = (c >> mbits) & ((1 << ebits) - 1)
    m = c & ((1 << mbits) - 1)
    bias = (1 << (ebits - 1)) - 1
    mag = np.where(e == 0, m / (1 << mbits) * 2.0 ** (1 - bias), (1 + m / (1 << mbits)) * 2.0 ** (e - bias))
    return sign * mag


def _elements(t: str, shape: tuple[int, int], rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(raw bits as uint32, values) of random non-zero elements of type t."""
    if t in ("s8", "s4"):
        lim = 128 if t == "s8" else 8
        v = rng.integers(1, lim, shape) * rng.choice([-1, 1], shape)
        return (v & ((1 << _BITS[t]) - 1)).astype(np.uint32), v.astype(np.float64)
    if t in ("u8", "u4"):
        v = rng.integers(1, 1 << _BITS[t], shape)
        return v.astype(np.uint32), v.astype(np.float64)
    if t in ("e4m3", "e5m2"):
        bad = (0x7F,) if t == "e4m3" else (0x7C, 0x7D, 0x7E, 0x7F)
        codes = rng.integers(1, 128, shape)
        codes = np.where(np.isin(codes, bad), 0x38, codes) | (rng.integers(0, 2, shape) << 7)
        vals = _fp8(codes, 4, 3) if t == "e4m3" else _fp8(codes, 5, 2)
        return codes.astype(np.uint32), vals
    if t == "tf32":
        f = (rng.standard_normal(shape) + 0.1).astype(np.float32).view(np.uint32) & np.uint32(0xFFFFE000)
        return f, f.view(np.float32).astype(np.float64)
    h = (rng.standard_normal(shape) + 0.1).astype(np.float16)
    return h.view(np.uint16).astype(np.uint32), h.astype(np.float64)


def _kernel(form: str, na: int, nb: int, flt: bool) -> str:
    c = "f" if flt else "r"
    regs = lambda p, lo, n: ", ".join(f"%{p}{lo + i}" for i in range(n))  # noqa: E731
    a, b = regs("r", 10, na), regs("r", 20, nb)
    loads = "\n".join(f"    ld.global.b32 %r{10 + i}, [%rd3+{4 * i}];" for i in range(na))
    loads += "\n" + "\n".join(f"    ld.global.b32 %r{20 + i}, [%rd3+{4 * (na + i)}];" for i in range(nb))
    loads += "\n" + "\n".join(f"    ld.global.{'f32' if flt else 'b32'} %{c}{30 + i}, [%rd3+{4 * (na + nb + i)}];"
                              for i in range(4))
    stores = "\n".join(f"    st.global.{'f32' if flt else 'b32'} [%rd4+{4 * i}], %{c}{40 + i};" for i in range(4))
    per = na + nb + 4
    return HEADER.replace(".version 8.0", ".version 8.4") + f""".visible .entry k(.param .u64 k_out, .param .u64 k_in)
{{
    .reg .b32 %r<48>;
    .reg .f32 %f<48>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [k_out];
    ld.param.u64 %rd2, [k_in];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
    mov.u32 %r0, %tid.x;
    mul.wide.u32 %rd5, %r0, {4 * per};
    add.s64 %rd3, %rd2, %rd5;
    mul.wide.u32 %rd6, %r0, 16;
    add.s64 %rd4, %rd1, %rd6;
{loads}
    mma.sync.aligned.{form} {{{regs(c, 40, 4)}}}, {{{a}}}, {{{b}}}, {{{regs(c, 30, 4)}}};
{stores}
    ret;
}}
"""


def _run(at: str, bt: str, k: int, dt: str, tmp_path, sat: bool = False, c_base: int = 0, gpu: bool = False) -> tuple:
    """Run one mma on random fragments (in the simulator, or on the GPU): (got D 16x8, expected D 16x8
    computed exactly from A, B, C)."""
    rng = np.random.default_rng()
    ebits = _BITS[at]
    per = 32 // ebits
    la, lb = _LAYOUTS[(_FAMILY[at], k)]
    na, nb = k // (2 * per), k // (4 * per)
    a_bits, A = _elements(at, (16, k), rng)
    b_bits, B = _elements(bt, (8, k), rng)  # B stored as (n, k): the "col" operand
    flt = dt == "f32"
    C = rng.standard_normal((16, 8)).astype(np.float32) if flt else \
        (c_base + rng.integers(1, 1000, (16, 8))).astype(np.int64)
    words = np.zeros((32, na + nb + 4), dtype=np.uint32)
    for lane in range(32):
        for v in range(na * per):
            i = _index(la, lane, v)
            words[lane, v // per] |= a_bits[i % 16, i // 16] << np.uint32(ebits * (v % per))
        for v in range(nb * per):
            i = _index(lb, lane, v)
            words[lane, na + v // per] |= b_bits[i % 8, i // 8] << np.uint32(ebits * (v % per))
        for v in range(4):
            i = _index(_C, lane, v)
            words[lane, na + nb + v] = np.float32(C[i % 16, i // 16]).view(np.uint32) if flt else \
                np.int64(C[i % 16, i // 16]) & 0xFFFFFFFF
    form = f"m16n8k{k}.row.col{'.satfinite' if sat else ''}.{dt}.{at}.{bt}.{dt}"
    ptx = _kernel(form, na, nb, flt)
    ptxas_ok(ptx, tmp_path)
    out = np.full(32 * 4, 0x7FC00000, dtype=np.uint32)  # poisoned: NaN bits
    args = [Arg("buffer", "uint32", array=out), Arg("buffer", "uint32", array=words.reshape(-1))]
    launch = Launch("k", (1, 1, 1), (32, 1, 1), args)
    if gpu:
        from validation.gpu import run_on_gpu

        outputs = run_on_gpu(ptx, launch, warmup=0, repeats=1).outputs
    else:
        outputs = run_functional(parse_ptx(ptx, "mma.ptx"), launch).outputs
    raw = outputs[0].reshape(32, 4)
    got = np.zeros((16, 8), dtype=np.float64 if flt else np.int64)
    for lane in range(32):
        for v in range(4):
            i = _index(_C, lane, v)
            got[i % 16, i // 16] = raw[lane, v].view(np.float32) if flt else raw[lane, v].view(np.int32)
    if flt:
        return got, A @ B.T + C.astype(np.float64)
    return got, A.astype(np.int64) @ B.astype(np.int64).T + C


@pytest.mark.parametrize("at,bt,k", [("s8", "s8", 32), ("s8", "u8", 32), ("u8", "s8", 32), ("u8", "u8", 32),
                                     ("s8", "s8", 16), ("s4", "s4", 64), ("u4", "s4", 64), ("u4", "u4", 64)])
def test_integer_mma_exact(at, bt, k, tmp_path):
    got, want = _run(at, bt, k, "s32", tmp_path)
    assert np.array_equal(got, want)


@pytest.mark.parametrize("sat", [False, True])
def test_integer_mma_overflow_wraps_or_saturates(sat, tmp_path):
    """C near the int32 limit: u8 x u8 products (about 2^19 per sum) push sums past 2^31 - 1."""
    got, want = _run("u8", "u8", 32, "s32", tmp_path, sat=sat, c_base=2**31 - 2**17)
    expect = np.clip(want, -(2**31), 2**31 - 1) if sat else (want + 2**31) % 2**32 - 2**31
    assert (want > 2**31 - 1).any()
    assert np.array_equal(got, expect)


@pytest.mark.parametrize("at,bt,k", [("tf32", "tf32", 8), ("tf32", "tf32", 4), ("e4m3", "e4m3", 32),
                                     ("e5m2", "e4m3", 32), ("e5m2", "e5m2", 32), ("f16", "f16", 16)])
def test_float_mma(at, bt, k, tmp_path):
    got, want = _run(at, bt, k, "f32", tmp_path)
    assert np.isfinite(got).all()
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < 1e-6


_FORMS = [("s8", "s8", 32, "s32"), ("u8", "s8", 32, "s32"), ("s4", "u4", 64, "s32"), ("tf32", "tf32", 8, "f32"),
          ("e4m3", "e5m2", 32, "f32"), ("f16", "f16", 16, "f32")]


@pytest.mark.gpu
@pytest.mark.parametrize("at,bt,k,dt", _FORMS)
def test_mma_forms_on_gpu(at, bt, k, dt, tmp_path):
    """The same kernels on the H200: its D equals the exact integer sums, and the f64 float reference to
    the rounding of f32 accumulation (the fragment placement checked against the hardware)."""
    from validation.gpu import gpu_available

    ok, why = gpu_available()
    if not ok:
        pytest.skip(f"no GPU: {why}")
    got, want = _run(at, bt, k, dt, tmp_path, gpu=True)
    if dt == "s32":
        assert np.array_equal(got, want)
    else:  # fp8: Hopper's tensor cores are reported to sum fp8 products with fewer than f32's mantissa bits
        tol = 1e-3 if at in ("e4m3", "e5m2") else 1e-5
        assert np.linalg.norm(got - want) / np.linalg.norm(want) < tol
