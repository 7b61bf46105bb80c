"""int8 x int8 -> int32 on the wgmma path (issue 16): wgmma_tma with s8 A and B issues
wgmma.mma_async m64nNk32.s32.s8.s8 (TILE_K = 128 bytes, K-major operands only); exact in the simulator,
ptxas-clean, in the planner's s8 search for the H200 with its own count and model."""

from __future__ import annotations

import shutil

import pytest

from kernelgen.models.schedule import planner_hw
from kernelgen.planner import plan
from kernelgen.spec import parse_spec
from kernelgen.tiling import Tiling
from kernelgen.variants import get
from sim.hw import load_hw
from tests.kernel_checks import ptxas_clean, sim_check

TMA = get("wgmma_tma")


def _spec(M: int, N: int, K: int, out: str = "s32", **extra):
    return parse_spec({"M": M, "N": N, "K": K, "dtype": {"a": "s8", "b": "s8", "out": out}, **extra})


def _tiling(bm: int, bn: int, tm: int, stages: int) -> Tiling:
    return Tiling("wgmma_tma", bm, bn, 128, tm, bn, stages, 0, 0, 16, 16, 0, 32)


def test_exact_in_the_simulator():
    """64 x 72 x 272: one persistent CTA walks 2 tiles of 64 x 64, 3 K tiles of 128 bytes each (the last 16
    wide, zero-filled by TMA), so the 3-stage ring wraps; random s8 A and B; the s32 D through the TMA-store
    epilogue (staging slabs of b32 pairs); D equals numpy's int64 sums exactly (rtol 0) and a corrupted D
    fails. A dequantising f32 D (alpha 0.5) converts in the registers -> global epilogue."""
    ptx = TMA.emit(_spec(64, 72, 272), _tiling(64, 64, 64, 3), {})
    assert ptx.count("wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8") == 4
    meta, _, _, chk = sim_check(ptx, 1, 5)
    assert chk["max_rel_err"] == 0.0 and meta["check"]["rtol"] == 0.0
    maps = [p for p in meta["params"] if p["kind"] == "tensormap"]
    assert [(m["of"], m["dtype"], m["box"]) for m in maps] == [("A", "s8", [128, 64]), ("B", "s8", [128, 64]),
                                                                ("D", "s32", [32, 64])]
    assert "st.shared.v2.b32" in ptx and "st.global" not in ptx
    deq = TMA.emit(_spec(64, 72, 272, "f32", alpha=0.5), _tiling(64, 64, 64, 3), {})
    assert "cvt.rn.f32.s32" in deq and "bulk_group" not in deq


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not on PATH")
@pytest.mark.parametrize("tiling", [(128, 256, 64, 3), (64, 128, 64, 4)], ids=lambda t: "x".join(map(str, t)))
def test_assembles_without_spills(tiling, tmp_path):
    t = _tiling(*tiling)
    ptxas_clean(TMA.emit(_spec(4096, 4096, 4096), t, {}), tmp_path, t.grid_m == 2)


def test_unavailable_layouts_and_k():
    hw = load_hw("h200")
    assert TMA.unavailable(_spec(64, 64, 64), hw) is None
    assert TMA.unavailable(_spec(64, 64, 64, "f32", alpha=0.5), hw) is None  # dequantising epilogue
    why = TMA.unavailable(parse_spec({"M": 64, "N": 64, "K": 64, "dtype": {"a": "s8", "b": "s8", "out": "s32"},
                                      "layout": {"b": "row"}}), hw)
    assert why and "K-major" in why and "--variant mma" in why
    assert "multiple of 16" in (TMA.unavailable(_spec(64, 64, 72), hw) or "")
    assert TMA.unavailable(_spec(64, 64, 64), load_hw("npu7nm.yaml"))  # no wgmma section
    from kernelgen.int4 import packed_spec

    s4 = parse_spec({"M": 64, "N": 64, "K": 128, "dtype": {"a": "s4", "b": "s4", "out": "s32"}})
    assert "packed" in (TMA.unavailable(packed_spec(s4), hw) or "")  # s4 bytes are not s8 values


