"""Ctrl-C ends a command with one line ("interrupted"), status 130 and no file half-written."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

SPIN = """.version 8.0
.target sm_80
.address_size 64
.visible .entry spin(.param .u64 p)
{
  .reg .b32 %r<3>;
  .reg .pred %p<2>;
  mov.u32 %r1, 0;
$L:
  add.u32 %r1, %r1, 1;
  setp.ne.u32 %p1, %r1, 0;
  @%p1 bra $L;
  ret;
}
"""


def _interrupt(tmp_path: Path, argv: list[str], after: float) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    # SIGINT back to its default in the child: a test run started in the background of a shell without
    # job control inherits SIGINT ignored, and Python then installs no KeyboardInterrupt handler
    p = subprocess.Popen([sys.executable, "-m", *argv], cwd=tmp_path, env=env, text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    time.sleep(after)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)


@pytest.mark.slow
def test_sim_run_interrupted_leaves_no_trace_file(tmp_path):
    (tmp_path / "spin.ptx").write_text(SPIN)
    r = _interrupt(tmp_path, ["sim", "run", "spin.ptx", "--hw", "npu7nm.yaml", "--grid", "1", "--block", "32",
                              "--max-instructions", "100000000", "--trace", "trace.json", "--arg", "p=zeros:f32:4"],
                   after=4.0)
    assert r.returncode == 130, r.stderr
    assert r.stderr.strip() == "interrupted", r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spin.ptx"]


@pytest.mark.slow
def test_kernelgen_interrupted_writes_nothing(tmp_path):
    # a K-range module (several searches, ~10-20 s): a single 8192^3 plan now ends in ~1.2 s, before the signal
    r = _interrupt(tmp_path, ["kernelgen", "compile", "--hw", "h200", "--gemm", "64x64x1..4096", "--exhaustive",
                              "-o", "out.ko"], after=2.5)
    assert r.returncode == 130, r.stderr
    assert r.stderr.strip() == "interrupted", r.stderr
    assert list(tmp_path.iterdir()) == []
