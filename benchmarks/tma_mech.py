"""On the H200, one invocation (< 4 minutes): the mechanisms behind the wgmma_tma model's misses (issue 14,
docs/wgmma-tma.md section 10). Writes $OUT/tma_mech.json (and $OUT/tma_l2res.json).

    source .devwheels/install.sh >/dev/null 2>&1; export PYTHONPATH="$PWD:$PYTHONPATH"
    python3 benchmarks/tma_mech.py --out $OUT

Parts, in this order (each under its own budget; a skipped item is marked in the JSON):
1. "l2res" (benchmarks/tma_l2res/run.py): the L2's hold on a TMA-read footprint of 8..88 MiB between back-to-back
   launches, and a box's round trip against boxes in flight (cold DRAM / warm L2), ~20 s.
2. "trace": benchmarks/tma_trace.py's per-K-step trace (issue, landed, released) of wgmma_tma kernels, upload and
   flushed runs plus the last back-to-back launch, with the histogram of the stage trips (100-cycle bins): the
   large-shape hold (256x128 t128 vs 128x256 t64, 3 and 4 stages, 4096^3), 5 vs 6 stages at N = K = 7168, 128x64
   vs 64x64 tiles at M = 64, and 64 x 4096 x K for K = 2048..7168 (footprints 16..59 MB: the L2 hold seen by the
   kernel itself), ~90 s.
3. "wgmma": benchmarks/micro_wgmma's throughput loop (8 back-to-back m64nNk16 per commit group) at N = 8 .. 256
   with one and two warpgroups (do two warpgroups' wgmma issues share one SM-wide issue slot?), ~5 s.
4. "picks": the four large-shape candidates (256x128 t128 / 128x256 t64, 3 / 4 stages; bf16, D bf16) timed in
   interleaved rounds (each round runs every kernel once: the power-limited clock moves between rounds, not
   between candidates) with per-CTA clock64 and the SM clock of the last launch, and torch.matmul per round.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

# (M, N, K, TILE_M, TILE_N, tm, stages)
TRACE_CASES = (
    (4096, 4096, 4096, 256, 128, 128, 3), (4096, 4096, 4096, 256, 128, 128, 4),
    (4096, 4096, 4096, 128, 256, 64, 3), (4096, 4096, 4096, 128, 256, 64, 4),
    (64, 7168, 7168, 64, 64, 64, 5), (64, 7168, 7168, 64, 64, 64, 6),
    (128, 7168, 7168, 128, 64, 128, 5), (128, 7168, 7168, 128, 64, 128, 6),
    (64, 4096, 7168, 128, 64, 128, 6), (64, 4096, 7168, 64, 64, 64, 6),
    (64, 4096, 2048, 64, 64, 64, 6), (64, 4096, 3072, 64, 64, 64, 6), (64, 4096, 4096, 64, 64, 64, 6),
    (64, 4096, 5120, 64, 64, 64, 6), (64, 4096, 6144, 64, 64, 64, 6),
)
PICK_SHAPES = ((6144, 6144, 6144), (4096, 4096, 4096), (4096, 7168, 2048), (8192, 8192, 8192))
PICK_TILINGS = ((256, 128, 128, 3), (256, 128, 128, 4), (128, 256, 64, 3), (128, 256, 64, 4))
ROUNDS = 3
FLUSH = 256 << 20


def trip_hist(buf: np.ndarray, grid: int, stages: int, steps: int) -> dict:
    """The stage trips (full - issue) of the steady steps (stages .. n - 2) of the CTAs that recorded the most
    steps: a histogram in 100-cycle bins up to 8000 and the fractions under 1200 / 1500 cycles (an L2-served
    stage vs a DRAM one: the trace of run 2 put them at ~930 and ~2000)."""
    from kernelgen.variants.wgmma_tma import TRACE_SLOTS

    ns = len(TRACE_SLOTS)
    v = np.asarray(buf).view(np.uint64).astype(np.int64)
    tr = v[grid * 4:grid * 4 + grid * ns * steps].reshape(grid, steps, ns)
    tr = tr[:, :, [TRACE_SLOTS.index(k) for k in ("issue", "full", "release_prev")]]
    counts = (tr[:, :, 1] != 0).sum(axis=1)
    tr = tr[counts == counts.max()]
    n = int(counts.max())
    if n < stages + 3:
        return {}
    g = np.arange(stages, n - 1)
    issue, full = tr[:, :, 0], tr[:, :, 1]
    release = np.zeros_like(full)
    release[:, :-1] = tr[:, 1:, 2]
    trip = (full[:, g] - issue[:, g]).ravel()
    gs = g[g + stages < n]
    h, _ = np.histogram(np.clip(trip, 0, 7999), bins=80, range=(0, 8000))
    # means (the ring identity stages x interval = trip + hold + reissue holds for means, not medians)
    return {"trip_hist_100": [int(x) for x in h], "trip_under_1200": float((trip < 1200).mean()),
            "trip_under_1500": float((trip < 1500).mean()), "trip_mean": float(trip.mean()),
            "interval_mean": float((full[:, g] - full[:, g - 1]).mean()),
            "hold_mean": float((release[:, g] - full[:, g]).mean()),
            "reissue_mean": float((issue[:, gs + stages] - release[:, gs]).mean()) if gs.size else None,
            "step_medians": {k: [int(x) for x in np.median(a[:, :n] - tr[:, :1, 1], axis=0)]
                             for k, a in (("issue", issue), ("full", full), ("release", release))}}


def part_trace(budget: float) -> list[dict]:
    import tma_trace

    from sim.launch import launch_from_metadata, read_metadata
    from validation.gpu import run_on_gpu
    from validation.gpu_tma import without_tensormaps

    t0 = time.time()
    rows = []
    for c in TRACE_CASES:
        row: dict = {"case": list(c)}
        if time.time() - t0 > budget:
            row["error"] = "skipped: budget spent"
            rows.append(row)
            continue
        try:
            text, info = tma_trace.emit_case(c)
            row.update(info)
            meta = read_metadata(text) or {}
            launch = launch_from_metadata(without_tensormaps(meta), np.random.default_rng(1))
            grid = meta["grid"][0]
            roles = [a.role for a in launch.args]
            i, j = roles.index("profile"), roles.index("timer")
            for mode, flush in (("upload", 0), ("flushed", FLUSH)):
                m = run_on_gpu(text, launch, warmup=3, repeats=10, check=None, flush_l2_bytes=flush,
                               read_after=("profile", "timer") if not flush else ())
                row[mode] = {"time_ms": m.wall_ms_median,
                             **tma_trace.analyse(m.outputs[i], grid, c[6], timer=m.outputs[j]),
                             **trip_hist(m.outputs[i], grid, c[6], tma_trace.STEPS)}
                after = m.extra.get("after") or {}
                if i in after and j in after:
                    row["last"] = {"time_ms": m.wall_ms_median,
                                   **tma_trace.analyse(after[i], grid, c[6], timer=after[j]),
                                   **trip_hist(after[i], grid, c[6], tma_trace.STEPS)}
                row["device"] = m.device
        except Exception as e:  # noqa: BLE001 - record and go on
            row["error"] = f"{type(e).__name__}: {e}"[:400]
        rows.append(row)
        brief = {k: ({x: y for x, y in v.items() if x not in ("cta0", "trip_hist_100")} if isinstance(v, dict) else v)
                 for k, v in row.items() if k != "model"}
        print(json.dumps(brief, default=float)[:1200], flush=True)
    return rows


def part_wgmma() -> list[dict]:
    from micro_wgmma.kernels import Case, ptx
    from micro_wgmma.run import launch

    from validation.gpu import run_on_gpu

    rows = []
    for n in (8, 16, 32, 64, 128, 256):  # n8/n16: the issue-bound end (run 2026-11-30: 23.7 / 25.9 per wgmma, 1 WG)
        for wg in (1, 2):
            c = Case(f"thr_f16_n{n}_{wg}wg", n, "f16", 8, warpgroups=wg)
            try:
                m = run_on_gpu(ptx(c), launch(c), warmup=1, repeats=3)
                out = np.asarray(m.outputs[0])
                cyc = [float(out[w * 128]) / (32 * c.group) for w in range(wg)]  # warp 0 of each warpgroup
                rows.append({"case": c.name, "n": n, "warpgroups": wg, "cycles_per_wgmma": cyc,
                             "sm_cycles_per_wgmma": max(cyc) / wg, "ideal_at_512_macs": n / 2})
            except Exception as e:  # noqa: BLE001
                rows.append({"case": c.name, "error": f"{type(e).__name__}: {e}"[:300]})
            print(json.dumps(rows[-1]), flush=True)
    return rows


def _emit_pick(d: Path, shape: tuple[int, int, int], tl: tuple[int, int, int, int]) -> tuple[Path, dict]:
    from kernelgen.planner import plan, prediction_dict
    from kernelgen.spec import shorthand
    from kernelgen.tiling import Tiling
    from kernelgen.variants import wgmma_tma
    from sim.hw import load_hw

    bm, bn, tm, st = tl
    spec = shorthand("x".join(map(str, shape)), "bf16", "bf16")
    t = Tiling("wgmma_tma", bm, bn, 64, tm, bn, st, 0, 0, 8, 8, 0)
    p = plan(spec, load_hw("h200"), "wgmma_tma", only=[t])
    pred = prediction_dict(dataclasses.replace(p, best=p.best))
    out = d / f"{'x'.join(map(str, shape))}_{t.key()}.ptx"
    out.write_text(wgmma_tma.emit(spec, t, pred, profile=True))
    return out, {"tiling": t.key(), "predicted_cycles_per_cta": p.best.cycles_per_cta,
                 "tiles_per_cta": p.best.model.terms.get("tiles_per_cta")}


def part_picks(budget: float, d: Path) -> list[dict]:
    from gpu_bench import cublas_tflops
    from gpucommon import run_kernel
    from top4 import per_cta_measured

    from sim.launch import read_metadata

    t0 = time.time()
    rows = []
    for shape in PICK_SHAPES:
        M, N, K = shape
        if time.time() - t0 > budget:
            rows.append({"shape": list(shape), "error": "skipped: budget spent"})
            continue
        kernels = []
        for tl in PICK_TILINGS:
            try:
                kernels.append(_emit_pick(d, shape, tl))
            except Exception as e:  # noqa: BLE001
                rows.append({"shape": list(shape), "tiling": str(tl), "error": f"{type(e).__name__}: {e}"[:300]})
        inputs: dict = {}
        runs: dict[str, list[dict]] = {info["tiling"]: [] for _, info in kernels}
        cublas = []
        for rnd in range(ROUNDS):
            if time.time() - t0 > budget:
                break
            order = kernels[rnd % len(kernels):] + kernels[:rnd % len(kernels)]
            for ptx, info in order:
                try:
                    r = run_kernel(ptx, 10, check=False, inputs=inputs, last=True)
                    prof = (read_metadata(ptx.read_text()) or {}).get("profile") or {}
                    x: dict = {"round": rnd, "time_ms": r["time_ms"]}
                    per_cta_measured(x, r.get("per_cta_cycles") or [], prof.get("tiles_per_cta"), r.get("per_cta_ns"))
                    runs[info["tiling"]].append(x)
                except Exception as e:  # noqa: BLE001
                    runs[info["tiling"]].append({"round": rnd, "error": f"{type(e).__name__}: {e}"[:300]})
            cublas.append(cublas_tflops(M, N, K, "bf16", 10))
        for _, info in kernels:
            got = [x for x in runs[info["tiling"]] if x.get("time_ms")]
            row = {"shape": list(shape), "dtype": "bf16", **info, "rounds": runs[info["tiling"]]}
            if got:
                ms = float(np.median([x["time_ms"] for x in got]))
                row.update(time_ms=ms, tflops=2 * M * N * K / (ms * 1e-3) / 1e12,
                           cycles_per_cta=float(np.median([x.get("measured_cycles_per_cta") or 0 for x in got])),
                           clock_mhz=float(np.median([x.get("measured_clock_mhz") or 0 for x in got])))
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "rounds"}), flush=True)
        rows.append({"shape": list(shape), "dtype": "bf16", "cublas_tflops_rounds": cublas})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--skip", default="", help="comma-separated parts to leave out (l2res, trace, wgmma, picks)")
    a = ap.parse_args()
    import tempfile

    import torch

    torch.zeros(1, device="cuda")
    skip = set(filter(None, a.skip.split(",")))
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    res: dict = {"date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                 "load_average": os.getloadavg()[0]}

    def save() -> None:
        res["seconds"] = time.time() - t0
        (out / "tma_mech.json").write_text(json.dumps(res, indent=1, default=float))

    for part in ("l2res", "trace", "wgmma", "picks"):
        if part in skip:
            continue
        t1 = time.time()
        try:
            if part == "l2res":
                from tma_l2res.run import run as l2res

                res["l2res"] = l2res(torch, budget=45.0)
                (out / "tma_l2res.json").write_text(json.dumps(res["l2res"], indent=1))
            elif part == "trace":
                res["trace"] = part_trace(budget=max(10.0, 150.0 - (time.time() - t0)))
            elif part == "wgmma":
                res["wgmma"] = part_wgmma()
            else:
                res["picks"] = part_picks(max(5.0, 215.0 - (time.time() - t0)), Path(tempfile.mkdtemp()))
        except Exception as e:  # noqa: BLE001 - the other parts still run
            res[part + "_error"] = f"{type(e).__name__}: {e}"[:400]
        res.setdefault("part_seconds", {})[part] = time.time() - t1
        print(f"== {part} done in {time.time() - t1:.1f} s", flush=True)
        save()
    save()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
