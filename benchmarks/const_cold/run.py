"""Cold constant caches, instruction fetch and atomics' latency on the H200 (issue 11): build const_cold.cu
with nvcc and run it once.

    (device, repo root) PYTHONPATH=$PWD python3 benchmarks/const_cold/run.py --out $OUT

Writes OUT/const_cold.json (the program's JSON, the nvidia-smi clocks, the wall time and the SASS that
ran, from cuobjdump, so each timed bracket can be read against its instructions) and prints one line per
case. Takes well under a minute; needs only nvcc and the driver.
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
    exe = Path("/tmp/const_cold")
    t0 = time.time()
    subprocess.run(["nvcc", "-arch=sm_90a", "-O2", str(HERE / "const_cold.cu"), "-o", str(exe)], check=True)
    sass = subprocess.run(["cuobjdump", "-sass", str(exe)], capture_output=True, text=True).stdout
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,clocks.max.sm",
                          "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
    p = subprocess.run([str(exe)], capture_output=True, text=True, timeout=170)
    if p.returncode != 0:
        (out / "const_cold_raw.txt").write_text(p.stdout + "\n--- stderr\n" + p.stderr)
        print(p.stderr[-2000:], file=sys.stderr)
        return 1
    (out / "const_cold.sass").write_text(sass)
    res = json.loads(p.stdout)
    res["nvidia_smi"] = smi
    res["date"] = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    res["wall_s"] = round(time.time() - t0, 1)
    res["stderr"] = p.stderr
    res["sass"] = sass
    (out / "const_cold.json").write_text(json.dumps(res, indent=1))
    for c in res["cases"]:
        head = f"{c['case']:13s} ctas={c['ctas']:>3d} launch={c.get('launch', 1)} stride={c.get('stride', '-')}"
        if c["case"] == "stream":
            body = f"{c['bytes'] / 2**20:.0f} MiB span mean {c['span_mean']:.0f} event {c['event_ms']:.4f} ms"
        elif c["case"] == "entry":
            body = f"stages {c['stage_median']} span {c['span_median']}"
        elif "pass" in c:
            body = " | ".join(f"median {q['median']:.0f} first {q['first_median']:.0f} cta0 {q['cta0'][:12]}"
                              for q in c["pass"])
        else:
            body = f"median {c['median']} cta0 {c['cta0']}"
        print(head, body)
    print(f"{res['wall_s']} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
