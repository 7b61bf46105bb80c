"""Rendering only: a markdown report, a self-contained HTML report and PNG figures of one kernel's
predicted-vs-simulated(-vs-measured) comparison.

``render(out_dir, report)`` draws what it is handed; it imports nothing of the simulator. ``report``
is the plain JSON object ``validation.compare.build_report`` returns (``python -m validation compare
OUT/ --json`` prints it); the keys read here, all optional except ``metrics``:

- ``title``, ``kernel_file`` ("kernel.ptx"), ``tiling``, ``shape`` [M, N, K]
- ``hw``: ``{name, clock_mhz, cores, predictor, peak_flops (FLOP/s), dram_bandwidth (B/s)}``
- ``prediction``: the planner's prediction (``utilization`` unit -> fraction, ``cycles``, ...)
- ``simulated``: the simulator's result (``cycles``, ``stalls``, ``stalls_by_line``,
  ``bank_conflicts_by_line``, ``series``, ...), ``measured``: the GPU's or None
- ``metrics``: ``[{metric, unit, predicted, simulated, measured?, error, error_kind ("rel"|"pp"), note}]``
- ``gap``: ``{predicted, simulated, cycles, relative}``, ``headline``: one sentence
- ``causes``: ``[{reason, label, cycles, fraction_of_cycles, share_of_gap, line, text, detail}]``
- ``line_text``: ``{"57": "bra LOOP_K"}``, ``roofline_points``: ``[{label, intensity, flops_per_s}]``
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reports.figures import FIGURES, draw_all
from reports.text import to_html, to_markdown
from sim import atomic

__all__ = ["render", "to_markdown", "to_html", "draw_all", "FIGURES"]


def render(out_dir: str | Path, report: dict[str, Any], prefix: str = "") -> dict[str, Path]:
    """Write ``report.md``, ``report.html`` and one PNG per figure into ``out_dir``; returns name -> path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    figs = draw_all(report, out, prefix)
    md = out / f"{prefix}report.md"
    atomic.write_text(md, to_markdown(report, figs))
    page = out / f"{prefix}report.html"
    atomic.write_text(page, to_html(report, figs))
    return {"markdown": md, "html": page, **{f"{k}.png": v for k, v in figs.items()}}
