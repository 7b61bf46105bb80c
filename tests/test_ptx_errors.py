"""Malformed or unsupported PTX gets a one-line error naming file:line; the CLI exits 2."""

from __future__ import annotations

import subprocess
import sys

import pytest

from sim.errors import PtxError
from sim.ptx.parser import parse_ptx

GOOD = """.version 8.0
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 k_out)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [k_out];
    mov.u32 %r1, %tid.x;
    st.global.u32 [%rd1], %r1;
    ret;
}
"""


def _err(text: str) -> str:
    with pytest.raises(PtxError) as e:
        parse_ptx(text, "bad.ptx")
    return e.value.one_line()


def test_good_parses():
    prog = parse_ptx(GOOD, "good.ptx")
    k = prog.kernel()
    assert [i.full for i in k.body] == ["ld.param.u64", "mov.u32", "st.global.u32", "ret"]
    assert [i.line for i in k.body] == [8, 9, 10, 11]


def test_syntax_error_names_line():
    msg = _err(GOOD.replace("mov.u32 %r1, %tid.x;", "mov.u32 %r1 %tid.x;"))
    assert msg.startswith("bad.ptx:9: ") and "expected ','" in msg


def test_unknown_instruction_names_line_and_text():
    msg = _err(GOOD.replace("mov.u32 %r1, %tid.x;", "frobnicate.u32 %r1, %r2;"))
    assert msg.startswith("bad.ptx:9: unsupported instruction 'frobnicate.u32'")
    assert "docs/ptx-subset.md" in msg


def test_undeclared_register():
    msg = _err(GOOD.replace("mov.u32 %r1, %tid.x;", "mov.u32 %r9, %tid.x;"))
    assert msg.startswith("bad.ptx:9: register %r9 is used but not declared")


def test_unknown_label():
    msg = _err(GOOD.replace("ret;", "bra NOWHERE;"))
    assert msg.startswith("bad.ptx:11: 'NOWHERE' is not a declared label")


def test_bad_character_and_missing_brace():
    assert _err(GOOD.replace("ret;", "ret; #")).startswith("bad.ptx:11: unexpected character '#'")
    assert "end of file" in _err(GOOD.rstrip().rstrip("}"))


def test_cli_exit_2_one_line(tmp_path):
    bad = tmp_path / "bad.ptx"
    bad.write_text(GOOD.replace("mov.u32 %r1, %tid.x;", "frobnicate.u32 %r1, %r2;"))
    p = subprocess.run([sys.executable, "-m", "sim", "run", str(bad), "--hw", "npu7nm.yaml",
                        "--grid", "1,1,1", "--block", "32,1,1", "--arg", "zeros:u32:1"],
                       capture_output=True, text=True)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{bad}:9: unsupported instruction")
    assert not p.stdout


def test_cli_bad_arg_exit_2(tmp_path):
    good = tmp_path / "good.ptx"
    good.write_text(GOOD)
    p = subprocess.run([sys.executable, "-m", "sim", "run", str(good), "--hw", "npu7nm.yaml",
                        "--grid", "1,1,1", "--block", "32,1,1", "--arg", "1.5"],
                       capture_output=True, text=True)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1


def test_cli_runs_and_writes_outputs(tmp_path):
    import numpy as np

    good = tmp_path / "good.ptx"
    good.write_text(GOOD)
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, "-m", "sim", "run", str(good), "--hw", "npu7nm.yaml",
                        "--grid", "1,1,1", "--block", "32,1,1", "--arg", "zeros:u32:1", "--out", str(out),
                        "--json"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    import json

    r = json.loads(p.stdout)
    assert r["warp_instructions"] == 4
    assert np.load(out / "arg0.npy").tolist() == [31]  # the last lane's store wins
