"""matplotlib figures (Agg backend) of one comparison: each function draws one PNG and returns its path.

Inputs are plain dicts (the JSON object ``validation.compare`` builds, see ``reports/__init__.py``);
nothing here imports the simulator. Every figure has a title, axis labels with units and a legend.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from sim import atomic

#: one colour per stall reason, fixed so that figures of different kernels read the same way
REASON_COLORS = {
    "scoreboard": "#4c72b0", "pipe_busy": "#dd8452", "bank_conflict": "#c44e52", "memory": "#8172b3",
    "barrier": "#937860", "flush": "#da8bc3", "no_eligible": "#8c8c8c",
}
PRED_COLOR, SIM_COLOR, MEAS_COLOR = "#4c72b0", "#dd8452", "#55a868"
DPI = 110


def _save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    atomic.write_with(path, lambda tmp: fig.savefig(tmp, dpi=DPI))
    plt.close(fig)
    return path


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) else None


def metrics_figure(report: dict[str, Any], path: Path) -> Path:
    """Predicted vs simulated (vs measured) per metric, as ratios to the simulated value.

    Metrics have different units (cycles, fractions, bytes), so each pair is drawn as
    predicted / simulated with the simulated value at 1.0 (the ±10 % target band shaded), and the
    absolute values are written above the bars.
    """
    rows = [r for r in report.get("metrics", []) if _num(r.get("predicted")) is not None
            and _num(r.get("simulated")) is not None]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(rows) + 2), 4.2))
    if not rows:
        ax.text(0.5, 0.5, "no metric has both a prediction and a simulated value", ha="center", va="center")
        ax.set_axis_off()
        ax.set_title("Predicted vs simulated")
        return _save(fig, path)
    x = list(range(len(rows)))
    w = 0.38
    ratios, labels = [], []
    for r in rows:
        p, s = float(r["predicted"]), float(r["simulated"])
        ratios.append(p / s if s else (1.0 if p == 0 else float("nan")))
        labels.append(r["metric"])
    ax.axhspan(0.9, 1.1, color="#cccccc", alpha=0.5, label="±10 % of simulated")
    ax.bar([i - w / 2 for i in x], ratios, w, color=PRED_COLOR, label="predicted / simulated")
    ax.bar([i + w / 2 for i in x], [1.0] * len(rows), w, color=SIM_COLOR, label="simulated (= 1)")
    meas = [(_num(r.get("measured")), _num(r.get("simulated"))) for r in rows]
    if any(m is not None for m, _ in meas):
        ax.scatter([i for i, (m, _) in zip(x, meas) if m is not None],
                   [m / s if s else float("nan") for m, s in meas if m is not None],
                   color=MEAS_COLOR, marker="D", zorder=3, label="measured / simulated")
    for i, r in zip(x, rows):
        ax.annotate(f"{_short(r['predicted'])}\nvs {_short(r['simulated'])}", (i, max(ratios[i], 1.0)),
                    textcoords="offset points", xytext=(0, 3), ha="center", fontsize=7)
    ax.set_xticks(x)
    ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("value / simulated value (ratio)")
    top = max([1.2] + [v for v in ratios if math.isfinite(v)])
    ax.set_ylim(0, top * 1.25)
    ax.set_title(f"Predicted vs simulated per metric: {report.get('title', 'kernel')}")
    ax.legend(fontsize=8, loc="upper right")
    return _save(fig, path)


def _short(v: Any) -> str:
    f = _num(v)
    if f is None:
        return "n/a"
    if abs(f) >= 1e6:
        return f"{f / 1e6:.3g}M"
    if abs(f) >= 1e4:
        return f"{f / 1e3:.3g}k"
    if abs(f) < 1 and f != 0:
        return f"{f:.3f}"
    return f"{f:.4g}"


def normalize_series(series: Any) -> tuple[list[float], dict[str, list[float]]]:
    """(window start cycles, {unit: [fraction per window]}) from the accepted series layouts:

    - ``{"window": W, "start": [...]?, "utilization": {unit: [..]}}`` (or the units at top level)
    - ``[{"cycle"|"start": c, "utilization": {unit: f}} | {"cycle": c, unit: f, ...}, ...]``
    """
    if not series:
        return [], {}
    if isinstance(series, dict):
        window = float(series.get("window", series.get("window_cycles", 1)) or 1)
        units = series.get("utilization", {k: v for k, v in series.items() if isinstance(v, list)
                                           and k not in ("start", "cycles", "cycle", "t", "ipc")})
        n = max((len(v) for v in units.values()), default=0)
        cols = series.get("t") or series.get("start") or series.get("cycles") or series.get("cycle") or \
            [i * window for i in range(n)]
        return [float(s) for s in cols][:n], {u: [float(x) for x in v] for u, v in units.items()}
    starts: list[float] = []
    out: dict[str, list[float]] = {}
    for i, pt in enumerate(series):
        if not isinstance(pt, dict):
            continue
        starts.append(float(pt.get("cycle", pt.get("start", i))))  # type: ignore[arg-type]
        util = pt.get("utilization", {k: v for k, v in pt.items() if k not in ("cycle", "start", "end")})
        for u, v in util.items():
            out.setdefault(u, [0.0] * (len(starts) - 1)).append(float(v))
        for u in out:
            if len(out[u]) < len(starts):
                out[u].append(0.0)
    return starts, out


def utilization_figure(report: dict[str, Any], path: Path) -> Path:
    """Per-unit utilization over time from the simulator's windows, with the predicted average dashed."""
    starts, units = normalize_series((report.get("simulated") or {}).get("series"))
    pred = (report.get("prediction") or {}).get("utilization", {})
    fig, ax = plt.subplots(figsize=(9.5, 4))
    if not starts:
        ax.text(0.5, 0.5, "the simulator recorded no utilization series", ha="center", va="center")
        ax.set_axis_off()
    else:
        cmap = plt.get_cmap("tab10")
        for i, (u, vals) in enumerate(sorted(units.items())):
            if not any(vals):
                continue
            c = cmap(i % 10)
            ax.step(starts[:len(vals)], [100 * v for v in vals], where="post", color=c, label=f"{u} (simulated)")
            if _num(pred.get(u)) is not None:
                ax.axhline(100 * float(pred[u]), color=c, ls="--", lw=1, label=f"{u} predicted mean")
        ax.set_xlabel("time (core cycles, window start)")
        ax.set_ylabel("utilization (% of peak)")
        ax.set_ylim(0, 105)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title(f"Per-unit utilization over time: {report.get('title', 'kernel')}")
    return _save(fig, path)


