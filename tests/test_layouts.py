"""Issue 15 item 3: storage layouts row, col, blocked-PxQ, striped-N for A, B and C (sim/layouts.py),
expanded into the simt and mma emitters' address arithmetic; inputs built from dense matrices in each
layout are numpy-checked in the simulator (validation/layout_check.py, the case table
validation.cases.LAYOUT_CASES; the same table runs on the H200: benchmarks/layouts_gpu.py)."""

from __future__ import annotations

import os
import shutil
import subprocess

import numpy as np
import pytest

from kernelgen.planner import plan
from kernelgen.spec import parse_spec
from sim.errors import UsageError
from sim.hw import load_hw
from sim.layouts import parse_layout
from validation.cases import LAYOUT_CASES
from validation.layout_check import emit_case, layout_spec, run_case, sim_runner


def test_formulas_by_hand():
    # a 3 x 4 matrix, element (r, c) holds 10r + c
    dense = np.array([[10 * r + c for c in range(4)] for r in range(3)], dtype=np.float64)
    # blocked-2x3: tiles (0,0) (0,1) / (1,0) (1,1), each 2x3 stored whole, row-major, tiles row-major
    flat = parse_layout("blocked-2x3").scatter(dense, fill=-1)
    assert flat.size == 4 * 6
    assert flat.tolist() == [0, 1, 2, 10, 11, 12,  3, -1, -1, 13, -1, -1,
                             20, 21, 22, -1, -1, -1,  23, -1, -1, -1, -1, -1]
    # striped-2: rows {0, 1} interleaved column by column, then rows {2, (pad)}
    flat = parse_layout("striped-2").scatter(dense, fill=-1)
    assert flat.tolist() == [0, 10, 1, 11, 2, 12, 3, 13,  20, -1, 21, -1, 22, -1, 23, -1]
    assert parse_layout("col").scatter(dense).tolist() == dense.T.ravel().tolist()
    for name in ("row", "col", "blocked-2x3", "blocked-4x1", "striped-2", "striped-5"):
        lay = parse_layout(name)
        assert np.array_equal(lay.gather(lay.scatter(dense), 3, 4), dense), name
        assert lay.size_expr("p0", "p1") == lay.size_expr("p0", "p1")  # a string the verifier reads
    assert parse_layout("row-major").name == "row" and parse_layout("column-major").name == "col"


@pytest.mark.parametrize("bad", ["diag", "blocked-0x4", "blocked-32", "striped-", "striped-0"])
def test_bad_layout_is_one_line_naming_the_key(bad):
    with pytest.raises(UsageError) as e:
        parse_spec({"M": 8, "N": 8, "K": 8, "layout": {"b": bad}}, "g.yaml")
    msg = str(e.value)
    assert msg.startswith("g.yaml") and "'layout.b'" in msg and "\n" not in msg


def test_wgmma_refuses_with_one_line_naming_the_variant():
    spec = parse_spec({"M": 64, "N": 64, "K": 64, "dtype": "f16", "layout": {"a": "blocked-32x32"}})
    with pytest.raises(UsageError) as e:
        plan(spec, load_hw("h200"), "wgmma")
    msg = str(e.value)
    assert "variant wgmma takes row or col layouts only (got a blocked-32x32)" in msg and "\n" not in msg


def _ids(case):
    v, d, shape, lays = case
    return f"{v}-{d}-{'x'.join(map(str, shape))}-{'.'.join(lays)}"


@pytest.mark.parametrize("case", LAYOUT_CASES, ids=_ids)
def test_layout_case_numpy_checked_in_simulator(case):
    variant, dtype, shape, layouts = case
    spec = layout_spec(variant, dtype, shape, layouts)
    text, _ = emit_case(spec, load_hw("h200"), variant, "small")
    r = run_case(spec, text, sim_runner)
    assert r["passed"], r


