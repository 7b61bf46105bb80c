"""First-touch global latency on the H200 (issue 11): build first_touch.cu with nvcc and run it once.

    (device, repo root) PYTHONPATH=$PWD python3 benchmarks/first_touch/run.py --out $OUT

Writes OUT/first_touch.json (the program's JSON plus the nvidia-smi clocks and the wall time) and prints
one summary line per case: median cycles per dependent load of each pass (first pass = first touch).
Takes well under a minute; needs only nvcc and the driver (no Python GPU package).
"""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    out = Path(sys.argv[sys.argv.index("--out") + 1]) if "--out" in sys.argv else Path("out")
    out.mkdir(parents=True, exist_ok=True)
    exe = Path("/tmp/first_touch")
    t0 = time.time()
    subprocess.run(["nvcc", "-arch=sm_90a", "-O2", str(HERE / "first_touch.cu"), "-o", str(exe)], check=True)
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,clocks.max.sm",
                          "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
    p = subprocess.run([str(exe)], capture_output=True, text=True)
    if p.returncode != 0:
        (out / "first_touch_raw.txt").write_text(p.stdout + "\n--- stderr\n" + p.stderr)
        print(p.stderr[-2000:], file=sys.stderr)
        return 1
    res = json.loads(p.stdout)
    res["nvidia_smi"] = smi
    res["date"] = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    res["wall_s"] = round(time.time() - t0, 1)
    res["stderr"] = p.stderr
    (out / "first_touch.json").write_text(json.dumps(res, indent=1))
    for c in res["cases"]:
        passes = " ".join(f"{q['median']:7.1f}" for q in c["pass"])
        extra = f" pre_off={c['pre_off']}" if c.get("pre_off", -1) >= 0 else ""
        extra += f" launch={c['launch']}" if "launch" in c else ""
        print(f"{c['case']:13s} stride={c['stride']:>8d} ctas={c['ctas']:>3d}{extra}: {passes}")
    print(f"{res['wall_s']} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
