"""SASS timing mode vs PTX timing mode, warp instructions per second of process (CPU) time, on the three kernels
of issue 17 (benchmarks/sim_kernels.py: sgemm 128^3, kernelgen mma f16 256^3, reduce6; h200.yaml). Issue 11's
goal: SASS mode no slower than 0.7x PTX mode per warp instruction. Each mode counts its own warp instructions
(ptxas's SASS has other instructions than the PTX); ptxas/nvdisasm run once before the timed SASS runs (their
output is cached), so the figure is the simulation alone. --repeat rounds of PTX then SASS back to back, the
median run of each mode; the 1-minute load average is printed beside each (the machine is often shared).

    PYTHONPATH=. python benchmarks/sass_speed.py [--repeat N] [--json FILE]
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


def measure(name: str, repeat: int) -> dict:
    from sim.sass.listing import disassemble
    from sim.sass.timing import simulate_sass
    from sim.timing import simulate

    out: dict = {"kernel": name}
    runs: dict[str, list[dict]] = {"ptx": [], "sass": []}
    for _ in range(repeat):  # PTX and SASS back to back, so that both see the same load
        for mode in ("ptx", "sass"):
            prog, launch, hw = build(name)
            text = _source(name)
            if mode == "sass":
                disassemble(text, hw.arch, prog.file)  # compile outside the timed part (cached)
            load = os.getloadavg()[0]
            t, p = time.perf_counter(), time.process_time()
            r = simulate(prog, launch, hw) if mode == "ptx" else simulate_sass(text, launch, hw, prog.file)
            cpu, wall = time.process_time() - p, time.perf_counter() - t
            runs[mode].append({"warp_instructions": r.warp_instructions, "cpu_s": round(cpu, 2),
                               "wall_s": round(wall, 2), "per_s_cpu": round(r.warp_instructions / cpu),
                               "load1": round(load, 1), "cycles": r.cycles})
    for mode in ("ptx", "sass"):
        out[mode] = sorted(runs[mode], key=lambda r: r["per_s_cpu"])[repeat // 2]  # the median run
        out[mode + "_runs"] = runs[mode]
    out["ratio_sass_over_ptx"] = round(out["sass"]["per_s_cpu"] / out["ptx"]["per_s_cpu"], 2)
    return out


def _source(name: str) -> str:
    """The PTX text of a sim_kernels kernel (build() parses it; SASS mode needs the text)."""
    if name == "sgemm_128":
        from tests.fixtures.cases import by_name

        return by_name("sgemm_tiled").ptx_path.read_text()
    if name == "mma_f16_256":
        from kernelgen.cli import compile_kernel

        return compile_kernel("h200", None, "256x256x256", "f16", "f32", "mma")["kernel.ptx"]
    from benchmarks.silicon.common import load
    from benchmarks.silicon.suite import SUITE

    return load(next(k for k in SUITE if k.name == name)).text


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--json")
    ap.add_argument("--only", nargs="*")
    a = ap.parse_args()
    rows = [measure(n, a.repeat) for n in KERNELS if not a.only or n in a.only]
    for r in rows:
        cells = [f"{m.upper()} {r[m]['per_s_cpu']:,} warp inst/s CPU ({r[m]['warp_instructions']:,} in "
                 f"{r[m]['cpu_s']} s, load {r[m]['load1']})" for m in ("ptx", "sass")]
        print(f"{r['kernel']:12s} " + "  ".join(cells) + f"  ratio {r['ratio_sass_over_ptx']}")
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
