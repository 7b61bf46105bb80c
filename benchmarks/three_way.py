"""Predicted vs simulated vs measured on h200.yaml (issue 6): per-CTA cycles and total time.

    python3 benchmarks/three_way.py compile  [--dir .three_way]       # kernelgen --profile kernels
    (device) python3 benchmarks/gpu_bench.py --skip-speed --kernels .three_way --out $OUT
    python3 benchmarks/three_way.py simulate [--dir .three_way]       # -> benchmarks/data/three_way_sim.json
    python3 benchmarks/three_way.py table --measured benchmarks/data/gpu_three_way_final_2026-11-30.json

The GPU runs the very PTX files compiled here (carried to the device). Large grids are simulated by
sampling: the simulator runs every CTA that the whole grid deals to its first k cores (the H200 spreads
a grid breadth-first, CTA i to SM i % SMs in the first wave: docs/placement.md), k so that about N
CTAs run, N as many as fit a budget of warp instructions (estimated from a one-CTA probe) but at least
one core's resident CTAs, and all CTAs when the budget allows. The sampled cores run all their CTAs,
every wave, so the launch's cycles are the sampled span; per-CTA cycles are the mean over the simulated
CTAs.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from validation.cases import THREE_WAY_SHAPES as SHAPES  # noqa: E402 - the one GEMM case table

SIM_JSON = ROOT / "benchmarks/data/three_way_sim.json"


def cmd_compile(d: Path) -> None:
    d.mkdir(parents=True, exist_ok=True)
    for M, N, K in SHAPES:
        out = d / f"{M}x{N}x{K}"
        cmd = [sys.executable, "-m", "kernelgen", "compile", "--hw", "h200", "--gemm", f"{M}x{N}x{K}",
               "--dtype", "f16", "--variant", "mma", "--profile", "-o", str(out)]
        subprocess.run(cmd, check=True, capture_output=True, text=True)
        print("compiled", out)


def cmd_simulate(d: Path, budget: int) -> None:
    from sim.hw import load_hw
    from sim.launch import launch_from_metadata, read_metadata
    from sim.ptx.parser import parse_file
    from sim.timing import simulate

    hw = load_hw("h200")
    rows = []
    for M, N, K in SHAPES:
        kdir = d / f"{M}x{N}x{K}"
        prog = parse_file(kdir / "kernel.ptx")
        meta = read_metadata(prog.text)
        plan = json.loads((kdir / "plan.json").read_text())
        launch = launch_from_metadata(meta, np.random.default_rng(0))
        total = launch.grid[0] * launch.grid[1] * launch.grid[2]
        probe = simulate(prog, launch_from_metadata(meta, np.random.default_rng(0)), hw, sample_ctas=1)
        cpc = int(probe.occupancy.get("ctas_per_core", 1)) if isinstance(probe.occupancy, dict) else 1
        per_cta = max(1, probe.warp_instructions)
        sample = min(total, max(1, cpc, budget // per_cta))
        t0 = time.time()
        # the GPU's per-CTA cycles come from the launch right after the inputs' upload, which leaves
        # them in the L2: simulate that (warm_l2), and once from an empty L2 for comparison
        kw = {"sample_ctas": sample} if sample < total else {}
        r = simulate(prog, launch, hw, warm_l2=True, **kw)
        secs = time.time() - t0
        cold = simulate(prog, launch_from_metadata(meta, np.random.default_rng(0)), hw, **kw)
        waves = math.ceil(total / (hw.core.count * cpc))
        span = r.cycles
        total_cycles = span  # the sampled cores run every CTA the grid deals them, all waves included
        pred = plan["prediction"]
        rows.append({
            "M": M, "N": N, "K": K, "tiling": plan["tiling"]["key"], "grid": list(launch.grid),
            "block": list(launch.block), "ctas": total, "ctas_per_core": cpc, "ctas_simulated": sample,
            "waves": waves, "predicted_cycles": pred["cycles"], "predicted_cycles_per_cta": pred["cycles_per_cta"],
            "simulated_cycles": total_cycles, "simulated_cycles_per_cta": float(np.mean(r.cycles_per_cta)),
            "simulated_span": span, "warp_instructions": r.warp_instructions, "sim_seconds": round(secs, 1),
            "simulated_cycles_per_cta_cold": float(np.mean(cold.cycles_per_cta)),
        })
        print(json.dumps(rows[-1]), flush=True)
    SIM_JSON.write_text(json.dumps({"date": time.strftime("%Y-%m-%d"), "hw": "h200", "rows": rows}, indent=1))
    print("wrote", SIM_JSON)


def _err(a: float, b: float) -> float:
    return (a - b) / b * 100 if b else float("nan")


def l2_table(sim: dict, l2: dict) -> list[str]:
    """GPU per-CTA cycles with the inputs warm in the L2 and evicted (benchmarks/gpu_l2.py) beside the
    simulator's from a warm and an empty L2."""
    by = {r["name"]: r for r in l2["kernels"]}
    lines = ["", "## L2 state at launch", "",
             f"Measured {l2['date']} on the H200 by `benchmarks/gpu_l2.py` (median of 5 fresh launches of the mean "
             "per-CTA clock64 span): warm = launched right after the inputs' upload (what the table above "
             f"measures), cold = a {l2['flush_bytes'] >> 20} MiB buffer written between the upload and the launch. "
             "The simulator's warm run starts with the buffer arguments in its L2 (`simulate(..., warm_l2=True)`, "
             "`python -m sim run --warm-l2`), the cold one with an empty L2.", "",
             "| M x N x K | GPU warm | sim warm | err | GPU cold | sim cold | err |", "|---|---|---|---|---|---|---|"]
    for r in sim["rows"]:
        name = f"{r['M']}x{r['N']}x{r['K']}"
        g = by.get(name)
        if not g or "simulated_cycles_per_cta_cold" not in r:
            continue
        gw, gc = g["warm_median_mean"], g["cold_median_mean"]
        sw, sc = r["simulated_cycles_per_cta"], r["simulated_cycles_per_cta_cold"]
        lines.append(f"| {name} | {gw:,.0f} | {sw:,.0f} | {_err(sw, gw):+.0f}% | {gc:,.0f} | {sc:,.0f} | "
                     f"{_err(sc, gc):+.0f}% |")
    return lines


