"""The warp-specialised TMA variant (kernelgen/variants/wgmma_tma.py): ptxas -arch=sm_90a without spills and
with the 168-register entry count setmaxnreg redistributes, the metadata header's tensor maps against the
shared layout the wgmma descriptors read, the PTX parameter list against the header, the planner keeping it
out of the default search, and (once the simulator executes cp.async.bulk.tensor) the numpy check."""

from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pytest

from kernelgen.planner import plan
from kernelgen.spec import parse_spec
from kernelgen.tiling import Tiling, operand_tiles
from kernelgen.variants import get
from kernelgen.variants.wgmma import kmajor
from sim.hw import load_hw
from sim.launch import read_metadata
from sim.ptx.parser import parse_ptx
from validation.gpu import ptx_entries

TMA = get("wgmma_tma")
LAYOUTS = [("row", "col"), ("row", "row"), ("col", "col"), ("col", "row")]


def _tiling(bm: int, bn: int, tm: int, stages: int) -> Tiling:
    return Tiling("wgmma_tma", bm, bn, 64, tm, bn, stages, 0, 0, 8, 8, 0)


def _spec(M: int, N: int, K: int, la: str = "row", lb: str = "col", **extra):
    return parse_spec({"M": M, "N": N, "K": K, "dtype": "bf16", "layout": {"a": la, "b": lb}, **extra})


