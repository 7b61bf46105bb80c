"""Exact integer/float semantics of the functional model, on tiny PTX kernels (one warp)."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from sim.functional.runner import run_functional
from sim.launch import Arg, Launch
from sim.ptx.parser import parse_ptx
from tests.simhelp import HEADER, run_snippet

STORE_R = """
    mul.wide.u32 %rd3, %r0, 4;
    add.s64 %rd4, %rd1, %rd3;
    st.global.u32 [%rd4], {reg};
"""


def _ld_in_u32():
    return """
    mul.wide.u32 %rd5, %r0, 4;
    add.s64 %rd6, %rd2, %rd5;
    ld.global.u32 %r1, [%rd6];
"""


def run_u32(expr: str, data: np.ndarray, reg: str = "%r2") -> np.ndarray:
    body = _ld_in_u32() + expr + STORE_R.format(reg=reg)
    return run_snippet(body, "", "uint32", 32, {"data": data.astype(np.uint32)})


def test_add_wraps_and_sub_negative():
    d = np.arange(32, dtype=np.uint64) + 0xFFFFFFF0
    out = run_u32("add.u32 %r2, %r1, 0x20;", d.astype(np.uint32))
    assert np.array_equal(out, ((d + 0x20) & 0xFFFFFFFF).astype(np.uint32))


def test_signed_vs_unsigned_shift_and_compare():
    d = np.array([0x80000000 + i for i in range(16)] + list(range(16)), dtype=np.uint32)
    s = run_u32("shr.s32 %r2, %r1, 4;", d)
    u = run_u32("shr.u32 %r2, %r1, 4;", d)
    assert np.array_equal(s, (d.view(np.int32) >> 4).view(np.uint32))
    assert np.array_equal(u, d >> 4)
    big = run_u32("shl.b32 %r2, %r1, 33;", d)  # shift >= width gives 0
    assert not big.any()
    lt = run_u32("setp.lt.s32 %p1, %r1, 5;\n selp.u32 %r2, 1, 0, %p1;", d)
    lo = run_u32("setp.lo.u32 %p1, %r1, 5;\n selp.u32 %r2, 1, 0, %p1;", d)
    assert np.array_equal(lt, (d.view(np.int32) < 5).astype(np.uint32))
    assert np.array_equal(lo, (d < 5).astype(np.uint32))


def test_mul_hi_wide_and_mad_lo():
    rng = np.random.default_rng()
    d = rng.integers(0, 2**32, 32, dtype=np.uint64).astype(np.uint32)
    hi = run_u32("mul.hi.u32 %r2, %r1, 0x9E3779B9;", d)
    assert np.array_equal(hi, ((d.astype(np.uint64) * 0x9E3779B9) >> 32).astype(np.uint32))
    his = run_u32("mul.hi.s32 %r2, %r1, -7;", d)
    exp = ((d.view(np.int32).astype(np.int64) * -7) >> 32).astype(np.int32).view(np.uint32)
    assert np.array_equal(his, exp)
    body = _ld_in_u32() + """
    mul.wide.s32 %rd7, %r1, -3;
    mul.wide.u32 %rd3, %r0, 8;
    add.s64 %rd4, %rd1, %rd3;
    st.global.u64 [%rd4], %rd7;
"""
    w = run_snippet(body, "", "int64", 32, {"data": d})
    assert np.array_equal(w, d.view(np.int32).astype(np.int64) * -3)
    mad = run_u32("mad.lo.s32 %r2, %r1, 3, %r0;", d)
    assert np.array_equal(mad, (d * np.uint32(3) + np.arange(32, dtype=np.uint32)))


def test_signed_div_rem_truncate_toward_zero():
    vals = np.array([-7, 7, -8, 8, -1, 0, 2**31 - 1, -(2**31)] * 4, dtype=np.int32)
    q = run_u32("div.s32 %r2, %r1, -3;", vals.view(np.uint32)).view(np.int32)
    r = run_u32("rem.s32 %r2, %r1, -3;", vals.view(np.uint32)).view(np.int32)
    py_q = [int(a / -3) if a != 0 else 0 for a in vals.tolist()]
    assert q.tolist() == py_q
    assert r.tolist() == [a - qq * -3 for a, qq in zip(vals.tolist(), py_q)]
    uq = run_u32("div.u32 %r2, %r1, 3;", vals.view(np.uint32))
    assert np.array_equal(uq, vals.view(np.uint32) // 3)


def test_fma_rounds_once():
    # a*b+c where the f32 product rounding would change the result: fma keeps the exact product
    a = np.float32(1 + 2**-12)
    c = np.float32(-(1 + 2**-11))
    data = np.full(32, a, dtype=np.float32).view(np.uint32)
    body = _ld_in_u32() + f"""
    mov.b32 %f1, %r1;
    fma.rn.f32 %f2, %f1, %f1, 0f{np.float32(c).view(np.uint32):08X};
    mul.f32 %f3, %f1, %f1;
    add.f32 %f4, %f3, 0f{np.float32(c).view(np.uint32):08X};
    mov.b32 %r2, %f2;
    mov.b32 %r3, %f4;
