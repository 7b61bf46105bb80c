"""On the GPU machine: per-CTA cycles of the three-way kernels with the inputs warm in the L2 (right
after their upload, as benchmarks/gpu_bench.py measures) and cold (a 256 MiB scratch buffer written
between the upload and the launch evicts them). The simulator starts with an empty L2.

    source .devwheels/install.sh && python3 benchmarks/gpu_l2.py --kernels .three_way --out $OUT

Writes OUT/gpu_l2.json: per kernel, for each of `--runs` fresh launches, the mean and max per-CTA
clock64 span (the kernels' --profile slots), warm and cold.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FLUSH = 256 << 20


def main() -> int:
    from sim.launch import launch_from_metadata, read_metadata
    from validation.gpu import run_on_gpu

    ap = argparse.ArgumentParser()
    ap.add_argument("--kernels", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    res: dict = {"date": datetime.date.today().isoformat(), "flush_bytes": FLUSH, "kernels": []}
    for kdir in sorted(Path(a.kernels).iterdir(), key=lambda d: int(d.name.split("x")[0]) * 10**9 + int(
            d.name.split("x")[2])):
        ptx = kdir / "kernel.ptx"
        if not ptx.exists():
            continue
        text = ptx.read_text()
        meta = read_metadata(text)
        slots = (meta.get("profile") or {}).get("slots")
        row: dict = {"name": kdir.name, "warm": [], "cold": []}
        for _ in range(a.runs):
            for kind, flush in (("warm", 0), ("cold", FLUSH)):
                launch = launch_from_metadata(meta, np.random.default_rng())
                m = run_on_gpu(text, launch, warmup=0, repeats=1, profile_slots=slots, flush_l2_bytes=flush)
                spans = m.per_cta_cycles or []
                row[kind].append({"mean": float(np.mean(spans)) if spans else None,
                                  "max": int(max(spans)) if spans else None, "device": m.device})
        for kind in ("warm", "cold"):
            means = [r["mean"] for r in row[kind] if r["mean"] is not None]
            row[f"{kind}_median_mean"] = float(np.median(means)) if means else None
        print(json.dumps({k: v for k, v in row.items() if k not in ("warm", "cold")}), flush=True)
        res["kernels"].append(row)
    Path(a.out, "gpu_l2.json").write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
