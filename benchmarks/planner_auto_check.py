"""The planner against an H200 run of its own picks (benchmarks/data/gpu_bench_auto_2026-12-01b.json: 24 GEMMs,
each row's picked tiling and wall time): each picked tiling re-predicted by the cycle model as it is now, the
launch's cycles against time_ms x [clock_mhz]; and the default pick now at each shape.

    PYTHONPATH=. python3 benchmarks/planner_auto_check.py [--variants]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
AUTO = ROOT / "benchmarks" / "data" / "gpu_bench_auto_2026-12-01b.json"


def rows(hw) -> list[dict]:
    """One dict per measured row: shape, picked key, measured and predicted launch cycles, the pick now."""
    from benchmarks.planner_silicon import tiling_of
    from kernelgen.planner import plan
    from kernelgen.spec import shorthand

    out = []
    for r in json.loads(AUTO.read_text())["speed"]:
        shape = f"{r['M']}x{r['N']}x{r['K']}"
        spec = shorthand(shape, r["dtype"], r.get("out_dtype") or "f32")
        t = tiling_of(r["picked"]["key"])
        pred = float(plan(spec, hw, t.variant, only=[t]).best.cycles)
        meas = r["time_ms"] * 1e-3 * hw.clock_mhz * 1e6
        best = plan(spec, hw, exhaustive=False).best if r["dtype"] == "bf16" else None
        out.append({"shape": shape, "dtype": r["dtype"], "key": t.key(), "measured": meas, "predicted": pred,
                    "ratio": pred / meas, "pick_now": best.tiling.key() if best else "",
                    "pick_now_cycles": best.cycles if best else 0})
    return out


def main(argv: list[str] | None = None) -> int:
    from sim.hw import load_hw

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="write the rows here")
    a = ap.parse_args(argv)
    rs = rows(load_hw("h200"))
    for r in rs:
        print(f"{r['shape']:>16} {r['dtype']:>4} {r['key']:<40} meas {r['measured']:>10,.0f}"
              f" pred {r['predicted']:>10,.0f} {r['ratio']:5.2f}  now {r['pick_now']} {r['pick_now_cycles']:,.0f}")
    bad = [r for r in rs if abs(r["ratio"] - 1) > 0.25]
    print(f"rows beyond 25%: {len(bad)} of {len(rs)}; mean |err| "
          f"{sum(abs(r['ratio'] - 1) for r in rs) / len(rs):.1%}")
    if a.json:
        Path(a.json).write_text(json.dumps(rs, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
