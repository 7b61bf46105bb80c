"""Speed of the timing core alone (issue 17 item 1): the three kernels of benchmarks/sim_kernels.py with
their lock-step records made first and timed apart, so that the figure is the scheduling core's
(sim/timing/core.py, warp.py, units.py, memory.py), not the functional pre-run's.

    PYTHONPATH=. python benchmarks/sim_core_speed.py [--repeat N] [--kernels a,b] [--json FILE]

Per kernel, the best of N runs by process time: the records' time (`recorded` / `replay_for`, what
`simulate` calls first), the timing core's time and rate, the whole run's rate, and the 1-minute load
average before and after. A kernel that does not replay (reduce6 reads %clock64) executes in the
timing model: its "core" figure then includes functional execution.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from benchmarks.sim_kernels import KERNELS, build  # noqa: E402


def one(name: str) -> dict:
    import sim.timing.engine as eng

    hook = "recorded" if hasattr(eng, "recorded") else "replay_for"  # the engine's name for the pre-run
    made = getattr(eng, hook)
    prog, launch, hw = build(name)
    load0 = os.getloadavg()[0]
    p = time.process_time()
    rec = made(prog, launch, 10**7)
    rec_s = time.process_time() - p
    setattr(eng, hook, lambda *a, **k: rec)
    try:
        p = time.process_time()
        r = eng.simulate(prog, launch, hw)
        core_s = time.process_time() - p
    finally:
        setattr(eng, hook, made)
    n = r.warp_instructions
    try:
        from sim.timing.native import active  # the compiled core (sim/timing/native.py), where this tree has it
        core = "compiled" if active() else "python"
    except ImportError:
        core = "python"
    return {"core": core, "warp_instructions": n, "cycles": r.cycles, "replayed": rec is not None,
            "records_s": round(rec_s, 3), "core_s": round(core_s, 3),
            "core_per_s": round(n / core_s), "whole_per_s": round(n / (core_s + rec_s)),
            "load": f"{load0:.2f} / {os.getloadavg()[0]:.2f}"}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--kernels", default=",".join(KERNELS))
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    out = {}
    for name in a.kernels.split(","):
        best: dict = {}
        for _ in range(a.repeat):
            got = one(name)
            if not best or got["core_s"] < best["core_s"]:
                best = got
        out[name] = best
        print(f"{name} ({best['core']} core): {best['warp_instructions']:,} warp instructions, "
              f"records {best['records_s']} s, timing core {best['core_s']} s = {best['core_per_s']:,}/s, "
              f"whole {best['whole_per_s']:,}/s "
              f"(process time; load {best['load']})", flush=True)
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
