"""Issue 15: a bank-conflict threshold (``bank_conflict_score <= X``, pruned in the data-movement layer;
tests/test_observables.py shows it changing the pick) that nothing meets names the nearest candidate's
score, not "bytes"."""

from __future__ import annotations

import pytest

from kernelgen.planner import plan
from kernelgen.spec import parse_spec
from sim.errors import UsageError
from sim.hw import load_hw

BASE = {"M": 256, "N": 256, "K": 256, "dtype": "f16",
        "tiling": ["TILE_M in [64, 64]", "TILE_N in [128, 128]", "STAGES in [2, 2]"]}


def test_infeasible_threshold_names_the_nearest_score():
    spec = parse_spec({**BASE, "constraints": ["bank_conflict_score <= 64"],
                       "tiling": BASE["tiling"] + ["PAD in [0, 0]"]})
    with pytest.raises(UsageError, match=r"bank_conflict_score <= 64, but the nearest candidate .* needs \d+ "
                                         r"\(bank-conflict score\)"):
        plan(spec, load_hw("npu7nm.yaml"), "mma")
