"""On the GPU machine: where a wgmma_tma K tile's time goes, from a per-K-step clock64 trace of every CTA.

    source .devwheels/install.sh >/dev/null 2>&1; export PYTHONPATH="$PWD:$PYTHONPATH"
    python3 benchmarks/tma_trace.py --out $OUT            # writes $OUT/tma_trace.json (< 2 minutes)

Each case (bf16, A row-major, B col-major, D bf16: issue 14's benchmark table) is emitted with
`wgmma_tma.emit(..., trace=STEPS)`: besides the per-CTA profile record (start, tile walk start, after the last K
loop, end), for each CTA's first STEPS K steps g (counted across its tiles) three clock64 values of the SM:

- issue[g]: the producer thread, once empty[s] let it refill the stage, before its arrive.expect_tx and TMA issues;
- full[g]: consumer thread 128 (warpgroup 1), once its try_wait on full[s] returned;
- release[g - 1]: the same thread, right after its arrive on empty[] of step g - 1's stage (after wait_group 1).

Derived per CTA and step (steady state: steps S .. n - 2, S = stages), medians over the CTAs:
- trip = full[g] - issue[g]: a stage's load round trip (issue + latency + transfer + the consumer's wake);
- interval = full[g] - full[g - 1]: the K step (what the model's k_tile predicts);
- hold = release[g] - full[g]: how long the consumer keeps a landed stage (one K step + the wgmma issue);
- reissue = issue[g + S] - release[g]: the producer's release-to-reissue time (its try_wait wake + the loop);
- in_flight = trip / interval: stages loading at once (the ring offers S - 1 while one is held).

Each case runs twice: as top4.py does (one launch right after the inputs' upload: `upload`), and after a 256 MiB
scratch write that evicts the inputs from the L2 (`flushed`); each run's median of 10 timed launches beside it, and
the last of the upload run's launches (`last`: back to back, the clock settled). Every record carries the SM clock
(clock64 span / %globaltimer span per CTA, median).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# (M, N, K, TILE_M, TILE_N, tm, stages): the stage sweep of run 1's probe (64x7168x4096), the table's picks at
# M = 64/128, and one large shape (its ring and the L2 share)
CASES = ((64, 7168, 4096, 64, 64, 64, 3), (64, 7168, 4096, 64, 64, 64, 4), (64, 7168, 4096, 64, 64, 64, 6),
         (64, 7168, 7168, 64, 64, 64, 4), (128, 7168, 7168, 128, 64, 128, 4), (128, 4096, 7168, 128, 64, 128, 6),
         (64, 4096, 4096, 64, 64, 64, 6), (4096, 4096, 4096, 256, 128, 128, 3))
STEPS = 256
FLUSH = 256 << 20


def emit_case(c: tuple[int, ...]) -> tuple[str, dict]:
    from kernelgen.planner import plan, prediction_dict
    from kernelgen.spec import shorthand
    from kernelgen.tiling import Tiling
    from kernelgen.variants import wgmma_tma
    from sim.hw import load_hw

    M, N, K, bm, bn, tm, st = c
    spec = shorthand(f"{M}x{N}x{K}", "bf16", "bf16")
    t = Tiling("wgmma_tma", bm, bn, 64, tm, bn, st, 0, 0, 8, 8, 0)
    p = plan(spec, load_hw("h200"), "wgmma_tma")
    ev = next((e for e in p.survivors if e.tiling.key() == t.key()), None)
    pred: dict = {}
    if ev is not None:
        import dataclasses

        pred = prediction_dict(dataclasses.replace(p, best=ev))
    model = {"cycles_per_cta": ev.cycles_per_cta, "k_tile": ev.model.iter_cycles,
             "terms": ev.model.terms, "bound": ev.model.bound} if ev is not None else None
    return wgmma_tma.emit(spec, t, pred, trace=STEPS), {"tiling": t.key(), "model": model}


def analyse(buf: np.ndarray, grid: int, stages: int, steps: int = STEPS, timer: np.ndarray | None = None) -> dict:
    """The trace's medians (see the module docstring) from the profile buffer of one launch, over the CTAs that
    recorded the most K steps; with the timer buffer (%globaltimer ns at each CTA's start and end) the SM clock
    the cycles ran at (clock64 span / timer span, median over the CTAs)."""
    v = np.asarray(buf).view(np.uint64).astype(np.int64)
    rec = v[:grid * 4].reshape(grid, 4)
    clock = None
    if timer is not None:
        tm = np.asarray(timer).view(np.uint64).astype(np.int64)[:2 * grid].reshape(grid, 2)
        ok = (tm[:, 1] > tm[:, 0]) & (rec[:, 3] > rec[:, 0])
        if ok.any():
            clock = float(np.median((rec[ok, 3] - rec[ok, 0]) / (tm[ok, 1] - tm[ok, 0]) * 1e3))
    from kernelgen.variants.wgmma_tma import PROFILE_SLOTS, TRACE_SLOTS

    ns = len(TRACE_SLOTS)
    rec = v[:grid * PROFILE_SLOTS].reshape(grid, PROFILE_SLOTS)
    tr = v[grid * PROFILE_SLOTS:grid * PROFILE_SLOTS + grid * ns * steps].reshape(grid, steps, ns)
    tr = tr[:, :, [TRACE_SLOTS.index(k) for k in ("issue", "full", "release_prev")]]
    counts = (tr[:, :, 1] != 0).sum(axis=1)
    tr, rec = tr[counts == counts.max()], rec[counts == counts.max()]
    out: dict = {"span": float(np.median(rec[:, 3] - rec[:, 0])), "clock_mhz": clock,
                 "span_max": int((rec[:, 3] - rec[:, 0]).max()),
                 "phases": [float(x) for x in np.median(np.diff(rec, axis=1), axis=0)]}
    n = int((tr[0, :, 1] != 0).sum())  # steps recorded (K steps of the CTA, at most STEPS)
    out["steps"] = n
    if n < stages + 3:
        return out
    g = np.arange(stages, n - 1)
    issue, full = tr[:, :, 0], tr[:, :, 1]
    release = np.zeros_like(full)
    release[:, :-1] = tr[:, 1:, 2]  # release of step g is written at step g + 1
    trip = full[:, g] - issue[:, g]
    interval = full[:, g] - full[:, g - 1]
    hold = release[:, g] - full[:, g]
    gs = g[g + stages < n]
    reissue = issue[:, gs + stages] - release[:, gs]
    fill = full[:, 0] - issue[:, 0]
    for k, x in (("trip", trip), ("interval", interval), ("hold", hold), ("reissue", reissue), ("first_trip", fill)):
        if not x.size:
            continue
        out[k] = float(np.median(x))
        out[k + "_p10_p90"] = [float(np.percentile(x, 10)), float(np.percentile(x, 90))]
    out["in_flight"] = out["trip"] / out["interval"] if out.get("interval") else None
    out["ctas"] = len(tr)
    out["cta0"] = {k: [int(y) for y in tr[0, :min(n, 40), j] - rec[0, 0]]
                   for j, k in enumerate(("issue", "full", "release_prev"))}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--budget", type=float, default=170.0, help="seconds after which no case is started")
    a = ap.parse_args()
    from sim.launch import launch_from_metadata, read_metadata
    from validation.gpu import run_on_gpu
    from validation.gpu_tma import without_tensormaps

    t0 = time.time()
    rows = []
    for c in CASES:
        row: dict = {"case": list(c)}
        if time.time() - t0 > a.budget:
            row["error"] = "skipped: budget spent"
            rows.append(row)
            continue
        try:
            text, info = emit_case(c)
            row.update(info)
            meta = read_metadata(text) or {}
            launch = launch_from_metadata(without_tensormaps(meta), np.random.default_rng(1))
            grid = meta["grid"][0]
            roles = [a.role for a in launch.args]
            i, j = roles.index("profile"), roles.index("timer")  # launch.args: no tensor maps (the header has them)
            for mode, flush in (("upload", 0), ("flushed", FLUSH)):
                m = run_on_gpu(text, launch, warmup=3, repeats=10, check=None, flush_l2_bytes=flush,
                               read_after=("profile", "timer") if not flush else ())
                row[mode] = {"time_ms": m.wall_ms_median, **analyse(m.outputs[i], grid, c[6], timer=m.outputs[j])}
                after = m.extra.get("after") or {}
                if i in after and j in after:  # the last of the timed launches: warm L2, the clock settled
                    row["last"] = {"time_ms": m.wall_ms_median, **analyse(after[i], grid, c[6], timer=after[j])}
                row["device"] = m.device
        except Exception as e:  # noqa: BLE001 - record and go on
            row["error"] = f"{type(e).__name__}: {e}"[:400]
        rows.append(row)
        brief = {k: ({x: y for x, y in v.items() if x != "cta0"} if isinstance(v, dict) else v)
                 for k, v in row.items() if k != "model"}
        print(json.dumps(brief)[:900], flush=True)
    res = {"date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
           "load_average": os.getloadavg()[0], "steps": STEPS, "seconds": time.time() - t0, "rows": rows}
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "tma_trace.json").write_text(json.dumps(res, indent=1, default=float))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
