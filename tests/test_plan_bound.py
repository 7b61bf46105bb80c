"""The planner's branch and bound (plan(exhaustive=False), the default of `kernelgen compile`): its lower
bounds (kernelgen/models/bound.py analytic_bound and fill_bound, models/schedule.py counted_bound) are never above the
predicted cycles, and the bounded search gives
the exhaustive search's choice, Pareto frontier (with every timed figure), analysis.md top 10 and
Pareto rows of candidates.csv, while candidates.csv lists every candidate once."""

from __future__ import annotations

import csv
import io
import math
import random

import pytest

from kernelgen.analysis import candidate_lines
from kernelgen.models.bound import analytic_bound, fill_bound, uses_shared_model
from kernelgen.models.schedule import counted_bound
from kernelgen.planner import Plan, _Staircase, enumerate_tilings, plan
from kernelgen.report import candidates_csv, plan_json
from kernelgen.spec import GemmSpec, parse_spec, shorthand
from kernelgen.tiling import Tiling
from kernelgen.variants import get, names
from sim.hw import HwConfig, load_hw

EVERY = 41  # the default suite's sample of tilings (under a second a test)


def _check_bounds(p: Plan) -> None:
    """Both bounds of every timed candidate of p, floored as the planner keys them, are <= its cycles (the
    model's launch cycles truncated; counted_bound: shared-model variants, often equal before the floor)."""
    for e in p.survivors:
        mv = e.movement
        args = (p.spec, e.tiling, p.hw, p.shape, mv.smem_bytes, mv.dram_cycles, 1.0 - mv.l2_hit_rate,
                e.registers.per_thread)
        assert math.floor(analytic_bound(*args)) <= e.cycles, e.tiling.key()
        if uses_shared_model(e.tiling.variant):
            assert math.floor(counted_bound(*args)) <= e.cycles, e.tiling.key()
            assert math.floor(fill_bound(*args)) <= e.cycles, e.tiling.key()


def _same_outputs(ex: Plan, bd: Plan) -> None:
    """The bounded plan bd chooses, ranks and reports what the exhaustive plan ex does."""
    assert not bd.exhaustive and ex.exhaustive, "the bounded search fell back to the exhaustive one"
    assert bd.best.tiling == ex.best.tiling and repr(bd.best) == repr(ex.best)
    assert [repr(e) for e in bd.survivors if e.pareto] == [repr(e) for e in ex.survivors if e.pareto]
    assert candidate_lines(bd) == candidate_lines(ex)
    pj_ex, pj_bd = plan_json(ex), plan_json(bd)
    for key in ("tiling", "prediction", "layers", "spec", "shape"):
        assert pj_bd[key] == pj_ex[key], key
    rows_ex = list(csv.DictReader(io.StringIO(candidates_csv(ex))))
    rows_bd = list(csv.DictReader(io.StringIO(candidates_csv(bd))))
    assert [r for r in rows_bd if r["status"] == "pareto"] == [r for r in rows_ex if r["status"] == "pareto"]
    for rows in (rows_ex, rows_bd):  # every candidate once
        assert len(rows) == ex.candidates and len({r["key"] for r in rows}) == ex.candidates
    timed = {e.tiling: e for e in ex.survivors}
    for e in bd.survivors:  # every candidate the bounded search timed: the exhaustive figures, bit for bit
        assert repr(e) == repr(timed[e.tiling])
    # the schedule layer's hard constraints (alu_utilization, cycles, ...): the bounded search rejects a subset
    # of the exhaustive search's rejections, with the same values (on_bound: an upper bound of the value, the
    # constraint's exact value violates it too); the others it left untimed
    rej_ex = {(r.tiling, r.constraint): r.metric for r in ex.rejected if r.layer == "schedule"}
    rej_bd = [r for r in bd.rejected if r.layer == "schedule"]
    assert all(rej_ex[(r.tiling, r.constraint)] == r.metric for r in rej_bd if not r.on_bound)
    rejected = {t for t, _ in rej_ex}
    for r in rej_bd:
        if r.on_bound:
            assert r.tiling in rejected, r.tiling.key()
            if (r.tiling, r.constraint) in rej_ex:
                assert rej_ex[(r.tiling, r.constraint)] <= r.metric * (1 + 1e-12), r.tiling.key()
    for b in bd.bounded:  # each untimed one: its bound holds and its dominator beats it
        assert b.by.score < b.bound
        if b.tiling in rejected:
            continue
        e = timed[b.tiling]
        assert b.bound <= e.cycles
        assert b.by.registers.per_thread <= e.registers.per_thread and b.by.movement.smem_bytes <= e.movement.smem_bytes
    assert len(bd.survivors) + len(bd.bounded) + len(rej_bd) == len(ex.survivors) + len(rej_ex)


def _subset(spec: GemmSpec, hw: HwConfig, every: int) -> list[Tiling]:
    """Every `every`-th tiling of each variant of the default search."""
    vs = [v for v in names() if not (get(v).opt_in or get(v).unavailable(spec, hw))]
    return [t for v in vs for t in enumerate_tilings(spec, v)[::every]]


