"""The warp-specialised TMA variant (kernelgen/variants/wgmma_tma.py): ptxas -arch=sm_90a without spills and
with the 168-register entry count setmaxnreg redistributes, the metadata header's tensor maps against the
shared layout the wgmma descriptors read, the PTX parameter list against the header, the planner keeping it
out of the default search, and (once the simulator executes cp.async.bulk.tensor) the numpy check."""

from __future__ import annotations

import re
import shutil

import pytest

from kernelgen.models.schedule import planner_hw
from kernelgen.planner import plan
from kernelgen.spec import parse_spec
from kernelgen.tiling import Tiling, operand_tiles
from kernelgen.variants import get
from kernelgen.variants.wgmma import kmajor
from sim.hw import load_hw
from sim.launch import read_metadata
from tests.kernel_checks import ptxas_clean, sim_check
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
    ptxas_clean(TMA.emit(spec, t, {}), tmp_path, t.grid_m == 2)


def test_unavailable_and_default_search():
    h200 = load_hw("h200")
    why = TMA.unavailable(parse_spec({"M": 64, "N": 64, "K": 60, "dtype": "bf16"}), h200) or ""
    assert "TMA row strides" in why and "--variant mma" in why
    assert TMA.unavailable(parse_spec({"M": 63, "N": 64, "K": 64, "dtype": "bf16"}), h200) is None
    assert "no wgmma" in (TMA.unavailable(parse_spec({"M": 64, "N": 64, "K": 64}), load_hw("npu7nm.yaml")) or "")
    spec = parse_spec({"M": 1024, "N": 1024, "K": 1024, "dtype": "bf16"})
    assert not TMA.opt_in  # in the default search, picked where the model predicts it fastest
    assert any(c.tiling.variant == "wgmma_tma" for c in plan(spec, h200).survivors)
    p = plan(spec, h200, "wgmma_tma")
    assert p.best.tiling.variant == "wgmma_tma" and p.best.cycles > 0
    # plan.json's prediction counts the persistent grid (min(tiles, 132)) in one wave, not a CTA per tile
    from kernelgen.planner import prediction_dict

    tiles = -(-1024 // p.best.tiling.bm) * -(-1024 // p.best.tiling.bn)
    pred = prediction_dict(p)
    assert (pred["ctas"], pred["waves"]) == (min(tiles, 132), 1) == (read_metadata(
        TMA.emit(spec, p.best.tiling, pred))["grid"][0], 1)


# row/col in the default tier; the other three layouts with the slow set (4 s of CPU each): every layout is
# numpy-checked in the default tier by test_numpy_check_tilings_in_the_simulator below (colcol at this tiling)
@pytest.mark.parametrize("layouts", [la if la == ("row", "col") else pytest.param(la, marks=pytest.mark.slow)
                                     for la in LAYOUTS], ids=lambda x: "".join(x))
def test_numpy_check_in_the_simulator(layouts):
    spec = _spec(296, 136, 264, *layouts, beta=-1.0, epilogue=["bias", "gelu"])  # TMA strides: 16-byte multiples
    ptx = TMA.emit(spec, _tiling(256, 128, 128, 3), {})  # 2 x 2 tiles of 5 K tiles, a ring of 3
    sim_check(ptx, 3, 3, corrupt=False)  # persistent CTAs 0 and 1 walk two tiles, CTA 2 none


@pytest.mark.parametrize("case", [(("row", "col"), (128, 64, 64, 3)), (("row", "row"), (64, 128, 64, 4)),
                                  (("col", "col"), (256, 128, 128, 3)), (("col", "row"), (128, 128, 128, 5))],
                         ids=lambda c: "".join(c[0]) + "_" + "x".join(map(str, c[1])))
def test_numpy_check_tilings_in_the_simulator(case):
    """Four tilings numpy-checked with the simulator's TMA (checked against the H200's own boxes,
    tests/test_tma.py): the ring's phases over 5 K tiles and several tiles per persistent CTA, the
    descriptors against the swizzled boxes, the tile walk and the epilogue; a corrupted D fails."""
    layouts, tiling = case
    spec = _spec(200, 136, 264, *layouts, beta=-1.0, epilogue=["bias", "gelu"])
    sim_check(TMA.emit(spec, _tiling(*tiling), {}), 3, 5)


# The cycle model of the persistent TMA kernel (kernelgen/models/tma_cycles.py), through the variant's hook.
H200_BENCH = "benchmarks/data/gpu_bench_wgmma_tma_2026-12-01.json"
# the tilings the planner chose for that run (its recorded CTA count and shared bytes; 128x256 s3 elsewhere)
BENCH_TILINGS = {(4096, 7168, 2048): (128, 128, 64), (128, 4096, 7168): (64, 64, 64), (64, 7168, 4096): (64, 64, 64),
                 (128, 7168, 4096): (64, 128, 64), (64, 4096, 7168): (64, 64, 64)}


def _model(M: int, N: int, K: int, t: Tiling, lb: str = "col", miss: float = 0.2):
    return TMA.cycle_model(_spec(M, N, K, "row", lb), t, load_hw("h200"), (M, N, K), 0.0, miss)


def test_cycle_model_terms_follow_the_mechanisms():
    t = _tiling(128, 256, 64, 3)
    base = _model(8192, 8192, 8192, t)
    assert base.terms["grid"] == 132 and base.terms["tiles_per_cta"] == 16  # ceil(2048 / 132)
    # twice the tiles per CTA: twice the tile time, the prologue and fill paid once
    two = _model(16384, 8192, 8192, t)
    assert two.terms["tiles_per_cta"] == 32
    once = base.pre_cycles + base.terms["store_tail"]  # the last tile's TMA stores drain once per CTA
    assert two.cycles_per_cta - once == pytest.approx(2 * (base.cycles_per_cta - once))
    # twice K: twice the K tiles of each output tile, the same per-tile wgmma latency and epilogue
    k2 = _model(8192, 8192, 16384, t)
    assert k2.terms["per_tile"] - base.terms["per_tile"] == pytest.approx(128 * base.terms["k_tile"])
    # an MN-major B is 4 boxes of [64, 64] per stage: 5 TMA issues instead of 2
    hw = load_hw("h200")
    assert hw.tma is not None
    per_box = max(hw.tma.issue, hw.tma.warp_issue)  # the issuing thread's sequence or the unit's interval
    assert base.terms["tma_issue"] == 2 * per_box
    assert _model(8192, 8192, 8192, t, "row").terms["tma_issue"] == 5 * per_box
    # a tensor-bound K tile is the consumers' wgmma time: 2 warpgroups x 128 x 256 x 64 MACs over 4 units
    assert base.terms["tensor"] == 128 * 256 * 64 / (4 * hw.wgmma.f16_macs)  # type: ignore[union-attr]
    # fewer stages in flight: a longer ring round trip per K tile
    assert _model(64, 7168, 4096, _tiling(64, 64, 64, 3), miss=0.5).terms["tma_ring"] > \
        _model(64, 7168, 4096, _tiling(64, 64, 64, 6), miss=0.5).terms["tma_ring"]
    # the other variants keep the shared model
    assert all(get(v).cycle_model(_spec(256, 256, 256), Tiling(v, 128, 128, 32, 64, 32, 2, 0, 0, 8, 8, 0),
                                  hw, (256, 256, 256), 0.0, 0.0) is None for v in ("simt", "mma", "wgmma"))


@pytest.fixture
def registers_epilogue(monkeypatch):
    """The kernel the 2026-12-01 runs measured: the registers -> global epilogue (before the TMA store)."""
    import kernelgen.variants.wgmma_tma as mod

    mod._counts.cache_clear()
    monkeypatch.setattr(mod, "tma_store", lambda spec: False)
    yield
    mod._counts.cache_clear()


def _bench_ratios() -> list[tuple[tuple[int, int, int], float]]:
    import json
    from pathlib import Path

    hw = load_hw("h200")
    out = []
    for r in json.loads(Path(H200_BENCH).read_text())["speed"]:
        shape = (r["M"], r["N"], r["K"])
        bm, bn, tm = BENCH_TILINGS.get(shape, (128, 256, 64))
        spec = parse_spec({"M": shape[0], "N": shape[1], "K": shape[2],
                           "dtype": {"a": r["dtype"], "b": r["dtype"], "out": "f32"}})
        ev = plan(spec, hw, "wgmma_tma", only=[_tiling(bm, bn, tm, 3)]).best
        out.append((shape, ev.cycles / (r["time_ms"] * planner_hw(hw).clock_mhz * 1e3)))
    return out


def test_cycle_model_within_5_percent_of_the_h200_at_large_shapes(registers_epilogue):
    """Predicted / measured time for the 2026-12-01 H200 run, bf16 and f16, at 4096^3, 6144^3, 8192^3 and
    4096x7168x2048 (several tiles per CTA), the prediction's cycles at the planner's clock ([planner_clock_mhz]
    1550, the clock these shapes ran at in top4 runs 2 and 3): 0.97-1.03, within 5% (0.97-1.05 at clock_mhz 1980
    before the tensor pipe's queue made the 3-stage 256x128 ring the bound; 0.76-0.95 at 1550 without it)."""
    large = [(s, q) for s, q in _bench_ratios() if s[0] >= 4096]
    assert len(large) == 8
    assert all(abs(q - 1) <= 0.05 for _, q in large), large


def test_cycle_model_at_m_64_128(registers_epilogue):
    """M = 64 / 128 (one tile per CTA, one wave, K 4096-7168, 3 stages): the ring keeps stages - 1 stages loading
    (the consumer holds one until the next K tile's wait_group 1), a stage waits for its slowest box, and its DRAM
    trip is the measured one at the device's DRAM bytes in flight ([tma.dram_trip_inflight] / [tma.dram_trip_cycles]:
    every core's stages - 1 stages of misses). Predicted cycles at the planner's clock (1550) over the measured wall
    time (launch included, the SM at ~1780 MHz: per-CTA cycles at the measured clock are
    tests/test_wgmma_tma_percta.py's) 0.97-1.09 (0.75-0.90 at clock_mhz 1980). Bounds it so a change shows up here."""
    from kernelgen.models.tma_cycles import _interp

    small = [(s, q) for s, q in _bench_ratios() if s[0] < 4096]
    assert len(small) == 8
    assert all(0.95 <= q <= 1.10 for _, q in small), small
    hw = load_hw("h200")
    assert hw.tma is not None and hw.tma.dram_trip_inflight and hw.tma.release_wake
    t = _tiling(64, 64, 64, 4)
    m = TMA.cycle_model(_spec(64, 7168, 4096), t, hw, (64, 7168, 4096), 0.0, 0.5)
    assert m.terms["p_stage"] == 1.0  # 59 MB of inputs: the L2 holds none of them for the next launch
    assert m.terms["tma_ring"] == pytest.approx((m.terms["tma_trip"] + m.terms["tma_hold"] + hw.tma.release_wake) / 3)
    # 112 CTAs x 3 stages x a core's DRAM bytes per stage: the miss rate's share of the 16 KiB stage, at most the
    # footprint over the CTAs' K steps (one 8 KiB B box and 1/112 of the A box every CTA reads)
    per_stage = min(16384 * 0.5, (64 * 4096 + 7168 * 4096) * 2 / (112 * 64))
    assert m.terms["tma_trip"] == pytest.approx(_interp(hw.tma.dram_trip_inflight, hw.tma.dram_trip_cycles,
                                                        112 * 3 * per_stage))


# The TMA-store epilogue (beta = 0, row-major D): registers -> swizzled shared staging -> cp.async.bulk.tensor.
def _out_spec(M: int, N: int, K: int, out: str, la: str = "row", lb: str = "col", **extra):
    return parse_spec({"M": M, "N": N, "K": K, "dtype": {"a": "bf16", "b": "bf16", "out": out},
                       "layout": {"a": la, "b": lb}, **extra})


@pytest.mark.parametrize("case", [("f32", ("row", "col"), (128, 64, 64, 3), {"epilogue": ["bias", "relu"]}),
                                  ("bf16", ("row", "row"), (64, 128, 64, 4), {"epilogue": ["bias", "relu"]}),
                                  ("f16", ("col", "col"), (256, 128, 128, 3), {"alpha": 0.5, "epilogue": ["gelu"]}),
                                  ("f32", ("col", "row"), (128, 256, 64, 3), {"epilogue": ["bias"]})],
                         ids=lambda c: f"{c[0]}_{''.join(c[1])}_{'x'.join(map(str, c[2]))}")
def test_tma_store_numpy_check_in_the_simulator(case):
    """200x136x136 (odd edges: the TMA store clips rows past M and columns past N; 3 K tiles a tile, so the
    ring of 3-4 stages wraps within a CTA's tiles) over 3 persistent CTAs:
    f32 and 16-bit D through the staging slabs, bias/relu/gelu/alpha applied before the stores; the last
    case has 5 buffers for 8 f32 slabs per consumer (the rolling buffer and wait_group.read 4). A corrupted
    D fails the check."""
    out, layouts, tiling, extra = case
    spec = _out_spec(200, 136, 136, out, *layouts, **extra)
    ptx = TMA.emit(spec, _tiling(*tiling), {})
    assert "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group" in ptx and "st.global" not in ptx
    sim_check(ptx, 3, 7)


def test_tma_store_header_staging_and_protocol():
    from kernelgen.variants.wgmma_tma import SHARED_LIMIT, ring_bytes, store_slabs

    spec = _out_spec(200, 136, 264, "f32", epilogue=["bias"])
    t = _tiling(128, 256, 64, 3)
    slabs, nb, slab = store_slabs(spec, t)
    assert (slabs, slab) == (8, 64 * 128) and nb == (SHARED_LIMIT - ring_bytes(spec, t)) // (2 * slab) == 5
    ptx = TMA.emit(spec, t, {})
    meta = read_metadata(ptx)
    maps = [p for p in meta["params"] if p["kind"] == "tensormap"]
    assert [m["of"] for m in maps] == ["A", "B", "D"]
    assert maps[2]["dims"] == [136, 200] and maps[2]["box"] == [32, 64] and maps[2]["swizzle"] == 128
    assert meta["dynamic_shared"] == ring_bytes(spec, t) + 2 * nb * slab <= SHARED_LIMIT
    assert TMA.shared_bytes(spec, t) == meta["dynamic_shared"]  # what the movement layer reports and packs by
    entry = ptx_entries(ptx)[meta["kernel"]]
    assert [n for _, n in entry] == [p["name"] for p in meta["params"] if not p.get("hidden")]
    for key in list(meta["ranges"]) + list(meta["extents"]):  # PTX param indices past the three maps
        assert int(key[1:]) >= 3
    assert f"cp.async.bulk.wait_group.read {nb - 1}" in ptx and "bar.sync %r" in ptx
    assert ptx.count("fence.proxy.async.shared::cta") >= slabs
    # every slab buffered (bf16 D: 4 slabs of 64 columns, 5 fit): one wait and two barriers per tile
    ptx16 = TMA.emit(_out_spec(200, 136, 264, "bf16"), t, {})
    assert "cp.async.bulk.wait_group.read 0" in ptx16 and "wait_group.read 3" not in ptx16
    # beta != 0 (C is read) and a column-major D keep the registers -> global epilogue
    for other in (_out_spec(200, 136, 264, "f32", beta=1.0), parse_spec(
            {"M": 200, "N": 136, "K": 264, "dtype": {"a": "bf16", "b": "bf16", "out": "f32"},
             "layout": {"a": "row", "b": "col", "c": "col"}})):
        assert store_slabs(other, t) == (0, 0, 0)
        assert "bulk_group" not in TMA.emit(other, t, {})
    # the search counts the staging against the 227 KiB: every tiling fits with at least one slab buffer
    for tt in TMA.tilings(_out_spec(4096, 4096, 4096, "f32")):
        assert store_slabs(spec, tt)[1] >= 1 and TMA.emit is not None
        assert ring_bytes(spec, tt) + tt.grid_m * store_slabs(spec, tt)[1] * store_slabs(spec, tt)[2] <= SHARED_LIMIT


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not on PATH")
@pytest.mark.parametrize("out", ["f32", "bf16"])
@pytest.mark.parametrize("tiling", [(64, 128, 64, 4), (128, 256, 64, 3), (128, 256, 64, 4), (128, 128, 128, 4),
                                    (256, 128, 128, 3)],
                         ids=lambda t: "x".join(map(str, t)))
def test_tma_store_assembles_without_spills(tiling, out, tmp_path):
    spec = _out_spec(4096, 4096, 4096, out, epilogue=["bias", "relu"])
    t = _tiling(*tiling)
    ptxas_clean(TMA.emit(spec, t, {}), tmp_path, t.grid_m == 2)


def test_cycle_model_tma_store_overlap():
    """The TMA-store epilogue in the model: with a buffer per slab the stores' drain hides behind the next
    tile's K loop; with 5 buffers for 8 f32 slabs, 3 slabs' drain stays exposed; either way the tile is
    shorter than with the registers -> global epilogue (beta != 0)."""
    hw = load_hw("h200")
    t = _tiling(128, 256, 64, 3)
    shape = (8192, 8192, 8192)
    m16 = TMA.cycle_model(_out_spec(*shape, "bf16"), t, hw, shape, 0.0, 0.2)
    m32 = TMA.cycle_model(_out_spec(*shape, "f32"), t, hw, shape, 0.0, 0.2)
    old = TMA.cycle_model(_out_spec(*shape, "f32", beta=1.0), t, hw, shape, 0.0, 0.2)
    assert m16.terms["store_exposed"] == 0.0
    assert m32.terms["store_exposed"] == pytest.approx(m32.terms["store_drain"] * 3 / 8)
    # TMA stores drain at the measured TMA-store rates ([tma.store_bytes_per_cycle] alone, a core's share of
    # [tma.store_bandwidth_gbps]), not at the st.global epilogue's L2 write share
    tma = hw.tma
    assert tma is not None and tma.store_bandwidth_gbps and tma.store_bytes_per_cycle
    rate = min(tma.store_bytes_per_cycle, tma.store_bandwidth_gbps * 1e3 / hw.clock_mhz / 132)
    assert m32.terms["store_drain"] == pytest.approx(128 * 256 * 4 / rate)
    assert rate > hw.l2.write_bandwidth_gbps * 1e3 / hw.clock_mhz / 132
    assert m16.terms["epilogue"] < m32.terms["epilogue"] < old.terms["epilogue"]


def test_profile_without_variant_profiles_the_pick():
    """`kernelgen compile --profile` without --variant: the pick itself (wgmma_tma has one clock64 record per
    persistent CTA now; tests/test_wgmma_tma_profile.py)."""
    import json

    from kernelgen.cli import compile_kernel

    # 2048^3: at 1024^3 the shared model's wgmma (cp.async) now predicts 1.3% under wgmma_tma (planfid, session 8)
    files = compile_kernel("h200", None, "2048x2048x2048", "bf16", "f32", None, profile=True)
    assert json.loads(files["plan.json"])["tiling"]["variant"] == "wgmma_tma"
    prof = read_metadata(files["kernel.ptx"])["profile"]
    assert prof["slots"] == 4 and prof["records"] == len(prof["tiles_per_cta"])


def test_cycle_model_against_the_h200_tma_store_runs():
    """The TMA-store epilogue measured on the H200 (docs/wgmma-tma.md 4d, the lead's run of 2026-12-01) at
    4096^3, 6144^3, 8192^3, 4096x7168x2048, cycles at the planner's clock: bf16 D (256x128 t128 s3, every slab
    buffered) predicted / measured 1.03-1.08 (its ring bound by the tensor pipe's queue; 0.93-0.95 before); f32 D
    (128x256, 5 of 8 slabs buffered) 1.03-1.08 since the measured TMA-store drain ([tma.store_bandwidth_gbps];
    1.06-1.17 with the st.global-sourced L2 write share). Bounds both so a change to either shows up here."""
    import json
    from pathlib import Path

    hw = load_hw("h200")
    tilings = {"bf16": _tiling(256, 128, 128, 3), "f32": _tiling(128, 256, 64, 3)}
    for out, (lo, hi) in (("bf16", (1.0, 1.1)), ("f32", (1.0, 1.1))):
        rows = json.loads(Path(f"benchmarks/data/gpu_bench_wgmma_tma_epi_{out}_2026-12-01.json").read_text())["speed"]
        large = [r for r in rows if r["M"] >= 4096]
        assert len(large) == 4
        for r in large:
            spec = _out_spec(r["M"], r["N"], r["K"], out)
            ev = plan(spec, hw, "wgmma_tma", only=[tilings[out]]).best
            q = ev.cycles / (r["time_ms"] * planner_hw(hw).clock_mhz * 1e3)
            assert lo <= q <= hi, (out, r["M"], r["N"], r["K"], q)
