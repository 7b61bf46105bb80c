"""Hostile inputs on the block-scaled fp8 path (session 15 sweep): each one line on stderr naming the file and
the fix, exit 2, nothing half-written, no traceback."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kernelgen.cli import main as kernelgen_main
from kernelgen.spec import parse_spec, shorthand
from sim.cli import main as sim_main
from sim.errors import UsageError
from sim.launch import Arg
from sim.reference import check_gemm


def _fp8(**extra):
    return {"M": 64, "N": 64, "K": 64, "dtype": "e5m2", "scale": "block128", **extra}


@pytest.mark.parametrize("data,msg", [
    (_fp8(alpha=float("nan")), "'alpha': expected a finite number"),
    (_fp8(beta=float("inf")), "'beta': expected a finite number"),
    ({"M": 100000, "N": 64, "K": 100000}, "M x K = 100000 x 100000 = 10,000,000,000 elements do not fit"),
    ({"M": 65536, "N": 65536, "K": 16}, "M x N = 65536 x 65536"),
    (_fp8(dtype={"a": "e5m2", "b": "f16"}), "share a dtype .*fp8 mixes with fp8 only"),
    (_fp8(dtype={"b": 5}), "'dtype.b': 5 is not one of"),
])
def test_spec_refuses(data, msg):
    with pytest.raises(UsageError, match=msg):
        parse_spec(data, "s.yaml")


def test_spec_b_alone_sets_both():
    """dtype {b: e5m2} gives A e5m2 too (as {a: e5m2} gives B e5m2), not A f16 and 'must share a dtype'."""
    s = parse_spec(_fp8(dtype={"b": "e5m2"}))
    assert (s.dtype_a, s.dtype_b) == ("e5m2", "e5m2")
    assert parse_spec({"M": 64, "N": 64, "K": 64, "dtype": {"b": "bf16"}}).dtype_a == "bf16"


def test_gemm_shorthand_fp8_k_range_runs_multiples_of_16(tmp_path: Path, capsys):
    """--gemm MxNxLO..HI --dtype e5m2: K steps of 16 implied (as s4 implies even K); the .ko module compiles."""
    s = shorthand("256x256x16..4096", "e5m2", "bf16")
    assert (s.K.lo, s.K.hi, s.K.multiple_of) == (16, 4096, 16)
    assert kernelgen_main(["compile", "--hw", "h200", "--gemm", "256x256x16..4096", "--dtype", "e5m2", "--variant",
                           "wgmma_fp8", "--no-cubin", "-o", str(tmp_path / "m.ko")]) == 0
    capsys.readouterr()
    out = tmp_path / "o.ko"
    assert kernelgen_main(["compile", "--hw", "h200", "--gemm", "256x256x1..4096", "--dtype", "e5m2", "--variant",
                           "wgmma_fp8", "--no-cubin", "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "multiples of 16" in err[0] and "256x256x16..4096" in err[0]
    assert not out.exists()


def test_yaml_k_range_names_multiple_of(tmp_path: Path, capsys):
    spec = tmp_path / "s.yaml"
    spec.write_text("M: 256\nN: 256\nK: [16, 4096]\ndtype: e5m2\nscale: block128\n")
    assert kernelgen_main(["compile", "--hw", "h200", "--op", str(spec), "--variant", "wgmma_fp8",
                           "-o", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "multiple_of: 16" in err[0] and not (tmp_path / "o").exists()


def _compiled(tmp_path: Path) -> tuple[str, dict]:
    assert kernelgen_main(["compile", "--hw", "h200", "--gemm", "64x64x128", "--dtype", "e5m2", "--variant",
                           "wgmma_fp8", "-o", str(tmp_path / "k")]) == 0
    text = (tmp_path / "k" / "kernel.ptx").read_text()
    first, rest = text.split("\n", 1)
    return rest, json.loads(first[len("// @workbench "):])


@pytest.mark.parametrize("edit,msg", [
    (lambda m: m["check"].update(block_scale=-128), "block_scale must be a positive integer"),
    (lambda m: m["check"].update(block_scale="128"), "block_scale must be a positive integer"),
    (lambda m: m["check"].update(rtol="x"), "rtol must be a non-negative number"),
    (lambda m: m["check"].update(K="many"), "K must be an integer"),
    (lambda m: m["params"][0].update(dtype="e6m2"), "unknown dtype 'e6m2'"),
])
def test_sim_header_errors_name_the_file_and_line(tmp_path: Path, capsys, edit, msg):
    """A bad header or check in an fp8 kernel: one line 'FILE:1: ...', exit 2 (block_scale -128 and rtol 'x' were
    'internal error: ValueError'; header errors named no file)."""
    rest, meta = _compiled(tmp_path)
    edit(meta)
    bad = tmp_path / "bad.ptx"
    bad.write_text("// @workbench " + json.dumps(meta) + "\n" + rest)
    capsys.readouterr()
    assert sim_main(["run", str(bad), "--hw", "h200", "--functional"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"{bad}:1: ") and msg in err[0], err


def test_block_scale_larger_than_n_is_cheap():
    """The reference spreads scale_b over N by index (it built G copies per K block: block_scale 1e9 took 33 s)."""
    rng = np.random.default_rng(0)
    M, N, K, G = 4, 3, 8, 10 ** 9
    A, B = rng.standard_normal(M * K), rng.standard_normal(K * N)
    sa, sb, D = np.full(M, 2.0), np.full(1, 3.0), np.zeros(M * N)
    args = [Arg("buffer", "f64", array=a, role=r) for a, r in ((A, "A"), (B, "B"), (sa, "scale_a"), (sb, "scale_b"),
                                                                (D, "D"))]
    roles = ["A", "B", "scale_a", "scale_b", "D"]
    want = 6.0 * (A.reshape(M, K) @ B.reshape(K, N))
    r = check_gemm({"op": "gemm", "M": M, "N": N, "K": K, "block_scale": G}, args, {4: want.ravel()}, roles)
    assert r["passed"] and r["max_rel_err"] < 1e-12


@pytest.mark.parametrize("extra,flag", [
    (["--shape", "256x256x256"], "--shape"),
    (["--dtype", "e5m2"], "--dtype"),
    (["--out-dtype", "f32"], "--out-dtype"),
])
def test_compile_refuses_flags_a_yaml_spec_overrides(tmp_path: Path, capsys, extra, flag):
    """--shape / --dtype / --out-dtype beside a YAML spec were dropped without a word (the spec's 200x136x272 e4m3 x
    e5m2 kernel came out for --shape 256x256x250 or --dtype f16)."""
    spec = Path(__file__).parent.parent / "examples" / "gemm_fp8_mixed.yaml"
    out = tmp_path / "o"
    assert kernelgen_main(["compile", "--hw", "h200", "--op", str(spec), *extra, "--variant", "wgmma_fp8",
                           "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"{spec}: {flag} ") and "drop " + flag in err[0], err
    assert not out.exists()
    assert kernelgen_main(["compile", "--hw", "h200", "--gemm", "64x64x64", "--shape", "32x32x32",
                           "-o", str(out)]) == 2
    assert "drop --shape" in capsys.readouterr().err and not out.exists()