""" + STORE_R.format(reg="%r2")
    out = run_snippet(body, "", "uint32", 32, {"data": data}).view(np.float32)
    exact = np.float64(a) * np.float64(a) + np.float64(c)
    assert out[0] == np.float32(exact) and out[0] == np.float32(2**-24)
    assert np.float32(np.float32(a * a) + c) != out[0]  # unfused differs: the test can fail


def test_cvt_rounding_and_saturation():
    vals = np.array([1.5, 2.5, -1.5, -2.7, 3e10, -3e10, np.nan, 0.49999997] * 4, dtype=np.float32)
    data = vals.view(np.uint32)
    rni = run_u32("mov.b32 %f1, %r1;\n cvt.rni.s32.f32 %r2, %f1;", data).view(np.int32)
    rzi = run_u32("mov.b32 %f1, %r1;\n cvt.rzi.s32.f32 %r2, %f1;", data).view(np.int32)
    rmi = run_u32("mov.b32 %f1, %r1;\n cvt.rmi.s32.f32 %r2, %f1;", data).view(np.int32)
    assert rni[:8].tolist() == [2, 2, -2, -3, 2**31 - 1, -(2**31), 0, 0]
    assert rzi[:8].tolist() == [1, 2, -1, -2, 2**31 - 1, -(2**31), 0, 0]
    assert rmi[:8].tolist() == [1, 2, -2, -3, 2**31 - 1, -(2**31), 0, 0]


def test_cvt_f16_bf16_round_to_nearest_even():
    rng = np.random.default_rng()
    vals = (rng.standard_normal(32) * 100).astype(np.float32)
    data = vals.view(np.uint32)
    h = run_u32("mov.b32 %f1, %r1;\n cvt.rn.f16.f32 %rs1, %f1;\n cvt.u32.u16 %r2, %rs1;", data)
    assert np.array_equal(h.astype(np.uint16), vals.astype(np.float16).view(np.uint16))
    b = run_u32("mov.b32 %f1, %r1;\n cvt.rn.bf16.f32 %rs1, %f1;\n cvt.u32.u16 %r2, %rs1;", data)
    u = vals.view(np.uint32).astype(np.uint64)
    rne = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    assert np.array_equal(b.astype(np.uint16), rne)
    back = run_u32("cvt.u16.u32 %rs1, %r1;\n cvt.f32.bf16 %f1, %rs1;\n mov.b32 %r2, %f1;",
                   rne.astype(np.uint32))
    assert np.array_equal(back, rne.astype(np.uint32) << 16)


def test_divergence_reconverges():
    # odd lanes add 100, even lanes add 1000, then all add 1 after the join
    body = """
    and.b32 %r5, %r0, 1;
    setp.eq.u32 %p1, %r5, 0;
    @%p1 bra EVEN;
    add.u32 %r2, %r0, 100;
    bra.uni JOIN;
EVEN:
    add.u32 %r2, %r0, 1000;
JOIN:
    add.u32 %r2, %r2, 1;
