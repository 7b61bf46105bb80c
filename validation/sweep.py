"""``python -m validation sweep SWEEP.yaml``: hardware parameters x GEMM shapes x variants.

Every point of the product gets the planner's prediction (kernelgen: the four models over the whole
tiling space) and, when the sweep asks for it, a simulation of the chosen kernel. The result is one
tidy table (a row per point: the varied parameters, the shape, the variant, the prediction, the
simulated cycles) written as CSV, plus two figures: the sensitivity of predicted time to each
parameter and the Pareto front of two columns. The sweep file:

    hw: h200.yaml                       # the base hardware config (path or bundled name)
    vary:                               # dotted hardware paths (pipes by name) -> values
      shared.banks: [16, 32]
      pipes.tensor.lanes: [149, 298, 596]
      l2.size: [31457280, 62914560]
    shapes: [1024x1024x1024, 4096x4096x4096]
    variants: [mma]                     # default: every variant available on the hardware, opt-in ones aside
    dtype: f16                          # A and B (the output is f32)
    simulate: false                     # true: simulate each point's kernel (small shapes only)
    pareto: [l2.size, time_us]          # two columns, both minimised (default: first parameter, time_us)

Points run in parallel: local processes by default, a dask.distributed LocalCluster with
``--executor dask``, or an existing cluster with ``--scheduler tcp://host:8786``. Rows come back in
point order, so every executor writes the same table.
"""

from __future__ import annotations

import copy
import csv
import io
import itertools
import math
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import yaml

from sim import atomic
from sim.errors import UsageError

PLAN_COLUMNS = ("cycles", "time_us", "tflops", "cycles_per_cta", "bound", "tiling", "occupancy",
                "shared_memory_per_block", "registers_per_thread", "l2_hit_rate", "candidates", "plan_s")
SIM_MAX_MACS = 256 ** 3  # simulate: larger shapes are not simulated (a whole-grid timing run takes minutes)


# -- the sweep file ----------------------------------------------------------------------------------
def load_sweep(path: str) -> dict[str, Any]:
    from sim.hw import resolve_hw_path, strict_yaml

    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"cannot read the sweep file ({getattr(e, 'strerror', None) or e})", file=path) from None
    data = strict_yaml(text, path)
    if not isinstance(data, dict):
        raise UsageError("a sweep file is a mapping (hw, vary, shapes, variants, dtype, simulate, pareto)", file=path)
    allowed = {"hw", "vary", "shapes", "variants", "dtype", "simulate", "pareto"}
    for key in data:
        if key not in allowed:
            raise UsageError(f"unknown key {key!r}; allowed: {', '.join(sorted(allowed))}", file=path)
    hw_path = resolve_hw_path(str(data.get("hw", "h200.yaml")))
    vary = data.get("vary") or {}
    if not isinstance(vary, dict) or not all(isinstance(v, list) and v for v in vary.values()):
        raise UsageError("vary: give each hardware path a non-empty list of values", file=path)
    shapes = data.get("shapes") or []
    if not isinstance(shapes, list) or not shapes:
        raise UsageError("shapes: give a list of MxNxK", file=path)
    for s in shapes:
        _shape(str(s), path)
    base_text = hw_path.read_text(encoding="utf-8")
    base = strict_yaml(base_text, str(hw_path))
    for key, values in vary.items():
        for v in values:
            _set(copy.deepcopy(base), key, v, path)  # every path must exist
    sweep = {"file": path, "hw_file": str(hw_path), "hw_text": base_text, "vary": vary,
             "shapes": [str(s) for s in shapes], "variants": data.get("variants"),
             "dtype": str(data.get("dtype", "f16")), "simulate": bool(data.get("simulate", False))}
    pareto = data.get("pareto") or [next(iter(vary), "M"), "time_us"]
    if not (isinstance(pareto, list) and len(pareto) == 2):
        raise UsageError("pareto: give two column names, e.g. [l2.size, time_us]", file=path)
    sweep["pareto"] = [str(c) for c in pareto]
    return sweep


