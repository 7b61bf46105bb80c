"""The suite's per-CTA MAPE against the committed H200 measurement with and without the L2 partition /
fill model (docs/first-touch.md): simulate every suite kernel on h200.yaml as is ("new") and with
l2.partition_bits, far_latency and fill cleared ("base"), in PTX or SASS mode.

    PYTHONPATH=. python3 benchmarks/first_touch/suite_effect.py --isa ptx|sass --variant new|base --out F.json
    PYTHONPATH=. python3 benchmarks/first_touch/suite_effect.py --report A.json B.json ...
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT))
GPU = ROOT / "benchmarks" / "data" / "silicon_gpu_2026-11-30.json"


def hw_variant(name: str):
    from sim.hw import load_hw

    hw = load_hw("h200.yaml")
    if name == "base":
        hw = dataclasses.replace(hw, l2=dataclasses.replace(hw.l2, partition_bits=(), far_latency=0, fill=None))
    return hw


def simulate(isa: str, variant: str, out: str, only: list[str] | None) -> None:
    from benchmarks.silicon.simulate import simulate_one
    from benchmarks.silicon.suite import SUITE

    hw = hw_variant(variant)
    rows = []
    for k in SUITE:
        if only and k.name not in only:
            continue
        t0 = time.time()
        row = simulate_one(k, hw, isa, True)
        rows.append({"name": k.name, "group": k.group, "mean": (row.get("per_cta") or {}).get("mean"),
                     "error": row.get("error"), "wall_s": round(time.time() - t0, 1)})
        print(json.dumps(rows[-1]), flush=True)
        Path(out).write_text(json.dumps({"isa": isa, "variant": variant, "kernels": rows}, indent=1))


def report(files: list[str]) -> None:
    gpu = {k["name"]: k.get("per_cta_mean") for k in json.loads(GPU.read_text())["kernels"]}
    runs = [json.loads(Path(f).read_text()) for f in files]
    names = [r["name"] for r in runs[0]["kernels"]]
    common = [n for n in names if gpu.get(n) and all(
        any(x["name"] == n and x["mean"] for x in r["kernels"]) for r in runs)]
    print("| kernel | measured | " + " | ".join(f"{r['isa']} {r['variant']}" for r in runs) + " |")
    print("|---|---|" + "---|" * len(runs))
    tot = [0.0] * len(runs)
    for n in common:
        cells = []
        for i, r in enumerate(runs):
            v = next(x["mean"] for x in r["kernels"] if x["name"] == n)
            e = (v - gpu[n]) / gpu[n]
            tot[i] += abs(e)
            cells.append(f"{v:,.0f} ({e:+.0%})")
        print(f"| {n} | {gpu[n]:,.0f} | " + " | ".join(cells) + " |")
    print("| MAPE | | " + " | ".join(f"{t / len(common):.1%} ({len(common)})" for t in tot) + " |")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--isa", choices=("ptx", "sass"), default="ptx")
    ap.add_argument("--variant", choices=("new", "base"), default="new")
    ap.add_argument("--out")
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--report", nargs="*")
    a = ap.parse_args()
    if a.report:
        report(a.report)
    else:
        simulate(a.isa, a.variant, a.out, a.only)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
