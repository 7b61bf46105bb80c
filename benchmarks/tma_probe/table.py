"""Tables and derived figures from benchmarks/tma_probe/timing.py's JSON (docs/tma-timing.md).

    python benchmarks/tma_probe/table.py benchmarks/data/tma_timing_2026-12-01.json
"""

from __future__ import annotations

import json
import sys

import numpy as np


def derive(d: dict) -> dict[str, float]:
    """Issue cost per extra TMA (least-squares slope of issue cycles per phase over depth), round trip of
    a lone 1 KiB box (L2 and DRAM, one CTA), and the bandwidth plateaus per SM and for the whole GPU."""
    rows = {(r["tensor"], r["box_bytes"], r["depth"], r["grid"]): r for r in d["results"]}
    depths = sorted({r["depth"] for r in d["results"]})
    per_phase = [rows[("l2", 1024, k, 1)]["issue_cycles_per_load_median"] * k for k in depths]
    slope, intercept = np.polyfit(depths, per_phase, 1)
    best = {t: max((r for r in d["results"] if r["tensor"] == t and r["grid"] == g),
                   key=lambda r: r["bytes_per_cycle_per_sm"]) for t, g in (("l2", 1), ("dram", d["sms"]))}
    ghz = d["clock_khz"] / 1e6
    return {"issue_cycles_per_tma": float(slope), "issue_fixed_cycles": float(intercept),
            "l2_round_trip_1k": rows[("l2", 1024, 1, 1)]["phase_cycles_median"],
            "dram_round_trip_1k": rows[("dram", 1024, 1, 1)]["phase_cycles_median"],
            "l2_bytes_per_cycle_per_sm": best["l2"]["bytes_per_cycle_per_sm"],
            "dram_bytes_per_cycle_per_sm_all": best["dram"]["bytes_per_cycle_per_sm"],
            "dram_tb_s_all_at_clock_rate": best["dram"]["bytes_per_cycle_per_sm"] * d["sms"] * ghz / 1e3}


def main(path: str) -> int:
    d = json.load(open(path))
    print(f"{d['device']}, {d['sms']} SMs, clock attribute {d['clock_khz'] / 1e6:.2f} GHz, {d['date']}, "
          f"{d['iters'] - d['warm']} timed phases per CTA\n")
    print("| tensor | box bytes | depth | CTAs | issue cycles / TMA | cycles / phase | bytes / cycle / SM |")
    print("|---|---|---|---|---|---|---|")
    for r in d["results"]:
        print(f"| {r['tensor']} | {r['box_bytes']} | {r['depth']} | {r['grid']} "
              f"| {r['issue_cycles_per_load_median']:.1f} | {r['phase_cycles_median']:.0f} "
              f"| {r['bytes_per_cycle_per_sm']:.1f} |")
    print()
    for k, v in derive(d).items():
        print(f"- {k}: {v:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
