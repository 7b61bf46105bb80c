"""Every command line prints a bad input as one line and exits 2 (sim.errors.run_cli)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sim.errors import UsageError, run_cli

ROOT = Path(__file__).resolve().parent.parent

BAD_PTX = ".version 7.0\n.target sm_80\n.address_size 64\n.visible .entry k()\n{\n  frobnicate.u32 %r1;\n  ret;\n}\n"
BAD_PTX_LINE = "bad.ptx:6: register %r1 is used but not declared"


def _run(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess:
    (tmp_path / "bad.ptx").write_text(BAD_PTX)
    (tmp_path / "bad.yaml").write_text("M: 64\nN: [\n")
    (tmp_path / "dup.yaml").write_text("M: 64\nN: 64\nM: 128\nK: 64\n")
    (tmp_path / "sexa.yaml").write_text("M: 64\nN: 64\nK: 1:30\n")
    (tmp_path / "alias.yaml").write_text("a: &x [*x]\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return subprocess.run([sys.executable, "-m", *argv], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=120)


@pytest.mark.parametrize("argv, first", [
    (["sim", "run", "bad.ptx", "--hw", "npu7nm.yaml"], BAD_PTX_LINE),
    (["sim", "run", "missing.ptx", "--hw", "npu7nm.yaml"], "missing.ptx"),
    (["validation", "verify", "bad.ptx"], BAD_PTX_LINE),
    (["validation", "gpu", "bad.ptx"], "bad.ptx: no @workbench header"),
    (["validation", "gpu", "missing.ptx"], "missing.ptx: cannot read the PTX file"),
    (["validation", "compare", "nodir"], "nodir is not a directory"),
    (["validation", "calibrate", "--hw", "bad.yaml"], "bad.yaml:3 <yaml>: malformed YAML"),
    (["kernelgen", "compile", "--hw", "h200", "--op", "bad.yaml", "-o", "out"], "bad.yaml:3: <yaml>: malformed YAML"),
    (["kernelgen", "compile", "--hw", "h200", "--gemm", "64x64x64", "-o", ""], "-o: the output directory is empty"),
    (["kernelgen", "compile", "--hw", "h200", "--op", "dup.yaml", "-o", "out"], "dup.yaml:3: M: duplicate key"),
    (["kernelgen", "compile", "--hw", "h200", "--op", "sexa.yaml", "-o", "out"], "sexa.yaml:3: K: ambiguous scalar"),
    (["kernelgen", "compile", "--hw", "h200", "--op", "alias.yaml", "-o", "out"], "alias.yaml:1: a[0]: an alias"),
])
def test_bad_input_is_one_line_exit_2(tmp_path, argv, first):
    r = _run(tmp_path, *argv)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(first), r.stderr
    assert not r.stdout
    assert not (tmp_path / "out").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["alias.yaml", "bad.ptx", "bad.yaml", "dup.yaml",
                                                           "sexa.yaml"]


def test_debug_shows_the_traceback(tmp_path):
    r = _run(tmp_path, "sim", "run", "bad.ptx", "--hw", "npu7nm.yaml", "--debug")
    assert r.returncode == 1 and "Traceback" in r.stderr and "PtxError" in r.stderr


def _raise(e: BaseException):
    def main(argv: list[str]) -> int:
        raise e
    return main


def test_run_cli_known_unexpected_and_interrupt(capsys):
    assert run_cli(_raise(UsageError("no such thing; give another", "k.ptx", 3)), []) == 2
    assert capsys.readouterr().err == "k.ptx:3: no such thing; give another\n"
    assert run_cli(_raise(ZeroDivisionError("division by zero")), ["x"]) == 2
    assert capsys.readouterr().err == \
        "internal error: ZeroDivisionError: division by zero (rerun with --debug for the traceback)\n"
    assert run_cli(_raise(FileNotFoundError(2, "No such file or directory", "a.yaml")), []) == 2
    assert capsys.readouterr().err == "a.yaml: No such file or directory; check the path and its permissions\n"
    assert run_cli(_raise(KeyboardInterrupt()), ["--debug"]) == 130
    assert capsys.readouterr().err == "interrupted\n"
    with pytest.raises(ZeroDivisionError):
        run_cli(_raise(ZeroDivisionError("x")), ["--debug"])
    assert run_cli(lambda argv: len(argv), ["a", "b"]) == 2


LOOP_PTX = """.version 8.0
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 k_out)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    .reg .pred %p<2>;
    ld.param.u64 %rd1, [k_out];
    mov.u32 %r1, 0;
