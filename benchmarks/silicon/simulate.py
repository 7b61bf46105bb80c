"""Simulate every instrumented suite kernel on h200.yaml (warm L2 as right after the inputs' upload; PTX
mode, or --isa sass: SASS timing into silicon_sim_sass.json) and write
benchmarks/data/silicon_sim.json: per kernel the per-CTA spans from the
profile buffer (mean, median over the simulated CTAs), the simulator's own cycles_per_cta, the check,
the wall time, or the one-line error when the simulator rejects the kernel.

    PYTHONPATH=. python3 benchmarks/silicon/simulate.py [--only NAME ...] [--out PATH] [--isa sass] [--cold-l2]
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from benchmarks.silicon.common import check, load, make_launch, one_line, spans, summary  # noqa: E402
from benchmarks.silicon.suite import ROOT, SUITE, Kernel  # noqa: E402

OUT = ROOT / "benchmarks" / "data" / "silicon_sim.json"
HW = "h200.yaml"


def simulate_one(k: Kernel, hw, isa: str = "ptx", warm: bool = True) -> dict:
    from sim.ptx.parser import parse_ptx
    from sim.sass.timing import simulate_sass
    from sim.timing import simulate

    row: dict = {"name": k.name, "group": k.group}
    t0 = time.time()
    try:
        ld = load(k)
        launch = make_launch(ld)
        before = launch.copy()
        prog = parse_ptx(ld.text, str(k.ptx))
        if isa == "sass":
            r = simulate_sass(ld.text, launch, hw, str(k.ptx), sample_ctas=k.sample, warm_l2=warm)
        else:
            r = simulate(prog, launch, hw, warm_l2=warm, sample_ctas=k.sample)
        sp = spans(ld, r.outputs)
        ran = None if r.ctas_simulated == r.ctas_total else set(sp)
        row.update({"per_cta": summary(list(sp.values())), "sim_cycles_per_cta": summary(r.cycles_per_cta),
                    "cycles": r.cycles, "ctas_simulated": r.ctas_simulated, "ctas_total": r.ctas_total,
                    "warp_instructions": r.warp_instructions,
                    "check": check(k, ld, before, r.outputs, ran)})
    except Exception as e:  # noqa: BLE001 - a rejected kernel is a finding, recorded in one line
        row["error"] = one_line(e)
    row["wall_s"] = round(time.time() - t0, 2)
    return row


def main() -> int:
    from sim.hw import load_hw

    ap = argparse.ArgumentParser()
    ap.add_argument("--only", nargs="*", help="kernel names (default: the whole suite)")
    ap.add_argument("--out", help=f"default {OUT.name}, silicon_sim_sass.json with --isa sass")
    ap.add_argument("--isa", choices=("ptx", "sass"), default="ptx", help="time the PTX or the SASS (sim.sass.timing)")
    ap.add_argument("--cold-l2", action="store_true", help="start with an empty L2 (the GPU run starts warm)")
    a = ap.parse_args()
    a.out = a.out or str(OUT if a.isa == "ptx" else OUT.with_name("silicon_sim_sass.json"))
    hw = load_hw(HW)
    kernels = [k for k in SUITE if not a.only or k.name in a.only]
    rows = []
    t0 = time.time()
    for k in kernels:
        row = simulate_one(k, hw, a.isa, not a.cold_l2)
        chk = row.get("check") or {}
        print(f"{k.name:28s} {row['wall_s']:7.1f}s  per-CTA mean "
              f"{(row.get('per_cta') or {}).get('mean')}  check {chk.get('passed')}  {row.get('error', '')}",
              flush=True)
        rows.append(row)
    res = {"date": datetime.date.today().isoformat(), "hw": HW, "mode": a.isa, "warm_l2": not a.cold_l2,
           "wall_s": round(time.time() - t0, 1), "kernels": rows}
    if a.only and Path(a.out).exists():  # merge a partial run into the existing file
        old = json.loads(Path(a.out).read_text())
        keep = {r["name"]: r for r in old.get("kernels", [])}
        keep.update({r["name"]: r for r in rows})
        res["kernels"] = [keep[k.name] for k in SUITE if k.name in keep]
        res["wall_s"] = old.get("wall_s")
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=1) + "\n")
    print(f"wrote {a.out} ({len(rows)} kernels, {res['wall_s']} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
