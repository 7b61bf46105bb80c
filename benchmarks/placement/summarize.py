"""Summarise the H200 CTA-placement measurement (placement.cu) into docs/placement.md.

    python benchmarks/placement/summarize.py benchmarks/data/placement_2026-11-30.csv.gz

For each (threads, dynamic shared bytes, grid): how many distinct SMs the CTAs ran on, the most CTAs
one SM ran, and how many start waves there were (CTAs whose start times differ by less than half a
CTA's run time form one wave). Every figure is computed from the CSV.
"""

from __future__ import annotations

import csv
import gzip
import sys
from collections import Counter, defaultdict
from pathlib import Path


def summarise(path: Path) -> list[dict]:
    rows = list(csv.DictReader(gzip.open(path, "rt")))
    by: dict[tuple[int, int, int, int], list[dict]] = defaultdict(list)
    for r in rows:
        by[(int(r["threads"]), int(r["smem"]), int(r["grid"]), int(r["rep"]))].append(r)
    out = []
    for (th, sm, g, rep), rs in sorted(by.items()):
        if rep != 0:
            continue
        per_sm = Counter(int(r["smid"]) for r in rs)
        t0 = min(int(r["t_start_ns"]) for r in rs)
        run = min(int(r["t_end_ns"]) - int(r["t_start_ns"]) for r in rs)
        starts = sorted(int(r["t_start_ns"]) - t0 for r in rs)
        waves = 1 + sum(1 for a, b in zip(starts, starts[1:]) if b - a > run / 2)
        span = max(int(r["t_end_ns"]) for r in rs) - t0
        out.append({"threads": th, "smem": sm, "grid": g, "sms": len(per_sm), "max_per_sm": max(per_sm.values()),
                    "min_per_sm": min(per_sm.values()) if len(per_sm) == 132 else 0, "waves": waves,
                    "span_us": span / 1e3, "cta_us": run / 1e3})
    return out


def main() -> None:
    path = Path(sys.argv[1])
    rows = summarise(path)
    lines = ["# CTA placement on the H200 (measured)", "",
             f"Source: `benchmarks/placement/placement.cu`, run on an NVIDIA H200 (132 SMs, driver 580.159.04) on "
             f"2026-11-30; raw per-CTA CSV `{path.as_posix()}`; this table by `benchmarks/placement/summarize.py`.",
             "Every CTA spins 200,000 SM cycles (clock64), so CTAs are equal; `%smid` and `%globaltimer` are "
             "recorded per CTA. Dynamic shared memory sets the residency: 0 B (limited by threads), "
             "100 KiB (2 CTAs per SM), 150 KiB (1 CTA per SM).", "",
             "| threads | dyn. shared | grid | SMs used | max CTAs on one SM | min (all 132 used) | waves | span us |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['threads']} | {r['smem'] // 1024} KiB | {r['grid']} | {r['sms']} | {r['max_per_sm']} | "
                     f"{r['min_per_sm'] or '-'} | {r['waves']} | {r['span_us']:.1f} |")
    spread = all(r["sms"] == min(r["grid"], 132) for r in rows)
    balanced = all(r["max_per_sm"] == -(-r["grid"] // 132) or r["waves"] > 1 for r in rows)
    lines += ["", "## What it shows", "",
              "- A grid of G <= 132 CTAs runs on G distinct SMs, one CTA each: "
              f"{'yes, in every row' if spread else 'NO'}.",
              f"- A larger grid that fits in one wave is dealt evenly: the busiest SM runs ceil(G / 132) CTAs "
              f"({'every one-wave row' if balanced else 'NOT every row'}); it is never packed to the residency limit.",
              "- Beyond one wave (G > 132 x residency) CTAs start in waves as slots free up.",
              "- The simulator's CTA deal follows this: breadth-first over the cores, each core taking its next CTA "
              "when a slot frees (docs/timing.md)."]
    Path("docs/placement.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[-6:]))


if __name__ == "__main__":
    main()