def test_in_the_s8_search_with_its_count_and_model():
    hw = load_hw("h200")
    assert hw.wgmma is not None
    spec = _spec(4096, 4096, 4096)
    # the default search (no --variant), narrowed by tiling ranges to stay fast: wgmma_tma beside mma
    narrow = _spec(4096, 4096, 4096, tiling=["TILE_M in [128, 128]", "TILE_N in [256, 256]", "STAGES in [2, 3]"])
    p = plan(narrow, hw)
    assert {e.tiling.variant for e in p.survivors} >= {"wgmma_tma", "mma"} and p.best.tiling.variant == "wgmma_tma"
    t = _tiling(128, 256, 64, 3)
    c = TMA.counts(spec, t)
    assert c.iter["tensor"] >= 4  # 4 k32 wgmmas (+ fence, commit, wait) per 128-byte K tile
    m = TMA.cycle_model(spec, t, hw, (4096, 4096, 4096), 0.0, 0.1)
    # two consumers' 64 x 256 x 128 s8 MACs per K tile over 4 units at [wgmma.int8_macs]
    assert m.terms["tensor"] == 2 * 64 * 256 * 128 / (4 * hw.wgmma.int8_macs)
    assert m.terms["tiles_per_cta"] == 4  # 512 tiles over 132 persistent CTAs


@pytest.mark.slow
@pytest.mark.parametrize("case", [((200, 136, 272), (128, 256, 64, 3), "s32", {}),
                                  ((200, 136, 272), (128, 128, 64, 4), "f32", {"alpha": 0.5, "epilogue": ["relu"]}),
                                  ((200, 136, 272), (256, 128, 128, 3), "bf16", {"alpha": 0.25})],
                         ids=lambda c: "x".join(map(str, c[1])) + "_" + c[2])
def test_tilings_in_the_simulator(case):
    """Two consumer warpgroups (TILE_N 256 with rolling s32 staging slabs, and m128 consumers) over 3 persistent
    CTAs; s32 exact, the dequantising f32 / bf16 epilogues within their tolerance."""
    shape, tiling, out, extra = case
    sim_check(TMA.emit(_spec(*shape, out, **extra), _tiling(*tiling), {}), 3, 9)


def test_against_the_h200():
    """The H200 run of 2026-12-01 (benchmarks/data/s8_check_2026-12-01.json): 8/8 checks exact, wgmma_tma s8 at
    1.93x / 1.78x torch._int_mm (4096^3 / 8192^3) and 2.5-2.7x the mma s8 kernel; predicted / measured 1.23 / 1.14
    with the s32 staging drain at the st.global L2 write share (docs/kernelgen.md), 1.10 / 1.12 with the
    measured TMA-store drain (tma.store_bandwidth_gbps). Bounds the ratios (both models inside) so a
    model change shows up here."""
    import json
    from pathlib import Path

    hw = load_hw("h200")
    data = json.loads((Path(__file__).parent.parent / "benchmarks/data/s8_check_2026-12-01.json").read_text())
    assert all(r["passed"] for r in data["checks"]) and len(data["checks"]) == 8
    assert all(r["rel_err"] == 0.0 for r in data["checks"] if r["out"] == "s32")
    for r in data["speed"]:
        if r["variant"] != "wgmma_tma":
            continue
        assert r["tiling"] == _tiling(128, 256, 64, 3).key() and r["vs_int_mm"] > 1.7
        ev = plan(_spec(r["M"], r["N"], r["K"]), hw, "wgmma_tma", only=[_tiling(128, 256, 64, 3)]).best
        assert 1.05 <= ev.cycles / (r["time_ms"] * 1e3 * planner_hw(hw).clock_mhz) <= 1.26, r["M"]
