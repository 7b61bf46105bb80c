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


# -- front-end validation (sim/ptx/check.py): each rule against ptxas -----------------------------

CHECK_BASE = """.version 8.0
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 k_out)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    .reg .pred %p<2>;
    .reg .f32 %f<2>;
    ld.param.u64 %rd1, [k_out];
    STMT
    st.global.u32 [%rd1], %r1;
    ret;
}
"""

# (text replacement, what our message says, its line); ptxas rejects every one of these too
BOTH_REJECT = [
    (("STMT", "mov.u32 %r2, 99999999999999999999999;"), "does not fit 64 bits", 11),
    (("STMT", "mov.u32 %r2, 0xFFFFFFFFFFFFFFFFF;"), "does not fit 64 bits", 11),
    (("STMT", "mov.u32 %r2, 08;"), "expected ','", 11),
    (("STMT", "add.s32 %r2, %r1, 1.5;"), "float literal", 11),
    (("STMT", "add.s32 %r2, %r1, 0f3F800000;"), "float literal", 11),
    (("STMT", "mov.u32 %r2, 0f3F800000;"), "float literal", 11),
    (("STMT", "add.f32 %f1, %f1, 1;"), "integer literal 1 for a .f32", 11),
    (("STMT", "add.s32 %r2, %rd1, 1;"), "%rd1 is .b64 (64 bits), the operand of .s32 needs 32", 11),
    (("STMT", "add.u64 %rd2, %rd1, %r1;"), "%r1 is .b32 (32 bits)", 11),
    (("STMT", "add.s32 %r2, %p1, 1;"), "%p1 is .pred, the operand needs a 32-bit register", 11),
    (("STMT", "st.global.u32 [%rd1], %p1;"), "%p1 is .pred", 11),
    (("STMT", "selp.b32 %r2, %r1, %r3, %r1;"), "%r1 is .b32, the operand needs a .pred register", 11),
    (("STMT", "setp.eq.s32 %p1, %rd1, 0;"), "%rd1 is .b64", 11),
    (("STMT", "shl.b32 %r1, %r2, %rd1;"), "%rd1 is .b64", 11),
    (("STMT", "mov.u32 %r1, %f1;"), "%f1 is .f32, the operand needs .u32", 11),
    (("STMT", "mul.wide.u32 %r1, %r1, %r1;"), "%r1 is .b32 (32 bits), the operand of .u32 needs 64", 11),
    (("STMT", "add.s32.approx.sync %r2, %r1, 1;"), "illegal modifier .approx for 'add'", 11),
    (("STMT", "add.rn.s32.sync %r2, %r1, 1;"), "illegal modifier .sync for 'add'", 11),
    (("STMT", "ld.global.u32 %r2, [%rd1+99999999999999999999999];"), "address offset", 11),
    (("STMT", "rem.f32 %f1, %f1, %f1;"), "'rem' does not take .f32", 11),
    (("STMT", "and.f32 %f1, %f1, %f1;"), "'and' does not take .f32", 11),
    ((".address_size 64", ".address_size 0"), ".address_size 0 is not allowed", 3),
    ((".target sm_90a", ".target sm_1234"), "unknown .target 'sm_1234'", 2),
    ((".target sm_90a", ".target sm_90a, bogus"), "unknown .target 'bogus'", 2),
]

# ptxas 13.0 accepts these (it truncates the literal; a 65-bit offset wraps): the simulator is stricter
STRICTER_THAN_PTXAS = [
    (("    .reg .f32 %f<2>;", "    .reg .f32 %f<2>;\n    .reg .b128 %q<2>;"), "registers of type .b128"),  # unsupported
    (("STMT", "mov.u32 %r2, 18446744073709551617;"), "integer literal 18446744073709551617 does not fit 64"),
    (("STMT", "mov.u32 %r2, 4294967296;"), "does not fit .u32 (range -2147483648..4294967295)"),
    (("STMT", "ld.global.u32 %r2, [%rd1+18446744073709551616];"), "address offset 18446744073709551616"),
]


def _ptxas_rejects(text: str, tmp_path) -> bool:
    f = tmp_path / "k.ptx"
    f.write_text(text)
    r = subprocess.run(["ptxas", "-arch=sm_90a", str(f), "-o", str(tmp_path / "k.cubin")],
                       capture_output=True, text=True)
    return r.returncode != 0


