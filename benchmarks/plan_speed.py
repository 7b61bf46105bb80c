"""Planner speed: plan a 4096x4096x4096 GEMM over the whole candidate space (issue 4: under 1 s).

    python3 benchmarks/plan_speed.py    # writes benchmarks/plan_speed.md
"""

from __future__ import annotations

import os
import platform
import statistics
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
        hw = load_hw(hwname)
        plan(shorthand("64x64x64"), hw)  # imports and caches
        secs, cands = [], 0
        for _ in range(5):
            t = time.process_time()
            p = plan(shorthand("4096x4096x4096"), hw)
            secs.append(time.process_time() - t)
            cands = p.candidates
        rows.append((hwname, cands, statistics.median(secs), p.seconds, p.best.tiling.key()))
    load = os.getloadavg()[0]
    lines = ["# Planner speed (benchmarks/plan_speed.py)", "",
             f"{time.strftime('%Y-%m-%d')}, {platform.machine()}, {os.cpu_count()} cores, Python "
             f"{platform.python_version()}, load average {load:.1f}. Median of 5 plans of 4096x4096x4096 f16 "
             "(process time); `search.seconds` is what plan.json records for the last one.", "",
             "| hw | candidates | seconds (median, process time) | search.seconds | chosen |", "|---|---|---|---|---|"]
    lines += [f"| {h} | {c:,} | {s:.3f} | {ps:.3f} | {k} |" for h, c, s, ps, k in rows]
    (ROOT / "benchmarks/plan_speed.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
