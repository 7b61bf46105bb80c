"""Where the simulator's time goes: cProfile of the three speed-goal kernels (benchmarks/sim_kernels.py),
timing model and functional-only, grouped by layer.

    PYTHONPATH=. python benchmarks/sim_profile.py [--out benchmarks/sim_profile.md] [--kernels a,b]

Each layer's share is the self time (tottime) of the functions defined in its files; numpy's C functions
and methods (cProfile names them '{method ...}' / '{built-in ...}') count as "numpy and builtins". Under
cProfile every Python call costs more than without it, so the shares lean towards call-heavy layers; the
wall rates in benchmarks/sim_speed.md are measured without the profiler.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime
import os
import pathlib
import pstats
import sys
from collections import defaultdict

ROOT = str(pathlib.Path(__file__).resolve().parent.parent).replace(os.sep, "/")
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from benchmarks.sim_kernels import KERNELS, build  # noqa: E402

# (layer, path fragment) in match order
LAYERS = (
    ("timing: scheduler (core.py)", "sim/timing/core.py"),
    ("timing: warp window, recompute, issue (timing/warp.py)", "sim/timing/warp.py"),
    ("timing: memory system (memory.py, units.py, tma.py)", "sim/timing/"),
    ("simpy event loop", "simpy/"),
    ("functional: warp step, SIMT stack, memory access (functional/warp.py)", "sim/functional/warp.py"),
    ("functional: opcode semantics (ops_*.py, operands.py, fragments.py)", "sim/functional/ops_"),
    ("functional: opcode semantics (ops_*.py, operands.py, fragments.py)", "sim/functional/operands.py"),
    ("functional: opcode semantics (ops_*.py, operands.py, fragments.py)", "sim/functional/fragments.py"),
    ("functional: type conversions (types.py)", "sim/functional/types.py"),
    ("functional: memories (functional/memory.py)", "sim/functional/memory.py"),
    ("functional: runner and records", "sim/functional/"),
    ("numpy (Python side)", "numpy/"),
)
NUMPY = "numpy and builtins (C functions and methods)"


def layer_of(fn: tuple[str, int, str]) -> str:
    path = fn[0].replace(os.sep, "/")
    if path == "~" or path.startswith("<"):
        return NUMPY
    for name, frag in LAYERS:
        if frag in path:
            return name
    return "other Python"


def profile(name: str, timed: bool) -> tuple[pstats.Stats, int, float]:
    from sim.functional.runner import run_functional
    from sim.timing import simulate

    prog, launch, hw = build(name)
    prof = cProfile.Profile()
    prof.enable()
    n = simulate(prog, launch, hw).warp_instructions if timed else run_functional(prog, launch).warp_instructions
    prof.disable()
    st = pstats.Stats(prof)
    return st, n, st.total_tt  # type: ignore[attr-defined]


def table(st: pstats.Stats, n: int, total: float) -> tuple[list[str], list[str]]:
    by: dict[str, float] = defaultdict(float)
    calls: dict[str, int] = defaultdict(int)
    for fn, (_cc, nc, tt, _ct, _callers) in st.stats.items():  # type: ignore[attr-defined]
        by[layer_of(fn)] += tt
        calls[layer_of(fn)] += nc
    rows = ["| layer | share | µs per warp instruction | calls per warp instruction |", "|---|---|---|---|"]
    for k, v in sorted(by.items(), key=lambda kv: -kv[1]):
        rows.append(f"| {k} | {100 * v / total:.1f}% | {1e6 * v / n:.1f} | {calls[k] / n:.1f} |")
    top = ["| function | share (self) | calls per warp instruction |", "|---|---|---|"]
    items = sorted(st.stats.items(), key=lambda kv: -kv[1][2])[:15]  # type: ignore[attr-defined]
    for fn, (_cc, nc, tt, _ct, _callers) in items:
        where = fn[0].replace(os.sep, "/")
        where = where.split(ROOT + "/")[-1].split("site-packages/")[-1]
        top.append(f"| `{where}:{fn[1]} {fn[2]}` | {100 * tt / total:.1f}% | {nc / n:.2f} |")
    return rows, top


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(pathlib.Path(__file__).parent / "sim_profile.md"))
    ap.add_argument("--kernels", default=",".join(KERNELS))
    a = ap.parse_args()
    md = ["# Simulator profile (benchmarks/sim_profile.py)", "",
          f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, load average (1 min) "
          f"{os.getloadavg()[0]:.2f}, h200.yaml, cProfile (self time per layer; the profiler inflates "
          "call-heavy code).", ""]
    for name in a.kernels.split(","):
        for timed in (True, False):
            st, n, total = profile(name, timed)
            rows, top = table(st, n, total)
            mode = "timing model" if timed else "functional only"
            md += [f"## {name}, {mode}: {n:,} warp instructions, {total:.1f} s under cProfile, "
                   f"{st.total_calls / n:.1f} calls per warp instruction", ""]  # type: ignore[attr-defined]
            md += rows + ["", "Top functions by self time:", ""] + top + [""]
            print(f"{name} {mode} done", file=sys.stderr)
    text = "\n".join(md)
    pathlib.Path(a.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
