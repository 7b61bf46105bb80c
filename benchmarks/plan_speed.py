"""Planner speed: plan a 4096x4096x4096 GEMM over the whole candidate space (target: under 1 s).

Two figures per hardware model: the first plan in a fresh process (what `kernelgen compile` pays:
the emitters' counting passes and the line-latency tables are built then) and the median of 5 later
plans in that process (warm: those caches filled).

    python3 benchmarks/plan_speed.py    # writes benchmarks/plan_speed.md
"""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    from kernelgen.planner import plan
    from kernelgen.spec import shorthand
    from sim.hw import load_hw

    rows = []
    for hwname in ("h200", "npu7nm"):
        cold = subprocess.run(
            [sys.executable, "-c", "import sys, time; sys.path.insert(0, sys.argv[1]); "
             "from kernelgen.planner import plan; from kernelgen.spec import shorthand; "
             "from sim.hw import load_hw; hw = load_hw(sys.argv[2]); t = time.process_time(); "
             "plan(shorthand('4096x4096x4096'), hw); print(time.process_time() - t)", str(ROOT), hwname],
            capture_output=True, text=True, check=True)
        hw = load_hw(hwname)
        plan(shorthand("64x64x64"), hw)  # imports and caches
        secs, cands = [], 0
        for _ in range(5):
            t = time.process_time()
            p = plan(shorthand("4096x4096x4096"), hw)
            secs.append(time.process_time() - t)
            cands = p.candidates
        rows.append((hwname, cands, float(cold.stdout), statistics.median(secs), p.seconds, p.best.tiling.key()))
    load = os.getloadavg()[0]
    lines = ["# Planner speed (benchmarks/plan_speed.py)", "",
             f"{time.strftime('%Y-%m-%d')}, {platform.machine()}, {os.cpu_count()} cores, Python "
             f"{platform.python_version()}, load average {load:.1f}. Median of 5 plans of 4096x4096x4096 f16 "
             "(process time); cold: the first plan in a fresh process (process time of the plan call, imports "
             "excluded); `search.seconds` is what plan.json records for the last warm one.", "",
             "| hw | candidates | cold seconds | warm seconds (median) | search.seconds | chosen |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {h} | {c:,} | {cs:.3f} | {s:.3f} | {ps:.3f} | {k} |" for h, c, cs, s, ps, k in rows]
    (ROOT / "benchmarks/plan_speed.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
