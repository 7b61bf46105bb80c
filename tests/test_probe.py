"""validation probe: driver attributes -> a hardware YAML that loads and simulates."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sim.hw import load_hw, resolve_hw_path
from validation.gpu import gpu_available
from validation.probe import arch_of, base_for, probe_yaml

ROOT = Path(__file__).resolve().parent.parent
_OK, _WHY = gpu_available()

# A device unlike the bundled H200 in every probed field, so a field the probe forgot shows.
FAKE = {"name": "NVIDIA Fake 90", "total_memory": 80 << 30, "attributes": {
    "MULTIPROCESSOR_COUNT": 100, "CLOCK_RATE": 1500000, "WARP_SIZE": 32, "MAX_THREADS_PER_MULTIPROCESSOR": 1536,
    "MAX_BLOCKS_PER_MULTIPROCESSOR": 24, "MAX_REGISTERS_PER_MULTIPROCESSOR": 65536, "MAX_REGISTERS_PER_BLOCK": 65536,
    "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR": 167936, "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN": 166912,
    "L2_CACHE_SIZE": 41943040, "MAX_THREADS_PER_BLOCK": 1024, "MEMORY_CLOCK_RATE": 2619000,
    "GLOBAL_MEMORY_BUS_WIDTH": 5120, "COMPUTE_CAPABILITY_MAJOR": 9, "COMPUTE_CAPABILITY_MINOR": 0}}


def test_probe_yaml_takes_every_probed_field(tmp_path):
    base = base_for(arch_of(FAKE["attributes"]))
    assert base == resolve_hw_path("h200.yaml")
    out = tmp_path / "probe.yaml"
    out.write_text(probe_yaml(FAKE, base, "2026-12-01"))
    hw = load_hw(out)
    assert (hw.name, hw.clock_mhz, hw.arch) == ("probe_nvidia_fake_90", 1500, "sm_90a")
    assert hw.planner_clock_mhz is None  # the base's clock measured under load is not this device's
    assert (hw.core.count, hw.core.max_threads, hw.core.max_ctas, hw.core.max_warps) == (100, 1536, 24, 48)
    assert (hw.shared.size, hw.l2.size, hw.limits.smem_per_block) == (167936, 41943040, 166912)
    assert hw.dram.bandwidth_gbps == round(2 * 2619000e3 * 5120 / 8 / 1e9)  # 3352
    text = out.read_text()
    assert "Not in" not in text
    assert text.count("# source: probe (") == 14  # 13 fields and the name
    base_hw = load_hw(base)
    assert hw.shared.latency == base_hw.shared.latency and hw.pipes == base_hw.pipes


def test_probe_without_gpu_is_one_line(tmp_path):
    if _OK:
        pytest.skip("a GPU is present")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-m", "validation", "probe", "-o", "p.yaml"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "probe needs a CUDA GPU" in r.stderr
    assert not (tmp_path / "p.yaml").exists()


@pytest.mark.gpu
@pytest.mark.skipif(not _OK, reason=f"no GPU for validation probe: {_WHY}")
def test_probe_live_gpu_writes_a_config_that_simulates(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-m", "validation", "probe", "-o", "p.yaml"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    hw = load_hw(tmp_path / "p.yaml")
    assert hw.core.count > 0 and hw.clock_mhz > 0
    r = subprocess.run([sys.executable, "-m", "sim", "run", str(ROOT / "examples" / "sgemm_tiled.ptx"), "--hw",
                        "p.yaml", "--json"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
