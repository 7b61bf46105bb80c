"""Simulator speed: the sgemm_tiled fixture at 128x128x128 on h200.yaml.

    python benchmarks/sim_speed.py [--out benchmarks/sim_speed.md]

Reports simulated warp instructions per second and simulated cycles per second of wall time
(functional-only speed alongside, for scale) and writes a markdown table.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import platform
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
    a = ap.parse_args()
    c = by_name("sgemm_tiled")
    s = {"M": a.size, "N": a.size, "K": a.size}
    args = c.make_args(np.random.default_rng(0), s)
    grid, block = c.grid(s), c.block(s)
    prog = parse_file(str(c.ptx_path))
    hw = load_hw("h200")

    def launch():
        L = to_launch(c, [x.copy() if isinstance(x, np.ndarray) else x for x in args])
        L.grid, L.block = grid, block
        return L

    t = time.perf_counter()
    f = run_functional(prog, launch())
    tf = time.perf_counter() - t
    t = time.perf_counter()
    r = simulate(prog, launch(), hw)
    ts = time.perf_counter() - t
    rows = [
        ("kernel", f"sgemm_tiled {a.size}x{a.size}x{a.size}, grid {grid}, block {block}, h200.yaml"),
        ("machine", f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python "
                    f"{platform.python_version()}"),
        ("warp instructions", f"{r.warp_instructions}"),
        ("simulated cycles", f"{r.cycles}"),
        ("timing simulation wall time", f"{ts:.2f} s"),
        ("**warp instructions / s (timing)**", f"**{r.warp_instructions / ts:,.0f}**"),
        ("simulated cycles / s", f"{r.cycles / ts:,.0f}"),
        ("functional only: warp instructions / s", f"{f.warp_instructions / tf:,.0f}"),
        ("bar", "20,000 warp instructions / s"),
    ]
    md = ["# Simulator speed (benchmarks/sim_speed.py)", "", "| what | value |", "|---|---|"]
    md += [f"| {k} | {v} |" for k, v in rows]
    text = "\n".join(md) + "\n"
    pathlib.Path(a.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
