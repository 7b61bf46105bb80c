"""reports: markdown, self-contained HTML and PNG figures rendered from plain dicts (no simulator)."""

from __future__ import annotations

import re

import pytest

# reports is imported by the tests that use it, not at collection: it imports matplotlib.pyplot (1 s of CPU, paid
# by every pytest-xdist worker that collects this file)


def fake_report() -> dict:
    sim = {
        "cycles": 1890, "cycles_per_cta": [1890], "warp_instructions": 1027, "ipc": 0.54,
        "utilization": {"mac": 0.43, "alu": 0.80, "lsu": 0.07, "shared": 0.01},
        "stalls": {"scoreboard": 40, "pipe_busy": 20, "bank_conflict": 24, "memory": 30, "flush": 58},
        "stalls_by_line": {"368": {"flush": 58}, "335": {"bank_conflict": 16, "scoreboard": 10},
                           "175": {"memory": 30}, "341": {"scoreboard": 30, "pipe_busy": 20}},
        "bank_conflicts_by_line": {"335": 16},
        "cache": {"l1_hit_rate": None, "l2_hit_rate": 0.6}, "dram_bytes": 6400,
        "flushes": [{"line": 368, "count": 3, "text": "@%p39 bra $L_ktile_1;", "cycles": 24}],
        "occupancy": {"ctas_per_core": 8, "warps_per_core": 8, "limiter": "core.max_ctas"},
        "series": {"window": 100, "t": [0, 100, 200], "ipc": [0.5, 0.6, 0.4],
                   "mac": [0.1, 0.5, 0.6], "alu": [0.9, 0.9, 0.8]},
    }
    return {
        "title": "33x17x40 mma on npu7nm", "kernel_file": "kernel.ptx", "tiling": "mma_64x32x16",
        "shape": [33, 17, 40], "flops": 2 * 33 * 17 * 40,
        "hw": {"name": "npu7nm", "clock_mhz": 1000, "cores": 1, "predictor": "backward_taken",
               "peak_flops": 2.56e11, "dram_bandwidth": 1.024e12},
        "prediction": {"cycles": 1682, "utilization": {"mac": 0.485, "alu": 0.877}},
        "simulated": sim, "measured": None,
        "metrics": [
            {"metric": "cycles", "unit": "cycles", "predicted": 1682, "simulated": 1890, "error": -0.11,
             "error_kind": "rel", "note": ""},
            {"metric": "mac utilization", "unit": "fraction", "predicted": 0.485, "simulated": 0.43,
             "error": 0.055, "error_kind": "pp", "note": ""},
            {"metric": "registers per thread", "unit": "registers", "predicted": 120, "simulated": None,
             "error": None, "error_kind": "rel", "note": "n/a in the simulator"},
        ],
        "gap": {"predicted": 1682, "simulated": 1890, "cycles": 208, "relative": -0.11},
        "causes": [{"reason": "flush", "label": "pipeline flushes", "cycles": 58, "fraction_of_cycles": 0.031,
                    "share_of_gap": 69, "line": 368, "text": "@%p39 bra $L_ktile_1",
                    "detail": "3 pipeline flushes at kernel.ptx:368, the loop exit mispredicted"}],
        "headline": "ALU idle 3.1% of cycles: 3 pipeline flushes at kernel.ptx:368 '@%p39 bra $L_ktile_1'",
        "line_text": {"368": "@%p39 bra $L_ktile_1", "335": "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {..}, [%r105]",
                      "175": "cp.async.cg.shared.global [%r42+0], [%rd4], 16, %r48", "341": "mma.sync ..."},
        "roofline_points": [{"label": "predicted", "intensity": 7.2, "flops_per_s": 2.7e10},
                            {"label": "simulated", "intensity": 7.0, "flops_per_s": 2.4e10}],
    }


def test_render_writes_all_files(tmp_path):
    from reports import FIGURES, render

    paths = render(tmp_path, fake_report())
    assert set(paths) == {"markdown", "html"} | {f"{k}.png" for k in FIGURES}
    for name in FIGURES:
        png = tmp_path / f"{name}.png"
        data = png.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000, name


def test_html_is_self_contained(tmp_path):
    from reports import FIGURES, render

    render(tmp_path, fake_report())
    page = (tmp_path / "report.html").read_text()
    assert page.count("data:image/png;base64,") == len(FIGURES)
    # no external resource: every src/href is a data URI
    for ref in re.findall(r"(?:src|href)=['\"]([^'\"]+)", page):
        assert ref.startswith("data:"), ref
    assert "loop exit mispredicted" in page and "&lt;" not in page.split("<body>")[0]


def test_markdown_tables_and_figure_links(tmp_path):
    from reports import FIGURES, render

    paths = render(tmp_path, fake_report())
    md = paths["markdown"].read_text()
    assert "| cycles (cycles) | 1,682 | 1,890 | -11.0% |" in md
    assert "| mac utilization | 48.5% | 43.0% | +5.5 pp |" in md
    assert "kernel.ptx:368 `@%p39 bra $L_ktile_1`" in md
    for name in FIGURES:
        assert f"]({name}.png)" in md


def test_render_without_series_stalls_or_roofline(tmp_path):
    from reports import render, to_markdown

    rep = fake_report()
    rep["simulated"] = {"cycles": 10}
    rep["causes"], rep["roofline_points"], rep["hw"] = [], [], {}
    paths = render(tmp_path, rep)
    assert all(p.exists() for p in paths.values())
    assert "reported no stalls" in to_markdown(rep)


@pytest.mark.parametrize("series", [
    {"window": 10, "t": [0, 10], "ipc": [1, 1], "alu": [0.5, 0.25]},
    {"window": 10, "utilization": {"alu": [0.5, 0.25]}},
    [{"cycle": 0, "utilization": {"alu": 0.5}}, {"cycle": 10, "alu": 0.25}],
])
def test_series_layouts(series):
    from reports.figures import normalize_series

    t, units = normalize_series(series)
    assert t == [0.0, 10.0] and units["alu"] == [0.5, 0.25] and "ipc" not in units