def _shape(s: str, file: str) -> tuple[int, int, int]:
    parts = s.lower().split("x")
    if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise UsageError(f"shapes: {s!r} is not MxNxK (e.g. 1024x1024x1024)", file=file)
    m, n, k = (int(p) for p in parts)
    return m, n, k


def _set(data: dict[str, Any], dotted: str, value: Any, file: str) -> dict[str, Any]:
    """Set a dotted hardware path in the YAML data (``pipes.NAME.key`` addresses a pipe by name)."""
    keys = dotted.split(".")
    node: Any = data
    for i, k in enumerate(keys[:-1]):
        if isinstance(node, list):  # pipes: by name
            match = [p for p in node if isinstance(p, dict) and p.get("name") == k]
            if not match:
                raise UsageError(f"vary: {dotted}: no pipe named {k!r}", file=file)
            node = match[0]
        elif isinstance(node, dict) and k in node:
            node = node[k]
        else:
            raise UsageError(f"vary: {dotted}: the hardware config has no {'.'.join(keys[:i + 1])}", file=file)
    if not isinstance(node, dict) or keys[-1] not in node:
        raise UsageError(f"vary: {dotted}: the hardware config has no such key", file=file)
    node[keys[-1]] = value
    return data


def points(sweep: dict[str, Any]) -> list[dict[str, Any]]:
    """The product of parameter values x shapes x variants, in a fixed order."""
    from kernelgen.variants import get, names

    keys = list(sweep["vary"])
    variants = sweep["variants"] or [n for n in names() if not get(n).opt_in]
    out: list[dict[str, Any]] = []
    for combo in itertools.product(*(sweep["vary"][k] for k in keys)):
        for shape in sweep["shapes"]:
            for variant in variants:
                out.append({"point": len(out), "params": dict(zip(keys, combo, strict=True)), "shape": shape,
                            "variant": str(variant)})
    return out


# -- one point -------------------------------------------------------------------------------------
def evaluate(point: dict[str, Any], sweep: dict[str, Any]) -> dict[str, Any]:
    """One row: the planner's prediction (and the simulated cycles when asked) at one point."""
    from kernelgen.planner import plan
    from kernelgen.spec import shorthand
    from sim.errors import WorkbenchError
    from sim.hw import hw_from_text, strict_yaml

    row: dict[str, Any] = {"point": point["point"], **point["params"], "shape": point["shape"],
                           "variant": point["variant"], "dtype": sweep["dtype"]}
    m, n, k = _shape(point["shape"], sweep["file"])
    row.update({"M": m, "N": n, "K": k})
    data = strict_yaml(sweep["hw_text"], sweep["hw_file"])
    for key, v in point["params"].items():
        _set(data, key, v, sweep["file"])
    where = f"{sweep['file']} point {point['point']} ({', '.join(f'{a}={b}' for a, b in point['params'].items())})"
    try:
        hw = hw_from_text(yaml.safe_dump(data, sort_keys=False), where)
        spec = shorthand(point["shape"], sweep["dtype"], "f32")
        t0 = time.process_time()
        p = plan(spec, hw, point["variant"])
        plan_s = time.process_time() - t0
    except WorkbenchError as e:
        row["error"] = e.one_line() if hasattr(e, "one_line") else str(e)
        return row
    best = p.best
    seconds = best.cycles / (hw.clock_mhz * 1e6)
    row.update({"cycles": best.cycles, "time_us": round(seconds * 1e6, 3),
                "tflops": round(2 * m * n * k / seconds / 1e12, 3), "cycles_per_cta": best.cycles_per_cta,
                "bound": best.schedule.bound_pipe, "tiling": best.tiling.key(),
                "occupancy": round(best.schedule.occupancy, 4),
                "shared_memory_per_block": best.movement.smem_bytes,
                "registers_per_thread": best.registers.per_thread, "l2_hit_rate": round(best.movement.l2_hit_rate, 4),
                "candidates": p.candidates, "plan_s": round(plan_s, 3)})
    if sweep["simulate"] and m * n * k <= SIM_MAX_MACS:
        row["simulated_cycles"] = _simulate(p, hw)
    return row


