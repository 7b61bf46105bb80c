"""Measured vs simulated per-CTA cycles of the silicon suite, one panel per timing mode, from
benchmarks/first_touch/suite_effect.py's files (OUT_sass_new.json, OUT_ptx_new.json) against the H200
measurement (benchmarks/data/silicon_gpu_2026-11-30.json): docs/fidelity.png, and the per-kernel table
(markdown) on stdout.

    python3 benchmarks/silicon/scatter.py SASS.json PTX.json [--png docs/fidelity.png]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.silicon.table import scatter_panel  # noqa: E402

GPU = ROOT / "benchmarks" / "data" / "silicon_gpu_2026-11-30.json"


def load(path: str) -> tuple[str, dict[str, float]]:
    d = json.loads(Path(path).read_text())
    return d["isa"], {k["name"]: k["mean"] for k in d["kernels"] if k.get("mean")}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+", help="suite_effect.py outputs, one per mode")
    ap.add_argument("--png", default=str(ROOT / "docs" / "fidelity.png"))
    a = ap.parse_args()
    gpu = json.loads(GPU.read_text())["kernels"]
    meas = {k["name"]: k["per_cta_mean"] for k in gpu if k.get("per_cta_mean")}
    group = {k["name"]: k["group"] for k in gpu}
    runs = [load(f) for f in a.files]
    names = [k["name"] for k in gpu if k["name"] in meas]
    print("| kernel | group | measured | " + " | ".join(f"simulated {m.upper()} | err" for m, _ in runs) + " |")
    print("|---|---|---|" + "---|---|" * len(runs))
    for n in names:
        cells = []
        for _, r in runs:
            v = r.get(n)
            cells += [f"{v:,.0f}", f"{(v - meas[n]) / meas[n] * 100:+.1f}%"] if v else ["—", "—"]
        print(f"| {n} | {group[n]} | {meas[n]:,.0f} | " + " | ".join(cells) + " |")
    row = []
    for _, r in runs:
        errs = [abs(r[n] - meas[n]) / meas[n] for n in names if n in r]
        row += [f"**{sum(errs) / len(errs) * 100:.1f}%** ({len(errs)})",
                f"{sum(e <= 0.10 for e in errs)} within 10%"]
    print("| MAPE | | | " + " | ".join(row) + " |")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(runs), figsize=(5.5 * len(runs), 5.5), squeeze=False)
    for ax, (mode, r) in zip(axes[0], runs):
        pts = [(meas[n], r[n], group[n]) for n in names if n in r]
        scatter_panel(ax, pts, 1.1)
        mape = sum(abs(p[1] - p[0]) / p[0] for p in pts) / len(pts) * 100
        ax.set_xlabel("measured per-CTA cycles (H200)")
        ax.set_ylabel(f"simulated per-CTA cycles ({mode.upper()} mode)")
        ax.set_title(f"{mode.upper()} mode: MAPE {mape:.1f}% over {len(pts)} (dotted: ±10%)")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(a.png, dpi=110)
    print(f"\nwrote {a.png}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
