"""SASS mode for TMA kernels (sim/sass/exec_tma.py, sim/sass/timing_tma.py): the SASS ptxas writes for the TMA,
bulk-copy and mbarrier fixtures runs to the same bytes as PTX mode (functional and timed), and the H200 TMA
probe kernel's phase cycles simulated from its SASS are within 10% of the H200's."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from sim.functional.runner import run_functional
from sim.hw import load_hw
from sim.launch import Arg, Launch, launch_from_metadata, read_metadata
from sim.ptx.parser import parse_ptx
from sim.sass.exec import run_sass_functional
from sim.sass.timing import simulate_sass
from sim.tensormap import TensorMapSpec
from tests.test_sass_exec import needs_tools
from tests.test_tma import BOX, PROBE, PROBE_CASES, TILE, tile_launch
from validation.tma_cases import CASES

ROOT = Path(__file__).resolve().parents[1]
ASYNC = ROOT / "tests" / "fixtures" / "async"
TIMING_PTX = ROOT / "tests" / "fixtures" / "hopper_cuda" / "tma_time.ptx"
TIMING_DATA = ROOT / "benchmarks" / "data" / "tma_timing_2026-12-01.json"


def _probe_tile():
    data = np.load(PROBE.with_suffix(".npz"))
    case = dict(PROBE_CASES[0], grid=[2, 1])  # two of its boxes
    want = data[f"{case['name']}_out"]
    return TILE, lambda: tile_launch(case, data[f"{case['name']}_in"], want.size)


def _header(path: Path):
    meta = read_metadata(path.read_text(), str(path))
    return path, lambda: launch_from_metadata(meta, np.random.default_rng(7))


def _im2col():
    case = dataclasses.replace(CASES[0], grid=(3, 2, 1))  # filter offsets (0..2, 0) at two start pixels
    return case.ptx, case.launch


def _bulk1d():
    src = np.random.default_rng(5).integers(1, 1 << 30, 96).astype(np.uint32)
    return BOX, lambda: Launch("bulk1d", (1, 1, 1), (64, 1, 1), [
        Arg("buffer", "u32", array=src.copy()), Arg("buffer", "u32", array=np.full(96, 0xFFFFFFFF, np.uint32)),
        Arg("scalar", "u32", value=src.nbytes)], src.nbytes)


def _pc():
    inp = np.random.default_rng(3).integers(1, 1 << 20, 64).astype(np.uint32)
    path = ROOT / "tests" / "fixtures" / "hopper" / "mbarrier_pc.ptx"
    return path, lambda: Launch("mbar_pc", (1, 1, 1), (64, 1, 1), [
        Arg("buffer", "uint32", array=np.full(64, 0xFFFFFFFF, np.uint32)), Arg("buffer", "uint32", array=inp.copy())])


FIXTURES = {"tma_tile": _probe_tile, "tma_im2col": _im2col, "bulk1d": _bulk1d, "mbar_pc": _pc,
            "tma_ring": lambda: _header(ASYNC / "tma_ring.ptx"), "tma_store": lambda: _header(ASYNC / "tma_store.ptx")}


@needs_tools
@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_sass_equals_ptx_mode(name):
    path, launch = FIXTURES[name]()
    text = path.read_text()
    want = run_functional(parse_ptx(text, str(path)), launch()).outputs
    got = run_sass_functional(text, launch(), file=str(path)).outputs
    timed = simulate_sass(text, launch(), load_hw("h200"), str(path))
    for i, w in want.items():
        assert np.array_equal(got[i].view(np.uint8), w.view(np.uint8)), i
        assert np.array_equal(timed.outputs[i].view(np.uint8), w.view(np.uint8)), i
    assert timed.cycles > 0


@needs_tools
@pytest.mark.parametrize("box_rows,depth", [(8, 1), (8, 8), pytest.param(128, 8, marks=pytest.mark.slow)])
def test_sass_tma_phase_cycles_match_the_h200(box_rows, depth):
    """The H200 TMA probe kernel (docs/tma-timing.md) from its SASS: cycles per phase within 10%, and the
    issuing thread's cycles per load grow by the probe's ~63 per further load (the issue loop's control codes)."""
    rows, iters, warm = 8192, 6, 1
    measured = next(r for r in json.loads(TIMING_DATA.read_text())["results"]
                    if (r["tensor"], r["box_rows"], r["depth"], r["grid"]) == ("l2", box_rows, depth, 1))
    data = np.random.default_rng(3).integers(1, 65535, size=rows * 64, dtype=np.uint16)
    spec = TensorMapSpec("t", "bf16", 2, (64, rows), (128,), (64, box_rows), 128)
    args = [Arg("buffer", "u64", array=np.zeros(2, np.uint64), name="out"),
            Arg("tensormap", "bf16", name="tmap", tmap=spec),
            *(Arg("scalar", "u32", value=v) for v in (box_rows * 128, box_rows, rows, depth, iters, warm)),
            Arg("buffer", "bf16", array=data, name="t", hidden=True)]
    launch = Launch("tma_time", (1, 1, 1), (32, 1, 1), args, depth * box_rows * 128 + 1024)
    hw = load_hw("h200")
    hw = dataclasses.replace(hw, l2=dataclasses.replace(hw.l2, far_latency=0))  # as tests/test_tma_timing.py
    res = simulate_sass(TIMING_PTX.read_text(), launch, hw, str(TIMING_PTX), warm_l2=True)
    phase = float(res.outputs[0][1]) / (iters - warm)
    assert abs(phase - measured["phase_cycles_median"]) / measured["phase_cycles_median"] < 0.10
    assert res.stalls.get("mbarrier", 0) > 0  # the waiting thread sleeps until the copies land


@needs_tools
@pytest.mark.slow
def test_sass_wgmma_tma_kernel_equals_ptx_mode():
    """A kernelgen wgmma_tma kernel (TMA loads into a 3-stage ring, warp-specialised producer, named barriers,
    TMA-store epilogue): its SASS gives the PTX mode's bytes, functional and timed."""
    from kernelgen.spec import parse_spec
    from kernelgen.tiling import Tiling
    from kernelgen.variants import get

    spec = parse_spec({"M": 128, "N": 128, "K": 128, "dtype": "bf16", "layout": {"a": "row", "b": "col"}})
    text = get("wgmma_tma").emit(spec, Tiling("wgmma_tma", 128, 128, 64, 64, 128, 3, 0, 0, 8, 8, 0), {})
    meta = read_metadata(text)
    want = run_functional(parse_ptx(text, "wgmma_tma.ptx"), launch_from_metadata(meta, np.random.default_rng(1)))
    got = run_sass_functional(text, launch_from_metadata(meta, np.random.default_rng(1)), file="wgmma_tma.ptx")
    timed = simulate_sass(text, launch_from_metadata(meta, np.random.default_rng(1)), load_hw("h200"), "wgmma_tma.ptx")
    for i, w in want.outputs.items():
        assert np.array_equal(got.outputs[i].view(np.uint8), w.view(np.uint8)), i
        assert np.array_equal(timed.outputs[i].view(np.uint8), w.view(np.uint8)), i


@needs_tools
def test_sass_tma_issue_holds_the_warp():
    """In SASS mode the hold is the copy's read barrier: a UBLKCP's uniform registers are read when the TMA
    unit accepts it, and the next copy's operand setup waits on that barrier. tma.issue 100: with tma.queue 0
    each further copy costs at least the unit's 100 cycles; with room for three the instruction stream alone."""
    path = ROOT / "tests" / "fixtures" / "tma" / "tma_issue_line.ptx"
    gaps = {}
    for queue in (0, 3):
        hw = load_hw("h200")
        hw = dataclasses.replace(hw, tma=dataclasses.replace(hw.tma, issue=100, queue=queue))
        args = [Arg("buffer", "u32", array=np.arange(64, dtype=np.uint32)),
                Arg("buffer", "u32", array=np.zeros(4, np.uint32))]
        launch = Launch("tma_issue_line", (1, 1, 1), (32, 1, 1), args, 0)
        res = simulate_sass(path.read_text(), launch, hw, str(path))
        gaps[queue] = np.diff(res.outputs[1].astype(np.int64)).tolist()
    assert gaps[0][1] >= 100 and gaps[0][2] >= 100, gaps
    assert gaps[3][1] < 100 and gaps[3][1] == gaps[3][2], gaps


@needs_tools
def test_sass_missing_release_is_a_deadlock_naming_the_line():
    """tma_no_release (the consumers never free a stage): the SASS functional runner stops with one line that
    names the PTX line of the wait, as PTX mode does."""
    path, launch = _header(ASYNC / "tma_no_release.ptx")
    from sim.errors import ExecutionError

    with pytest.raises(ExecutionError, match=r"tma_no_release.ptx:\d+: deadlock in CTA .* waits at SASS"):
        run_sass_functional(path.read_text(), launch(), file=str(path))


@needs_tools
def test_sass_timed_missing_release_is_a_deadlock():
    path, launch = _header(ASYNC / "tma_no_release.ptx")
    from sim.errors import ExecutionError

    with pytest.raises(ExecutionError, match=r"tma_no_release.ptx:\d+: deadlock in CTA .* mbarrier"):
        simulate_sass(path.read_text(), launch(), load_hw("h200"), str(path))


@needs_tools
@pytest.mark.parametrize("producers", [1, 4])
def test_sass_tma_issue_probe_phases_match_the_h200(producers):
    """benchmarks/tma_probe/issue.py's kernel from its SASS, 4 x 1 KiB per phase per producer warp: cycles per
    phase within 10% of the H200's (653 for one producer, 659 for each of four)."""
    from tests.test_tma_timing import ISSUE_DATA, ISSUE_PTX, issue_probe_launch

    measured = next(r for r in json.loads(ISSUE_DATA.read_text())["results"]
                    if (r["box_bytes"], r["producers"], r["stride"], r["depth"]) == (1024, producers, 1, 4))
    hw = load_hw("h200")
    hw = dataclasses.replace(hw, l2=dataclasses.replace(hw.l2, far_latency=0))
    res = simulate_sass(ISSUE_PTX.read_text(), issue_probe_launch(producers, 4), hw, str(ISSUE_PTX), warm_l2=True)
    out = res.outputs[0].reshape(32, 2).astype(np.float64)
    for k in range(producers):
        phase = out[k, 1] / 6
        assert abs(phase - measured["phase_cycles"][k]) / measured["phase_cycles"][k] < 0.10, (k, phase)


PREFETCH_PTX = """.version 8.3
.target sm_90a
.address_size 64
.visible .entry k(.param .align 64 .b8 tmap[128], .param .u64 out)
{
	.reg .b32 %r<8>;
	.reg .b64 %rd<4>;
	mov.u64 %rd1, tmap;
	mov.u32 %r1, 0;
	cp.async.bulk.prefetch.tensor.2d.L2.global [%rd1, {%r1, %r1}];
	ld.param.u64 %rd2, [out];
	fence.proxy.tensormap::generic.acquire.gpu [%rd2], 128;
	ret;
}
"""


@needs_tools
def test_tensor_prefetch_and_tensormap_fence_run_in_both_modes():
    """cp.async.bulk.prefetch.tensor (UTMAPF.L2.2D) and fence.proxy.tensormap::generic (UTMACCTL.IV, DEPBAR):
    accepted, no effect on memory, in PTX and SASS mode."""
    spec = TensorMapSpec("x", "f32", 4, (32, 8), (128,), (32, 8), 0)

    def launch() -> Launch:
        return Launch("k", (1, 1, 1), (32, 1, 1), [
            Arg("tensormap", "f32", name="tmap", tmap=spec), Arg("buffer", "u8", array=np.arange(128, dtype=np.uint8)),
            Arg("buffer", "f32", array=np.zeros(256, np.float32), name="x", hidden=True)])
    a = run_functional(parse_ptx(PREFETCH_PTX, "prefetch.ptx"), launch())
    b = run_sass_functional(PREFETCH_PTX, launch(), file="prefetch.ptx")
    assert np.array_equal(a.outputs[1], np.arange(128, dtype=np.uint8))
    assert np.array_equal(b.outputs[1], a.outputs[1])


@needs_tools
def test_sass_im2col_3d_and_5d_offsets_equal_ptx_mode():
    """tests/fixtures/tma/tma_im2col_35.ptx: 3-D and 5-D im2col loads whose offsets SASS packs as 16 and 5 bits
    (UTMALDG.3D.IM2COL / .5D.IM2COL), with columns that wrap into the next image: SASS mode's bytes equal PTX
    mode's."""
    path = ROOT / "tests" / "fixtures" / "tma" / "tma_im2col_35.ptx"
    rng = np.random.default_rng(35)
    t3 = rng.standard_normal(8 * 10 * 2).astype(np.float32)
    t5 = rng.standard_normal(4 * 5 * 4 * 3 * 2).astype(np.float32)
    m3 = TensorMapSpec("t3", "f32", 4, (8, 10, 2), (32, 320), (), 0, (), (-2,), (1,), 8, 8)
    m5 = TensorMapSpec("t5", "f32", 4, (4, 5, 4, 3, 2), (16, 80, 320, 960), (), 0, (), (-1, -1, -1), (-1, 0, -1), 4, 32)

    def launch() -> Launch:
        return Launch("tma_im2col_35", (1, 1, 1), (192, 1, 1), [
            Arg("buffer", "f32", array=np.full(192, np.nan, np.float32)),
            Arg("tensormap", "f32", name="map3", tmap=m3), Arg("tensormap", "f32", name="map5", tmap=m5),
            *(Arg("scalar", "u32", value=v) for v in (9, 1, 2, 1, 0, 1 | 2 << 4 | 1 << 8)),
            Arg("buffer", "f32", array=t3.copy(), name="t3", hidden=True),
            Arg("buffer", "f32", array=t5.copy(), name="t5", hidden=True)], 2048)
    text = path.read_text()
    want = run_functional(parse_ptx(text, str(path)), launch()).outputs[0]
    got = run_sass_functional(text, launch(), file=str(path)).outputs[0]
    assert not np.isnan(want).any() and (want == 0).any() and (want != 0).sum() > 100
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
