"""Issue 15 item 2: non-power-of-two tiles where the hardware allows them (multiples of the mma shape,
of 4 f32 for simt), enumerated only when the spec's tiling range asks (a divisor or a single value);
the default search space is unchanged (tests/test_plan_speed.py digests). Kernels with such tiles,
including copies that carry their chunk coordinates at run time, pass the dense numpy check in the simulator."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from kernelgen.planner import enumerate_tilings, plan, prediction_dict
from kernelgen.spec import parse_spec, shorthand
from kernelgen.tiling import operand_tiles, tile_values
from kernelgen.variants import get
from sim.hw import load_hw
from validation.layout_check import run_case, sim_runner


def _spec(tiling, M=40, N=100, K=72, **extra):
    return parse_spec({"M": M, "N": N, "K": K, "dtype": "f16", "beta": 0.5, "tiling": tiling, **extra})


def test_values_only_where_the_spec_asks():
    assert tile_values(shorthand("64x64x64"), "TILE_K", (8, 16, 32), 4) == (8, 16, 32)
    assert tile_values(_spec(["TILE_K in [8, 64]"]), "TILE_K", (8, 16, 32), 4) == (8, 16, 32)  # a bare range filters
    asks = _spec(["TILE_K in [8, 64], TILE_K % 8 == 0"])
    assert tile_values(asks, "TILE_K", (8, 16, 32), 4) == (8, 16, 32, 24)  # up to the largest default
    assert tile_values(asks, "TILE_K", (16, 32, 64), 16) == (16, 32, 64, 48)  # mma: multiples of k16
    assert tile_values(_spec(["TILE_N in [96, 96]"]), "TILE_N", (8, 16, 32, 64, 128, 256), 8)[-1] == 96
    base = {v: len(enumerate_tilings(shorthand("64x64x64"), v)) for v in ("simt", "mma")}
    assert all(len(enumerate_tilings(_spec(["TILE_K in [8, 64]"]), v)) == n for v, n in base.items())


def _checked(spec, variant, hw="h200"):
    p = plan(spec, load_hw(hw), variant)
    t = p.best.tiling
    text = get(variant).emit(spec, t, prediction_dict(p))
    r = run_case(spec, text, sim_runner)
    assert r["passed"], (t.key(), r)
    return t, text


def test_simt_tile_k_24_and_tile_n_96():
    """The issue's example: TILE_K 24 gave "needs 8 value"; with TILE_N 96 the thread grid is 12 or 24
    wide (rem.u32 / div.u32 of tid)."""
    t, text = _checked(_spec(["TILE_K in [24, 24]", "TILE_N in [96, 96]", "TILE_M in [32, 32]", "PAD in [0, 0]"],
                             M=20, N=96, K=48), "simt", "npu7nm.yaml")
    assert (t.bn, t.bk) == (96, 24) and "rem.u32" in text


def test_mma_tile_k_48_runtime_chunks():
    """TILE_K 48 of 8-element chunks is 6 per row: the copies do not tile the threads linearly and each
    carries its (row, column) from the previous copy (setp.ge + predicated carry); TILE_N 96 = 12 n8 tiles."""
    spec = _spec(["TILE_K in [48, 48]", "TILE_N in [96, 96]", "TILE_M in [32, 32]", "STAGES in [2, 2]",
                  "PAD in [8, 8]"], M=32, N=100, K=96)
    t, text = _checked(spec, "mma")
    assert (t.bn, t.bk) == (96, 48)
    assert not operand_tiles(spec, t)[0].linear_copies(t.threads) and "setp.ge.u32" in text


def test_npot_case_table_in_simulator():
    """validation.cases.NPOT_CASES (the H200 script runs the same): the picks have the asked tiles."""
    from validation.cases import NPOT_CASES
    from validation.layout_check import layout_spec

    for variant, dtype, shape, layouts, tiling in NPOT_CASES[:2]:  # [2] is the ptxas test's kernel
        t, _ = _checked(layout_spec(variant, dtype, shape, layouts, tiling), variant)
        assert t.bn == 96 and t.bk in (24, 48)


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="no ptxas on PATH")
def test_ptxas_accepts_npot_tiles(tmp_path):
    spec = _spec(["TILE_K in [48, 48]", "TILE_N in [96, 96]", "TILE_M in [32, 32]", "STAGES in [3, 3]"],
                 M=100, N=200, K=192,
                 layout={"a": "blocked-16x16", "b": "striped-8", "c": "blocked-24x40"})
    p = plan(spec, load_hw("h200"), "mma")
    src = tmp_path / "k.ptx"
    src.write_text(get("mma").emit(spec, p.best.tiling, prediction_dict(p)))
    r = subprocess.run(["ptxas", "-arch=sm_90a", str(src), "-o", str(tmp_path / "k.cubin")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_copy_extra_alu_matches_the_emitter():
    """The cycle model's extra copy address instructions (emit_common.copy_extra_alu) are the emitter's:
    a simt 48x128x24 tiling of 192 threads copies B row-major in 128-chunk rows (not linear: run-time
    division) or col-major in 24-chunk rows (linear); A blocked-8x8 adds its formula to each copy."""
    from kernelgen.emit_common import copy_extra_alu
    from kernelgen.tiling import Tiling

    t = Tiling("simt", 48, 128, 24, 4, 8, 1, 0, 0, 1, 1)
    totals, model = {}, {}
    for lays in (("row", "col"), ("row", "row"), ("blocked-8x8", "row"), ("striped-4", "blocked-3x5")):
        spec = parse_spec({"M": 64, "N": 200, "K": 64, "dtype": "f16", "layout": dict(zip("ab", lays))})
        c = get("simt").counts(spec, t)
        totals[lays] = sum(c.iter.values())
        model[lays] = sum(n * e + o for n, tl, lay in ((c.copies_a, operand_tiles(spec, t)[0], lays[0]),
                                                       (c.copies_b, operand_tiles(spec, t)[1], lays[1]))
                          for e, o in [copy_extra_alu(tl, t.threads, lay)])
    assert not operand_tiles(parse_spec({"M": 64, "N": 200, "K": 64, "layout": {"b": "row"}}), t)[1].linear_copies(192)
    base = ("row", "col")
    assert model[base] == 0
    for lays in totals:
        assert totals[lays] - totals[base] == model[lays], lays
