"""On the GPU: per-CTA clock64 profiles of a kernelgen --profile kernel, and a live calibration figure
(``-m gpu``; skipped without pycuda or a GPU)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from sim.launch import launch_from_metadata, read_metadata
from validation.gpu import gpu_available

_OK, _WHY = gpu_available()
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not _OK, reason=f"no GPU: {_WHY}")]


def test_profile_kernel_reports_per_cta_cycles(tmp_path):
    from validation.gpu import run_on_gpu

    out = tmp_path / "k"
    subprocess.run([sys.executable, "-m", "kernelgen", "compile", "--hw", "h200", "--gemm", "256x256x256",
                    "--dtype", "f16", "--variant", "mma", "--profile", "-o", str(out)], check=True,
                   capture_output=True)
    text = (out / "kernel.ptx").read_text()
    meta = read_metadata(text)
    launch = launch_from_metadata(meta, np.random.default_rng())
    prof = meta["profile"]
    m = run_on_gpu(text, launch, warmup=1, repeats=3, check=meta["check"], profile_slots=prof["slots"])
    assert m.check["passed"], m.check
    ctas = launch.grid[0] * launch.grid[1] * launch.grid[2]
    assert m.per_cta_cycles is not None and len(m.per_cta_cycles) == ctas
    assert all(c > 0 for c in m.per_cta_cycles)
    raw = m.outputs[prof["param"]].view(np.uint64).reshape(ctas, prof["slots"]).astype(np.int64)
    assert (np.diff(raw, axis=1) >= 0).all()  # start <= loop start <= loop end <= end in every CTA


def test_live_calibration_figure_matches_committed_measurement():
    from validation.calibrate import load_measured, measure_gpu

    live = measure_gpu(["shared_latency", "mma_latency"])
    committed = load_measured()["figures"]
    for name in ("shared_latency", "mma_latency"):
        got = live["figures"][name]["value"]
        ref = committed[name]["value"]
        assert abs(got - ref) <= 0.1 * ref, (name, got, ref)
