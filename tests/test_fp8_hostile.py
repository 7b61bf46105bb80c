"""Hostile inputs on the block-scaled fp8 path (session 15 sweep): each one line on stderr naming the file and
the fix, exit 2, nothing half-written, no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelgen.cli import main as kernelgen_main
from kernelgen.spec import parse_spec, shorthand
from sim.errors import UsageError


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
