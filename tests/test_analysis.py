"""analysis.md derives each layer's numbers from formulas; every derived number must equal the model's
(a mismatch is printed as "(model: X)", which these tests forbid), and the top candidates each carry a
trade-off sentence against the choice."""

import re

import pytest

from kernelgen.analysis import MISMATCH, tradeoff
from kernelgen.planner import plan
from kernelgen.report import analysis_md
from kernelgen.spec import parse_spec, shorthand
from sim.hw import load_hw

CASES = [("h200", "200x136x264", "mma", "bf16"), ("h200", "100x60x70", "simt", "f32"),
         ("h200", "1000x520x264", "wgmma_tma", "f16"), ("npu7nm", "256x256x256", "mma", "f16"),
         pytest.param(("h200", "4096x4096x4096", None, "f16"), marks=pytest.mark.slow)]


@pytest.fixture(scope="module", params=CASES, ids=["mma", "simt", "wgmma_tma", "npu7nm", "h200-4096"])
def report(request):
    hw_name, shape, variant, dtype = request.param
    p = plan(shorthand(shape, dtype), load_hw(hw_name), variant=variant)
    return p, analysis_md(p)


def test_every_derivation_agrees_with_its_model(report):
    p, text = report
    assert MISMATCH not in text, [line for line in text.splitlines() if MISMATCH in line]
    for section in ("### 1. Data movement", "### 2. Registers", "### 3. ALU scheduling", "### 4. Synchronization",
                    "## Prediction", "## Hotspots", "## Top 10 candidates"):
        assert section in text
    # the prediction's bold result is the plan's cycle count
    assert f"**{p.best.model.cycles}** cycles" in text


def test_top_candidates_have_a_trade_off_sentence(report):
    p, text = report
    rows = [r for r in text.splitlines() if re.match(r"\| \d+ \| ", r)]
    assert rows and len(rows) == min(10, sum(1 for x in p.survivors if x.pareto))
    assert "the choice" in rows[0]
    for r in rows[1:]:
        assert "% cycles" in r and "bound by" in r


def test_trade_off_names_what_differs():
    hw = load_hw("h200")
    p = plan(parse_spec({"M": 512, "N": 512, "K": 512}, "t"), hw, variant="mma")
    other = next(x for x in p.survivors if x.pareto and x is not p.best
                 and x.registers.per_thread != p.best.registers.per_thread)
    s = tradeoff(other, p.best)
    assert f"({other.registers.per_thread} vs {p.best.registers.per_thread})" in s
    pct = 100 * (other.cycles / p.best.cycles - 1)
    assert f"{pct:+.1f}% cycles" in s


def test_a_wrong_model_value_is_shown_not_hidden():
    from kernelgen.analysis import _check
    assert _check(100, 100) == "100"
    assert _check(100, 250) == f"100 {MISMATCH}250)"
