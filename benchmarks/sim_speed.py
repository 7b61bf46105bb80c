"""Simulator speed on the three kernels of issue 17 (benchmarks/sim_kernels.py: sgemm 128^3, kernelgen mma
f16 256^3, CUDA samples' reduce6; h200.yaml).

    PYTHONPATH=. python benchmarks/sim_speed.py [--out benchmarks/sim_speed.md] [--json FILE]
                                               [--previous FILE] [--repeat N]

Reports warp instructions per second of the timing model and of functional-only execution, over wall time
and process (CPU) time (the machine is often shared: the load average around each run is given too), the
best of --repeat runs, plus Python function calls per warp instruction of the timing model on sgemm 64^3
(cProfile; deterministic, independent of load). --json writes the figures; --previous reads such a file
and puts its figures next to the new ones.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime
import json
import os
import pathlib
import platform
import pstats
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from benchmarks.sim_kernels import KERNELS, build  # noqa: E402


def rate(name: str, timed: bool, repeat: int) -> dict:
    from sim.functional.runner import run_functional
    from sim.timing import simulate

    best: dict = {}
    for _ in range(repeat):
        prog, launch, hw = build(name)
        load0 = os.getloadavg()[0]
        t, p = time.perf_counter(), time.process_time()
        r = simulate(prog, launch, hw) if timed else run_functional(prog, launch)
        wall, proc = time.perf_counter() - t, time.process_time() - p
        n = r.warp_instructions
        got = {"warp_instructions": n, "wall_s": round(wall, 3), "process_s": round(proc, 3),
               "per_s_wall": round(n / wall), "per_s_process": round(n / proc),
               "load": f"{load0:.2f} / {os.getloadavg()[0]:.2f}"}
        if timed:
            got["cycles"] = r.cycles
        else:
            got["execution"] = getattr(r, "mode", "sequential")  # sim/functional/lockstep.py
        if not best or got["per_s_process"] > best["per_s_process"]:
            best = got
    return best


def calls_per_instruction() -> float:
    from sim.timing import simulate
    from tests.test_timing_speed import _sgemm

    prog, L = _sgemm(64)
    from sim.hw import load_hw

    prof = cProfile.Profile()
    prof.enable()
    r = simulate(prog, L, load_hw("h200"))
    prof.disable()
    return pstats.Stats(prof).total_calls / r.warp_instructions  # type: ignore[attr-defined]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(pathlib.Path(__file__).parent / "sim_speed.md"))
    ap.add_argument("--json", default=None)
    ap.add_argument("--previous", default=None)
    ap.add_argument("--repeat", type=int, default=1)
    a = ap.parse_args()
    figs = {"date": f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC",
            "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python "
                       f"{platform.python_version()}",
            "timing": {}, "functional": {}}
    for name in KERNELS:
        figs["timing"][name] = rate(name, True, a.repeat)
        figs["functional"][name] = rate(name, False, a.repeat)
    figs["calls_per_instruction"] = round(calls_per_instruction(), 1)
    prev = json.loads(pathlib.Path(a.previous).read_text()) if a.previous else None
    md = ["# Simulator speed (benchmarks/sim_speed.py)", "",
          f"{figs['date']}, {figs['machine']}, h200.yaml; best of {a.repeat} run(s) by process time. "
          "Goal (issue 17): timing >= 100,000 and functional >= 300,000 warp instructions/s.", ""]
    head = ("| mode | kernel | warp instructions | warp instr/s (wall) | warp instr/s (process) "
            "| load (1 min) before / after |")
    if prev:
        head += f" previous ({prev['date']}): wall / process, load | speed-up (process) |"
    md += [head, "|---" * (head.count("|") - 1) + "|"]
    for mode in ("timing", "functional"):
        for name in KERNELS:
            g = figs[mode][name]
            row = (f"| {mode} | {name} | {g['warp_instructions']:,} | {g['per_s_wall']:,} | "
                   f"**{g['per_s_process']:,}** | {g['load']} |")
            if prev:
                p = prev[mode][name]
                row += (f" {p['per_s_wall']:,} / {p['per_s_process']:,}, {p['load']} | "
                        f"{g['per_s_process'] / p['per_s_process']:.2f}x |")
            md.append(row)
    md += ["", f"Python function calls per warp instruction (timing model, sgemm 64^3, cProfile): "
           f"{figs['calls_per_instruction']}" + (f" (previous {prev['calls_per_instruction']})" if prev else ""),
           ""]
    text = "\n".join(md)
    pathlib.Path(a.out).write_text(text)
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(figs, indent=1) + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
