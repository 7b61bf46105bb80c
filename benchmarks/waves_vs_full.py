"""--by-waves against one simulation of the whole grid, where both fit in minutes: kernelgen mma GEMMs on
h200 with fewer cores (HwConfig core.count) so that the grid takes several waves (docs/sampling.md).

    PYTHONPATH=. python benchmarks/waves_vs_full.py [--json FILE] [CASE ...]

CASE is N:CORES[:CTAS] or MxNxK:CORES[:CTAS] (GEMM f16 mma planned for h200, run on CORES cores, at most
CTAS resident per core: default as planned).
Reports both cycle counts, the difference, warp instructions (equal), and process time of each.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def one(gemm: str, cores: int, max_ctas: int | None = None) -> dict:
    import numpy as np

    from sim.cli import build_launch, build_parser
    from sim.hw import load_hw
    from sim.launch import read_metadata
    from sim.ptx.parser import parse_file
    from sim.timing import simulate
    from sim.timing.sampling import simulate_by_waves

    out = pathlib.Path(tempfile.mkdtemp()) / "k"
    subprocess.run([sys.executable, "-m", "kernelgen", "compile", "--hw", "h200", "--gemm", gemm, "--dtype",
                    "f16", "--variant", "mma", "-o", str(out)], check=True, capture_output=True)
    f = str(out / "kernel.ptx")
    prog = parse_file(f)
    hw0 = load_hw("h200")
    core = dataclasses.replace(hw0.core, count=cores)
    if max_ctas is not None:
        core = dataclasses.replace(core, max_ctas=max_ctas)
    hw = dataclasses.replace(hw0, core=core)
    meta = read_metadata(prog.text, f)

    def launch():
        return build_launch(prog, build_parser().parse_args(["run", f, "--hw", "h200"]), meta,
                            np.random.default_rng(1))

    load0 = os.getloadavg()[0]
    p = time.process_time()
    full = simulate(prog, launch(), hw, max_instructions=10**9)
    t_full = time.process_time() - p
    p = time.process_time()
    w = simulate_by_waves(prog, launch(), hw, 10**9)
    t_w = time.process_time() - p
    same = all(np.array_equal(full.outputs[i], w.outputs[i], equal_nan=True) for i in full.outputs)
    return {"gemm": gemm, "cores": cores, "max_ctas": max_ctas, "ctas_per_core": full.occupancy["ctas_per_core"],
            "grid": list(launch().grid), "waves": w.waves, "full_cycles": full.cycles,
            "by_waves_cycles": w.cycles, "difference": round((w.cycles - full.cycles) / full.cycles, 4),
            "warp_instructions": [full.warp_instructions, w.warp_instructions], "outputs_equal": same,
            "execution": w.execution, "process_s": [round(t_full, 1), round(t_w, 1)],
            "load_1min": [load0, os.getloadavg()[0]]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", nargs="*", default=["256:16", "512:32"])
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    runs: list[dict] = []
    res = {"date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"), "runs": runs}
    for c in a.cases:
        g, *rest = c.split(":")
        gemm = g if "x" in g else f"{g}x{g}x{g}"
        runs.append(one(gemm, int(rest[0]), int(rest[1]) if len(rest) > 1 else None))
        print(json.dumps(runs[-1]), flush=True)
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
