"""The planner's per-CTA prediction against the H200 for the generated GEMMs the H200 measured, with the
cycle model as it is now: the silicon suite's GEMMs (their stored tilings, benchmarks/silicon/gemm/*/plan.json,
measured in benchmarks/data/silicon_gpu_2026-11-30.json) and the top-4 candidates of docs/top4.md
(benchmarks/data/top4_2026-11-30d.json). Each tiling is re-predicted by kernelgen.planner.plan(only=[it]); with
--top4 also whether the candidate the model now ranks first of each shape's four is within 5% of the
measured fastest (a proxy: the planner's own top 4 may now hold unmeasured candidates).

    PYTHONPATH=. python3 benchmarks/planner_silicon.py [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SUITE_GPU = ROOT / "benchmarks" / "data" / "silicon_gpu_2026-11-30.json"
TOP4 = ROOT / "benchmarks" / "data" / "top4_2026-11-30d.json"


def tiling_of(key: str):
    """The Tiling whose key() is `key` (variant_MxNxK_tAxB_sS_pA.B_vA.B[_uU][_kK])."""
    import re

    from kernelgen.tiling import Tiling

    m = re.fullmatch(r"(\w+?)_(\d+)x(\d+)x(\d+)_t(\d+)x(\d+)_s(\d+)_p(\d+)\.(\d+)_v(\d+)\.(\d+)"
                     r"(?:_u(\d+))?(?:_k(\d+))?", key)
    if m is None:
        raise SystemExit(f"tiling key {key!r} not understood")
    g = m.groups()
    nums = [int(x) for x in g[1:11]]
    return Tiling(g[0], *nums, unroll_k=int(g[11] or 0), mma_k=int(g[12] or 16))


def predict(spec_d: dict, tiling_d: dict, hw) -> float:
    from kernelgen.planner import plan
    from kernelgen.spec import parse_spec

    spec = parse_spec({k: v for k, v in spec_d.items() if k in ("M", "N", "K", "dtype", "layout", "alpha", "beta")},
                      "plan.json")
    t = tiling_of(tiling_d["key"])
    assert t.key() == tiling_d["key"]
    return float(plan(spec, hw, t.variant, only=[t]).best.cycles_per_cta)


def rows(hw) -> list[dict]:
    gpu = {k["name"]: k.get("per_cta_mean") for k in json.loads(SUITE_GPU.read_text())["kernels"]}
    out = []
    for d in sorted((ROOT / "benchmarks" / "silicon" / "gemm").iterdir()):
        p = json.loads((d / "plan.json").read_text())
        if gpu.get(d.name):
            out.append({"set": "suite", "name": d.name, "key": p["tiling"]["key"], "measured": gpu[d.name],
                        "stored": p["prediction"]["cycles_per_cta"], "predicted": predict(p["spec"], p["tiling"], hw)})
    return out


def top4_rows(hw) -> list[dict]:
    from kernelgen.planner import plan
    from kernelgen.spec import shorthand

    out = []
    for r in json.loads(TOP4.read_text())["rows"]:
        meas = r.get("measured_cycles_per_cta")
        if not meas or not str(r.get("tiling", "")).count("_"):
            continue
        shape = "x".join(str(x) for x in r["shape"])
        t = tiling_of(r["tiling"])
        pred = float(plan(shorthand(shape, "f16"), hw, t.variant, only=[t]).best.cycles_per_cta)
        out.append({"set": "top4", "name": f"{shape} r{r['rank']}", "key": r["tiling"], "measured": meas,
                    "stored": r.get("predicted_cycles_per_cta"), "predicted": pred, "shape": shape,
                    "rank": r["rank"], "time_ms": r["time_ms"]})
    return out


def mape(rs: list[dict]) -> float:
    """Mean |predicted - measured| / measured over `rs`."""
    return sum(abs(r["predicted"] - r["measured"]) / r["measured"] for r in rs) / len(rs)


def picks(rs: list[dict]) -> list[tuple[str, bool, float]]:
    """Per top-4 shape: (shape, whether the candidate the cycle model now ranks first (fewest predicted
    cycles per CTA, ties to the recorded rank) is within 5% of the measured fastest of the four (time_ms),
    its measured time over the fastest's)."""
    out = []
    for shape in sorted({r["shape"] for r in rs if r["set"] == "top4"}):
        four = [r for r in rs if r.get("shape") == shape]
        pick = min(four, key=lambda r: (r["predicted"], r["rank"]))
        best = min(r["time_ms"] for r in four)
        out.append((shape, pick["time_ms"] <= 1.05 * best, pick["time_ms"] / best))
    return out


def main() -> int:
    from sim.hw import load_hw

    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--top4", action="store_true", help="also the top-4 candidates (slower)")
    a = ap.parse_args()
    hw = load_hw("h200.yaml")
    rs = rows(hw) + (top4_rows(hw) if a.top4 else [])
    print("| set | GEMM | tiling | measured | predicted (stored) | err | predicted now | err |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rs:
        es = (r["stored"] - r["measured"]) / r["measured"] if r["stored"] else float("nan")
        en = (r["predicted"] - r["measured"]) / r["measured"]
        print(f"| {r['set']} | {r['name']} | {r['key']} | {r['measured']:,.0f} | {r['stored'] or 0:,.0f} | {es:+.0%} "
              f"| {r['predicted']:,.0f} | {en:+.0%} |")
    for st in sorted({r["set"] for r in rs}):
        sub = [r for r in rs if r["set"] == st]
        ms = [abs(r["stored"] - r["measured"]) / r["measured"] for r in sub if r["stored"]]
        print(f"MAPE {st}: now {mape(sub):.1%} over {len(sub)}" + (f", stored {sum(ms) / len(ms):.1%}" if ms else ""))
    print(f"MAPE all: now {mape(rs):.1%} over {len(rs)}")
    if a.top4:
        pk = picks(rs)
        for shape, ok, ratio in pk:
            print(f"pick {shape}: {'holds' if ok else 'misses'} ({ratio:.3f} x the fastest of the four)")
        print(f"picks within 5% of the measured fastest: {sum(ok for _, ok, _ in pk)} of {len(pk)}")
    if a.json:
        Path(a.json).write_text(json.dumps(rs, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