$L_top:
    add.s32 %r1, %r1, 1;
    setp.ne.s32 %p1, %r1, 0;
    @%p1 bra $L_top;
    st.global.u32 [%rd1], %r1;
    ret;
}
"""


@pytest.mark.parametrize("mode", [[], ["--functional"]])
def test_endless_loop_ends_naming_the_loop(tmp_path, mode):
    import time

    (tmp_path / "loop.ptx").write_text(LOOP_PTX)
    t0 = time.monotonic()
    r = _run(tmp_path, "sim", "run", "loop.ptx", "--hw", "npu7nm.yaml", "--grid", "2", "--block", "64",
             "--arg", "zeros:u32:1", "--max-instructions", "5000", *mode)
    assert time.monotonic() - t0 < 60
    assert r.returncode == 2 and r.stderr == (
        "loop.ptx:12: more than 5,000 warp instructions: 100% of the last 512 warp instructions ran in the loop "
        "starting at 'add.s32 %r1, %r1, 1;' (an endless loop?); fix its exit condition or raise the limit with "
        "--max-instructions N\n")


TWO_LOOPS_PTX = """.version 8.0
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 k_out)
{
    .reg .b32 %r<6>;
    .reg .b64 %rd<4>;
    .reg .pred %p<3>;
    ld.param.u64 %rd1, [k_out];
$L_outer:
    mov.u32 %r1, 0;
$L_a:
    add.s32 %r1, %r1, 1;
    setp.lt.s32 %p1, %r1, 3;
    @%p1 bra $L_a;
    mov.u32 %r2, 0;
$L_b:
    add.s32 %r2, %r2, 2;
    setp.lt.s32 %p2, %r2, 400;
    @%p2 bra $L_b;
    st.global.u32 [%rd1], %r2;
    bra.uni $L_outer;
}
"""


@pytest.mark.parametrize("mode", [[], ["--functional"]])
@pytest.mark.parametrize("budget", ["4910", "5000", "5516"])  # stops in loop a, loop b, the tail
def test_budget_names_the_hottest_loop_not_where_it_stopped(tmp_path, mode, budget):
    """An endless outer loop around a short loop (3 trips) and a long one (200 trips): wherever the
    budget runs out, the message names the long loop, the one the launch spends its instructions in."""
    (tmp_path / "two.ptx").write_text(TWO_LOOPS_PTX)
    r = _run(tmp_path, "sim", "run", "two.ptx", "--hw", "npu7nm.yaml", "--grid", "1", "--block", "32",
             "--arg", "zeros:u32:1", "--max-instructions", budget, *mode)
    assert r.returncode == 2
    assert r.stderr.startswith(f"two.ptx:18: more than {int(budget):,} warp instructions: ")
    assert "ran in the loop starting at 'add.s32 %r2, %r2, 2;'" in r.stderr and r.stderr.count("\n") == 1


def test_budget_without_a_loop_and_bad_budget(tmp_path):
    from sim.functional.runner import budget_error
    from sim.ptx.parser import parse_ptx

    k = parse_ptx(LOOP_PTX, "loop.ptx").kernel()
    assert "no loop around" in budget_error(k, [1], 10).one_line()
    assert budget_error(k, [3], 10).one_line().startswith("loop.ptx:12: more than 10 warp")
    (tmp_path / "loop.ptx").write_text(LOOP_PTX)
    r = _run(tmp_path, "sim", "run", "loop.ptx", "--hw", "npu7nm.yaml", "--max-instructions", "0")
    assert r.returncode == 2 and r.stderr.startswith("--max-instructions 0: give a positive number")


@pytest.mark.parametrize("argv, first", [
    (["sim"], "python -m sim: the following arguments are required: COMMAND (see python -m sim --help)"),
    (["sim", "run", "k.ptx", "--seed", "abc"], "python -m sim run: argument --seed: invalid int value: 'abc'"),
    (["kernelgen", "compile", "--bogus"], "kernelgen compile: the following arguments are required"),
    (["validation", "verify"], "python -m validation verify: the following arguments are required: ptx"),
    (["validation", "nosuch"], "python -m validation: argument COMMAND: invalid choice: 'nosuch'"),
])
def test_argparse_errors_are_one_line(tmp_path, argv, first):
    r = _run(tmp_path, *argv)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and r.stderr.startswith(first), r.stderr
    assert "usage:" not in r.stderr


def test_help_still_shows_usage(tmp_path):
    r = _run(tmp_path, "sim", "run", "--help")
    assert r.returncode == 0 and r.stdout.startswith("usage: python -m sim run")


@pytest.mark.parametrize("cmd", [["validation", "verify"], ["validation", "gpu"], ["sim", "run", "--check-all"]])
def test_non_utf8_ptx_is_one_line(tmp_path, cmd):
    (tmp_path / "bin.ptx").write_bytes(b".version 8.0\n\xff\xfe\n")
    argv = cmd[:2] + ["bin.ptx"] + cmd[2:]
    r = _run(tmp_path, *argv)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and r.stderr.startswith("bin.ptx: not a"), r.stderr


def test_body_that_falls_off_its_end_returns(tmp_path):
    text = LOOP_PTX.replace("    ret;\n}", "$L_end:\n}").replace("@%p1 bra $L_top;", "@%p1 bra $L_end;")
    (tmp_path / "k.ptx").write_text(text)
    for mode in ([], ["--functional"]):
        r = _run(tmp_path, "sim", "run", "k.ptx", "--hw", "npu7nm.yaml", "--grid", "1", "--block", "32",
                 "--arg", "zeros:u32:1", *mode)
        assert r.returncode == 0, r.stderr
