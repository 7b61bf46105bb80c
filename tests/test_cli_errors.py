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
    (["kernelgen", "compile", "--hw", "h200", "--op", "bad.yaml", "-o", "out"], "bad.yaml:3: YAML syntax error"),
])
def test_bad_input_is_one_line_exit_2(tmp_path, argv, first):
    r = _run(tmp_path, *argv)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(first), r.stderr
    assert not r.stdout
    assert not (tmp_path / "out").exists()


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
