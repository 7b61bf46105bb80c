"""The design-space sweep of examples/sweep_h200.yaml (216 points of planner predictions) run twice, with
local processes and on a dask.distributed LocalCluster, in cold subprocesses as a user runs them; the two
tables must be identical (plan_s, a process time, aside). Writes benchmarks/sweep.md.

    PYTHONPATH=$PWD python benchmarks/sweep_bench.py
"""

from __future__ import annotations

import csv
import datetime
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SWEEP = "examples/sweep_h200.yaml"


def run(executor: str, out: Path) -> tuple[float, float, list[dict]]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    load = os.getloadavg()[0]
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-m", "validation", "sweep", SWEEP, "-o", str(out), "--executor", executor,
                    "--workers", "2"], cwd=ROOT, env=env, check=True, capture_output=True, text=True)
    wall = time.monotonic() - t0
    rows = [{k: v for k, v in r.items() if k != "plan_s"} for r in csv.DictReader((out / "sweep.csv").open())]
    return wall, load, rows


def main() -> int:
    with tempfile.TemporaryDirectory() as d:
        results = {ex: run(ex, Path(d) / ex) for ex in ("processes", "dask")}
    (wp, lp, rp), (wd, ld, rd) = results["processes"], results["dask"]
    same = rp == rd
    verdict = "identical" if same else "DIFFERENT"
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    text = f"""# Design-space sweep: {len(rp)} points, two executors

Measured {now} on this 2-core machine by `benchmarks/sweep_bench.py` (cold `python -m validation sweep
{SWEEP} --workers 2` subprocesses; wall clock; the 1-minute load average before each run beside it).

| executor | points | wall s | load average | table |
|---|---|---|---|---|
| local processes (`--executor processes`) | {len(rp)} | {wp:.1f} | {lp:.2f} | reference |
| dask.distributed LocalCluster (`--executor dask`) | {len(rd)} | {wd:.1f} | {ld:.2f} | {verdict} |

Every point is a full planner search (all tilings of the variant) on a hardware config with the point's
parameters; `plan_s` (process time per search) is left out of the comparison. The same command runs on an
existing cluster with `--scheduler tcp://host:8786`.
"""
    (ROOT / "benchmarks" / "sweep.md").write_text(text)
    print(text)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