""" + STORE_R.format(reg="%r2")
    out = run_snippet(body, "", "uint32", 32)
    lanes = np.arange(32)
    assert np.array_equal(out, np.where(lanes % 2 == 0, lanes + 1001, lanes + 101))


def test_shfl_modes():
    for mode, exp in [("down", lambda l: np.where(l + 3 <= 31, l + 3, l)),
                      ("up", lambda l: np.where(l - 3 >= 0, l - 3, l)),
                      ("bfly", lambda l: l ^ 3),
                      ("idx", lambda l: np.full(32, 3))]:
        clamp = "0" if mode == "up" else "31"
        body = f"""
    mul.lo.u32 %r1, %r0, 10;
    shfl.sync.{mode}.b32 %r2|%p1, %r1, 3, {clamp}, -1;
""" + STORE_R.format(reg="%r2")
        out = run_snippet(body, "", "uint32", 32)
        assert np.array_equal(out, exp(np.arange(32)) * 10), mode


def test_out_of_bounds_stops_with_line_and_thread():
    import pytest

    from sim.errors import ExecutionError

    body = """
    mul.wide.u32 %rd3, %r0, 4;
    add.s64 %rd4, %rd1, %rd3;
    st.global.u32 [%rd4+4], %r0;
"""
    with pytest.raises(ExecutionError) as e:
        run_snippet(body, "", "uint32", 32)
    msg = e.value.one_line()
    assert "snippet.ptx:19:" in msg and "thread (31, 0, 0)" in msg and "outside buffer" in msg


def test_atomic_add_serializes_lanes():
    body = """
    atom.global.add.u32 %r2, [%rd1], 1;
    mul.wide.u32 %rd3, %r0, 4;
    add.s64 %rd4, %rd1, %rd3;
    st.global.u32 [%rd4+4], %r2;
"""
    out = run_snippet(body, "", "uint32", 33)
    assert out[0] == 32  # every lane added one
    assert sorted(out[1:].tolist()) == list(range(32))  # each saw a distinct old value


def test_one_load_reads_two_buffers():
    """Lanes of one ld.global may point into different allocations (here: out for even lanes,
    in for odd ones); each lane reads its own buffer."""
    body = """
    and.b32 %r5, %r0, 1;
    setp.eq.u32 %p1, %r5, 0;
    selp.b64 %rd6, %rd1, %rd2, %p1;
    ld.global.u32 %r2, [%rd6];
    mul.wide.u32 %rd3, %r0, 4;
    add.s64 %rd4, %rd1, %rd3;
    bar.sync 0;
    st.global.u32 [%rd4], %r2;