@pytest.mark.parametrize("edit, says, line", BOTH_REJECT)
def test_front_end_rejects_as_ptxas_does(edit, says, line, tmp_path):
    import shutil

    good = CHECK_BASE.replace("STMT", "mov.u32 %r1, 7;")
    text = (good if edit[0] != "STMT" else CHECK_BASE).replace(*edit)
    msg = _err(text)
    assert msg.startswith(f"bad.ptx:{line}: ") and says in msg, msg
    parse_ptx(good, "good.ptx")
    if shutil.which("ptxas"):
        assert not _ptxas_rejects(good, tmp_path) and _ptxas_rejects(text, tmp_path)


@pytest.mark.parametrize("edit, says", STRICTER_THAN_PTXAS)
def test_front_end_stricter_than_ptxas(edit, says):
    assert says in _err(CHECK_BASE.replace(*edit))


def test_duplicate_entry_rejected(tmp_path):
    import shutil

    one = CHECK_BASE.replace("STMT", "mov.u32 %r1, 7;")
    text = one + one[one.index(".visible"):]
    assert _err(text).startswith("bad.ptx:15: duplicate definition of entry k")
    if shutil.which("ptxas"):
        assert _ptxas_rejects(text, tmp_path)


def test_accepted_forms_ptxas_also_accepts(tmp_path):
    """Relaxed rules PTX allows: .b registers for floats, wider registers for ld/st/cvt, bit-typed
    hex floats, negative literals for unsigned types, octal and binary literals."""
    import shutil

    stmts = ["add.f32 %f1, %r1, %f1;", "mov.f32 %f1, %r1;", "and.b32 %r1, %f1, 3;", "mov.b32 %r1, 0f3F800000;",
             "ld.global.u32 %rd2, [%rd1];", "cvt.u16.u32 %r1, %r2;", "add.u32 %r2, %r1, -1;",
             "mov.u32 %r2, 017;", "mov.u32 %r2, 0b101;", "mad.wide.u32 %rd2, %r1, %r2, %rd1;",
             "popc.b64 %r1, %rd1;", "ld.global.nc.L1::no_allocate.v2.u32 {%r2, %r3}, [%rd1];"]
    for s in stmts:
        text = CHECK_BASE.replace("STMT", s)
        parse_ptx(text, "ok.ptx")
        if shutil.which("ptxas"):
            assert not _ptxas_rejects(text, tmp_path), s


def _two_entries(bad_stmt: str) -> str:
    good = GOOD.replace(".entry k(", ".entry good(").replace("k_out", "g_out")
    bad = GOOD[GOOD.index(".visible"):].replace(".entry k(", ".entry bad(").replace(
        "mov.u32 %r1, %tid.x;", bad_stmt)
    return good + bad


def test_bad_entry_reported_when_asked_for_only():
    prog = parse_ptx(_two_entries("frobnicate.u32 %r1, %r2;"), "two.ptx")
    assert [i.full for i in prog.kernel("good").body][0] == "ld.param.u64"
    with pytest.raises(PtxError) as e:
        prog.kernel("bad")
    assert e.value.one_line().startswith("two.ptx:18: unsupported instruction 'frobnicate.u32'")
    with pytest.raises(Exception, match="2 kernels \\(good, bad\\)"):
        prog.kernel()


def test_check_all_lists_every_entry(tmp_path):
    f = tmp_path / "two.ptx"
    f.write_text(_two_entries("add.s32.approx %r1, %r1, 1;"))
    p = subprocess.run([sys.executable, "-m", "sim", "run", str(f), "--check-all"], capture_output=True, text=True)
    assert p.returncode == 2, p.stderr
    assert p.stdout.splitlines() == ["good: ok", f"bad: {f}:18: illegal modifier .approx for 'add' (allowed: "
                                     ".cc .ftz .rm .rn .rp .rz .sat) in 'add.s32.approx %r1, %r1, 1;'"]
    p = subprocess.run([sys.executable, "-m", "sim", "run", str(f), "--kernel", "good", "--hw", "npu7nm.yaml",
                        "--grid", "1", "--block", "32", "--arg", "zeros:u32:1"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    f.write_text(GOOD)
    p = subprocess.run([sys.executable, "-m", "sim", "run", str(f), "--check-all"], capture_output=True, text=True)
    assert (p.returncode, p.stdout) == (0, "k: ok\n")
