"""The wgmma microbenchmarks (kernels.py) timed in SASS mode (sim.sass.timing: HGMMA/QGMMA/IGMMA)
against the committed H200 figures and PTX mode (benchmarks/data/wgmma_micro_2026-11-30.json).

    PYTHONPATH=. python3 benchmarks/micro_wgmma/sass_compare.py [--case NAME ...]
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.micro_wgmma.kernels import cases, ptx  # noqa: E402
from benchmarks.micro_wgmma.run import launch, per_wgmma  # noqa: E402
from sim.hw import load_hw  # noqa: E402
from sim.sass.timing import simulate_sass  # noqa: E402

DATA = ROOT / "benchmarks" / "data" / "wgmma_micro_2026-11-30.json"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--case", action="append")
    a = ap.parse_args()
    gpu = {r["case"]: r for r in json.loads(DATA.read_text())["rows"]}
    hw = load_hw("h200")
    print("| case | H200 | PTX mode | err | SASS mode | err |\n|---|---|---|---|---|---|")
    errs: dict[str, list[float]] = {"ptx": [], "sass": []}
    for c in cases():
        if a.case and c.name not in a.case or c.name not in gpu:
            continue
        g = gpu[c.name]
        r = simulate_sass(ptx(c), launch(c), hw, f"{c.name}.ptx")
        s = per_wgmma(r.outputs[0], c)
        m, p = g["gpu_cycles_per_wgmma"], g["sim_cycles_per_wgmma"]
        errs["ptx"].append(abs(p - m) / m)
        errs["sass"].append(abs(s - m) / m)
        print(f"| {c.name} | {m:.1f} | {p:.1f} | {(p - m) / m:+.0%} | {s:.1f} | {(s - m) / m:+.0%} |", flush=True)
    n = len(errs["sass"])
    print(f"| MAPE ({n}) | | | {sum(errs['ptx']) / n:.1%} | | {sum(errs['sass']) / n:.1%} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
