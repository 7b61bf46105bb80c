"""Score the current wgmma_tma model against a recorded top4.py run (issue 14's two model goals), on this machine:

    PYTHONPATH=. python3 benchmarks/tma_score.py [benchmarks/data/top4_bench_h200_2026-12-01_run2.json] [--json F]

- per CTA: each measured kernel predicted at its own measured SM clock (top4.at_clock) against its measured clock64
  cycles (the busiest CTAs of the last launch): mean |error| and the count within 10%, all and the picks;
- top 4: per shape, the measured candidate the current model ranks first (predicted cycles per CTA as the planner
  ranks them, at h200.yaml's planner_clock_mhz) and whether it is within 5% of the fewest measured cycles of the
  four (`top4_holds`) and of the shortest measured time (`top4_holds_time`: the kernels run at different clocks); the
  current planner's own pick (full search), with whether it is among the measured four at all.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def score(path: Path, full_pick: bool = True, hw=None) -> dict:
    import dataclasses

    from kernelgen.planner import plan
    from kernelgen.spec import shorthand
    from kernelgen.variants import get
    from sim.hw import load_hw

    hw = hw or load_hw("h200")
    rows = [r for r in json.loads(path.read_text())["rows"] if "rank" in r and r.get("measured_cycles_per_cta")
            and r["tiling"].startswith("wgmma_tma_")]  # this model's kernels (a cp.async wgmma may join a top 4)
    out = []
    excluded: list[str] = []
    for r in rows:
        spec = shorthand("x".join(map(str, r["shape"])), r["dtype"], r["out_dtype"])
        ts = [t for t in get("wgmma_tma").tilings(spec) if t.key() == r["tiling"]]
        if not ts:  # no longer a candidate (e.g. a consumer warpgroup wholly beyond M): not scored
            excluded.append(r["tiling"] + " @ " + "x".join(map(str, r["shape"])))
            continue
        base = plan(spec, hw, "wgmma_tma", only=ts).best.cycles_per_cta
        clk = dataclasses.replace(hw, clock_mhz=float(r["measured_clock_mhz"]), planner_clock_mhz=None)
        at = plan(spec, clk, "wgmma_tma", only=ts).best.cycles_per_cta
        meas = r["measured_cycles_per_cta"]
        out.append({"shape": r["shape"], "dtype": r["dtype"], "out_dtype": r["out_dtype"], "rank_then": r["rank"],
                    "tiling": r["tiling"], "pred": base, "pred_at_clock": at, "meas": meas, "q": at / meas,
                    "time_ms": r["time_ms"]})
    res: dict = {"kernels": out, "shapes": [], "excluded": excluded}
    for key in dict.fromkeys((x["dtype"], tuple(x["shape"])) for x in out):
        grp = [x for x in out if (x["dtype"], tuple(x["shape"])) == key]
        pick = min(grp, key=lambda x: x["pred"])
        best = min(x["meas"] for x in grp)
        fastest = min(x["time_ms"] for x in grp)
        sh: dict = {"dtype": key[0], "shape": list(key[1]), "pick": pick["tiling"], "pick_q": pick["q"],
                    "holds": pick["meas"] <= 1.05 * best, "pick_over_best": pick["meas"] / best,
                    "holds_time": pick["time_ms"] <= 1.05 * fastest, "pick_over_fastest": pick["time_ms"] / fastest,
                    "best": min(grp, key=lambda x: x["meas"])["tiling"]}
        if full_pick:
            spec = shorthand("x".join(map(str, key[1])), key[0], grp[0]["out_dtype"])
            p = plan(spec, hw)
            sh["planner_pick"] = p.best.tiling.key()
            sh["planner_pick_measured"] = any(x["tiling"] == sh["planner_pick"] for x in grp)
        res["shapes"].append(sh)
    picks = [x for x in out if x["tiling"] == next(s["pick"] for s in res["shapes"]
                                                   if (s["dtype"], s["shape"]) == (x["dtype"], x["shape"]))]
    res["summary"] = {
        "kernels": len(out), "mape": sum(abs(x["q"] - 1) for x in out) / len(out),
        "within_10": sum(abs(x["q"] - 1) <= 0.10 for x in out),
        "picks_within_10": sum(abs(x["q"] - 1) <= 0.10 for x in picks), "picks": len(picks),
        "top4_holds": sum(s["holds"] for s in res["shapes"]),
        "top4_holds_time": sum(s["holds_time"] for s in res["shapes"]), "shapes": len(res["shapes"]),
        "planner_pick_measured": sum(s.get("planner_pick_measured", False) for s in res["shapes"]),
        "excluded": len(excluded)}
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("measured", nargs="?", default=str(ROOT / "benchmarks/data/top4_bench_h200_2026-12-01_run2.json"))
    ap.add_argument("--json")
    ap.add_argument("--no-full", action="store_true", help="skip the full-search pick per shape")
    a = ap.parse_args()
    res = score(Path(a.measured), not a.no_full)
    for x in res["kernels"]:
        print(f"{x['dtype']:4s} {'x'.join(map(str, x['shape'])):16s} {x['tiling']:44s} pred {x['pred_at_clock']:>10,} "
              f"meas {x['meas']:>12,.0f} q {x['q']:.3f}")
    for s in res["shapes"]:
        print(f"{s['dtype']:4s} {'x'.join(map(str, s['shape'])):16s} pick {s['pick']:44s} "
              f"{'holds ' if s['holds'] else 'MISSES'} {s['pick_over_best']:.3f} x best ({s['best']}), "
              f"time {s['pick_over_fastest']:.3f}; "
              f"planner: {s.get('planner_pick', '-')}"
              f"{'' if s.get('planner_pick_measured', True) else ' (NOT MEASURED)'}")
    print(json.dumps(res["summary"]))
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
