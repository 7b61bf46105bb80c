"""CUDA launch limits and the inputs that used to end as 'internal error': one line, exit 2, at load
time (sim/limits.py, sim/ptx/check.py, sim/cli.py)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from sim.cli import main
from tests.test_cli_errors import LOOP_PTX


def _one_line(capsys, tmp_path, *argv: str, text: str = LOOP_PTX) -> str:
    f = tmp_path / "k.ptx"
    f.write_text(text)
    t0 = time.monotonic()
    rc = main(["run", str(f), "--hw", "npu7nm.yaml", "--arg", "zeros:u32:1", *argv])
    err = capsys.readouterr().err
    assert time.monotonic() - t0 < 20
    assert rc == 2 and len(err.splitlines()) == 1 and "internal error" not in err, err
    return err.strip().replace(str(tmp_path) + "/", "")


@pytest.mark.parametrize("argv, says", [
    (["--grid", "2147483648", "--block", "32"], "grid x = 2,147,483,648 is outside 1..2,147,483,647"),
    (["--grid", "1,65536", "--block", "32"], "grid y = 65,536 is outside 1..65,535"),
    (["--grid", "1,1,65536", "--block", "32"], "grid z = 65,536 is outside"),
    (["--grid", "1", "--block", "1025"], "block x = 1,025 is outside 1..1,024"),
    (["--grid", "1", "--block", "1,1,65"], "block z = 65 is outside 1..64"),
    (["--grid", "1", "--block", "1024,2"], "block (1024, 2, 1) has 2,048 threads, more than 1024"),
    (["--grid", "2147483647,65535,65535", "--block", "1024"], "more than the budget of 350,000"),
    (["--grid", "2147483647,65535,65535", "--block", "1024", "--functional"], "more than the budget"),
    (["--grid", "1", "--block", "32", "--shared", "131073"], "131,073 bytes of shared memory (0 static"),
    (["--grid", "1", "--block", "32", "--shared", "-5"], "--shared -5: give a non-negative"),
    (["--grid", "1", "--block", "32", "--seed", "-1"], "--seed -1: give a non-negative integer"),
])
def test_launch_limits_one_line(capsys, tmp_path, argv, says):
    assert says in _one_line(capsys, tmp_path, *argv)


def test_module_limits_one_line(capsys, tmp_path):
    decl = "    .reg .pred %p<2>;\n"
    run = ("--grid", "1", "--block", "32")
    big_shared = LOOP_PTX.replace(decl, decl + "    .shared .align 4 .b8 buf[99999999999999];\n")
    assert "99,999,999,999,999 bytes of shared memory (99,999,999,999,999 static" in \
        _one_line(capsys, tmp_path, *run, text=big_shared)
    big_local = LOOP_PTX.replace(decl, decl + "    .local .align 4 .b8 stack[600000];\n")
    assert "600,000 bytes of .local memory, more than 524,288" in _one_line(capsys, tmp_path, *run, text=big_local)
    assert _one_line(capsys, tmp_path, *run, text=LOOP_PTX.replace("%p<2>", "%p<4294967296>")).startswith(
        "k.ptx:8: register count <4294967296> must be 1..65,528")
    assert "register count <-> must be" in _one_line(capsys, tmp_path, *run, text=LOOP_PTX.replace("%p<2>", "%p<-1>"))
    token = "x" * 1_000_000
    line = _one_line(capsys, tmp_path, *run, text=LOOP_PTX.replace("add.s32", f"add{token}.s32"))
    assert len(line) < 400 and ",00" in line and "characters)" in line


def test_files_that_are_not_what_they_say(capsys, tmp_path):
    np.savez(tmp_path / "a.npz", x=np.zeros(4))
    f = tmp_path / "k.ptx"
    f.write_text(LOOP_PTX)
    assert main(["run", str(f), "--hw", "npu7nm.yaml", "--grid", "1", "--block", "32", "--arg",
                 f"@{tmp_path / 'a.npz'}"]) == 2
    assert "is an .npz archive, not one array" in capsys.readouterr().err
    assert main(["run", str(f), "--hw", "npu7nm.yaml", "--grid", "1", "--block", "32", "--arg", "zeros:u32:1",
                 "--trace", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"--trace {tmp_path} is a directory: give a file path such as trace.json\n"
