"""validation.formal over the kernelgen suite: every generated kernel proved, no false alarm.

A representative subset (both variants, three shapes, both hardware models, plus the 3-stage cp.async
pipeline that needs the wrapping stage counters); ``python -m validation.formal.suite`` runs the
whole matrix and writes the table of docs/verify.md (wall and process time per kernel: a benchmark,
not a timed test).
"""

from __future__ import annotations

import pytest

pytest.importorskip("z3")

from validation.formal.suite import compile_kernel, verify_file  # noqa: E402

CASES = [
    ("npu7nm.yaml", (33, 17, 40), "simt", "f32"),
    ("npu7nm.yaml", (33, 17, 40), "mma", "f16"),
    ("npu7nm.yaml", (128, 64, 96), "simt", "f16"),
    ("npu7nm.yaml", (128, 64, 96), "mma", "bf16"),
    ("npu7nm.yaml", (16, 16, 16), "simt", "f32"),  # a K loop that runs once (trip count 0 back edges)
    ("h200", (128, 64, 96), "mma", "f16"),  # 3+ stage pipeline: stage counters wrap modulo stages
]
STAGES = {("h200", (128, 64, 96), "mma", "f16"): 3}  # at least: the pick must keep exercising that pipeline


@pytest.mark.parametrize("hw,shape,variant,dtype", CASES,
                         ids=[f"{h.split('.')[0]}-{'x'.join(map(str, s))}-{v}-{d}" for h, s, v, d in CASES])
def test_generated_kernel_proved(tmp_path, hw, shape, variant, dtype):
    ptx, err = compile_kernel(hw, shape, variant, dtype, tmp_path)
    if ptx is None:
        pytest.skip(f"kernelgen compile failed: {err[:200]}")
    if (hw, shape, variant, dtype) in STAGES:
        import json

        tiling = json.loads((ptx.parent / "plan.json").read_text())["tiling"]
        assert tiling["stages"] >= STAGES[hw, shape, variant, dtype], tiling["key"]
    rep = verify_file(ptx)
    assert {p["name"]: p["status"] for p in rep["properties"]} == {
        n: "proved" for n in ("bounds", "barrier_divergence", "shared_race", "async_copy", "termination")
    }, [(p["name"], p["detail"]) for p in rep["properties"] if p["status"] != "proved"]
    # timing is recorded, not asserted (the figures live in docs/verify.md, python -m validation.formal.suite)
    assert rep["wall_s"] >= 0 and rep["cpu_s"] >= 0
    assert all(p["seconds"] >= 0 for p in rep["properties"])
    assert sum(p["checks"] for p in rep["properties"]) > 0  # the solver did the work
