"""Markdown and self-contained HTML from one comparison dict (figures referenced or embedded)."""

from __future__ import annotations

import base64
import html
import math
from pathlib import Path
from typing import Any

from reports.figures import FIGURES


def fmt_value(v: Any, unit: str = "") -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "n/a"
    if isinstance(v, bool):
        return str(v)
    if unit == "fraction" and isinstance(v, int | float):
        return f"{100 * v:.1f}%"
    if isinstance(v, float):
        return f"{v:.4g}" if abs(v) < 1000 else f"{v:,.0f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def fmt_error(row: dict[str, Any]) -> str:
    e = row.get("error")
    if e is None or (isinstance(e, float) and not math.isfinite(e)):
        return "n/a"
    if row.get("error_kind") == "pp":
        return f"{100 * e:+.1f} pp"
    return f"{100 * e:+.1f}%"


def _md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows]
    return out


def metric_table(report: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    has_meas = any(r.get("measured") is not None for r in report.get("metrics", []))
    header = ["metric", "predicted", "simulated"] + (["measured"] if has_meas else []) + ["error", "note"]
    rows = []
    for r in report.get("metrics", []):
        u = r.get("unit", "")
        row = [r["metric"] + (f" ({u})" if u and u != "fraction" else ""), fmt_value(r.get("predicted"), u),
               fmt_value(r.get("simulated"), u)]
        if has_meas:
            row.append(fmt_value(r.get("measured"), u))
        row += [fmt_error(r), r.get("note", "")]
        rows.append(row)
    return header, rows


def cause_table(report: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    header = ["cause", "stall cycles", "% of cycles", "share of gap (cycles)", "where", "explanation"]
    rows = []
    for c in report.get("causes", []):
        where = f"{report.get('kernel_file', 'kernel.ptx')}:{c['line']} `{c.get('text', '')}`" if c.get("line") else ""
        rows.append([c.get("label", c["reason"]), fmt_value(c.get("cycles")),
                     f"{100 * c.get('fraction_of_cycles', 0):.1f}%", fmt_value(round(c.get("share_of_gap", 0))),
                     where, c.get("detail", "")])
    return header, rows


def line_table(report: dict[str, Any], top: int = 10) -> tuple[list[str], list[list[str]]]:
    sim = report.get("simulated") or {}
    by_line = sim.get("stalls_by_line") or {}
    texts = report.get("line_text") or {}
    conf = sim.get("bank_conflicts_by_line") or {}
    lines = sorted(by_line, key=lambda ln: -sum(float(v) for v in by_line[ln].values()))[:top]
    header = ["PTX line", "instruction", "stall cycles", "by cause", "bank-conflict extra passes"]
    rows = []
    for ln in lines:
        causes = ", ".join(f"{k} {fmt_value(v)}" for k, v in sorted(by_line[ln].items(), key=lambda kv: -kv[1]) if v)
        rows.append([f"{report.get('kernel_file', 'kernel.ptx')}:{ln}", f"`{texts.get(str(ln), '')}`",
                     fmt_value(sum(by_line[ln].values())), causes, fmt_value(conf.get(str(ln), conf.get(ln)))])
    return header, rows


def summary_lines(report: dict[str, Any]) -> list[str]:
    hw = report.get("hw") or {}
    gap = report.get("gap") or {}
    out = [f"- kernel: `{report.get('kernel_file', 'kernel.ptx')}` ({report.get('tiling', '')}), "
           f"GEMM {'x'.join(map(str, report.get('shape', [])))}",
           f"- hardware: {hw.get('name', '?')} ({hw.get('clock_mhz', '?')} MHz, {hw.get('cores', '?')} cores, "
           f"branch predictor {hw.get('predictor', '?')})"]
    if gap:
        out.append(f"- cycles: predicted {fmt_value(gap.get('predicted'))}, simulated {fmt_value(gap.get('simulated'))}"
                   f" (prediction error {100 * gap.get('relative', 0):+.1f}%)")
    chk = report.get("check")
    if chk:
        out.append(f"- numerical check: {'passed' if chk.get('passed') else 'FAILED'} "
                   f"(max rel err {chk.get('max_rel_err', float('nan')):.2e})")
    if report.get("headline"):
        out.append(f"- **largest cause: {report['headline']}**")
    if report.get("branch_note"):
        out.append(f"- branches: {report['branch_note']}")
    return out


def to_markdown(report: dict[str, Any], figures: dict[str, Path] | None = None) -> str:
    md = [f"# Report: {report.get('title', 'kernel')}", ""]
    md += summary_lines(report) + [""]
    md += ["## Predicted vs simulated", ""]
    md += _md_table(*metric_table(report)) + [""]
    md += ["Errors are (predicted - simulated) / simulated; fractions differ in percentage points (pp).", ""]
    md += ["## Where the cycle gap goes", ""]
    if report.get("causes"):
        md += _md_table(*cause_table(report)) + [""]
        md += ["Stall cycles are the simulator's; the share of the gap splits (simulated - predicted) cycles "
               "in proportion to them.", ""]
    else:
        md += ["The simulator reported no stalls.", ""]
    h, rows = line_table(report)
    if rows:
        md += ["### Top PTX lines by stall cycles", ""] + _md_table(h, rows) + [""]
    pts = report.get("roofline_points") or []
    if pts:
        md += ["## Roofline", ""]
        md += _md_table(["point", "arithmetic intensity (FLOP/B)", "GFLOP/s"],
                        [[p["label"], f"{p['intensity']:.3g}", f"{p['flops_per_s'] / 1e9:.4g}"] for p in pts]) + [""]
    if figures:
        md += ["## Figures", ""]
        for name, p in figures.items():
            md += [f"![{FIGURES[name][1]}]({Path(p).name})", ""]
    return "\n".join(md).rstrip() + "\n"


_CSS = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:0.9em}td,th{border:1px solid #ccc;padding:3px 8px;
text-align:left}th{background:#f0f0f0}code{background:#f6f6f6;padding:0 3px}img{max-width:100%;
border:1px solid #eee;margin:0.5em 0}.headline{background:#fff4e0;padding:0.6em;border-left:4px solid #dd8452}"""


def _html_table(header: list[str], rows: list[list[str]]) -> str:
    def cell(c: str) -> str:
        # `code` spans of the markdown cells become <code>
        parts = html.escape(c).split("`")
        return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))

    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{cell(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def to_html(report: dict[str, Any], figures: dict[str, Path] | None = None) -> str:
    """One file, no external resources: figures are embedded as base64 PNG data URIs."""
    title = html.escape(f"Report: {report.get('title', 'kernel')}")
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{title}</title>",
             f"<style>{_CSS}</style></head><body><h1>{title}</h1><ul>"]
    for line in summary_lines(report):
        text = html.escape(line[2:]).replace("**", "")
        parts.append(f"<li>{text}</li>")
    parts.append("</ul>")
    if report.get("headline"):
        parts.append(f"<p class='headline'>{html.escape(report['headline'])}</p>")
    parts.append("<h2>Predicted vs simulated</h2>" + _html_table(*metric_table(report)))
    parts.append("<p>Errors are (predicted - simulated) / simulated; fractions differ in percentage points.</p>")
    parts.append("<h2>Where the cycle gap goes</h2>")
    parts.append(_html_table(*cause_table(report)) if report.get("causes") else "<p>No stalls reported.</p>")
    h, rows = line_table(report)
    if rows:
        parts.append("<h3>Top PTX lines by stall cycles</h3>" + _html_table(h, rows))
    for name, p in (figures or {}).items():
        data = base64.b64encode(Path(p).read_bytes()).decode("ascii")
        parts.append(f"<h2>{html.escape(FIGURES[name][1])}</h2>"
                     f"<img alt='{html.escape(FIGURES[name][1])}' src='data:image/png;base64,{data}'>")
    parts.append("</body></html>\n")
    return "\n".join(parts)