def cmd_table(measured: Path, l2: Path | None = None) -> None:
    sim = json.loads(SIM_JSON.read_text())
    meas = json.loads(measured.read_text())
    from sim.hw import load_hw

    clock = load_hw("h200").clock_mhz * 1e6  # HwConfig.clock_mhz
    by = {(r["M"], r["N"], r["K"]): r for r in meas["three_way"]}
    lines = [
        "# Predicted vs simulated vs measured (h200.yaml, NVIDIA H200)",
        "",
        f"Simulated {sim['date']} on the 2-core development machine; measured {meas['date']} on an NVIDIA "
        "H200 (driver 580.159.04) from the same PTX (`kernelgen compile --hw h200 --dtype f16 --variant mma "
        "--profile`). Per-CTA cycles: the kernel's own clock64 reads at CTA start and end (GPU: mean over "
        "all CTAs; simulator: mean over the simulated CTAs; planner: its cycles_per_cta). Time: predicted and "
        "simulated cycles / h200.yaml clock_mhz; measured: CUDA events around 20 back-to-back launches after "
        "warm-up, divided by 20 (where recorded; else the median of 20 launches timed one by one, which "
        "includes the launch overhead that dominates small shapes). Even back to back, a pycuda launch "
        "costs about 10 us "
        "of host time, so a kernel shorter than that measures the launch path, not the kernel: compare small "
        "shapes by their per-CTA cycles. Large grids are simulated by sampling whole cores: every CTA the grid "
        "deals to the first few cores, all waves (see benchmarks/three_way.py); the CTAs column gives the "
        "sample size asked for. Error = (x - measured) / measured.",
        "",
        "| M x N x K | tiling | CTAs (simulated) | per-CTA cycles pred / sim / meas | err pred / sim | "
        "time us pred / sim / meas | err pred / sim |",
        "|---|---|---|---|---|---|---|",
    ]
    sim_cta_err, sim_t_err, pred_cta_err, pred_t_err = [], [], [], []
    for r in sim["rows"]:
        m = by.get((r["M"], r["N"], r["K"]))
        if not m or "error" in m:
            lines.append(f"| {r['M']}x{r['N']}x{r['K']} | {r['tiling']} | {r['ctas']} | not measured | | | |")
            continue
        mc = float(np.mean(m["per_cta_cycles"])) if m.get("per_cta_cycles") else float("nan")
        mt = (m.get("time_ms_batched") or m["time_ms"]) * 1e3
        pt, st = r["predicted_cycles"] / clock * 1e6, r["simulated_cycles"] / clock * 1e6
        e = [_err(r["predicted_cycles_per_cta"], mc), _err(r["simulated_cycles_per_cta"], mc), _err(pt, mt),
             _err(st, mt)]
        pred_cta_err.append(abs(e[0]))
        sim_cta_err.append(abs(e[1]))
        pred_t_err.append(abs(e[2]))
        sim_t_err.append(abs(e[3]))
        lines.append(
            f"| {r['M']}x{r['N']}x{r['K']} | {r['tiling']} | {r['ctas']} ({r['ctas_simulated']}) | "
            f"{r['predicted_cycles_per_cta']:,.0f} / {r['simulated_cycles_per_cta']:,.0f} / {mc:,.0f} | "
            f"{e[0]:+.0f}% / {e[1]:+.0f}% | {pt:,.1f} / {st:,.1f} / {mt:,.1f} | {e[2]:+.0f}% / {e[3]:+.0f}% |")

    def mape(x: list[float]) -> str:
        return f"{np.mean(x):.1f}%" if x else "n/a"

    lines += ["", "Mean absolute percentage error against the measurement:", "",
              "| | per-CTA cycles | total time |", "|---|---|---|",
              f"| simulated | {mape(sim_cta_err)} | {mape(sim_t_err)} |",
              f"| predicted | {mape(pred_cta_err)} | {mape(pred_t_err)} |", ""]
    if l2 is not None:
        lines += l2_table(sim, json.loads(l2.read_text())) + [""]
    (ROOT / "docs/three_way.md").write_text("\n".join(lines))
    _plot(sim["rows"], by, clock)
    print("\n".join(lines[-6:]))


