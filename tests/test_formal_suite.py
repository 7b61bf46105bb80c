"""validation.formal over the kernelgen suite: every generated kernel proved, no false alarm.

A representative subset (validation.cases.FORMAL_QUICK: the three variants, three shapes, both hardware
models, plus the 3-stage cp.async pipeline that needs the wrapping stage counters);
``python -m validation.formal.suite`` runs the whole matrix and writes the table of docs/verify.md
(wall and process time per kernel: a benchmark, not a timed test).
"""

from __future__ import annotations

import pytest

pytest.importorskip("z3")

from validation.cases import FORMAL_QUICK, GemmCase, cases  # noqa: E402
from validation.formal.properties import NAMES  # noqa: E402
from validation.formal.suite import compile_kernel, verify_file  # noqa: E402


def test_quick_cases_are_table_cases():
    assert set(FORMAL_QUICK) <= set(cases())


@pytest.mark.parametrize("c", list(FORMAL_QUICK), ids=lambda c: c.id)
def test_generated_kernel_proved(tmp_path, c: GemmCase):
    ptx, err = compile_kernel(c.hw, c.shape, c.variant, c.dtype, tmp_path)
    if ptx is None:
        pytest.skip(f"kernelgen compile failed: {err[:200]}")
    if FORMAL_QUICK[c]:  # at least that many stages: the pick must keep exercising that pipeline
        import json

        tiling = json.loads((ptx.parent / "plan.json").read_text())["tiling"]
        assert tiling["stages"] >= FORMAL_QUICK[c], tiling["key"]
    rep = verify_file(ptx)
    assert {p["name"]: p["status"] for p in rep["properties"]} == {n: "proved" for n in NAMES}, [
        (p["name"], p["detail"]) for p in rep["properties"] if p["status"] != "proved"]
    # timing is recorded, not asserted (the figures live in docs/verify.md, python -m validation.formal.suite)
    assert rep["wall_s"] >= 0 and rep["cpu_s"] >= 0
    assert all(p["seconds"] >= 0 for p in rep["properties"])
    assert sum(p["checks"] for p in rep["properties"]) > 0  # the solver did the work