def stalls_figure(report: dict[str, Any], path: Path, top: int = 8) -> Path:
    """Left: stall cycles by cause. Right: the top PTX lines, stacked by cause."""
    sim = report.get("simulated") or {}
    stalls = {k: float(v) for k, v in (sim.get("stalls") or {}).items() if _num(v)}
    by_line = sim.get("stalls_by_line") or {}
    texts = report.get("line_text") or {}
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.4), gridspec_kw={"width_ratios": [1, 1.6]})
    if stalls:
        names = sorted(stalls, key=lambda k: -stalls[k])
        a1.barh(names[::-1], [stalls[k] for k in names[::-1]],
                color=[REASON_COLORS.get(k, "#999999") for k in names[::-1]], label="stall cycles")
        a1.set_xlabel("stall cycles (warp-cycles without issue)")
        a1.legend(fontsize=8, loc="lower right")
    else:
        a1.text(0.5, 0.5, "no stalls recorded", ha="center", va="center")
        a1.set_axis_off()
    a1.set_title("Stalls by cause")
    lines = sorted(by_line, key=lambda ln: -sum(float(v) for v in by_line[ln].values()))[:top]
    if lines:
        labels = [f"{report.get('kernel_file', 'kernel.ptx')}:{ln} {_clip(texts.get(str(ln), ''))}"
                  for ln in lines]
        left = [0.0] * len(lines)
        reasons = sorted({r for ln in lines for r in by_line[ln]}, key=lambda r: -stalls.get(r, 0))
        for r in reasons:
            vals = [float(by_line[ln].get(r, 0)) for ln in lines]
            a2.barh(labels[::-1], vals[::-1], left=left[::-1], color=REASON_COLORS.get(r, "#999999"), label=r)
            left = [a + b for a, b in zip(left, vals)]
        a2.set_xlabel("stall cycles (warp-cycles without issue)")
        a2.tick_params(axis="y", labelsize=7)
        a2.legend(fontsize=7, loc="lower right")
    else:
        a2.text(0.5, 0.5, "no per-line stalls recorded", ha="center", va="center")
        a2.set_axis_off()
    a2.set_title(f"Top {len(lines)} PTX lines by stall cycles")
    fig.suptitle(f"Stall breakdown: {report.get('title', 'kernel')}", fontsize=11)
    return _save(fig, path)


