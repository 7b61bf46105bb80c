"""The bounded search's rejections on an upper bound (kernelgen/planner.py over_bound, models/bound.py
busy_bound and utilization_bound): a hard ">=" constraint over an observable that falls as the cycles rise
(alu_utilization, tensor_utilization, bandwidth_demand_gbps) rejects a candidate untimed when its value at
the candidate's proven lower bound of the cycles already violates it. Never a candidate the exhaustive
search keeps: the same survivors, pick and timed figures, and every candidate rejected on its bound has an
exact value that violates the constraint (issue 15: the seed's alu_utilization >= 0.85)."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from kernelgen.models.bound import busy_bound
from kernelgen.models.schedule import pipe_busy
from kernelgen.planner import Plan, enumerate_tilings, plan
from kernelgen.report import candidates_csv
from kernelgen.spec import GemmSpec, parse_spec
from kernelgen.tiling import Tiling
from kernelgen.variants import get, names
from sim.hw import HwConfig, load_hw

SEEDS = Path(__file__).resolve().parent.parent / "examples/seeds"
EVERY = 41


def _seed(threshold: str = "0.85", shape: str = "4096x4096x4096", tmp: Path | None = None) -> tuple[GemmSpec, HwConfig]:
    """The seed's gemm.dgemm on its hardware.yaml, its alu_utilization threshold replaced (a copy in tmp)."""
    from kernelgen.cli import load_any_spec

    op = SEEDS / "gemm.dgemm"
    if threshold != "0.85":
        assert tmp is not None
        text = op.read_text(encoding="utf-8")
        assert "alu_utilization >= 0.85;" in text
        op = tmp / "gemm.dgemm"
        op.write_text(text.replace("alu_utilization >= 0.85;", f"alu_utilization >= {threshold};"), encoding="utf-8")
    spec, hw, _ = load_any_spec(str(SEEDS / "hardware.yaml"), str(op), None, "f16", "f16", None, shape)
    return spec, hw


def _subset(spec: GemmSpec, hw: HwConfig, every: int) -> list[Tiling]:
    vs = [v for v in names() if not (get(v).opt_in or get(v).unavailable(spec, hw))]
    return [t for v in vs for t in enumerate_tilings(spec, v)[::every]]


def _check(ex: Plan, bd: Plan, key: str, threshold: float) -> int:
    """bd (bounded) against ex (exhaustive): same pick, same survivors (bd's timed ones with the exhaustive
    figures bit for bit, the others left untimed by bound), and each rejection on an upper bound is an
    exhaustive rejection whose exact value violates ``key >= threshold`` while the bound is >= it. The number
    of rejections on a bound."""
    assert not bd.exhaustive, "the bounded search fell back to the exhaustive one"
    assert repr(bd.best) == repr(ex.best)
    timed = {e.tiling: e for e in ex.survivors}
    assert all(repr(e) == repr(timed[e.tiling]) for e in bd.survivors)
    assert {e.tiling for e in bd.survivors} | {b.tiling for b in bd.bounded} >= set(timed)
    exact = {r.tiling: r for r in ex.rejected if r.layer == "schedule"}
    on_bound = [r for r in bd.rejected if r.on_bound]
    for r in on_bound:
        assert r.tiling not in timed, f"{r.tiling.key()}: rejected on its bound, kept by the exhaustive search"
        e = exact[r.tiling]
        assert e.constraint == r.constraint and e.metric < threshold and e.metric <= r.metric * (1 + 1e-12)
    return len(on_bound)


CASES = [("seed", None), ("epilogue", "npu7nm"), ("epilogue", "seed"), ("f16", "h200")]


def _case(name: str, hwname: str | None) -> tuple[GemmSpec, HwConfig]:
    if name == "seed":
        return _seed()
    data = {"M": 2048, "N": 1536, "K": 1024}
    if name == "epilogue":  # beta (C read and fma), bias, gelu: the epilogue's fma-class work per accumulator
        data |= {"beta": 1.0, "epilogue": ["bias", "gelu"], "layout": {"a": "col", "b": "row", "c": "col"}}
    hw = _seed()[1] if hwname == "seed" else load_hw(hwname or "h200")
    return parse_spec(data), hw


