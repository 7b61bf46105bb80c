"""The suite's per-CTA MAPE against the committed H200 measurement with and without the L2 partition /
fill model (docs/first-touch.md): simulate every suite kernel on h200.yaml as is ("new") and with
l2.partition_bits, far_latency and fill cleared ("base"), or with the tensor pipe's lanes at the measured
339 ("lanes339", docs/micro-hmma.md), in PTX or SASS mode.

    PYTHONPATH=. python3 benchmarks/first_touch/suite_effect.py --isa ptx sass --variant new base --out PREFIX --jobs 14
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
    if name == "lanes339":  # docs/micro-hmma.md: the HMMA.16816 pipe alone, 2048 MACs / 6.04 cycles per sub-partition
        hw = dataclasses.replace(hw, pipes=tuple(dataclasses.replace(p, lanes=339) if p.name == "tensor" else p
                                                 for p in hw.pipes))
    return hw


def _one(job: tuple[str, str, str]) -> dict:
    from benchmarks.silicon.simulate import simulate_one
    from benchmarks.silicon.suite import SUITE

    isa, variant, name = job
    k = next(k for k in SUITE if k.name == name)
    t0 = time.time()
    row = simulate_one(k, hw_variant(variant), isa, True)
    out = {"name": k.name, "group": k.group, "isa": isa, "variant": variant,
           "mean": (row.get("per_cta") or {}).get("mean"), "error": row.get("error"),
           "wall_s": round(time.time() - t0, 1)}
    print(json.dumps(out), flush=True)
    return out


def simulate(isas: list[str], variants: list[str], out: str, only: list[str] | None, jobs: int) -> None:
    """Every (isa, variant, kernel), `jobs` at a time; one file per (isa, variant): OUT_isa_variant.json."""
    from multiprocessing import Pool

    from benchmarks.silicon.suite import SUITE

    names = [k.name for k in SUITE if not only or k.name in only]
    work = [(i, v, n) for n in names for i in isas for v in variants]
    with Pool(jobs) as pool:
        rows = pool.map(_one, work, chunksize=1)
    for i in isas:
        for v in variants:
            mine = [r for r in rows if r["isa"] == i and r["variant"] == v]
            Path(f"{out}_{i}_{v}.json").write_text(json.dumps({"isa": i, "variant": v, "kernels": mine}, indent=1))


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
    ap.add_argument("--isa", nargs="+", choices=("ptx", "sass"), default=["ptx"])
    ap.add_argument("--variant", nargs="+", choices=("new", "base", "lanes339"), default=["new"])
    ap.add_argument("--out", default="suite_effect", help="prefix: writes PREFIX_isa_variant.json")
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--report", nargs="*")
    a = ap.parse_args()
    if a.report:
        report(a.report)
    else:
        simulate(a.isa, a.variant, a.out, a.only, a.jobs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
