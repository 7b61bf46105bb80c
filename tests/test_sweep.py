"""validation sweep: the product of hardware values x shapes x variants, the same table from every executor."""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from validation.sweep import load_sweep, pareto_front, points, run_points, sensitivity, to_csv

ROOT = Path(__file__).resolve().parent.parent

SWEEP = """hw: npu7nm.yaml
vary:
  shared.banks: [16, 32]
  pipes.mac.lanes: [32, 64]
shapes: [64x64x64, 128x128x64]
variants: [mma]
dtype: f16
"""


def _sweep(tmp_path: Path, text: str = SWEEP) -> dict:
    f = tmp_path / "s.yaml"
    f.write_text(text)
    return load_sweep(str(f))


def _table(sweep: dict, rows: list[dict]) -> list[dict]:
    """The CSV rows without plan_s (process time, which differs run to run)."""
    return [{k: v for k, v in r.items() if k != "plan_s"} for r in csv.DictReader(io.StringIO(to_csv(sweep, rows)))]


def test_points_are_the_product_in_order(tmp_path):
    pts = points(_sweep(tmp_path))
    assert len(pts) == 2 * 2 * 2 * 1
    assert [p["point"] for p in pts] == list(range(8))
    assert pts[0]["params"] == {"shared.banks": 16, "pipes.mac.lanes": 32} and pts[0]["shape"] == "64x64x64"


@pytest.mark.slow
def test_serial_and_dask_localcluster_give_the_same_table(tmp_path):
    pytest.importorskip("distributed")
    sweep = _sweep(tmp_path)
    pts = points(sweep)
    serial = run_points(sweep, pts, "serial", 1)
    dask = run_points(sweep, pts, "dask", 2)
    assert _table(sweep, serial) == _table(sweep, dask)
    assert all("cycles" in r and r["cycles"] > 0 for r in serial)
    # the parameters reach the planner: more MAC lanes never predict a slower kernel here
    by = {(r["shared.banks"], r["pipes.mac.lanes"], r["shape"]): r["cycles"] for r in serial}
    assert all(by[(b, 64, s)] <= by[(b, 32, s)] for b in (16, 32) for s in ("64x64x64", "128x128x64"))
    assert len({r["cycles"] for r in serial}) > 1


def test_pareto_and_sensitivity():
    rows = [{"x": 1, "t": 5.0}, {"x": 2, "t": 3.0}, {"x": 3, "t": 4.0}, {"x": 4, "t": 1.0}]
    assert [r["x"] for r in pareto_front(rows, "x", "t")] == [1, 2, 4]
    sweep = {"vary": {"a": [1, 2]}}
    rows2 = [{"a": 1, "shape": "s", "variant": "v", "time_us": 4.0},
             {"a": 2, "shape": "s", "variant": "v", "time_us": 2.0}]
    assert sensitivity(sweep, rows2) == {"a": [(1, 1.0), (2, 0.5)]}


@pytest.mark.parametrize("text, msg", [
    (SWEEP.replace("shared.banks", "shared.bankz"), "vary: shared.bankz: the hardware config has no such key"),
    (SWEEP.replace("pipes.mac.lanes", "pipes.mc.lanes"), "no pipe named 'mc'"),
    (SWEEP.replace("64x64x64", "64x64"), "is not MxNxK"),
    (SWEEP + "colour: red\n", "unknown key 'colour'"),
])
def test_bad_sweep_is_one_line(tmp_path, text, msg):
    (tmp_path / "s.yaml").write_text(text)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-m", "validation", "sweep", "s.yaml", "-o", "out"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and msg in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()


def test_infeasible_point_is_a_row_with_its_error(tmp_path):
    sweep = _sweep(tmp_path, SWEEP.replace("shared.banks: [16, 32]", "shared.size: [1024, 65536]"))
    rows = run_points(sweep, points(sweep)[:1], "serial", 1)
    assert "error" in rows[0] and "cycles" not in rows[0]
