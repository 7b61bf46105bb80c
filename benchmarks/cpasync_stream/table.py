"""Tables of an H200 run of benchmarks/cpasync_stream/run.py, and the cycle model beside the GEMMs' K loops.

    PYTHONPATH=. python3 benchmarks/cpasync_stream/table.py benchmarks/data/cpasync_stream_<date>.json

1. stream rows (grid >= 66): per source / pattern / grid, cycles per tile and the round trip by Little's law
   (depth x cycles per tile) for each tile size and depth, the chip's GB/s, and a least-squares line
   round trip = a + (bytes in flight on the chip) / b over the latency-bound rows (those below 90% of the
   best chip rate of their group): a is the round trip of a lone tile under load, b the rate the queue drains.
2. GEMM rows: measured K loop per K tile (first launch after the upload, last timed launch), per CTA, and the
   planner's iteration and per CTA now (kernelgen.planner.plan(only=[tiling])).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT))


def fit(rows: list[dict]) -> tuple[float, float] | None:
    """(a, b): round trip = a + chip bytes in flight / b, least squares over the latency-bound rows."""
    if len(rows) < 3:
        return None
    best = max(r["chip_gbps"] or 0 for r in rows)
    pts = [(r["grid"] * r["in_flight_bytes"], r["round_trip_littles_law"]) for r in rows
           if (r["chip_gbps"] or 0) < 0.9 * best]
    if len(pts) < 3:
        return None
    x, y = np.array(pts, float).T
    slope, a = np.polyfit(x, y, 1)
    return float(a), float(1 / slope) if slope > 0 else float("inf")


def stream_tables(rows: list[dict]) -> None:
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        if r["part"] == "stream" and r["work"] == 0:
            groups.setdefault((r["source"], r["pattern"], r["grid"]), []).append(r)
    for (src, pat, grid), rs in sorted(groups.items()):
        print(f"\n## {src} {pat} grid {grid} (clock {np.median([r['clock_mhz'] or 0 for r in rs]):.0f} MHz)")
        depths = sorted({r["depth"] for r in rs})
        print("| tile | " + " | ".join(f"d{d} cyc/tile (trip)" for d in depths) + " | best GB/s |")
        print("|---" * (len(depths) + 2) + "|")
        for tile in sorted({r["tile"] for r in rs}):
            by = {r["depth"]: r for r in rs if r["tile"] == tile}
            cells = [f"{by[d]['cycles_per_tile']:.0f} ({by[d]['round_trip_littles_law']:.0f})" if d in by else ""
                     for d in depths]
            gb = max((r["chip_gbps"] or 0) for r in by.values())
            print(f"| {tile // 1024} KiB | " + " | ".join(cells) + f" | {gb:.0f} |")
        f = fit(rs)
        if f:
            print(f"fit: round trip = {f[0]:.0f} + chip bytes in flight / {f[1]:.0f} B/cycle")


def gemm_table(rows: list[dict]) -> None:
    from benchmarks.planner_silicon import tiling_of
    from kernelgen.planner import plan
    from kernelgen.spec import shorthand
    from sim.hw import load_hw

    hw = load_hw("h200")
    print("\n| shape | tiling | K tiles | first K tile | last K tile | pred K tile | first / last per CTA "
          "| pred per CTA | wall us | pred / meas per CTA (last) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if r["part"] != "gemm" or r.get("error"):
            if r["part"] == "gemm":
                print(f"| {r['shape']} | {r['tiling']} | error: {r['error'][:80]} |")
            continue
        t = tiling_of(r["tiling"])
        ev = plan(shorthand(r["shape"], r["dtype"], r["out_dtype"]), hw, t.variant, only=[t]).best
        last = r.get("last_cycles_per_cta") or 0
        print(f"| {r['shape']} | {r['tiling']} | {r['ktiles']} | {r.get('first_cycles_per_ktile', 0):.0f} "
              f"| {r.get('last_cycles_per_ktile', 0):.0f} | {ev.model.iter_cycles:.0f} "
              f"| {r.get('first_cycles_per_cta') or 0:,.0f} / {last:,.0f} | {ev.cycles_per_cta:,} "
              f"| {r['time_ms'] * 1e3:.1f} | {ev.cycles_per_cta / last if last else 0:.2f} |")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    d = json.loads(Path(argv[0]).read_text())
    print(f"{d['device']}, {d['date']}, {d['seconds']:.0f} s")
    stream_tables(d["rows"])
    gemm_table(d["rows"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
