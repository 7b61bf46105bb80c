"""Run the wgmma microbenchmarks (kernels.py) on the GPU and on the simulator (h200.yaml), side by side.

    python3 benchmarks/micro_wgmma/run.py --out DIR            # GPU + simulator (the device machine)
    python3 benchmarks/micro_wgmma/run.py --out DIR --sim-only  # simulator only, checks the PTX with ptxas

Writes DIR/wgmma_micro.json: per case the GPU's and the simulator's cycles per wgmma (warp 0's
clock64 loop time / (reps x group)), and a fit of hwconfigs/h200.yaml's wgmma section: per input
type the MACs per cycle per unit that the throughput cases imply (16*N*K / cycles per wgmma), and
the fixed latency the latency cases imply beyond wgmma.issue + the MACs at that rate.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))

from benchmarks.micro_wgmma.kernels import Case, cases, ptx  # noqa: E402
from sim.hw import load_hw  # noqa: E402
from sim.launch import Arg, Launch  # noqa: E402
from sim.ptx.parser import parse_ptx  # noqa: E402
from sim.sass.tools import find_tool  # noqa: E402
from sim.timing import simulate  # noqa: E402

REPS = 32


def launch(c: Case) -> Launch:
    out = np.zeros(2 * c.threads, dtype=np.uint64)
    return Launch(f"wgmma_{c.name}", (1, 1, 1), (c.threads, 1, 1),
                  [Arg("buffer", "uint64", array=out), Arg("scalar", "u32", value=REPS)])


def per_wgmma(out: np.ndarray, c: Case) -> float:
    return float(out[0]) / (REPS * c.group)


def ptxas_check(text: str) -> None:
    exe = find_tool("ptxas")
    if exe is None:
        return
    with tempfile.TemporaryDirectory() as d:
        f = pathlib.Path(d) / "k.ptx"
        f.write_text(text)
        r = subprocess.run([str(exe), "-arch=sm_90a", str(f), "-o", str(f.with_suffix(".cubin"))],
                           capture_output=True, text=True, timeout=120)
        if r.returncode:
            raise SystemExit(f"ptxas rejects {f}: {r.stderr.strip()}")


def fit(rows: list[dict], key: str) -> dict:
    """MACs per cycle per unit by input type (throughput cases) and the fixed latency (latency cases)."""
    hw = load_hw("h200")
    assert hw.wgmma is not None
    rate: dict[str, float] = {}
    for r in rows:
        if r["group"] > 1 and r["warpgroups"] == 1 and not r["rs"] and r.get(key):
            rate.setdefault(r["atype"], 0.0)
            rate[r["atype"]] = max(rate[r["atype"]], r["macs_per_warp"] / r[key])
    lat = [r[key] - hw.wgmma.issue - r["macs_per_warp"] / rate[r["atype"]]
           for r in rows if r["group"] == 1 and not r["rs"] and r.get(key) and r["atype"] in rate]
    return {"macs_per_cycle": {t: round(v, 1) for t, v in rate.items()},
            "fixed_latency_median": round(statistics.median(lat), 1) if lat else None}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    ap.add_argument("--sim-only", action="store_true")
    ap.add_argument("--case", action="append", help="run only these case names")
    a = ap.parse_args()
    hw = load_hw("h200")
    rows = []
    for c in cases():
        if a.case and c.name not in a.case:
            continue
        text = ptx(c)
        row = {"case": c.name, "n": c.n, "atype": c.atype, "group": c.group, "rs": c.rs,
               "warpgroups": c.warpgroups, "macs_per_warp": c.macs_per_warp}
        if a.sim_only:
            ptxas_check(text)
        else:
            from validation.gpu import run_on_gpu

            m = run_on_gpu(text, launch(c), warmup=1, repeats=1)
            row["gpu_cycles_per_wgmma"] = round(per_wgmma(m.outputs[0], c), 2)
        res = simulate(parse_ptx(text, f"{c.name}.ptx"), launch(c), hw)
        row["sim_cycles_per_wgmma"] = round(per_wgmma(res.outputs[0], c), 2)
        rows.append(row)
        print(json.dumps(row), flush=True)
    result = {"reps": REPS, "rows": rows, "sim_fit": fit(rows, "sim_cycles_per_wgmma")}
    if not a.sim_only:
        result["gpu_fit"] = fit(rows, "gpu_cycles_per_wgmma")
        try:
            result["nvidia_smi"] = subprocess.run(
                ["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,clocks.max.sm", "--format=csv,noheader"],
                capture_output=True, text=True, timeout=20).stdout.strip()
        except OSError as e:
            result["nvidia_smi"] = str(e)
    out = pathlib.Path(a.out) / "wgmma_micro.json"
    out.write_text(json.dumps(result, indent=1))
    print(json.dumps({k: v for k, v in result.items() if k != "rows"}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
