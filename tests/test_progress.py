"""``python -m sim run`` shows its progress on stderr only on a terminal and without ``--quiet``; the display
changes no figure, and the instruction budget still trips where it did (sim.progress)."""

from __future__ import annotations

import io
import json
import os
import pty
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import sim.progress
import sim.timing.engine
from sim.cli import main

ROOT = Path(__file__).resolve().parent.parent
KERNEL = str(ROOT / "examples" / "sgemm_tiled.ptx")
RUN = ["run", KERNEL, "--hw", "npu7nm.yaml", "--seed", "1", "--json"]


@pytest.fixture
def eager(monkeypatch):
    """Show the display at once and report every 50 warp instructions, so a small kernel draws it."""
    monkeypatch.setattr(sim.progress, "SHOW_AFTER_S", 0.0)
    monkeypatch.setattr(sim.progress, "REDRAW_EVERY_S", 0.0)
    monkeypatch.setattr(sim.timing.engine, "PROGRESS_EVERY", 50)


def _run_on_pty(monkeypatch, argv: list[str]) -> tuple[int, str]:
    """main(argv) with stderr on a pseudo-terminal; returns the exit code and what the terminal received."""
    master, slave = pty.openpty()
    received = bytearray()

    def drain() -> None:
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                return
            if not chunk:
                return
            received.extend(chunk)

    reader = threading.Thread(target=drain)
    reader.start()
    with os.fdopen(slave, "w", encoding="utf-8") as term:
        monkeypatch.setattr(sys, "stderr", term)
        rc = main(argv)
        term.flush()
        monkeypatch.undo()
    reader.join(timeout=10)
    os.close(master)
    return rc, received.decode("utf-8", "replace")


@pytest.mark.parametrize("mode", [[], ["--functional"]], ids=["timing", "functional"])
def test_progress_appears_on_a_terminal(eager, monkeypatch, capsys, mode):
    rc, term = _run_on_pty(monkeypatch, RUN + mode)
    assert rc == 0
    assert "/6 CTAs" in term and "warp instr/s" in term, term[-400:]
    if not mode:
        assert " cycles, " in term, term


def test_quiet_silences_the_terminal(eager, monkeypatch, capsys):
    rc, term = _run_on_pty(monkeypatch, RUN + ["--quiet"])
    assert rc == 0 and term == ""


def test_nothing_extra_without_a_terminal(eager, monkeypatch, capsys):
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert main(RUN) == 0
    assert sys.stderr.getvalue() == ""


def test_display_changes_no_figure(eager, monkeypatch, capsys):
    assert main(RUN + ["--quiet"]) == 0
    quiet = json.loads(capsys.readouterr().out)
    rc, _ = _run_on_pty(monkeypatch, RUN)
    shown = json.loads(capsys.readouterr().out)
    assert rc == 0
    for key in ("cycles", "warp_instructions", "stalls", "check"):
        assert shown[key] == quiet[key], key


def test_budget_trips_at_the_same_count_with_the_display(eager, monkeypatch, capsys):
    rc, term = _run_on_pty(monkeypatch, RUN + ["--max-instructions", "777"])
    assert main(RUN + ["--max-instructions", "777", "--quiet"]) == 2
    err_quiet = capsys.readouterr().err.strip()
    assert rc == 2 and "more than 777 warp instructions" in err_quiet
    assert term.replace("\r\n", "\n").rstrip().endswith(err_quiet), term[-300:]


def test_subprocess_with_piped_stderr_is_silent():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-m", "sim", *RUN, "--functional"], capture_output=True, text=True,
                       env=env, timeout=120)
    assert p.returncode == 0 and p.stderr == ""