def _clip(text: str, n: int = 38) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1] + "…"


def roofline_figure(report: dict[str, Any], path: Path) -> Path:
    """Attainable FLOP/s = min(peak compute, intensity x DRAM bandwidth), log-log, with the kernel on it."""
    hw = report.get("hw") or {}
    peak = float(hw.get("peak_flops") or 0)  # FLOP/s
    bw = float(hw.get("dram_bandwidth") or 0)  # B/s
    fig, ax = plt.subplots(figsize=(7, 4.6))
    pts = [p for p in report.get("roofline_points", []) if _num(p.get("intensity")) and _num(p.get("flops_per_s"))]
    if peak <= 0 or bw <= 0:
        ax.text(0.5, 0.5, "hardware summary lacks peak compute or DRAM bandwidth", ha="center", va="center")
        ax.set_axis_off()
        ax.set_title("Roofline")
        return _save(fig, path)
    ridge = peak / bw
    xs = [p["intensity"] for p in pts] + [ridge]
    lo = min(xs) / 8
    hi = max(xs) * 8
    n = 200
    grid = [lo * (hi / lo) ** (i / (n - 1)) for i in range(n)]
    ax.loglog(grid, [min(peak, x * bw) for x in grid], color="black", lw=2,
              label=f"roof: {peak / 1e12:.3g} TFLOP/s, {bw / 1e9:.4g} GB/s")
    ax.axvline(ridge, color="#999999", ls=":", lw=1, label=f"ridge point {ridge:.3g} FLOP/B")
    markers = {"predicted": ("o", PRED_COLOR), "simulated": ("s", SIM_COLOR), "measured": ("D", MEAS_COLOR)}
    for p in pts:
        m, c = markers.get(p.get("label", ""), ("x", "#333333"))
        frac = p["flops_per_s"] / min(peak, p["intensity"] * bw)
        ax.loglog([p["intensity"]], [p["flops_per_s"]], m, color=c, ms=8,
                  label=f"{p.get('label', 'kernel')}: {p['intensity']:.3g} FLOP/B, "
                        f"{p['flops_per_s'] / 1e9:.4g} GFLOP/s ({100 * frac:.0f}% of roof)")
    ys = [p["flops_per_s"] for p in pts] + [min(peak, lo * bw)]
    ax.set_ylim(min(ys) / 3, peak * 3)
    ax.set_xlim(lo, hi)
    ax.set_xlabel("arithmetic intensity (FLOP per DRAM byte)")
    ax.set_ylabel("performance (FLOP/s)")
    ax.set_title(f"Roofline: {report.get('title', 'kernel')}", fontsize=10)
    ax.legend(fontsize=7, loc="upper left")
    ax.grid(True, which="both", alpha=0.3)
    return _save(fig, path)


FIGURES = {
    "metrics": (metrics_figure, "Predicted vs simulated per metric"),
    "utilization": (utilization_figure, "Per-unit utilization over time"),
    "stalls": (stalls_figure, "Stall breakdown by cause and PTX line"),
    "roofline": (roofline_figure, "Roofline"),
}


def draw_all(report: dict[str, Any], out_dir: Path, prefix: str = "") -> dict[str, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    return {name: fn(report, out_dir / f"{prefix}{name}.png") for name, (fn, _t) in FIGURES.items()}