def _simulate(p: Any, hw: Any) -> int:
    import numpy as np

    from kernelgen.planner import prediction_dict
    from kernelgen.variants import get
    from sim.launch import launch_from_metadata, read_metadata
    from sim.ptx.parser import parse_ptx
    from sim.timing import simulate

    ptx = get(p.best.tiling.variant).emit(p.spec, p.best.tiling, prediction_dict(p))
    meta = read_metadata(ptx, "sweep")
    assert meta is not None
    r = simulate(parse_ptx(ptx, "sweep"), launch_from_metadata(meta, np.random.default_rng(0)), hw)
    return int(r.cycles)


# -- executors -------------------------------------------------------------------------------------
def run_points(sweep: dict[str, Any], pts: list[dict[str, Any]], executor: str, workers: int,
               scheduler: str | None = None, progress: Callable[[int, int], None] | None = None) -> list[dict]:
    """Evaluate every point; rows in point order whatever the executor."""
    rows: list[dict] = []
    if executor == "serial":
        for i, pt in enumerate(pts):
            rows.append(evaluate(pt, sweep))
            if progress:
                progress(i + 1, len(pts))
    elif executor == "processes":
        from concurrent.futures import ProcessPoolExecutor, as_completed

        with ProcessPoolExecutor(max_workers=workers) as ex:
            futs = [ex.submit(evaluate, pt, sweep) for pt in pts]
            for i, _f in enumerate(as_completed(futs)):
                if progress:
                    progress(i + 1, len(pts))
            rows = [f.result() for f in futs]
    elif executor == "dask":
        rows = _run_dask(sweep, pts, workers, scheduler, progress)
    else:
        raise UsageError(f"--executor {executor!r}: give serial, processes or dask")
    return sorted(rows, key=lambda r: r["point"])


def _run_dask(sweep: dict[str, Any], pts: list[dict[str, Any]], workers: int, scheduler: str | None,
              progress: Callable[[int, int], None] | None) -> list[dict]:
    try:
        from distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise UsageError('--executor dask needs dask.distributed: pip install -e ".[sweep]"') from None
    cluster = None
    try:
        if scheduler:
            client = Client(scheduler, timeout=30)
        else:
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)
            client = Client(cluster)
    except OSError as e:
        raise UsageError(f"cannot reach the Dask scheduler {scheduler or 'LocalCluster'} ({e})") from None
    try:
        sweep_f = client.scatter(sweep, broadcast=True)
        futs = [client.submit(evaluate, pt, sweep_f, pure=False) for pt in pts]
        for i, _f in enumerate(as_completed(futs)):
            if progress:
                progress(i + 1, len(pts))
        return list(client.gather(futs))
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


# -- outputs ---------------------------------------------------------------------------------------
def columns(sweep: dict[str, Any], rows: Iterable[dict]) -> list[str]:
    cols = ["point", *sweep["vary"], "shape", "M", "N", "K", "variant", "dtype", *PLAN_COLUMNS]
    if sweep["simulate"]:
        cols.append("simulated_cycles")
    cols.append("error")
    return cols


