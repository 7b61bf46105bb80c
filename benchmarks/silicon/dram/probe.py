"""H200 probe for the device-wide DRAM model (issue 11, session 10; dram_dev.cu says what each kernel does):
per-CTA cycles of a float4 stream with 1, 2 or 4 loads in flight per thread at 1 .. 8 CTAs per SM (each CTA
512 KiB from DRAM after an L2 flush), and a lone dependent load's latency alone and under the streams of every SM.
Builds dram_dev.cu to a cubin and dram_host.cu (driver API) with nvcc, runs once (~30 s).

    (device, repo root) PYTHONPATH=$PWD python3 benchmarks/silicon/dram/probe.py --out $OUT

Writes OUT/dram_probe.json (raw per-CTA spans and chase steps, a summary, nvidia-smi clocks, the SASS that ran) and
prints the summary. benchmarks/silicon/dram/sim.py simulates the same cases.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def summarize(cases: list[dict]) -> list[dict]:
    """Per (kernel, grid): medians over the repeats of the per-CTA span's median and mean, the bytes per cycle of
    the whole grid (CTAs x bytes per CTA / median span), GB/s by events, and for chase_* the median step of the
    walk (steps 8.. of the first 96: the background streams are running then) and its 10th / 90th percentile."""
    groups: dict[tuple[str, int], list[dict]] = {}
    for c in cases:
        groups.setdefault((c["kernel"], c["grid"]), []).append(c)
    out = []
    for (k, g), cs in groups.items():
        row: dict = {"kernel": k, "grid": g, "stream_ctas": cs[0]["stream_ctas"]}
        spans = [c["cta_spans"] for c in cs if c["cta_spans"]]
        if spans:
            med = statistics.median(statistics.median(s) for s in spans)
            row["per_cta_median"] = med
            row["per_cta_mean"] = statistics.median(statistics.mean(s) for s in spans)
            nbytes = cs[0]["per_float4"] * 16
            row["bytes_per_cycle"] = round(cs[0]["stream_ctas"] * nbytes / med, 1)
            row["gbps_events"] = round(statistics.median(cs[0]["stream_ctas"] * nbytes / (c["ms"] * 1e-3) / 1e9
                                                         for c in cs), 1)
        if "steps" in cs[0]:
            st = sorted(x for c in cs for x in c["steps"][8:96])
            row["step_median"] = statistics.median(st)
            row["step_p10"], row["step_p90"] = st[len(st) // 10], st[len(st) * 9 // 10]
        out.append(row)
    return out


def main() -> int:
    sys.path.insert(0, str(HERE.parents[2]))
    from benchmarks.sass_probe.run import summarized_main

    return summarized_main(str(HERE / "dram_dev.cu"), str(HERE / "dram_host.cu"), "dram_probe", summarize)


if __name__ == "__main__":
    raise SystemExit(main())
