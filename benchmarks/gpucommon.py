"""What the H200 scripts share (fp8_check.py, tma_check.py, gpu_bench.py): compile a spec with kernelgen, check
a kernel with ``python -m validation gpu`` in its own process under a timeout, time a kernel (CUDA events,
validation.gpu.run_on_gpu) and time a torch op."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def compile_spec(spec: dict, variant: str, d: Path) -> Path:
    """kernelgen compile --hw h200 of `spec` (written as d/spec.yaml: JSON is YAML) with --variant; d/kernel.ptx."""
    d.mkdir(parents=True, exist_ok=True)
    (d / "spec.yaml").write_text(json.dumps(spec))
    subprocess.run([sys.executable, "-m", "kernelgen", "compile", "--hw", "h200", "--op", str(d / "spec.yaml"),
                    "--variant", variant, "-o", str(d)], check=True, capture_output=True, text=True, cwd=ROOT)
    return d / "kernel.ptx"


def gpu_case(row: dict, make_ptx: Callable[[], Path], timeout: int) -> dict:
    """Compile (make_ptx) and check one kernel with ``python -m validation gpu KERNEL.ptx --json`` in a child
    process under `timeout` seconds (a hung mbarrier wait costs one case, not the run); fills `row` with
    passed, time_ms, rel_err, grid, block, the plan's tiling, or an error, prints it and returns it."""
    try:
        ptx = make_ptx()
        plan = ptx.parent / "plan.json"
        if plan.exists():
            row["tiling"] = json.loads(plan.read_text())["tiling"]["key"]
        r = subprocess.run([sys.executable, "-m", "validation", "gpu", str(ptx), "--json", "--repeats", "5"],
                           capture_output=True, text=True, timeout=timeout, cwd=ROOT)
        if r.returncode in (0, 1) and r.stdout.strip():
            d = json.loads(r.stdout.strip().splitlines()[-1])
            row.update(passed=bool(d["check"] and d["check"]["passed"]), time_ms=d["time_ms"],
                       rel_err=d["check"] and d["check"].get("max_rel_err"), grid=d["grid"], block=d["block"])
        else:
            row["error"] = (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1][:300]
    except subprocess.TimeoutExpired:
        row["error"] = f"timeout after {timeout} s (hang?)"
    except subprocess.CalledProcessError as e:
        row["error"] = f"compile: {(e.stderr or '').strip()[-300:]}"
    print(json.dumps(row), flush=True)
    return row


def run_kernel(ptx: Path, repeats: int, check: bool) -> dict[str, Any]:
    """One checked run (the header's check, if asked), a warm-up, `repeats` timed runs of a kernelgen PTX."""
    from sim.launch import launch_from_metadata, read_metadata
    from validation.gpu import run_on_gpu
    from validation.gpu_tma import without_tensormaps

    text = ptx.read_text()
    meta = read_metadata(text) or {}
    launch = launch_from_metadata(without_tensormaps(meta), np.random.default_rng(1))  # maps: at launch
    prof = meta.get("profile") or {}
    m = run_on_gpu(text, launch, warmup=3, repeats=repeats, check=meta.get("check") if check else None,
                   profile_slots=prof.get("slots"))
    return {"time_ms": m.wall_ms_median, "time_ms_batched": m.extra.get("time_ms_batched"),
            "check": m.check, "per_cta_cycles": m.per_cta_cycles,
            "grid": list(launch.grid), "block": list(launch.block), "prediction": meta.get("prediction"),
            "device": m.device, "registers": m.extra.get("num_regs"),
            "phase_cycles": m.extra.get("profile_phase_cycles")}


def median_ms(op: Callable[[], object], repeats: int) -> float:
    """Median CUDA-event time of `op` (a torch call) over `repeats` runs after 3 warm-ups."""
    import torch

    for _ in range(3):
        op()
    times = []
    for _ in range(repeats):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        op()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e))
    return float(np.median(times))
