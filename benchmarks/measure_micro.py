"""Measure the calibration microbenchmarks on the real GPU (one device call) and write JSON.

    source .devwheels/install.sh && python3 benchmarks/measure_micro.py --out $OUT

Figures and sizes: validation/calibrate.py (FIGURES). The result is committed as
validation/micro/h200_micro.json (package data: ``python -m validation calibrate`` reads it).
``--dry`` runs the same flow on the functional simulator with the simulator sizes (checks the
argument plumbing without a GPU).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from validation import calibrate  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    ap.add_argument("--dry", action="store_true")
    ap.add_argument("--figure", action="append")
    a = ap.parse_args()
    t0 = time.time()
    if a.dry:
        from sim.functional.runner import run_functional
        from sim.ptx.parser import parse_file

        def run(case, sizes, args):
            return run_functional(parse_file(str(case.ptx_path)), calibrate.to_launch(case, args)).outputs

        res = {"device": "dry-run", "figures": {}}
        for fig in calibrate.FIGURES:
            if a.figure and fig.name not in a.figure:
                continue
            res["figures"][fig.name] = calibrate.run_figure(fig, "sim", run)
    else:
        res = calibrate.measure_gpu(a.figure)
    res["seconds"] = round(time.time() - t0, 1)
    try:
        res["nvidia_smi"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,clocks.max.sm", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception as e:  # noqa: BLE001
        res["nvidia_smi"] = str(e)
    out = pathlib.Path(a.out) / "h200_micro.json"
    out.write_text(json.dumps(res, indent=1))
    print(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
