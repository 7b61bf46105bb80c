"""Constraints over every planner observable (issue 15 item 2): each prunes in its own layer, visible in
the log; a bank-conflict threshold changes the pick; '==' and soft '~' work on the new observables."""

import pytest

from kernelgen.models.schedule import planner_hw
from kernelgen.planner import _metric, plan
from kernelgen.spec import CONSTRAINTS, parse_spec
from sim.errors import UsageError
from sim.hw import load_hw

BASE = {"M": 128, "N": 128, "K": 64}


@pytest.fixture(scope="module")
def hw():
    return load_hw("h200")


@pytest.fixture(scope="module")
def free(hw):
    return plan(parse_spec(BASE, "t"), hw, variant="simt")


def test_bank_conflict_threshold_changes_the_pick(hw, free):
    assert free.best.movement.bank_conflict_score > 100
    p = plan(parse_spec({**BASE, "constraints": ["bank_conflict_score <= 100"]}, "t"), hw, variant="simt")
    assert p.best.tiling.key() != free.best.tiling.key()
    assert all(e.movement.bank_conflict_score <= 100 for e in p.survivors)
    assert p.pruned["movement"]["bank_conflict_score <= 100"] > 0
    assert any("layer movement" in x and "bank_conflict_score <= 100" in x for x in p.log)


FAST = ("l2_hit_rate", "tensor_utilization", "bandwidth_demand_gbps")  # one per layer kind; the rest in the slow tier


@pytest.mark.parametrize("key", [k if k in FAST else pytest.param(k, marks=pytest.mark.slow)
                                 for k in sorted(CONSTRAINTS) if k != "dram_bytes"])
def test_every_observable_prunes_in_its_layer(hw, free, key):
    """A bound halfway between the survivors' extremes removes some, in the layer the table names.
    (dram_bytes: every tiling of a GEMM whose operands fit the L2 reads them once, so no bound splits them.)"""
    variant = "mma" if key == "tensor_utilization" else "simt"
    ref = free if variant == "simt" else plan(parse_spec(BASE, "t"), hw, variant=variant)
    vals = sorted(_metric(e, key, hw) for e in ref.survivors)
    lo, hi = vals[0], vals[-1]
    assert lo < hi, f"{key} is the same for every {variant} candidate at this shape"
    mid = (lo + hi) / 2
    op = "<=" if CONSTRAINTS[key][1] == "higher" else ">="
    text = f"{key} {op} {mid!r}"
    p = plan(parse_spec({**BASE, "constraints": [text]}, "t"), hw, variant=variant)
    layer = CONSTRAINTS[key][0]
    assert p.pruned[layer][f"{key} {op} {mid:g}"] > 0
    ok = (lambda v: v <= mid) if op == "<=" else (lambda v: v >= mid)
    assert all(ok(_metric(e, key, hw)) for e in p.survivors)


def test_equality_and_soft_constraints(hw, free):
    target = free.best.registers.per_thread
    p = plan(parse_spec({**BASE, "constraints": [f"registers_per_thread == {target}"]}, "t"), hw, variant="simt")
    assert {e.registers.per_thread for e in p.survivors} == {target}
    # a soft cycles target below every candidate penalises all by their relative excess; the pick stays
    q = plan(parse_spec({**BASE, "constraints": ["cycles ~ 1"]}, "t"), hw, variant="simt")
    assert q.best.tiling.key() == free.best.tiling.key() and q.best.penalty > 0


def test_bandwidth_demand_is_dram_bytes_over_the_predicted_time(hw, free):
    e = free.best
    want = e.movement.dram_bytes / (e.cycles / (planner_hw(hw).clock_mhz * 1e6)) / 1e9  # cycles at the planner's clock
    assert _metric(e, "bandwidth_demand_gbps", hw) == pytest.approx(want)


def test_unknown_observable_names_the_known_ones():
    with pytest.raises(UsageError) as e:
        parse_spec({**BASE, "constraints": ["l2_hits >= 0.5"]}, "t.yaml")
    assert "l2_hit_rate" in str(e.value) and "\n" not in str(e.value)


def test_dgml_l2_hit_rate_min_is_enforced(tmp_path, hw):
    from kernelgen.seedlang import load_seed_spec

    f = tmp_path / "m.dgml"
    f.write_text('target "hopper";\nprecision { weight: fp16; activation: fp16; output: fp32; }\n'
                 "shape { M: 128; N: 128; K: 64; }\nconstraints { l2_hit_rate_min: 0.5; }\n")
    spec, _, _ = load_seed_spec(f)
    assert [c.text() for c in spec.constraints] == ["l2_hit_rate >= 0.5"]