@pytest.mark.parametrize(("hwname", "shape", "dtype"), [("h200", "1000x520x264", "f16"),
                                                        ("npu7nm", "2048x2048x512", "bf16")])
def test_bound_below_cycles_and_same_outputs_on_a_sample(hwname: str, shape: str, dtype: str) -> None:
    """A sample of each variant's tilings (every EVERY-th): bound <= cycles for each timed one, and the
    bounded search over the same sample reports what the exhaustive one does."""
    spec, hw = shorthand(shape, dtype), load_hw(hwname)
    only = _subset(spec, hw, EVERY)
    ex = plan(spec, hw, only=only)
    _check_bounds(ex)
    bd = plan(spec, hw, only=only, exhaustive=False)
    _same_outputs(ex, bd)
    assert bd.bounded, "nothing bounded out: the test does not exercise the bound"


def _seed(shape: str = "4096x4096x4096", dgemm: bool = True) -> tuple[GemmSpec, HwConfig]:
    """The seed's gemm.dgemm (hard alu_utilization >= 0.85, non-power-of-two tiles, blocked layouts) or a
    plain f16 GEMM, on the seed's hardware.yaml (examples/seeds, seed 000's schema)."""
    from pathlib import Path

    from kernelgen.cli import load_any_spec

    root = Path(__file__).resolve().parent.parent / "examples/seeds"
    op = str(root / "gemm.dgemm") if dgemm else None
    spec, hw, _ = load_any_spec(str(root / "hardware.yaml"), op, None if dgemm else shape, "f16", "f16", None,
                                shape if dgemm else None)
    return spec, hw


def test_bound_below_cycles_and_same_outputs_on_the_seed_spec_sample() -> None:
    """As above for the seed spec on the seed hardware (every 5 x EVERY-th tiling): its hard alu_utilization
    rejects timed candidates, which never prune (they are not survivors)."""
    spec, hw = _seed()
    only = _subset(spec, hw, 5 * EVERY)
    ex = plan(spec, hw, only=only)
    _check_bounds(ex)
    bd = plan(spec, hw, only=only, exhaustive=False)
    _same_outputs(ex, bd)
    assert "schedule" in bd.pruned