@pytest.mark.parametrize("layouts", LAYOUTS, ids=lambda x: "".join(x))
def test_header_tensor_maps_cover_the_stage_layout(layouts):
    spec = _spec(200, 136, 264, *layouts, beta=0.5, epilogue=["bias"])
    t = _tiling(256, 128, 128, 4)
    ptx = TMA.emit(spec, t, {})
    meta = read_metadata(ptx)
    ps = meta["params"]
    assert [p["role"] for p in ps[:2]] == ["A", "B"] and all(p["hidden"] for p in ps[:2])
    maps = [p for p in ps if p["kind"] == "tensormap"]
    assert [m["of"] for m in maps] == ["A", "B"]
    ta, tb = operand_tiles(spec, t)
    for m, tile, mn, ext in ((maps[0], ta, 256, 200), (maps[1], tb, 128, 136)):
        assert m["swizzle"] == 128 and m["box"][0] * 2 == 128  # one 128-byte swizzle row per box row
        assert m["dims"] == ([264, ext] if kmajor(tile) else [ext, 264])
        assert m["strides"] == [m["dims"][0] * 2] and m["strides"][0] % 16 == 0
        per_stage = (1 if kmajor(tile) else mn // 64) * m["box"][0] * m["box"][1] * 2
        assert per_stage == tile.stage_bytes  # the expect_tx bytes fill exactly the stage the descriptors read
    assert "expect_tx.shared::cta.b64 _, [%r" in ptx and f", {ta.stage_bytes + tb.stage_bytes};" in ptx
    assert meta["block"] == [384, 1, 1] and meta["grid"] == [2, 1, 1]  # 1 x 2 tiles
    assert meta["dynamic_shared"] == 4 * (ta.stage_bytes + tb.stage_bytes) + 64


def test_ptx_params_are_the_maps_then_the_passed_params():
    spec = _spec(300, 200, 100, beta=1.0, epilogue=["bias", "relu"])
    ptx = TMA.emit(spec, _tiling(128, 128, 64, 3), {})
    meta = read_metadata(ptx)
    entry = ptx_entries(ptx)[meta["kernel"]]
    passed = [p for p in meta["params"] if not p.get("hidden")]
    assert [n for _, n in entry] == [p["name"] for p in passed]
    assert [ty for ty, _ in entry[:2]] == ["array", "array"] and ".param .align 64 .b8" in ptx
    for key, (lo, hi) in meta["ranges"].items():  # ranges and extents index the PTX params
        assert passed[int(key[1:])]["role"] in ("M", "N", "K") and lo == hi
    for key, expr in meta["extents"].items():
        assert passed[int(key[1:])]["kind"] == "buffer"
        for ref in re.findall(r"p(\d+)", expr):
            assert passed[int(ref)]["role"] in ("M", "N", "K")


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not on PATH")
@pytest.mark.parametrize("layouts", LAYOUTS, ids=lambda x: "".join(x))
@pytest.mark.parametrize("tiling", [(64, 128, 64, 4), (128, 256, 64, 3), (128, 128, 64, 6), (128, 128, 128, 4),
                                    (256, 128, 128, 3)],
                         ids=lambda t: "x".join(map(str, t)))
def test_assembles_without_spills(tiling, layouts, tmp_path):
    spec = _spec(4096, 4096, 4096, *layouts, beta=1.0, epilogue=["bias"])
    t = _tiling(*tiling)
    f = tmp_path / "k.ptx"
    f.write_text(TMA.emit(spec, t, {}))
    r = subprocess.run(["ptxas", "-arch=sm_90a", "-v", str(f), "-o", str(tmp_path / "k.cubin")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "0 bytes spill stores" in r.stderr and "0 bytes spill loads" in r.stderr, r.stderr
    assert "warning" not in r.stderr.lower(), r.stderr
    regs = int(re.search(r"Used (\d+) registers", r.stderr).group(1))
    if t.grid_m == 2:  # setmaxnreg 40 / 232 needs the full 168 x 384 pool at entry
        assert regs == 168, r.stderr
    else:
        assert regs <= 255


def test_unavailable_and_opt_in():
    h200 = load_hw("h200")
    why = TMA.unavailable(parse_spec({"M": 64, "N": 64, "K": 60, "dtype": "bf16"}), h200) or ""
    assert "TMA row strides" in why and "--variant mma" in why
    assert TMA.unavailable(parse_spec({"M": 63, "N": 64, "K": 64, "dtype": "bf16"}), h200) is None
    assert "no wgmma" in (TMA.unavailable(parse_spec({"M": 64, "N": 64, "K": 64}), load_hw("npu7nm.yaml")) or "")
    spec = parse_spec({"M": 1024, "N": 1024, "K": 1024, "dtype": "bf16"})
    assert all(c.tiling.variant != "wgmma_tma" for c in plan(spec, h200).survivors)
    p = plan(spec, h200, "wgmma_tma")
    assert p.best.tiling.variant == "wgmma_tma" and p.best.cycles > 0
    with pytest.raises(ValueError, match="--profile"):
        TMA.emit(spec, p.best.tiling, {}, profile=True)


@pytest.mark.parametrize("layouts", LAYOUTS, ids=lambda x: "".join(x))
def test_numpy_check_in_the_simulator(layouts):
    from sim.functional.runner import run_functional
    from sim.launch import launch_from_metadata
    from sim.reference import check_from_metadata

    spec = _spec(296, 136, 264, *layouts, beta=-1.0, epilogue=["bias", "gelu"])  # TMA strides: 16-byte multiples
    ptx = TMA.emit(spec, _tiling(256, 128, 128, 3), {})  # 2 x 2 tiles of 5 K tiles, a ring of 3
    prog = parse_ptx(ptx, "wgmma_tma.ptx")
    meta = read_metadata(ptx)
    meta["grid"] = [3, 1, 1]  # persistent CTAs 0 and 1 walk two tiles, CTA 2 none
    launch = launch_from_metadata(meta, np.random.default_rng(3))
    before = launch.copy()
    res = run_functional(prog, launch)
    chk = check_from_metadata(meta, before, res.outputs)
    assert chk is not None and chk["passed"], chk


@pytest.mark.parametrize("case", [(("row", "col"), (128, 64, 64, 3)), (("row", "row"), (64, 128, 64, 4)),
                                  (("col", "col"), (256, 128, 128, 3)), (("col", "row"), (128, 128, 128, 5))],
                         ids=lambda c: "".join(c[0]) + "_" + "x".join(map(str, c[1])))
def test_numpy_check_tilings_in_the_simulator(case):
    """Four tilings numpy-checked with the simulator's TMA (checked against the H200's own boxes,
    tests/test_tma.py): the ring's phases over 5 K tiles and several tiles per persistent CTA, the
    descriptors against the swizzled boxes, the tile walk and the epilogue; a corrupted D fails."""
    from sim.functional.runner import run_functional
    from sim.launch import launch_from_metadata
    from sim.reference import check_from_metadata

    layouts, tiling = case
    spec = _spec(200, 136, 264, *layouts, beta=-1.0, epilogue=["bias", "gelu"])
    ptx = TMA.emit(spec, _tiling(*tiling), {})
    meta = read_metadata(ptx)
    meta["grid"] = [3, 1, 1]
    d = next(i for i, p in enumerate(meta["params"]) if p.get("role") == "D")
    launch = launch_from_metadata(meta, np.random.default_rng(5))
    before = launch.copy()
    res = run_functional(parse_ptx(ptx, "wgmma_tma.ptx"), launch)
    chk = check_from_metadata(meta, before, res.outputs)
    assert chk is not None and chk["passed"], chk
    bad = {**res.outputs, d: res.outputs[d].copy()}
    bad[d].view(np.uint8)[::7] ^= 0x40
    with np.errstate(invalid="ignore"):
        assert not check_from_metadata(meta, before, bad)["passed"]
