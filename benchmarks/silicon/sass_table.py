"""Per-CTA cycles of the suite kernels: H200 (clock64 spans, median over the calls of the per-call mean)
vs SASS-timed (benchmarks/data/silicon_sim_sass.json, simulate.py --isa sass) vs PTX-timed
(benchmarks/data/silicon_sim.json), each with its error, and the MAPE of each mode over the kernels
that have all three; --before PATH (an earlier SASS run, e.g. from git show) adds its column and MAPE first
and keeps to the kernels it has.
Markdown on stdout.

    PYTHONPATH=. python3 benchmarks/silicon/sass_table.py [--gpu PATH] [--sass PATH] [--ptx PATH] [--before PATH]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from benchmarks.silicon.suite import ROOT  # noqa: E402

DATA = ROOT / "benchmarks" / "data"


def measured(row: dict) -> float | None:
    means = [c["per_cta"]["mean"] for c in row.get("calls", []) if c.get("per_cta")]
    return statistics.median(means) if means else None


def simulated(row: dict | None) -> float | None:
    return ((row or {}).get("per_cta") or {}).get("mean")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpu", default=str(DATA / "silicon_gpu_2026-11-30.json"))
    ap.add_argument("--sass", default=str(DATA / "silicon_sim_sass.json"))
    ap.add_argument("--ptx", default=str(DATA / "silicon_sim.json"))
    ap.add_argument("--before", help="an earlier SASS run to show beside (column 'SASS before')")
    a = ap.parse_args()
    gpu = {r["name"]: r for r in json.loads(Path(a.gpu).read_text())["kernels"]}
    sass = {r["name"]: r for r in json.loads(Path(a.sass).read_text())["kernels"]}
    ptx = {r["name"]: r for r in json.loads(Path(a.ptx).read_text())["kernels"]}
    before = {r["name"]: r for r in json.loads(Path(a.before).read_text())["kernels"]} if a.before else None
    head = "| kernel | H200 |" + (" SASS before | err |" if before is not None else "") + " SASS | err | PTX | err |"
    print(head + "\n|---|---:|" + "---:|" * (head.count("|") - 3))
    es: list[float] = []
    ep: list[float] = []
    eb: list[float] = []
    for name, srow in sass.items():
        m, s, p = measured(gpu.get(name, {})), simulated(srow), simulated(ptx.get(name))
        if before is not None and name not in before:
            continue
        b = simulated(before.get(name)) if before is not None else None
        if not m or s is None or p is None or (before is not None and b is None):
            print(f"| {name} | {m or 'n/a'} | {s if s is not None else srow.get('error', 'n/a')[:60]} | | {p} | |")
            continue
        es.append(abs(s - m) / m)
        ep.append(abs(p - m) / m)
        cells = [f"{m:,.0f}"]
        if b is not None:
            eb.append(abs(b - m) / m)
            cells += [f"{b:,.0f}", f"{(b - m) / m * 100:+.1f}%"]
        cells += [f"{s:,.0f}", f"{(s - m) / m * 100:+.1f}%", f"{p:,.0f}", f"{(p - m) / m * 100:+.1f}%"]
        print(f"| {name} | " + " | ".join(cells) + " |")
    if es:
        print(f"\nMAPE over {len(es)} kernels: " + (f"SASS before {statistics.mean(eb) * 100:.1f}%, " if eb else "")
              + f"SASS {statistics.mean(es) * 100:.1f}%, PTX {statistics.mean(ep) * 100:.1f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