"""
    data = np.full(4, 777, dtype=np.uint32)
    out = run_snippet(body, "", "uint32", 32, {"data": data})
    assert np.array_equal(out, np.where(np.arange(32) % 2 == 0, 0, 777))  # out starts zeroed


# -- packed halves: f16x2 / bf16x2 ----------------------------------------------------------------
PACKED_OPS = {  # PTX statement (d = %r4, sources %r1..%r3) and the float64 reference per element
    "add.rn": (2, lambda a, b, c: a + b),
    "sub.rn": (2, lambda a, b, c: a - b),
    "mul.rn": (2, lambda a, b, c: a * b),
    "fma.rn": (3, lambda a, b, c: a * b + c),
    "min": (2, lambda a, b, c: np.fmin(a, b)),
    "max": (2, lambda a, b, c: np.fmax(a, b)),
    "neg": (1, lambda a, b, c: -a),
    "abs": (1, lambda a, b, c: np.abs(a)),
}


def _packed_kernel(stmt: str) -> str:
    return HEADER + f""".visible .entry k(.param .u64 k_out, .param .u64 k_a, .param .u64 k_b, .param .u64 k_c)
{{
    .reg .b32 %r<8>;
    .reg .b64 %rd<12>;
    ld.param.u64 %rd1, [k_out];
    ld.param.u64 %rd2, [k_a];
    ld.param.u64 %rd3, [k_b];
    ld.param.u64 %rd4, [k_c];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
    cvta.to.global.u64 %rd3, %rd3;
    cvta.to.global.u64 %rd4, %rd4;
    mov.u32 %r0, %tid.x;
    mul.wide.u32 %rd5, %r0, 4;
    add.s64 %rd6, %rd2, %rd5;
    ld.global.u32 %r1, [%rd6];
    add.s64 %rd7, %rd3, %rd5;
    ld.global.u32 %r2, [%rd7];
    add.s64 %rd8, %rd4, %rd5;
    ld.global.u32 %r3, [%rd8];
    {stmt}
    add.s64 %rd9, %rd1, %rd5;
    st.global.u32 [%rd9], %r4;
    ret;
}}
"""


def _halves(rng, elem: str) -> np.ndarray:
    """64 random non-zero values exactly representable in elem, as their 16-bit patterns."""
    x = rng.uniform(0.125, 16.0, 64) * rng.choice([-1.0, 1.0], 64)
    if elem == "f16":
        return x.astype(np.float16).view(np.uint16)
    return (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)  # truncated: exact bf16


def _to_f64(bits: np.ndarray, elem: str) -> np.ndarray:
    if elem == "f16":
        return bits.view(np.float16).astype(np.float64)
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def _round_bf16(x: np.ndarray) -> np.ndarray:
    """float64 -> nearest bf16 pattern, ties to even: the closest of three neighbouring patterns."""
    t = (x.astype(np.float32).view(np.uint32) >> 16).astype(np.int64)
    cand = np.stack([t - 1, t, t + 1])
    vals = ((cand.astype(np.uint32) << 16).view(np.float32)).astype(np.float64)
    dist = np.abs(vals - x)
    best = dist.min(axis=0)
    score = np.where(dist == best, 0, 2) + (cand & 1)  # nearest, then even
    return cand[np.argmin(score, axis=0), np.arange(x.size)].astype(np.uint16)


def _ptxas_ok(ptx: str, tmp_path) -> None:
    if shutil.which("ptxas") is None:
        return
    f = tmp_path / "k.ptx"
    f.write_text(ptx)
    r = subprocess.run(["ptxas", "-arch=sm_90a", str(f), "-o", str(tmp_path / "k.cubin")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("elem", ["f16", "bf16"])
@pytest.mark.parametrize("op", list(PACKED_OPS))
def test_packed_half_arithmetic(op, elem, tmp_path):
    n, ref = PACKED_OPS[op]
    stmt = f"{op}.{elem}x2 %r4, " + ", ".join(f"%r{i + 1}" for i in range(n)) + ";"
    ptx = _packed_kernel(stmt)
    _ptxas_ok(ptx, tmp_path)
    rng = np.random.default_rng()
    ins = [_halves(rng, elem) for _ in range(3)]  # element 0 of lane i in the low half of word i
    out = np.full(32, 0xDEADBEEF, dtype=np.uint32)
    args = [Arg("buffer", "uint32", array=out)] + [Arg("buffer", "uint32", array=h.view(np.uint32)) for h in ins]
    res = run_functional(parse_ptx(ptx, "packed.ptx"), Launch("k", (1, 1, 1), (32, 1, 1), args))
    got = res.outputs[0].view(np.uint16)
    exact = ref(*[_to_f64(h, elem) for h in ins])
    want = exact.astype(np.float16).view(np.uint16) if elem == "f16" else _round_bf16(exact)
    assert np.array_equal(got, want), (stmt, got[:4], want[:4])


@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("elem", ["f16", "bf16"])
def test_cvt_packs_two_f32(elem, relu, tmp_path):
    """cvt.rn{.relu}.{f16x2,bf16x2}.f32 d, a, b: a rounded into the high half, b into the low half."""
    stmt = f"cvt.rn{'.relu' if relu else ''}.{elem}x2.f32 %r4, %r1, %r2;"
    ptx = _packed_kernel(stmt)
    _ptxas_ok(ptx, tmp_path)
    rng = np.random.default_rng()
    a, b = (rng.standard_normal(32).astype(np.float32) * 7 for _ in range(2))
    out = np.full(32, 0xDEADBEEF, dtype=np.uint32)
    args = [Arg("buffer", "uint32", array=out)] + [Arg("buffer", "uint32", array=x.view(np.uint32))
                                                   for x in (a, b, b)]
    got = run_functional(parse_ptx(ptx, "cvt.ptx"), Launch("k", (1, 1, 1), (32, 1, 1), args)).outputs[0]

    def rounded(x: np.ndarray) -> np.ndarray:
        x = np.maximum(x, 0).astype(np.float64) if relu else x.astype(np.float64)
        return x.astype(np.float16).view(np.uint16) if elem == "f16" else _round_bf16(x)

    want = (rounded(a).astype(np.uint32) << 16) | rounded(b).astype(np.uint32)
    assert np.array_equal(got, want)