def test_a_bound_above_the_cycles_falls_back_to_the_exhaustive_search(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bound above a timed candidate's cycles (a model term the bounds mirror changed) is caught when that
    candidate is timed: plan() then searches exhaustively (search.exhaustive true) and its log says why."""
    import kernelgen.planner as planner

    spec, hw = shorthand("256x128x64"), load_hw("npu7nm")
    only = _subset(spec, hw, 4 * EVERY)
    monkeypatch.setattr(planner, "analytic_bound", lambda *a: 1e15)
    p = plan(spec, hw, only=only, exhaustive=False)
    assert p.exhaustive and not p.bounded and p.log[0].startswith("branch and bound refused, searched exhaustively")
    monkeypatch.undo()
    ex = plan(spec, hw, only=only)
    assert [repr(e) for e in p.survivors] == [repr(e) for e in ex.survivors]


def test_staircase_finds_a_dominator_exactly_when_one_exists() -> None:
    """_Staircase.below(regs, smem) returns a stored point with no more of either, or None when none is."""
    rng = random.Random(7)
    spec = shorthand("256x256x256")
    t = enumerate_tilings(spec, "simt")[0]

    class _Pt:  # the two fields the staircase reads
        def __init__(self, r: int, s: int) -> None:
            self.registers = type("R", (), {"per_thread": r})()
            self.movement = type("M", (), {"smem_bytes": s})()
            self.tiling = t

    for _ in range(20):
        st, pts = _Staircase(), []
        for _ in range(rng.randrange(1, 30)):
            pt = _Pt(rng.randrange(16, 80), rng.randrange(0, 50))
            st.add(pt)  # type: ignore[arg-type]
            pts.append(pt)
            assert st.regs == sorted(st.regs) and st.smem == sorted(st.smem, reverse=True)
        for _ in range(50):
            r, s = rng.randrange(10, 90), rng.randrange(0, 60)
            got = st.below(r, s)
            if any(p.registers.per_thread <= r and p.movement.smem_bytes <= s for p in pts):
                assert got is not None and got.registers.per_thread <= r and got.movement.smem_bytes <= s
            else:
                assert got is None


def test_untimed_rows_and_rejections_in_candidates_csv() -> None:
    """candidates.csv of a bounded plan: untimed rows carry their bound and dominator, without cycles;
    rejected rows (a layer's constraint) name it; the old columns of the Pareto rows are kept."""
    spec = parse_spec({"M": 1000, "N": 520, "K": 264, "constraints": ["registers_per_thread <= 96"]})
    hw = load_hw("h200")
    p = plan(spec, hw, only=_subset(spec, hw, EVERY), exhaustive=False)
    rows = list(csv.DictReader(io.StringIO(candidates_csv(p))))
    untimed = [r for r in rows if r["status"].startswith("untimed: cycles >= ")]
    rejected = [r for r in rows if r["status"].startswith("rejected: registers: registers_per_thread <= 96")]
    assert untimed and rejected
    assert all(r["cycles"] == "" and r["registers_per_thread"] for r in untimed)
    assert [r["status"] for r in rows[:len([e for e in p.survivors if e.pareto])]] == ["pareto"] * sum(
        e.pareto for e in p.survivors)
    assert plan_json(p)["search"]["bounded"] == len(untimed) and not plan_json(p)["search"]["exhaustive"]


CASES = [("h200", "4096x4096x4096", "f16"), ("h200", "8192x8192x8192", "f16"), ("h200", "1000x520x264", "f16"),
         ("h200", "1024x1024x1024", "bf16"), ("h200", "512x384x1000", "f32"), ("h200", "2048x2048x2048", "s8"),
         ("h200", "4096x4096x4096", "s4"),
         ("npu7nm", "4096x4096x4096", "f16"), ("npu7nm", "128x64x32", "bf16"), ("npu7nm", "1000x520x264", "f16")]


@pytest.mark.slow
@pytest.mark.parametrize(("hwname", "shape", "dtype"), CASES)
def test_bounded_search_equals_exhaustive(hwname: str, shape: str, dtype: str) -> None:
    """Whole candidate spaces: every timed candidate's bound <= its cycles, and the bounded search's
    choice, frontier, top 10 and Pareto rows are the exhaustive search's (~3 s a case)."""
    spec, hw = shorthand(shape, dtype), load_hw(hwname)
    ex = plan(spec, hw)
    _check_bounds(ex)
    _same_outputs(ex, plan(spec, hw, exhaustive=False))


@pytest.mark.slow
@pytest.mark.parametrize("dgemm", [True, False])
def test_bounded_search_equals_exhaustive_on_the_seed_hardware(dgemm: bool) -> None:
    """The seed's gemm.dgemm at 4096^3 (7,724 candidates, ~10 s) and a plain f16 4096^3 GEMM on the seed's
    hardware.yaml: every timed candidate's bound <= its cycles, the same outputs bounded and exhaustive."""
    spec, hw = _seed(dgemm=dgemm)
    ex = plan(spec, hw)
    _check_bounds(ex)
    _same_outputs(ex, plan(spec, hw, exhaustive=False))


@pytest.mark.slow
def test_bounded_search_with_epilogue_layouts_and_soft_constraints() -> None:
    """A spec with beta, a gelu epilogue, column-major A, row-major B and a soft constraint (a penalty >= 0 keeps
    score >= cycles >= bound)."""
    spec = parse_spec({"M": 1024, "N": 768, "K": 512, "beta": 1.0, "epilogue": ["bias", "gelu"],
                       "layout": {"a": "col", "b": "row", "c": "row"}, "constraints": ["occupancy ~ 0.5"]})
    for hwname in ("h200", "npu7nm"):
        hw = load_hw(hwname)
        ex = plan(spec, hw)
        assert any(e.penalty > 0 for e in ex.survivors)
        _check_bounds(ex)
        _same_outputs(ex, plan(spec, hw, exhaustive=False))


def test_compile_takes_exhaustive() -> None:
    from kernelgen.cli import build_parser

    args = build_parser().parse_args(["compile", "--gemm", "64x64x64", "--hw", "h200", "-o", "x", "--exhaustive"])
    assert args.exhaustive
    assert not build_parser().parse_args(["compile", "--gemm", "64x64x64", "--hw", "h200", "-o", "x"]).exhaustive


@pytest.mark.slow
def test_compile_exhaustive_flag_same_kernel() -> None:
    """`kernelgen compile --exhaustive` times every candidate (plan.json search.exhaustive, no bound layer);
    the default bounded compile writes the same kernel.ptx and prediction (a spec narrowed by tiling
    ranges: about 2 s with the imports at load 9)."""
    import json

    from kernelgen.cli import compile_spec

    spec = parse_spec({"M": 1000, "N": 520, "K": 264, "tiling": ["TILE_M in [64, 128]", "TILE_N in [64, 128]",
                                                                 "TILE_K in [32, 32]", "PAD in [0, 0]"]})
    hw = load_hw("h200")
    ex, bd = compile_spec(spec, hw, None, exhaustive=True), compile_spec(spec, hw, None)
    assert ex["kernel.ptx"] == bd["kernel.ptx"]
    pj_ex, pj_bd = json.loads(ex["plan.json"]), json.loads(bd["plan.json"])
    assert pj_ex["prediction"] == pj_bd["prediction"] and pj_ex["tiling"] == pj_bd["tiling"]
    assert pj_ex["search"]["exhaustive"] and not pj_bd["search"]["exhaustive"]
    assert "bound" not in pj_ex["pruned"] and pj_bd["search"]["bounded"] == pj_bd["pruned"]["bound"][
        next(iter(pj_bd["pruned"]["bound"]))] > 0
