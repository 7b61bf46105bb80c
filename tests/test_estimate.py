"""``python -m sim run`` refuses a launch whose estimate (one CTA's warp instructions x CTAs) passes the
budget before it runs, in one line with the estimate and time (sim.estimate)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sim.cli import main

ROOT = Path(__file__).resolve().parent.parent
RUN = ["run", str(ROOT / "examples" / "sgemm_tiled.ptx"), "--hw", "npu7nm.yaml", "--seed", "1", "--quiet"]
TOTAL = 13_098  # warp instructions of the 6 blocks (ragged edges: not all alike)


@pytest.mark.parametrize("mode", [[], ["--functional"]], ids=["timing", "functional"])
def test_refused_up_front_with_the_estimate(capsys, mode):
    assert main(RUN + mode + ["--max-instructions", "10000"]) == 2
    cap = capsys.readouterr()
    assert cap.out == ""
    lines = cap.err.strip().splitlines()
    assert len(lines) == 1, lines
    m = re.search(r"about ([\d,]+) warp instructions \(([\d,]+) in block .* x 6 blocks\), more than the budget "
                  r"of 10,000; about \d+ s at [\d,]+/s", lines[0])
    assert m, lines[0]
    estimate = int(m.group(1).replace(",", ""))
    assert estimate == 6 * int(m.group(2).replace(",", ""))
    assert abs(estimate - TOTAL) / TOTAL < 0.05, estimate
    assert "--max-instructions N" in lines[0]


def test_within_the_budget_runs(capsys):
    assert main(RUN + ["--functional", "--json", "--max-instructions", str(TOTAL)]) == 0
    assert f'"warp_instructions": {TOTAL}' in capsys.readouterr().out
