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


def _profile_kernel(tmp_path, gemm: str) -> tuple[str, dict]:
    """kernelgen's --profile mma f16 kernel for the h200 at MxNxK: (PTX text, its @workbench metadata)."""
    out = tmp_path / "k"
    subprocess.run([sys.executable, "-m", "kernelgen", "compile", "--hw", "h200", "--gemm", gemm,
                    "--dtype", "f16", "--variant", "mma", "--profile", "-o", str(out)], check=True,
                   capture_output=True)
    text = (out / "kernel.ptx").read_text()
    return text, read_metadata(text)


def test_profile_kernel_reports_per_cta_cycles(tmp_path):
    from validation.gpu import run_on_gpu

    text, meta = _profile_kernel(tmp_path, "256x256x256")
    launch = launch_from_metadata(meta, np.random.default_rng())
    prof = meta["profile"]
    m = run_on_gpu(text, launch, warmup=1, repeats=3, check=meta["check"], profile_slots=prof["slots"])
    assert m.check["passed"], m.check
    ctas = launch.grid[0] * launch.grid[1] * launch.grid[2]
    assert m.per_cta_cycles is not None and len(m.per_cta_cycles) == ctas
    assert all(c > 0 for c in m.per_cta_cycles)
    raw = m.outputs[prof["param"]].view(np.uint64).reshape(ctas, prof["slots"]).astype(np.int64)
    assert (np.diff(raw, axis=1) >= 0).all()  # start <= loop start <= loop end <= end in every CTA
    phases = m.extra["profile_phase_cycles"]  # prologue, K loop, epilogue
    assert len(phases) == prof["slots"] - 1 and abs(sum(phases) - np.mean(m.per_cta_cycles)) < 1e-6 * sum(phases)


def test_live_calibration_figure_matches_committed_measurement():
    from validation.calibrate import load_measured, measure_gpu

    live = measure_gpu(["shared_latency", "mma_latency"])
    committed = load_measured()["figures"]
    for name in ("shared_latency", "mma_latency"):
        got = live["figures"][name]["value"]
        ref = committed[name]["value"]
        assert abs(got - ref) <= 0.1 * ref, (name, got, ref)


def test_flushing_the_l2_makes_the_first_tile_a_dram_wait(tmp_path):
    """flush_l2_bytes evicts the uploaded inputs: the CTA then waits for DRAM instead of the L2 for
    its first tile (on the H200 ~400 cycles more for 16^3: 875 warm vs 1,275 cold, gpu_l2.py)."""
    from validation.gpu import run_on_gpu

    text, meta = _profile_kernel(tmp_path, "16x16x16")
    slots = meta["profile"]["slots"]
    spans = {}
    for kind, flush in (("warm", 0), ("cold", 256 << 20)):
        runs = [run_on_gpu(text, launch_from_metadata(meta, np.random.default_rng()), warmup=0, repeats=1,
                           profile_slots=slots, flush_l2_bytes=flush).per_cta_cycles[0] for _ in range(3)]
        spans[kind] = float(np.median(runs))
    assert spans["cold"] > spans["warm"] + 200, spans
