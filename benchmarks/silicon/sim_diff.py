"""Before/after table of two simulate.py runs against the H200 measurement: the kernels whose simulated
per-CTA cycles moved, each with its error against the measured figure, and the MAPE of both runs.

    python3 benchmarks/silicon/sim_diff.py --before OLD.json --after benchmarks/data/silicon_sim.json \
        --gpu benchmarks/data/silicon_gpu_2026-11-30.json --title "..." --out benchmarks/data/X.md

OLD.json: an earlier silicon_sim.json, e.g. `git show COMMIT:benchmarks/data/silicon_sim.json > OLD.json`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def _per_cta(path: str) -> dict[str, float | None]:
    rows = json.loads(Path(path).read_text())["kernels"]
    return {r["name"]: (r.get("per_cta") or {}).get("mean") for r in rows}


def _err(x: float | None, ref: float | None) -> float | None:
    return None if x is None or not ref else (x - ref) / ref * 100.0


def _mape(errs: list[float | None]) -> str:
    v = [abs(e) for e in errs if e is not None]
    return f"{sum(v) / len(v):.1f}% over {len(v)} kernels" if v else "—"


def _f(x: float | None, fmt: str) -> str:
    return "—" if x is None else fmt.format(x)


def render(before: dict, after: dict, gpu: dict, title: str, sources: str) -> str:
    meas = {r["name"]: r.get("per_cta_mean") for r in gpu["kernels"]}
    names = [n for n in after if n in before]
    moved = [n for n in names if before[n] != after[n]]
    L = [f"# {title}", "", sources, "",
         f"Simulated per-CTA cycles (PTX mode, h200.yaml) before and after; measured: H200 {gpu['date']}. "
         f"{len(moved)} of {len(names)} kernels moved; the others are identical.", "",
         f"- MAPE before: {_mape([_err(before[n], meas.get(n)) for n in names])}",
         f"- MAPE after: {_mape([_err(after[n], meas.get(n)) for n in names])}", "",
         "| kernel | measured | before | err | after | err | change |", "|---|---|---|---|---|---|---|"]
    for n in moved:
        b, a, m = before[n], after[n], meas.get(n)
        ch = _f(_err(a, b), "{:+.1f}%")
        L.append(f"| {n} | {_f(m, '{:,.0f}')} | {_f(b, '{:,.0f}')} | {_f(_err(b, m), '{:+.0f}%')} "
                 f"| {_f(a, '{:,.0f}')} | {_f(_err(a, m), '{:+.0f}%')} | {ch} |")
    return "\n".join(L) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", required=True)
    ap.add_argument("--gpu", required=True)
    ap.add_argument("--title", default="Simulated per-CTA cycles before and after a timing-model change")
    ap.add_argument("--sources", default="", help="a line naming the change and the command that made the files")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    gpu = json.loads(Path(a.gpu).read_text())
    Path(a.out).write_text(render(_per_cta(a.before), _per_cta(a.after), gpu, a.title, a.sources))
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
