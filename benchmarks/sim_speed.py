"""Simulator speed: the sgemm_tiled fixture at 128x128x128 on h200.yaml.

    python benchmarks/sim_speed.py [--out benchmarks/sim_speed.md]

Reports simulated warp instructions per second and simulated cycles per second of wall time
(functional-only speed alongside, for scale) and writes a markdown table. The machine is often
shared, so the table also gives the same rates over process (CPU) time, the load average around
the run, and -- deterministic, independent of load -- Python function calls per warp instruction
(cProfile, at --calls-size, default 64^3; 0 skips it).
"""

from __future__ import annotations

import argparse
import cProfile
import datetime
import os
import pathlib
import platform
import pstats
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from sim.functional.runner import run_functional  # noqa: E402
from sim.hw import load_hw  # noqa: E402
from sim.ptx.parser import parse_file  # noqa: E402
from sim.timing import simulate  # noqa: E402
from tests.fixtures.cases import by_name  # noqa: E402
from validation.calibrate import to_launch  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(pathlib.Path(__file__).parent / "sim_speed.md"))
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--calls-size", type=int, default=64)
    a = ap.parse_args()
    c = by_name("sgemm_tiled")
    s = {"M": a.size, "N": a.size, "K": a.size}
    args = c.make_args(np.random.default_rng(0), s)
    grid, block = c.grid(s), c.block(s)
    prog = parse_file(str(c.ptx_path))
    hw = load_hw("h200")

    def launch(size=a.size):
        sz = {"M": size, "N": size, "K": size}
        ar = args if size == a.size else c.make_args(np.random.default_rng(0), sz)
        L = to_launch(c, [x.copy() if isinstance(x, np.ndarray) else x for x in ar])
        L.grid, L.block = c.grid(sz), c.block(sz)
        return L

    load0 = os.getloadavg()[0]
    t, p = time.perf_counter(), time.process_time()
    f = run_functional(prog, launch())
    tf, pf = time.perf_counter() - t, time.process_time() - p
    t, p = time.perf_counter(), time.process_time()
    r = simulate(prog, launch(), hw)
    ts, ps = time.perf_counter() - t, time.process_time() - p
    load1 = os.getloadavg()[0]
    calls = None
    if a.calls_size:
        L = launch(a.calls_size)
        prof = cProfile.Profile()
        prof.enable()
        rc = simulate(prog, L, hw)
        prof.disable()
        calls = (pstats.Stats(prof).total_calls / rc.warp_instructions, a.calls_size, rc.warp_instructions)
    n = r.warp_instructions
    rows = [
        ("date", datetime.date.today().isoformat()),
        ("kernel", f"sgemm_tiled {a.size}x{a.size}x{a.size}, grid {grid}, block {block}, h200.yaml"),
        ("machine", f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python "
                    f"{platform.python_version()}"),
        ("load average (1 min) before / after", f"{load0:.2f} / {load1:.2f}"),
        ("warp instructions", f"{n}"),
        ("simulated cycles", f"{r.cycles}"),
        ("timing simulation wall time", f"{ts:.2f} s"),
        ("timing simulation process time", f"{ps:.2f} s"),
        ("**warp instructions / s (timing, wall)**", f"**{n / ts:,.0f}**"),
        ("warp instructions / s (timing, process time)", f"{n / ps:,.0f}"),
        ("simulated cycles / s (wall)", f"{r.cycles / ts:,.0f}"),
        ("simulated cycles / s (process time)", f"{r.cycles / ps:,.0f}"),
        ("functional only: warp instructions / s (wall / process time)", f"{f.warp_instructions / tf:,.0f} / "
                                                                        f"{f.warp_instructions / pf:,.0f}"),
    ]
    if calls is not None:
        rows.append((f"Python function calls per warp instruction (cProfile, {calls[1]}^3, {calls[2]} warp "
                     "instructions, timing + functional)", f"{calls[0]:.1f}"))
    rows.append(("bar", "20,000 warp instructions / s"))
    md = ["# Simulator speed (benchmarks/sim_speed.py)", "", "| what | value |", "|---|---|"]
    md += [f"| {k} | {v} |" for k, v in rows]
    text = "\n".join(md) + "\n"
    pathlib.Path(a.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
