"""SASS-mode fidelity probe on the H200 (issue 11): FP32/FMA-heavy/ALU pipe sharing of IMAD, LOP3 and FFMA,
the immediate-constant path at the entry of a freshly loaded kernel, whether two constant (LDC) misses
overlap, S2R latency, and the drain rate of fully coalesced global stores. Builds probe_dev.cu to a cubin and
probe_host.cu (driver API) with nvcc, runs once.

    (device, repo root) PYTHONPATH=$PWD python3 benchmarks/sass_probe/run.py --out $OUT

Writes OUT/sass_probe.json (the program's JSON, nvidia-smi clocks, wall time, and the SASS that ran from
nvdisasm/cuobjdump) and prints one line per case. Well under a minute; needs nvcc, the driver and libcuda.
"""

from __future__ import annotations

import datetime
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def build_and_run(dev_cu: str, host_cu: str, name: str, out: Path) -> dict | None:
    """nvcc DEV_CU to a cubin and HOST_CU (driver API) to a program, run it once on the cubin: its JSON with the
    nvidia-smi clocks, the date, the wall time, its stderr and the SASS that ran (cuobjdump/nvdisasm); None when
    the program fails (its output in OUT/NAME_raw.txt). Shared by run.py and micro.py."""
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    cubin, exe = Path(f"/tmp/{name}.cubin"), Path(f"/tmp/{name}_host")
    subprocess.run(["nvcc", "-cubin", "-arch=sm_90a", "-O2", str(HERE / dev_cu), "-o", str(cubin)], check=True)
    subprocess.run(["nvcc", "-O2", str(HERE / host_cu), "-o", str(exe), "-lcuda"], check=True)
    dis = shutil.which("cuobjdump") or shutil.which("nvdisasm")
    sass = subprocess.run([dis, "-sass" if dis.endswith("cuobjdump") else "-c", str(cubin)],
                          capture_output=True, text=True).stdout if dis else ""
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,clocks.max.sm",
                          "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
    p = subprocess.run([str(exe), str(cubin)], capture_output=True, text=True, timeout=200)
    if p.returncode != 0:
        (out / f"{name}_raw.txt").write_text(p.stdout + "\n--- stderr\n" + p.stderr)
        print(p.stderr[-2000:], file=sys.stderr)
        return None
    res = json.loads(p.stdout)
    res.update({"nvidia_smi": smi, "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                "wall_s": round(time.time() - t0, 1), "stderr": p.stderr, "sass": sass})
    return res


def summarized_main(dev_cu: str, host_cu: str, name: str, summarize) -> int:
    """The main of a probe that summarises its cases: build and run it (--out DIR, default out), add
    summarize(cases) as "summary", write DIR/NAME.json, print one line per summary row and the wall time.
    Shared by micro.py and benchmarks/silicon/dram/probe.py."""
    out = Path(sys.argv[sys.argv.index("--out") + 1]) if "--out" in sys.argv else Path("out")
    res = build_and_run(dev_cu, host_cu, name, out)
    if res is None:
        return 1
    res["summary"] = summarize(res["cases"])
    (out / f"{name}.json").write_text(json.dumps(res))
    for r in res["summary"]:
        print(" ".join(f"{k}={v}" for k, v in r.items()))
    print(f"{res['wall_s']} s")
    return 0

def main() -> int:
    out = Path(sys.argv[sys.argv.index("--out") + 1]) if "--out" in sys.argv else Path("out")
    res = build_and_run("probe_dev.cu", "probe_host.cu", "sass_probe", out)
    if res is None:
        return 1
    (out / "sass_probe.json").write_text(json.dumps(res, indent=1))
    for c in res["cases"]:
        keys = ("case", "threads", "two", "ctas", "rep", "launch", "cycles_per_warp_inst_per_subpartition",
                "stage_median", "median", "bytes_per_cycle_per_cta")
        print(" ".join(f"{k}={c[k]}" for k in keys if k in c))
    print(f"{res['wall_s']} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
