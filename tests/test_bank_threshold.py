"""Issue 15: a bank-conflict threshold in the spec (``bank_conflict_score <= X``) is a hard constraint the
data-movement layer prunes on (models/movement.bank_model: the shared addresses the code uses), it
changes the pick, and --verbose names it."""

from __future__ import annotations

import pytest

from kernelgen.cli import main
from kernelgen.planner import plan
from kernelgen.spec import parse_spec
from sim.errors import UsageError
from sim.hw import load_hw

BASE = {"M": 256, "N": 256, "K": 256, "dtype": "f16",
        "tiling": ["TILE_M in [64, 64]", "TILE_N in [128, 128]", "STAGES in [2, 2]"]}


def test_threshold_changes_the_pick():
    hw = load_hw("npu7nm.yaml")
    free = plan(parse_spec(BASE), hw, "mma").best
    assert free.movement.bank_conflict_score == 1024  # the unpadded pick: ldmatrix rows in one bank group
    p = plan(parse_spec({**BASE, "constraints": ["bank_conflict_score <= 64"]}), hw, "mma")
    assert p.best.tiling != free.tiling and p.best.movement.bank_conflict_score <= 64
    assert p.best.cycles >= free.cycles  # the threshold costs predicted cycles, it does not win them
    assert p.pruned["movement"]["bank_conflict_score <= 64"] > 0
    assert all(e.movement.bank_conflict_score <= 64 for e in p.survivors)
    soft = plan(parse_spec({**BASE, "constraints": ["bank_conflict_score ~ 0"]}), hw, "mma")
    assert not any("bank" in k for k in soft.pruned.get("movement", {}))  # soft: weighed, not pruned
    assert soft.best.movement.bank_conflict_score == 0 and soft.best.penalty == 0.0


def test_verbose_names_the_threshold(tmp_path, capsys):
    op = tmp_path / "g.yaml"
    op.write_text("M: 256\nN: 256\nK: 256\ndtype: f16\ntiling:\n  - TILE_M in [64, 64]\n  - TILE_N in [128, 128]\n"
                  "constraints:\n  - bank_conflict_score <= 64\n")
    rc = main(["compile", "--hw", "npu7nm.yaml", "--op", str(op), "--variant", "mma", "-o", str(tmp_path / "o"),
               "--verbose"])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert "layer movement:" in err and "by bank_conflict_score <= 64" in err


def test_infeasible_threshold_names_the_nearest_score():
    spec = parse_spec({**BASE, "constraints": ["bank_conflict_score <= 64"],
                       "tiling": BASE["tiling"] + ["PAD in [0, 0]"]})
    with pytest.raises(UsageError, match=r"bank_conflict_score <= 64, but the nearest candidate .* needs \d+ "
                                         r"\(bank-conflict score\)"):
        plan(spec, load_hw("npu7nm.yaml"), "mma")
