"""The wgmma variant (kernelgen/variants/wgmma.py): generated kernels numpy-checked in the simulator
(float64 reference by relative norm, random inputs, D poisoned before the run, a perturbed output
must fail), ptxas -arch=sm_90a without spills, the planner choosing among mma and wgmma, and the
reason it gives on hardware without wgmma."""

from __future__ import annotations

import csv
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

from kernelgen.planner import plan
from kernelgen.spec import parse_spec
from kernelgen.tiling import Tiling
from kernelgen.variants import get
from sim.functional.runner import run_functional
from sim.hw import load_hw
from sim.launch import launch_from_metadata, read_metadata
from sim.ptx.parser import parse_ptx
from sim.reference import check_from_metadata

WG = get("wgmma")


def _check(ptx: str) -> None:
    meta = read_metadata(ptx)
    d = next(i for i, p in enumerate(meta["params"]) if p.get("role") == "D")
    assert meta["params"][d]["init"] == "poison"
    launch = launch_from_metadata(meta, np.random.default_rng(7))
    before = launch.copy()
    res = run_functional(parse_ptx(ptx, "wgmma.ptx"), launch)
    chk = check_from_metadata(meta, before, res.outputs)
    assert chk is not None and chk["passed"], chk
    bad = {**res.outputs, d: res.outputs[d].copy()}
    bad[d].view(np.uint8)[::7] ^= 0x40
    with np.errstate(invalid="ignore"):
        assert not check_from_metadata(meta, before, bad)["passed"]


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
@pytest.mark.parametrize("shape", [(128, 128, 128), (128, 256, 64), (192, 136, 72)],
                         ids=lambda s: "x".join(map(str, s)))
def test_planned_wgmma_kernel_passes_numpy_check(tmp_path, shape, dtype):
    M, N, K = shape
    out = tmp_path / "k"
    subprocess.run([sys.executable, "-m", "kernelgen", "compile", "--hw", "h200", "--gemm", f"{M}x{N}x{K}",
                    "--dtype", dtype, "--variant", "wgmma", "-o", str(out)], check=True, capture_output=True)
    _check((out / "kernel.ptx").read_text())


# (TILE_M, TILE_N, tm, stages): one and two warpgroups, two m64 blocks per warpgroup, N 64..256
TILINGS = [(64, 64, 64, 2), (128, 256, 64, 3), (256, 128, 128, 4), (128, 128, 128, 3)]
EXTRAS = [{"layout": {"a": "row", "b": "row"}},
          {"layout": {"a": "col", "b": "col", "c": "col"}, "dtype": {"a": "f16", "b": "f16", "out": "f16"}},
          {"layout": {"a": "col", "b": "row"}, "beta": 0.5, "alpha": 1.5, "epilogue": ["bias", "gelu"],
           "dtype": {"a": "bf16", "b": "bf16", "out": "bf16"}},
          {"layout": {"a": "row", "b": "col"}, "beta": -1.0, "epilogue": ["relu"]}]


# default tier: each tiling with two of the EXTRAS, each EXTRA with two tilings (i, i + 1 mod 4); the other 8 of the
# 16 pairs with the slow set (1.2-2.7 s of CPU each)
@pytest.mark.parametrize("tiling,extra", [
    pytest.param(t, e, marks=() if (e - i) % len(EXTRAS) in (0, 1) else pytest.mark.slow,
                 id=f"{'x'.join(map(str, t))}-{e}")
    for i, t in enumerate(TILINGS) for e in range(len(EXTRAS))])
def test_wgmma_tilings_layouts_epilogues_on_edges(tiling, extra):
    bm, bn, tm, stages = tiling
    spec = parse_spec({"M": 200, "N": 136, "K": 136, "dtype": "bf16", **EXTRAS[extra]})
    t = Tiling("wgmma", bm, bn, 64, tm, bn, stages, 0, 0, 8, 8, 0)
    assert t in WG.tilings(spec)
    _check(WG.emit(spec, t, {}))


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not on PATH")
@pytest.mark.parametrize("tiling", TILINGS + [(128, 128, 64, 3), (256, 128, 128, 3)],
                         ids=lambda t: "x".join(map(str, t)))
def test_wgmma_assembles_without_spills(tiling, tmp_path):
    bm, bn, tm, stages = tiling
    spec = parse_spec({"M": 4096, "N": 4096, "K": 4096, "dtype": "bf16",
                       "layout": {"a": "row", "b": "row"}, "beta": 1.0, "epilogue": ["bias"]})
    f = tmp_path / "k.ptx"
    f.write_text(WG.emit(spec, Tiling("wgmma", bm, bn, 64, tm, bn, stages, 0, 0, 8, 8, 0), {}))
    r = subprocess.run(["ptxas", "-arch=sm_90a", "-v", str(f), "-o", str(tmp_path / "k.cubin")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "0 bytes spill stores" in r.stderr and "0 bytes spill loads" in r.stderr, r.stderr
    assert "warning" not in r.stderr.lower(), r.stderr  # e.g. wgmma serialization
    assert int(re.search(r"Used (\d+) registers", r.stderr).group(1)) <= 255


def test_planner_chooses_among_mma_and_wgmma(tmp_path):
    out = tmp_path / "k"
    subprocess.run([sys.executable, "-m", "kernelgen", "compile", "--hw", "hwconfigs/h200.yaml", "--gemm",
                    "4096x4096x4096", "--dtype", "bf16", "-o", str(out)], check=True, capture_output=True)
    rows = list(csv.DictReader((out / "candidates.csv").open()))
    assert {"mma", "wgmma"} <= {r["variant"] for r in rows}
    p = plan(parse_spec({"M": 4096, "N": 4096, "K": 4096, "dtype": "bf16"}), load_hw("h200"), "wgmma")
    assert p.best.cycles > 0 and p.best.schedule.bound_pipe == "tensor"


def test_unavailable_reasons():
    assert "no wgmma" in (WG.unavailable(parse_spec({"M": 64, "N": 64, "K": 64}), load_hw("npu7nm.yaml")) or "")
    h200 = load_hw("h200")
    assert "f16 or bf16" in (WG.unavailable(parse_spec({"M": 64, "N": 64, "K": 64, "dtype": "f32"}), h200) or "")
    assert "K must be a multiple of 8" in (WG.unavailable(parse_spec({"M": 64, "N": 64, "K": 60}), h200) or "")
    assert WG.unavailable(parse_spec({"M": 63, "N": 64, "K": 64}), h200) is None  # M is not contiguous
