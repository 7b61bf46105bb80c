"""H200 probe for the four microbenchmarks SASS mode left outside 10% (issue 11, session 9): barrier cost vs
warps per CTA (bar_only, bar_skew, the suite's bar_loop at two trip counts), shared-load issue rate vs warps
with and without a 2-way bank conflict (lds_rate, lds_rate_c2), whether VIADD takes the ALU (pipe_add_lop,
pipe_add_ffma, pipe_lop_only), and DRAM streaming with 1-8 float4 loads in flight per thread (stream_u*).
Builds micro_dev.cu to a cubin and micro_host.cu (driver API) with nvcc, runs once (~20 s).

    (device, repo root) PYTHONPATH=$PWD python3 benchmarks/sass_probe/micro.py --out $OUT

Writes OUT/sass_micro.json: the raw clock stamps, a per-case summary (medians over the repeats' second
launches), nvidia-smi clocks and the SASS that ran; prints the summary. The same reduction (summarize) reads
SASS-mode simulations of the same kernels (benchmarks/sass_probe/micro_sim.py).
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _warps(T: list[int], n: int) -> list[list[int]]:
    return [T[i:i + n] for i in range(0, len(T), n)]


def reduce_case(c: dict) -> dict:
    """One launch's figure(s) from its stamps T (see micro_dev.cu for each layout)."""
    name, T, p = c["case"], c["T"], c["param"]
    w = c["block"] // 32
    if name == "bar_skew":
        st = _warps(T, 64)
        rel_lo, rel_hi, period = [], [], []
        amax = [max(s[2 * r] for s in st) for r in range(32)]
        for r in range(2, 32):
            rel = [s[2 * r + 1] - amax[r] for s in st]
            rel_lo.append(min(rel))
            rel_hi.append(max(rel))
            if r < 31:
                period.append(amax[r + 1] - amax[r])
        return {"release_first": statistics.median(rel_lo), "release_last": statistics.median(rel_hi),
                "round": statistics.median(period)}
    if name.startswith("stream"):
        st = _warps(T, 2)
        per_cta = [max(b for _, b in st[i:i + 8]) - min(a for a, _ in st[i:i + 8]) for i in range(0, len(st), 8)]
        med = statistics.median(per_cta)
        nbytes = p * 16 / c["grid"]  # bytes per CTA
        return {"per_cta_median": med, "bytes_per_cycle_per_cta": round(nbytes / med, 2),
                "gbps": round(p * 16 / (c["ms"] * 1e-3) / 1e9, 1)}
    st = _warps(T, 2)
    span = max(b for _, b in st) - min(a for a, _ in st)
    if name == "bar_only":
        return {"span": span, "cycles_per_barrier": round(span / p, 2)}
    if name == "bar_loop":
        return {"span": span}
    if name.startswith("lds_rate"):
        return {"span": span, "cycles_per_lds_per_sm": round(span / (p * 16 * w), 3)}
    if name.startswith("pipe_"):
        return {"span": span, "cycles_per_warp_inst_per_subpartition": round(span / (p * 64 * max(1, w / 4)), 3)}
    return {"span": span}


def summarize(cases: list[dict]) -> list[dict]:
    """Per (case, block, param): the median over the repeats' second launches of each figure; bar_loop also
    the cost per trip by difference of its two trip counts."""
    groups: dict[tuple, list[dict]] = {}
    for c in cases:
        if c["launch"] == 2:
            groups.setdefault((c["case"], c["block"] // 32, c["param"]), []).append(reduce_case(c))
    out = []
    for (name, w, p), rs in groups.items():
        row = {"case": name, "warps": w, "param": p}
        for k in rs[0]:
            row[k] = statistics.median(r[k] for r in rs)
        out.append(row)
    for w in sorted({r["warps"] for r in out if r["case"] == "bar_loop"}):
        a = {r["param"]: r["span"] for r in out if r["case"] == "bar_loop" and r["warps"] == w}
        if 64 in a and 256 in a:
            out.append({"case": "bar_loop_trip", "warps": w, "param": 0, "cycles_per_trip": (a[256] - a[64]) / 192})
    return out


def main() -> int:
    sys.path.insert(0, str(HERE.parents[1]))
    from benchmarks.sass_probe.run import summarized_main

    return summarized_main("micro_dev.cu", "micro_host.cu", "sass_micro", summarize)


if __name__ == "__main__":
    raise SystemExit(main())