def to_csv(sweep: dict[str, Any], rows: list[dict]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns(sweep, rows), extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow(r)
    return buf.getvalue()


def pareto_front(rows: list[dict], x: str, y: str) -> list[dict]:
    """Rows no other row beats in both columns (both minimised), sorted by x."""
    ok = [r for r in rows if isinstance(r.get(x), int | float) and isinstance(r.get(y), int | float)]
    ok.sort(key=lambda r: (r[x], r[y]))
    front: list[dict] = []
    best = math.inf
    for r in ok:
        if r[y] < best:
            front.append(r)
            best = r[y]
    return front


def sensitivity(sweep: dict[str, Any], rows: list[dict]) -> dict[str, list[tuple[Any, float]]]:
    """Per parameter: (value, geometric mean over the other points of time_us / that point's time at the
    parameter's first value): how much each value of the parameter speeds up or slows down the GEMMs."""
    out: dict[str, list[tuple[Any, float]]] = {}
    ok = [r for r in rows if "time_us" in r]
    for key, values in sweep["vary"].items():
        others = [k for k in sweep["vary"] if k != key]

        def ctx(r: dict, others: list[str] = others) -> tuple:
            return tuple(r[k] for k in others) + (r["shape"], r["variant"])

        base = {ctx(r): r["time_us"] for r in ok if r[key] == values[0]}
        series = []
        for v in values:
            ratios = [r["time_us"] / base[ctx(r)] for r in ok if r[key] == v and base.get(ctx(r))]
            if ratios:
                series.append((v, math.exp(sum(math.log(x) for x in ratios) / len(ratios))))
        out[key] = series
    return out


def draw(sweep: dict[str, Any], rows: list[dict], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    sens = sensitivity(sweep, rows)
    fig, axes = plt.subplots(1, max(1, len(sens)), figsize=(4 * max(1, len(sens)), 3.2), squeeze=False)
    for ax, (key, series) in zip(axes[0], sens.items(), strict=False):
        ax.plot([str(v) for v, _ in series], [s for _, s in series], marker="o")
        ax.axhline(1.0, color="#999", lw=0.8)
        ax.set_title(key, fontsize=9)
        ax.set_ylabel("predicted time vs first value")
    fig.tight_layout()
    paths.append(atomic.write_with(out / "sensitivity.png", lambda tmp: fig.savefig(tmp, dpi=110)))
    plt.close(fig)
    x, y = sweep["pareto"]
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for shape in sweep["shapes"]:
        mine = [r for r in rows if r["shape"] == shape]
        ok = [r for r in mine if isinstance(r.get(x), int | float) and isinstance(r.get(y), int | float)]
        front = pareto_front(mine, x, y)
        dots = ax.scatter([r[x] for r in ok], [r[y] for r in ok], s=8, alpha=0.4)
        ax.plot([r[x] for r in front], [r[y] for r in front], marker="o", color=dots.get_facecolor()[0],
                alpha=1.0, label=shape)
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.set_yscale("log")
    ax.set_title("Pareto front per shape (both minimised)", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    paths.append(atomic.write_with(out / "pareto.png", lambda tmp: fig.savefig(tmp, dpi=110)))
    plt.close(fig)
    return paths


# -- CLI -------------------------------------------------------------------------------------------
def add_arguments(p) -> None:
    p.add_argument("sweep", help="the sweep file (YAML: hw, vary, shapes, variants, dtype, simulate, pareto)")
    p.add_argument("-o", "--out", default="sweep_out", help="output directory (sweep.csv, sensitivity.png, pareto.png)")
    p.add_argument("--executor", default="processes", choices=("serial", "processes", "dask"),
                   help="how points run: in this process, local processes, or Dask (LocalCluster by default)")
    p.add_argument("--workers", type=int, default=0, help="parallel workers (default: the CPU count)")
    p.add_argument("--scheduler", help="address of an existing Dask scheduler (tcp://host:8786); implies dask")
    p.add_argument("--no-plots", action="store_true", help="write the table only")


def cli_main(args) -> int:
    import os
    import sys

    if not args.out.strip():
        raise UsageError("-o: the output directory is empty; name a directory")
    sweep = load_sweep(args.sweep)
    pts = points(sweep)
    workers = args.workers or os.cpu_count() or 1
    executor = "dask" if args.scheduler else args.executor
    t0 = time.monotonic()
    tty = sys.stderr.isatty()

    def progress(done: int, total: int) -> None:
        if tty:
            print(f"\rsweep: {done}/{total} points, {time.monotonic() - t0:.0f} s", end="", file=sys.stderr)

    rows = run_points(sweep, pts, executor, workers, args.scheduler, progress)
    if tty:
        print(file=sys.stderr)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    atomic.write_text(out / "sweep.csv", to_csv(sweep, rows))
    if not args.no_plots:
        draw(sweep, rows, out)
    errors = sum(1 for r in rows if "error" in r)
    load = os.getloadavg()[0]
    print(f"sweep: {len(rows)} points ({errors} infeasible) in {time.monotonic() - t0:.1f} s wall, executor "
          f"{executor}, {workers} workers, load average {load:.2f} -> {out}/sweep.csv")
    return 0
