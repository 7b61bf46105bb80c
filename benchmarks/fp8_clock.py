"""H200: the SM clock and power while the block-scaled fp8 GEMM and cuBLAS's fp8 GEMM run back to back at 8192^3
(docs/wgmma-fp8.md: predicted / measured 0.80 at 1980 MHz; does the H200 hold its boost clock at full fp8 rate?).

    source .devwheels/install.sh && python3 benchmarks/fp8_clock.py --out $OUT

For each workload (the planner's wgmma_fp8 pick, the 4-stage 128x256 kernel, torch._scaled_mm per-tensor) about
--seconds of back-to-back launches (the kernels in a child: benchmarks/gpucommon.py --time) while ``nvidia-smi
--query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu -lms 50`` samples; the samples of each window at load
(power >= 0.7 x the window's peak) give the median and lowest SM clock, the power and the temperature; the
time per launch from CUDA events. Writes OUT/fp8_clock.json (~40 s).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.fp8_check import compile_case  # noqa: E402

QUERY = "clocks.sm,power.draw,temperature.gpu"


def _sampler() -> subprocess.Popen:
    return subprocess.Popen(["nvidia-smi", f"--query-gpu=timestamp,{QUERY}", "--format=csv,noheader,nounits",
                             "-lms", "50"], stdout=subprocess.PIPE, text=True)


def _kernel_window(ptx: Path, seconds: float) -> dict:
    """Time a kernelgen PTX in a child (benchmarks/gpucommon.py --time): ~`seconds` of launches after its set-up
    (JIT, host data, upload: the GPU idles meanwhile, so the clock is read from the samples at load only)."""
    reps = max(20, int(seconds / 0.85e-3))  # ~0.85 ms a launch at 8192^3 (round 2)
    t0 = time.time()
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpucommon.py"), "--time", str(ptx), "--repeats",
                        str(reps)], capture_output=True, text=True, timeout=300, cwd=ROOT)
    w: dict = {"t0": t0, "t1": time.time(), "launches": reps}
    if r.returncode == 0 and r.stdout.strip():
        w["ms_per_launch"] = json.loads(r.stdout.strip().splitlines()[-1])["time_ms"]
    else:
        w["error"] = (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1][:300]
    return w


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--seconds", type=float, default=3.0)
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    kd = Path(tempfile.mkdtemp(prefix="fp8_clock_"))
    n = 8192
    windows: list[dict] = []
    ptxs = {name: compile_case(n, n, n, tiling, "bf16", {}, kd / name) for name, tiling in (
        ("wgmma_fp8_pick", []),
        ("wgmma_fp8_128x256_s4", ["TILE_M in [128, 128]", "TILE_N in [256, 256]", "STAGES in [4, 4]"]))}
    smi = _sampler()
    time.sleep(1.0)
    for name, ptx in ptxs.items():
        windows.append({"workload": name, **_kernel_window(ptx, a.seconds)})
        time.sleep(1.0)

    import torch

    x = (torch.randn(n, n, device="cuda") * 0.5).to(torch.float8_e4m3fn)
    y = (torch.randn(n, n, device="cuda") * 0.5).to(torch.float8_e4m3fn)
    one = torch.tensor(1.0, device="cuda")
    for _ in range(5):
        torch._scaled_mm(x, y.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    torch.cuda.synchronize()
    reps = int(a.seconds / 0.85e-3)
    t0 = time.time()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(reps):
        torch._scaled_mm(x, y.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    e.record()
    torch.cuda.synchronize()
    windows.append({"workload": "torch_scaled_mm_per_tensor", "t0": t0, "t1": time.time(), "launches": reps,
                    "ms_per_launch": s.elapsed_time(e) / reps})
    time.sleep(0.5)
    smi.terminate()
    lines = (smi.communicate(timeout=10)[0] or "").strip().splitlines()
    samples = []
    for ln in lines:
        parts = [p.strip() for p in ln.split(",")]
        try:
            day, frac = parts[0].split(".")
            ts = time.mktime(time.strptime(day, "%Y/%m/%d %H:%M:%S")) + float("0." + frac)
            samples.append((ts, float(parts[1]), float(parts[2]), float(parts[3])))
        except (ValueError, IndexError):
            continue
    for w in windows:
        if "ms_per_launch" in w:
            w["tflops"] = 2 * n ** 3 / (w["ms_per_launch"] * 1e-3) / 1e12
        inside = [s for s in samples if w["t0"] <= s[0] <= w["t1"]]
        top = max((s[2] for s in inside), default=0.0)
        inside = [s for s in inside if s[2] >= 0.7 * top]  # at load: the child's set-up idles the GPU
        w["samples"] = len(inside)
        if inside:
            w["sm_clock_mhz_median"] = float(np.median([s[1] for s in inside]))
            w["sm_clock_mhz_min"] = min(s[1] for s in inside)
            w["power_w_median"] = float(np.median([s[2] for s in inside]))
            w["temperature_c_max"] = max(s[3] for s in inside)
        print(json.dumps(w), flush=True)
    (out / "fp8_clock.json").write_text(json.dumps({"windows": windows, "raw_samples": len(samples)}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