def _plot(rows: list, by: dict, clock: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels, p, s, m = [], [], [], []
    for r in rows:
        mm = by.get((r["M"], r["N"], r["K"]))
        if not mm or "error" in mm or not mm.get("per_cta_cycles"):
            continue
        labels.append(f"{r['M']}x{r['N']}x{r['K']}")
        p.append(r["predicted_cycles_per_cta"])
        s.append(r["simulated_cycles_per_cta"])
        m.append(float(np.mean(mm["per_cta_cycles"])))
    x = np.arange(len(labels))
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for off, vals, name in ((-0.27, p, "predicted"), (0, s, "simulated"), (0.27, m, "measured (H200)")):
        ax.bar(x + off, vals, 0.27, label=name)
    ax.set_yscale("log")
    ax.set_xticks(x, labels, rotation=20)
    ax.set_ylabel("cycles per CTA (log scale)")
    ax.set_title("Per-CTA cycles: predicted vs simulated vs measured, f16 mma kernels on h200")
    ax.legend()
    fig.tight_layout()
    fig.savefig(ROOT / "docs/three_way.png", dpi=110)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("command", choices=["compile", "simulate", "table"])
    ap.add_argument("--dir", default=str(ROOT / ".three_way"))
    ap.add_argument("--budget", type=int, default=400_000, help="warp instructions to simulate per shape")
    ap.add_argument("--measured", default=str(ROOT / "benchmarks/data/gpu_three_way_2026-11-30b.json"))
    ap.add_argument("--l2", default=str(ROOT / "benchmarks/data/gpu_l2_2026-11-30b.json"),
                    help="warm vs cold GPU per-CTA cycles (benchmarks/gpu_l2.py); '' to leave the table out")
    a = ap.parse_args()
    if a.command == "compile":
        cmd_compile(Path(a.dir))
    elif a.command == "simulate":
        cmd_simulate(Path(a.dir), a.budget)
    else:
        cmd_table(Path(a.measured), Path(a.l2) if a.l2 else None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
