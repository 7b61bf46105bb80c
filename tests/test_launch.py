"""sim.launch (arg specs, metadata, bf16) and sim.reference (the GEMM check)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from sim.errors import UsageError
from sim.launch import (
    DTYPES,
    Arg,
    Launch,
    bf16_bits_to_f32,
    buffer_to_float64,
    f32_to_bf16_bits,
    launch_from_metadata,
    parse_arg_spec,
    parse_dim3,
    poison_array,
    read_metadata,
    split_named,
)
from sim.reference import check_from_metadata, check_gemm, gemm_reference

# ------------------------------------------------------------------------------------------
# dtypes and bf16


def test_dtype_table_covers_names_and_ptx_spellings():
    for name, np_t in [("f16", np.float16), ("f32", np.float32), ("f64", np.float64), ("i8", np.int8),
                       ("s32", np.int32), ("u64", np.uint64), ("b16", np.uint16), ("bf16", np.uint16),
                       ("i64", np.int64), ("u8", np.uint8)]:
        assert DTYPES[name] == np.dtype(np_t)


@pytest.mark.parametrize(
    "value, bits",
    [
        (1.0, 0x3F80),
        (-2.0, 0xC000),
        (0.0, 0x0000),
        (-0.0, 0x8000),
        (math.inf, 0x7F80),
        (-math.inf, 0xFF80),
        (3.140625, 0x4049),  # exactly representable
    ],
)
def test_bf16_known_patterns(value, bits):
    assert int(f32_to_bf16_bits(np.float32(value))) == bits
    assert float(bf16_bits_to_f32(np.uint16(bits))) == value


def _f32(bits: int) -> np.float32:
    return np.array([bits], dtype=np.uint32).view(np.float32)[0]


def test_bf16_round_to_nearest_even():
    # 0x3F80_8000 is halfway between 0x3F80 and 0x3F81: ties go to the even 0x3F80
    assert int(f32_to_bf16_bits(_f32(0x3F808000))) == 0x3F80
    # 0x3F81_8000 is halfway between 0x3F81 and 0x3F82: ties go to the even 0x3F82
    assert int(f32_to_bf16_bits(_f32(0x3F818000))) == 0x3F82
    # just above / below the halfway point
    assert int(f32_to_bf16_bits(_f32(0x3F808001))) == 0x3F81
    assert int(f32_to_bf16_bits(_f32(0x3F807FFF))) == 0x3F80
    # rounding carries into the exponent; the largest finite value rounds up to infinity
    assert int(f32_to_bf16_bits(_f32(0x3FFFFFFF))) == 0x4000
    assert int(f32_to_bf16_bits(_f32(0x7F7FFFFF))) == 0x7F80


def test_bf16_nan_stays_nan_and_roundtrip_array():
    b = f32_to_bf16_bits(np.array([np.nan, -np.nan], dtype=np.float32))
    assert np.all(np.isnan(bf16_bits_to_f32(b)))
    x = np.array([0.5, -1.75, 1024.0, 1e-3], dtype=np.float32)
    back = bf16_bits_to_f32(f32_to_bf16_bits(x))
    assert back.dtype == np.float32
    np.testing.assert_allclose(back, x, rtol=2**-8)
    assert buffer_to_float64(f32_to_bf16_bits(x), "bf16").dtype == np.float64


# ------------------------------------------------------------------------------------------
# metadata


def test_read_metadata_first_line_only():
    text = ('// @workbench {"version": 1, "kernel": "k"}\n'
            '// @workbench {"version": 1, "kernel": "other"}\n.version 8.0\n')
    assert read_metadata(text) == {"version": 1, "kernel": "k"}
    assert read_metadata(".version 8.0\n.target sm_90\n") is None


def test_read_metadata_malformed_names_the_line():
    text = '.version 8.0\n// comment\n// @workbench {"version": 1,\n'
    with pytest.raises(UsageError) as e:
        read_metadata(text, file="k.ptx")
    assert e.value.line == 3
    assert e.value.one_line().startswith("k.ptx:3: malformed @workbench metadata JSON")
    with pytest.raises(UsageError, match="one JSON object"):
        read_metadata("// @workbench [1, 2]\n")


def _gemm_meta(M=6, N=5, K=7, **check):
    chk = {"op": "gemm", "M": M, "N": N, "K": K, "layout_a": "row", "layout_b": "row",
           "layout_c": "row", "alpha": 1.0, "beta": 0.0, "out_dtype": "f32", "rtol": 1e-6}
    chk.update(check)
    return {
        "version": 1, "kernel": "gemm", "grid": [2, 1, 1], "block": [32, 4, 1], "dynamic_shared": 1024,
        "params": [
            {"name": "A", "kind": "buffer", "dtype": "f32", "role": "A", "count": M * K, "init": "random"},
            {"name": "B", "kind": "buffer", "dtype": "bf16", "role": "B", "count": K * N, "init": "random"},
            {"name": "C", "kind": "buffer", "dtype": "f16", "role": "C", "count": M * N, "init": "random"},
            {"name": "bias", "kind": "buffer", "dtype": "f32", "role": "bias", "count": N, "init": "random"},
            {"name": "D", "kind": "buffer", "dtype": "f32", "role": "D", "count": M * N, "init": "poison"},
            {"name": "idx", "kind": "buffer", "dtype": "i32", "role": "", "count": 64, "init": "random"},
            {"name": "prof", "kind": "buffer", "dtype": "u64", "role": "profile", "count": 4,
             "init": "zeros"},
            {"name": "M", "kind": "scalar", "dtype": "u32", "role": "M", "value": M},
            {"name": "alpha", "kind": "scalar", "dtype": "f32", "role": "alpha", "value": 1},
        ],
        "check": chk,
    }


def test_launch_from_metadata():
    meta = _gemm_meta()
    launch = launch_from_metadata(meta, np.random.default_rng(1))
    assert launch.kernel == "gemm" and launch.grid == (2, 1, 1) and launch.block == (32, 4, 1)
    assert launch.dynamic_shared == 1024
    A, B, C, bias, D, idx, prof, M, alpha = launch.args
    assert A.array.dtype == np.float32 and A.array.size == 42 and np.any(A.array)
    assert B.dtype == "bf16" and B.array.dtype == np.uint16
    assert np.all(np.isfinite(bf16_bits_to_f32(B.array))) and np.any(bf16_bits_to_f32(B.array))
    assert C.array.dtype == np.float16
    assert np.all(np.isnan(D.array)) and D.init == "poison" and D.role == "D"
    assert idx.array.dtype == np.int32 and np.any(idx.array) and np.all(np.abs(idx.array) < 8)
    assert prof.array.dtype == np.uint64 and not np.any(prof.array)
    assert (M.kind, M.dtype, M.value) == ("scalar", "u32", 6)
    assert alpha.value == 1.0 and isinstance(alpha.value, float)
    assert launch.roles[:5] == ["A", "B", "C", "bias", "D"]
    # same seed, same data
    again = launch_from_metadata(meta, np.random.default_rng(1))
    assert np.array_equal(again.args[0].array, A.array)


def test_launch_from_metadata_errors():
    meta = _gemm_meta()
    del meta["grid"]
    with pytest.raises(UsageError, match="'grid' is missing"):
        launch_from_metadata(meta, np.random.default_rng(0))
    meta = _gemm_meta()
    meta["params"][0]["init"] = "ones"
    with pytest.raises(UsageError, match="init must be random, poison or zeros"):
        launch_from_metadata(meta, np.random.default_rng(0))
    meta = _gemm_meta()
    meta["params"][0]["dtype"] = "f8"
    with pytest.raises(UsageError, match="unknown dtype"):
        launch_from_metadata(meta, np.random.default_rng(0))


def test_poison_values():
    assert np.all(np.isnan(poison_array("f16", 3)))
    assert np.all(np.isnan(bf16_bits_to_f32(poison_array("bf16", 3))))
    assert np.all(poison_array("i32", 3) == -1)
    assert np.all(poison_array("u8", 3) == 0xFF)


def test_random_ints_never_all_zero():
    meta = {"kernel": "k", "grid": [1], "block": [1],
            "params": [{"name": "x", "kind": "buffer", "dtype": "u8", "count": 1, "init": "random"}]}
    for seed in range(30):
        assert launch_from_metadata(meta, np.random.default_rng(seed)).args[0].array[0] != 0


# ------------------------------------------------------------------------------------------
# dim3 and arg specs


def test_parse_dim3():
    assert parse_dim3("8,4,1") == (8, 4, 1)
    assert parse_dim3("8") == (8, 1, 1)
    assert parse_dim3("8, 2") == (8, 2, 1)
    for bad in ("", "8,4,1,1", "a,b", "0,1,1", "-2"):
        with pytest.raises(UsageError, match="e.g. 8,4,1"):
            parse_dim3(bad)


def test_split_named():
    assert split_named("n=1024") == ("n", "1024")
    assert split_named("saxpy_param_2=@x.npy") == ("saxpy_param_2", "@x.npy")
    assert split_named("1024") == (None, "1024")
    assert split_named("zeros:f32:4") == (None, "zeros:f32:4")
    assert split_named("@dir/a=b.npy") == (None, "@dir/a=b.npy")


def test_scalar_literals():
    a = parse_arg_spec("1024", ".u32", 0)
    assert (a.kind, a.dtype, a.value) == ("scalar", "u32", 1024)
    assert parse_arg_spec("0x40", "u64", 1).value == 64
    assert parse_arg_spec("-3", ".s32", 2).value == -3
    f = parse_arg_spec("2.5", ".f32", 3)
    assert (f.dtype, f.value) == ("f32", 2.5)
    assert parse_arg_spec("1e-3", "f64", 3).value == 1e-3
    g = parse_arg_spec("2", ".f32", 4)  # an integer literal for a float parameter is fine
    assert g.value == 2.0 and isinstance(g.value, float)


def test_scalar_literal_errors():
    with pytest.raises(UsageError, match=r"argument 0 \('1.5'\): float literal for an integer .u32"):
        parse_arg_spec("1.5", ".u32", 0)
    with pytest.raises(UsageError, match=r"argument 1 \('-1'\): -1 does not fit a .u32 parameter"):
        parse_arg_spec("-1", ".u32", 1)
    with pytest.raises(UsageError, match=r"argument 2 \('4294967296'\).*does not fit"):
        parse_arg_spec("4294967296", "u32", 2)
    with pytest.raises(UsageError, match=r"argument 3 \('abc'\): not a number, @file.npy or zeros:DTYPE"):
        parse_arg_spec("abc", ".f32", 3)
    with pytest.raises(UsageError, match="empty value"):
        parse_arg_spec("", ".f32", 3)
    with pytest.raises(UsageError, match="parameter type '.pred' is not supported"):
        parse_arg_spec("1", ".pred", 0)


def test_zeros_buffer():
    a = parse_arg_spec("zeros:f32:4096", ".u64", 3)
    assert a.kind == "buffer" and a.dtype == "f32" and a.init == "zeros"
    assert a.array.shape == (4096,) and a.array.dtype == np.float32 and not np.any(a.array)
    b = parse_arg_spec("zeros:bf16:64*64", "u64", 0)
    assert b.array.dtype == np.uint16 and b.array.size == 4096 and b.dtype == "bf16"
    assert parse_arg_spec("zeros:s32:2", "u64", 0).dtype == "i32"


def test_zeros_errors():
    with pytest.raises(UsageError, match=r"argument 3 \('zeros:f32'\): write zeros:DTYPE:COUNT"):
        parse_arg_spec("zeros:f32", ".u64", 3)
    with pytest.raises(UsageError, match="unknown DTYPE 'f8'; use one of f16, bf16"):
        parse_arg_spec("zeros:f8:4", ".u64", 0)
    with pytest.raises(UsageError, match="COUNT 'many' is not an integer"):
        parse_arg_spec("zeros:f32:many", ".u64", 0)
    with pytest.raises(UsageError, match="COUNT must be >= 1"):
        parse_arg_spec("zeros:f32:0", ".u64", 0)
    with pytest.raises(UsageError, match=r"parameter is .u32, not a 64-bit pointer"):
        parse_arg_spec("zeros:f32:4", ".u32", 0)


def test_npy_buffer(tmp_path):
    x = np.arange(12, dtype=np.float16).reshape(3, 4)
    p = tmp_path / "x.npy"
    np.save(p, x)
    a = parse_arg_spec(f"@{p}", ".u64", 2)
    assert a.kind == "buffer" and a.dtype == "f16" and a.init == "file"
    assert a.array.shape == (12,) and np.array_equal(a.array, x.ravel())


def test_npy_errors(tmp_path):
    with pytest.raises(UsageError, match=r"argument 2 \('@nope.npy'\): file 'nope.npy' not found"):
        parse_arg_spec("@nope.npy", ".u64", 2)
    with pytest.raises(UsageError, match="write @FILE.npy"):
        parse_arg_spec("@", ".u64", 2)
    bad = tmp_path / "bad.npy"
    bad.write_text("not numpy")
    with pytest.raises(UsageError, match="cannot read .* as .npy"):
        parse_arg_spec(f"@{bad}", ".u64", 0)
    c = tmp_path / "c.npy"
    np.save(c, np.zeros(3, dtype=np.complex64))
    with pytest.raises(UsageError, match="has dtype complex64"):
        parse_arg_spec(f"@{c}", ".u64", 0)


# ------------------------------------------------------------------------------------------
# GEMM reference check


def _layout(mat: np.ndarray, layout: str) -> np.ndarray:
    return (mat if layout == "row" else mat.T).ravel().copy()


def _gemm_case(M, N, K, la="row", lb="row", lc="row", alpha=1.0, beta=0.0, epilogue=(), seed=0):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((M, K))
    B = rng.standard_normal((K, N))
    C = rng.standard_normal((M, N))
    bias = rng.standard_normal(N)
    ref = alpha * A @ B + beta * C
    for step in epilogue:
        if step == "bias":
            ref = ref + bias
        elif step == "relu":
            ref = np.maximum(ref, 0)
        elif step == "gelu":
            ref = 0.5 * ref * (1 + np.tanh(np.sqrt(2 / np.pi) * (ref + 0.044715 * ref**3)))
    args = [
        Arg("buffer", "f64", array=_layout(A, la), role="A"),
        Arg("buffer", "f64", array=_layout(B, lb), role="B"),
        Arg("buffer", "f64", array=_layout(C, lc), role="C"),
        Arg("buffer", "f64", array=bias, role="bias"),
        Arg("buffer", "f64", array=poison_array("f64", M * N), role="D"),
    ]
    check = {"op": "gemm", "M": M, "N": N, "K": K, "layout_a": la, "layout_b": lb, "layout_c": lc,
             "alpha": alpha, "beta": beta, "epilogue": list(epilogue), "rtol": 1e-9}
    return check, args, [a.role for a in args], _layout(ref, lc)


def test_gemm_check_exact_passes_and_perturbed_fails():
    check, args, roles, d = _gemm_case(20, 40, 33)
    r = check_gemm(check, args, {4: d}, roles)
    assert r["passed"] and r["max_rel_err"] < 1e-12 and r["rtol"] == 1e-9
    bad = d.copy()
    bad[7] += 1.0
    r = check_gemm(check, args, {4: bad}, roles)
    assert not r["passed"] and r["max_rel_err"] > 1e-4
    nan = d.copy()
    nan[0] = np.nan
    r = check_gemm(check, args, {4: nan}, roles)
    assert not r["passed"] and r["max_rel_err"] == math.inf
    assert set(r) == {"passed", "max_rel_err", "rtol"}
    json.dumps(r)


@pytest.mark.parametrize("la, lb, lc", [("col", "row", "row"), ("row", "col", "row"), ("row", "row", "col"),
                                        ("col", "col", "col")])
def test_gemm_check_layouts(la, lb, lc):
    check, args, roles, d = _gemm_case(9, 13, 5, la, lb, lc, alpha=0.5, beta=2.0)
    assert check_gemm(check, args, {4: d}, roles)["passed"]
    # the same output read with the wrong C layout is wrong
    wrong = dict(check, layout_c="row" if lc == "col" else "col")
    assert not check_gemm(wrong, args, {4: d}, roles)["passed"]


@pytest.mark.parametrize("epilogue", [("bias",), ("relu",), ("gelu",), ("bias", "relu"), ("bias", "gelu")])
def test_gemm_check_epilogues(epilogue):
    check, args, roles, d = _gemm_case(8, 6, 4, alpha=1.5, beta=-0.5, epilogue=epilogue)
    assert check_gemm(check, args, {4: d}, roles)["passed"]
    plain = dict(check, epilogue=[])
    assert not check_gemm(plain, args, {4: d}, roles)["passed"]


def test_gemm_check_gelu_is_tanh_approximation():
    check, args, roles, _ = _gemm_case(4, 4, 3, epilogue=("gelu",))
    ref_tanh = gemm_reference(check, args, roles)
    ref_erf = gemm_reference(dict(check, epilogue=["gelu_erf"]), args, roles)
    assert 0 < np.max(np.abs(ref_tanh - ref_erf)) < 1e-2


def test_gemm_check_reduced_precision_and_inplace_c():
    M, N, K = 16, 8, 32
    rng = np.random.default_rng(3)
    A = rng.standard_normal((M, K)).astype(np.float16)
    B = f32_to_bf16_bits(rng.standard_normal((K, N)).astype(np.float32))
    C = rng.standard_normal((M, N)).astype(np.float32)
    ref = A.astype(np.float64) @ bf16_bits_to_f32(B).astype(np.float64) + C
    args = [Arg("buffer", "f16", array=A.ravel(), role="A"), Arg("buffer", "bf16", array=B.ravel(), role="B"),
            Arg("buffer", "f32", array=C.ravel(), role="D")]  # D holds C before the run (in place)
    check = {"op": "gemm", "M": M, "N": N, "K": K, "beta": 1.0, "rtol": 1e-2}
    out = ref.astype(np.float32).ravel()
    r = check_gemm(check, args, {2: out}, ["A", "B", "D"])
    assert r["passed"] and r["max_rel_err"] < 1e-6


def test_gemm_check_errors():
    check, args, roles, d = _gemm_case(4, 4, 4)
    with pytest.raises(UsageError, match="no parameter has role 'D'"):
        check_gemm(check, args, {4: d}, roles[:4] + [""])
    with pytest.raises(UsageError, match="unknown epilogue step 'silu'"):
        check_gemm(dict(check, epilogue=["silu"]), args, {4: d}, roles)
    with pytest.raises(UsageError, match="A holds 16 elements, needs 5x4"):
        check_gemm(dict(check, M=5), args, {4: d}, roles)
    with pytest.raises(UsageError, match="layout of A must be 'row' or 'col'"):
        check_gemm(dict(check, layout_a="diag"), args, {4: d}, roles)


def test_check_from_metadata():
    meta = _gemm_meta(M=6, N=5, K=7, alpha=2.0, beta=1.0, epilogue=["bias", "relu"])
    launch = launch_from_metadata(meta, np.random.default_rng(0))
    A = launch.args[0].array.astype(np.float64).reshape(6, 7)
    B = bf16_bits_to_f32(launch.args[1].array).astype(np.float64).reshape(7, 5)
    C = launch.args[2].array.astype(np.float64).reshape(6, 5)
    bias = launch.args[3].array.astype(np.float64)
    D = np.maximum(2.0 * A @ B + C + bias, 0).astype(np.float32).ravel()
    r = check_from_metadata(meta, launch, {4: D})
    assert r["passed"], r
    assert check_from_metadata({"kernel": "k"}, launch, {}) is None
    with pytest.raises(UsageError, match="unknown check op 'conv'"):
        check_from_metadata(dict(meta, check={"op": "conv"}), launch, {4: D})


def test_launch_copy_is_deep():
    launch = Launch("k", (1, 1, 1), (32, 1, 1), [Arg("buffer", "f32", array=np.ones(4, np.float32))])
    c = launch.copy()
    c.args[0].array[0] = 5
    assert launch.args[0].array[0] == 1


# ------------------------------------------------------------------------------------------
# one --arg binder: python -m sim run and python -m validation gpu bind the same specs alike

_SAXPY = Path(__file__).parent / "data" / "gpu" / "saxpy.ptx"
_SAXPY_META = {
    "version": 1, "kernel": "saxpy", "grid": [8, 1, 1], "block": [128, 1, 1],
    "params": [
        {"name": "saxpy_param_0", "kind": "scalar", "dtype": "u32", "role": "n", "value": 1000},
        {"name": "saxpy_param_1", "kind": "scalar", "dtype": "f32", "role": "a", "value": 2.5},
        {"name": "saxpy_param_2", "kind": "buffer", "dtype": "f32", "role": "x", "count": 1000, "init": "random"},
        {"name": "saxpy_param_3", "kind": "buffer", "dtype": "f32", "role": "y", "count": 1000, "init": "poison"},
    ],
}


def _launch(tmp_path: Path, command: str, header: dict | None, cli: list[str]) -> Launch:
    """The launch ``python -m sim run`` or ``python -m validation gpu`` builds (no GPU needed)."""
    from sim.cli import build_launch as sim_launch
    from sim.cli import build_parser as sim_parser
    from sim.ptx.parser import parse_file
    from validation.__main__ import build_parser as validation_parser
    from validation.gpu import build_launch as gpu_launch

    path = tmp_path / "k.ptx"
    path.write_text((f"// @workbench {json.dumps(header)}\n" if header else "") + _SAXPY.read_text())
    if command == "sim":
        args = sim_parser().parse_args(["run", str(path), "--hw", "npu7nm.yaml", "--seed", "0", *cli])
        prog = parse_file(str(path))
        return sim_launch(prog, args, read_metadata(prog.text, str(path)), np.random.default_rng(0))
    argv = ["gpu", str(path), "--seed", "0", *cli]
    return gpu_launch(path.read_text(), str(path), validation_parser(argv).parse_args(argv))[0]


@pytest.mark.parametrize("header, cli", [
    (None, ["--kernel", "saxpy", "--grid", "8", "--block", "128", "--arg", "1000", "--arg", "2",
            "--arg", "zeros:f32:1000", "--arg", "zeros:f32:1000"]),
    (None, ["--kernel", "saxpy", "--grid", "8,1,1", "--block", "128", "--arg", "16", "--arg", "0.5",
            "--arg", "p3=zeros:f32:1000", "--arg", "saxpy_param_2=@X", "--shared", "64"]),
    (_SAXPY_META, []),
    (_SAXPY_META, ["--grid", "2", "--arg", "256", "--arg", "saxpy_param_3=zeros:f32:256"]),
])
def test_cli_binders_agree(tmp_path, header, cli):
    x = tmp_path / "x.npy"
    np.save(x, np.arange(1000, dtype=np.float32))
    cli = [c.replace("@X", f"@{x}") for c in cli]
    a, b = (_launch(tmp_path, command, header, cli) for command in ("sim", "gpu"))
    assert (a.kernel, a.grid, a.block, a.dynamic_shared) == (b.kernel, b.grid, b.block, b.dynamic_shared)
    assert len(a.args) == len(b.args) == 4
    for x, y in zip(a.args, b.args):
        assert (x.kind, x.dtype, x.value, x.name, x.role, x.init) == (y.kind, y.dtype, y.value, y.name, y.role, y.init)
        if x.kind == "buffer":
            assert x.array.dtype == y.array.dtype
            np.testing.assert_array_equal(x.array, y.array)


@pytest.mark.parametrize("cli, message", [
    (["--arg", "1"], "no @workbench header: give --grid X,Y,Z --block X,Y,Z"),
    (["--grid", "8", "--block", "128", "--arg", "1.5"], "argument 0 ('1.5'): float literal"),
    (["--grid", "8", "--block", "128", "--arg", "8", "--arg", "2.0"],
     "parameter 2 (saxpy_param_2) is not bound; add --arg"),
    (["--grid", "8", "--block", "128", "--arg", "q=1"], "'q' is not a parameter of 'saxpy'"),
    (["--grid", "8", "--block", "128", *["--arg", "1"] * 5], "'saxpy' takes only 4 parameters"),
    (["--grid", "8", "--block", "128", "--arg", "zeros:f32:4"], "not a 64-bit pointer"),
])
def test_cli_binders_reject_alike(tmp_path, cli, message):
    errors = []
    for command in ("sim", "gpu"):
        with pytest.raises(UsageError) as e:
            _launch(tmp_path, command, None, ["--kernel", "saxpy", *cli])
        errors.append(e.value.message)
    assert errors[0] == errors[1] and message in errors[0]