@pytest.mark.parametrize(("name", "hwname"), CASES)
def test_busy_bound_is_above_the_counted_busy(name: str, hwname: str | None) -> None:
    """busy_bound (no instruction counted) >= schedule.pipe_busy (the counts) for every pipe it covers, on a
    sample of each variant's tilings (whole spaces: the slow test below)."""
    spec, hw = _case(name, hwname)
    n = 0
    for t in _subset(spec, hw, (5 if name == "seed" else 3) * EVERY):
        bb = busy_bound(spec, t, hw, spec.nominal())
        if bb is None:
            continue
        busy = pipe_busy(spec, t, hw, -(-spec.nominal()[2] // t.bk), -(-spec.nominal()[0] // t.bm)
                         * -(-spec.nominal()[1] // t.bn), 0.0)
        for p, b in bb.items():
            assert busy[p] <= b, (t.key(), p, busy[p], b)
            n += 1
    assert n  # h200's fma and tensor pipes serve only those classes: covered too


def test_seed_sample_rejects_on_the_bound_and_matches_the_exhaustive_search() -> None:
    """A sample of the seed spec's tilings (every 5 x EVERY-th): some candidates are rejected untimed on their
    utilization bound, none the exhaustive search keeps; candidates.csv shows the bound and analysis' log
    the count."""
    spec, hw = _seed()
    only = _subset(spec, hw, 5 * EVERY)
    ex = plan(spec, hw, only=only)
    bd = plan(spec, hw, only=only, exhaustive=False)
    n = _check(ex, bd, "alu_utilization", 0.85)
    assert n
    rows = list(csv.DictReader(io.StringIO(candidates_csv(bd))))
    marked = [r for r in rows if r["status"].startswith("rejected on its upper bound, untimed: schedule: "
                                                        "alu_utilization >= 0.85 (<=")]
    assert len(marked) == n and len(rows) == bd.candidates
    assert any(line.startswith(f"schedule: {n} candidates rejected untimed: ") for line in bd.log)
    assert any("(on an upper bound, untimed)" in line for line in bd.log)


def test_other_threshold_and_bandwidth_constraint_on_a_sample(tmp_path: Path) -> None:
    """The seed spec with alu_utilization >= 0.6, and a YAML spec with a hard bandwidth_demand_gbps >= floor
    (DRAM bytes over the cycles: its bound from the same lower bound), on samples."""
    spec, hw = _seed("0.6", tmp=tmp_path)
    only = _subset(spec, hw, 3 * EVERY)
    assert _check(plan(spec, hw, only=only), plan(spec, hw, only=only, exhaustive=False), "alu_utilization", 0.6)
    spec = parse_spec({"M": 2048, "N": 2048, "K": 2048, "constraints": ["bandwidth_demand_gbps >= 8"]})
    hw = load_hw("npu7nm")
    only = _subset(spec, hw, EVERY)
    ex, bd = plan(spec, hw, only=only), plan(spec, hw, only=only, exhaustive=False)
    assert _check(ex, bd, "bandwidth_demand_gbps", 8.0)


def test_a_busy_bound_below_the_counts_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """A busy bound below a timed candidate's counted busy (an emitter change the bound does not know) makes
    plan() search exhaustively and say why; one that rejects every candidate is confirmed exhaustively."""
    import kernelgen.models.bound as bound
    import kernelgen.planner as planner

    spec, hw = _seed()
    only = _subset(spec, hw, 10 * EVERY)
    real = bound.busy_bound
    monkeypatch.setattr(planner, "busy_bound", lambda *a: {k: v * 0.5 for k, v in (real(*a) or {}).items()})
    p = plan(spec, hw, only=only, exhaustive=False)
    assert p.exhaustive and p.log[0].startswith("branch and bound refused, searched exhaustively")
    assert "busy_bound" in p.log[0]
    monkeypatch.undo()
    monkeypatch.setattr(bound, "busy_bound", lambda *a: {k: 0.0 for k in (real(*a) or {})})
    monkeypatch.setattr(bound, "_UTIL", {})  # utilization_bound's memo of busy_bound's figures
    p = plan(spec, hw, only=only, exhaustive=False)
    assert p.exhaustive and p.log[0].startswith("every candidate rejected or rejected on an upper bound")


@pytest.mark.slow
@pytest.mark.parametrize("threshold", ["0.85", "0.6"])
def test_whole_seed_space_bounded_equals_exhaustive(threshold: str, tmp_path: Path) -> None:
    """The seed's gemm.dgemm at 4096^3 (7,724 candidates), as written and with alu_utilization >= 0.6: the
    bounded search with its rejections on the bound against the exhaustive one (~10-20 s each)."""
    spec, hw = _seed(threshold, tmp=tmp_path)
    ex, bd = plan(spec, hw), plan(spec, hw, exhaustive=False)
    assert _check(ex, bd, "alu_utilization", float(threshold)) > (500 if threshold == "0.85" else 0)
    assert len(bd.survivors) + len(bd.bounded) + len(bd.rejected) == len(ex.survivors) + len(ex.rejected)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "hwname"), CASES)
def test_busy_bound_whole_spaces(name: str, hwname: str | None) -> None:
    """busy_bound >= pipe_busy for every tiling of each case."""
    spec, hw = _case(name, hwname)
    M, N, K = spec.nominal()
    for t in _subset(spec, hw, 1):
        bb = busy_bound(spec, t, hw, (M, N, K))
        if bb:
            busy = pipe_busy(spec, t, hw, -(-K // t.bk), -(-M // t.bm) * -(-N // t.bn), 0.0)
            assert all(busy[p] <= b for p, b in bb.items()), t.key()