def test_layout_check_can_fail():
    """A kernel that addresses striped-8 operands as col-major (the same orientation and buffer sizes
    at this shape: only the formula differs) fails the check: the check sees the layouts."""
    variant, dtype, shape, layouts = LAYOUT_CASES[4]
    assert layouts == ("striped-8",) * 3 and all(x % 8 == 0 for x in shape)
    spec = layout_spec(variant, dtype, shape, layouts)
    wrong = layout_spec(variant, dtype, shape, ("col", "col", "col"))
    text, _ = emit_case(wrong, load_hw("h200"), variant, "small")
    r = run_case(spec, text, sim_runner)
    assert not r["passed"] and r["dense_err"] > 0.5


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="no ptxas on PATH")
def test_ptxas_accepts_layout_kernels(tmp_path):
    hw = load_hw("h200")
    for i, (variant, dtype, shape, layouts) in enumerate(LAYOUT_CASES[::2]):
        text, _ = emit_case(layout_spec(variant, dtype, shape, layouts), hw, variant, "small")
        src = tmp_path / f"k{i}.ptx"
        src.write_text(text)
        r = subprocess.run(["ptxas", "-arch=sm_90a", str(src), "-o", str(tmp_path / f"k{i}.cubin")],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr


def test_burst_model_reads_the_layout_addresses():
    """A 4 x 8 f16 tile of A: blocked-2x8 stores each 2 x 8 block contiguously (two 32-byte runs, every
    burst full); blocked-2x64 leaves 16-byte row pieces (four runs, each in its own 32-byte burst)."""
    from kernelgen.models.movement import _layout_burst

    assert _layout_burst("blocked-2x8", "m", "k", 4, 8, 64, 128, 2, 32) == 1.0
    assert _layout_burst("blocked-2x64", "m", "k", 4, 8, 64, 128, 2, 32) == 0.5
    # striped-4 A (col-like: tile rows are k, cols m): 4 rows of m interleaved over the 8 k -> one run
    assert _layout_burst("striped-4", "k", "m", 8, 4, 128, 64, 2, 32) == 1.0
    assert _layout_burst("striped-2", "k", "m", 8, 4, 128, 64, 2, 32) == 1.0  # 2 runs of 32 B
    assert _layout_burst("striped-1", "k", "m", 8, 4, 128, 64, 2, 32) == 0.5  # 4 runs of 16 B


def test_blocked_runs_equal_the_sorted_element_addresses():
    """movement._blocked_runs (block by block) == the maximal runs of every element's sorted index, and
    _layout_burst's figure from them == the element-wise one bit for bit: tiles inside and across blocks,
    partial blocks, a tile wider than the matrix's block columns, whole block rows (runs across rows)."""
    import numpy as np

    from kernelgen.models.movement import _blocked_runs, _layout_burst
    from sim.layouts import parse_layout

    for p, q in ((32, 32), (2, 8), (3, 5), (1, 7), (16, 4)):
        lay = parse_layout(f"blocked-{p}x{q}")
        for ext_r, ext_c in ((64, 64), (50, 35), (96, 40)):
            for rows, cols in ((16, 16), (33, 20), (64, 64), (7, 40), (40, 7), (100, 100)):
                r, c = min(rows, ext_r), min(cols, ext_c)
                gr, gc = np.meshgrid(np.arange(r), np.arange(c), indexing="ij")
                srt = np.sort(lay.index(gr, gc, ext_r, ext_c).ravel())
                starts = np.flatnonzero(np.diff(srt) != 1) + 1
                runs = np.diff(np.concatenate(([0], starts, [srt.size])))
                assert _blocked_runs(p, q, r, c, -(-ext_c // q)) == runs.tolist(), (p, q, ext_r, ext_c, rows, cols)
                for ein, burst in ((2, 32), (4, 64), (1, 128)):
                    b = runs * ein
                    want = float(srt.size * ein / (np.sum(-(-b // burst)) * burst))
                    got = _layout_burst.__wrapped__(lay.name, "m", "k", rows, cols, ext_r, ext_c, ein, burst)
                    assert got == want


def test_l1_line_walk_reads_the_layout_addresses():
    """kernelgen.models.l1lines takes each copy's lines from the layout's formula: warp 0's first copy
    of a 64 x 32 f16 A tile (8-element chunks, 128 threads) stored blocked-16x16 touches the lines of
    those elements' addresses, which differ from row-major's."""
    import kernelgen.models.l1lines as l1

    M, K, line = 256, 256, 128
    geo = (64, 32, 8, 4, 2, True)  # rows, cols, vec, chunks per row, bytes, K contiguous
    ext = ((K, M, K), (K, M, K))  # (ld, row extent, col extent) per operand
    for name in ("row", "blocked-16x16"):
        got = l1._warp_lines((geo + (name,),) * 2, 128, 32, ext, 32, line, 1, 0)[0][0][0]  # kt 0, copy 0, warp 0
        lanes = np.arange(32)
        r, c = lanes // 4, (lanes % 4) * 8
        want = sorted({int(a) * 2 // line for a in parse_layout(name).index(r, c, M, K)})
        assert list(got) == want, name
    assert l1._warp_lines(((geo + ("row",)),) * 2, 128, 32, ext, 32, line, 1, 0) != \
        l1._warp_lines(((geo + ("blocked-16x16",)),) * 2, 128, 32, ext, 32, line, 1, 0)


NPOT_RUNTIME_DIV = ("mma", "f16", (32, 100, 96), ("blocked-16x16", "striped-8", "row"))


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("WORKBENCH_LONG") != "1",
                    reason="about 30 s of Z3: WORKBENCH_LONG=1 python -m pytest -m slow")
@pytest.mark.parametrize("case", [LAYOUT_CASES[5], NPOT_RUNTIME_DIV], ids=_ids)
def test_layout_kernels_proved(tmp_path, case):
    """Z3 (validation.formal): every access in bounds of the padded buffers the metadata declares, for a
    non-power-of-two blocked C (every property proved) and a TILE_K 48 kernel whose copies carry their
    chunk index at run time: bounds (13 s) and barriers proved here at a 20 s limit; its race and async-copy
    analyses need ~150 s of Z3 and are proved in tests/test_verify_copies.py (long tier). About 10 and 22 s."""
    pytest.importorskip("z3")
    from validation.formal.properties import NAMES
    from validation.formal.suite import verify_file

    variant, dtype, shape, layouts = case
    npot = case == NPOT_RUNTIME_DIV
    tiling = ("TILE_K in [48, 48]", "TILE_N in [96, 96]", "TILE_M in [32, 32]") if npot else ()
    text, _ = emit_case(layout_spec(variant, dtype, shape, layouts, tiling), load_hw("h200"), variant,
                        "planner" if npot else "small")
    src = tmp_path / "k.ptx"
    src.write_text(text)
    rep = verify_file(src, timeout=20.0 if npot else 120.0)
    status = {p["name"]: p["status"] for p in rep["properties"]}
    assert "violated" not in status.values(), status
    want = ("bounds", "barrier_divergence") if npot else NAMES
    assert all(status[n] == "proved" for n in want), [
        (p["name"], p["detail"]) for p in rep["properties"] if p["status"] != "proved"]
