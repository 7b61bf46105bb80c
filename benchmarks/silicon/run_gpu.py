"""On the GPU machine: run every instrumented suite kernel through validation.gpu.run_on_gpu and write
OUT/silicon_gpu.json (per kernel: per-CTA clock64 spans, mean and median over the CTAs, of each
call's first launch right after the inputs' upload (the warm L2 that simulate.py assumes); the
median over ``--calls`` calls; event times of the timed repeats; the numerical check; device; date).

    source .devwheels/install.sh && python3 benchmarks/silicon/run_gpu.py --out $OUT

Each call JIT-loads the instrumented PTX, uploads the inputs, runs once (checked, profiled), then
``--warmup`` untimed and ``--repeats`` timed launches (validation.gpu). The kernels are built by
benchmarks/silicon/build.py on the development machine (no nvcc needed here). Stops starting new
kernels after ``--budget`` seconds so the whole run stays under 5 minutes.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from benchmarks.silicon.common import check, load, make_launch, one_line, spans, summary  # noqa: E402
from benchmarks.silicon.suite import SUITE, Kernel  # noqa: E402


def run_one(k: Kernel, calls: int, warmup: int, repeats: int) -> dict:
    from validation.gpu import run_on_gpu

    row: dict = {"name": k.name, "group": k.group, "calls": []}
    t0 = time.time()
    try:
        ld = load(k)
        launch = make_launch(ld)
        for c in range(calls):
            m = run_on_gpu(ld.text, launch, warmup=warmup, repeats=repeats, check=None, roles=launch.roles)
            sp = list(spans(ld, m.outputs).values())
            call = {"per_cta": summary(sp), "time_ms": m.wall_ms_median,
                    "time_ms_batched": m.extra.get("time_ms_batched")}
            if c == 0:
                row["device"] = m.device
                row["check"] = check(k, ld, launch, m.outputs, None)
                row["num_regs"] = m.extra.get("num_regs")
                row["ctas"] = len(sp)
            row["calls"].append(call)
        means = [c["per_cta"]["mean"] for c in row["calls"] if c["per_cta"]["mean"] is not None]
        medians = [c["per_cta"]["median"] for c in row["calls"] if c["per_cta"]["median"] is not None]
        row["per_cta_mean"] = float(statistics.median(means)) if means else None
        row["per_cta_median"] = float(statistics.median(medians)) if medians else None
        row["time_ms"] = float(statistics.median(c["time_ms"] for c in row["calls"]))
    except Exception as e:  # noqa: BLE001 - one failing kernel must not stop the suite
        row["error"] = one_line(e)
    row["wall_s"] = round(time.time() - t0, 2)
    return row


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--calls", type=int, default=3, help="fresh uploads + profiled launches per kernel")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--budget", type=float, default=240.0, help="seconds; later kernels are skipped")
    a = ap.parse_args()
    from validation.gpu import _import_driver, gpu_available

    ok, device = gpu_available()
    if not ok:
        print(f"no GPU: {device}", file=sys.stderr)
        return 2
    driver = str(_import_driver().get_driver_version())
    t0 = time.time()
    rows = []
    for k in SUITE:
        if a.only and k.name not in a.only:
            continue
        if time.time() - t0 > a.budget:
            rows.append({"name": k.name, "group": k.group, "error": f"skipped: past the {a.budget:.0f} s budget"})
            continue
        row = run_one(k, a.calls, a.warmup, a.repeats)
        chk = row.get("check") or {}
        print(f"{k.name:28s} {row['wall_s']:6.1f}s per-CTA mean {row.get('per_cta_mean')} "
              f"check {chk.get('passed')} {row.get('error', '')}", flush=True)
        rows.append(row)
    res = {"date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"), "device": device,
           "driver": driver, "calls": a.calls, "warmup": a.warmup, "repeats": a.repeats,
           "wall_s": round(time.time() - t0, 1), "kernels": rows}
    Path(a.out).mkdir(parents=True, exist_ok=True)
    path = Path(a.out, "silicon_gpu.json")
    path.write_text(json.dumps(res, indent=1) + "\n")
    print(f"wrote {path} ({len(rows)} kernels, {res['wall_s']} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
