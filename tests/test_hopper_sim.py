"""benchmarks/hopper_sim.py without a GPU: the kernels it compiles, and its table from the committed 2026-12-02 data."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks import hopper_sim
from sim.launch import read_metadata

DATA = Path(__file__).parent.parent / "benchmarks" / "data"


def test_compiles_one_profiled_tile_per_case(tmp_path: Path) -> None:
    hopper_sim.cmd_compile(tmp_path)
    for name, variant, spec in hopper_sim.CASES:
        meta = read_metadata((tmp_path / name / "kernel.ptx").read_text())
        plan = json.loads((tmp_path / name / "plan.json").read_text())
        assert meta["grid"] == [1, 1, 1] and "profile" in meta, name  # one CTA, its clock64 record
        bm, bn, stages = (int(r.split("[")[1].split(",")[0]) for r in spec["tiling"])
        assert plan["tiling"].startswith(f"{variant}_{bm}x{bn}x") and f"_s{stages}_" in plan["tiling"], plan


def test_table_of_the_committed_run() -> None:
    sim = json.loads((DATA / "hopper_sim_2026-12-02.json").read_text())
    meas = json.loads((DATA / "hopper_gpu_h200_2026-12-02.json").read_text())
    rows = {r.split(" | ")[0].strip("| "): r for r in hopper_sim.table(sim, meas).splitlines()[2:]}
    assert set(rows) == {n for n, _, _ in hopper_sim.CASES}
    assert "| 147,552 | 135,338 | -8.3% | 134,604 | -8.8% | 136,689 | -7.4% |" in rows["fp8_128x256_s4_k16384"]
    assert all(r["check_passed"] for r in meas["rows"])
