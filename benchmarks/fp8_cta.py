"""Predicted vs measured per-CTA cycles of the block-scaled fp8 kernels on the H200 (issue 14: "within 10%"),
at the SM clock each kernel ran at. One invocation, one JSON under OUT:

    source .devwheels/install.sh >/dev/null 2>&1; export PYTHONPATH="$PWD:$PYTHONPATH"
    python3 benchmarks/fp8_cta.py --out $OUT          # on the H200 (~1-2 minutes)
    python3 benchmarks/fp8_cta.py --out DIR --fake    # here: compile, plan, JSON from a made-up measurement
    python3 benchmarks/fp8_cta.py --out $OUT --ab e5m2,e5m2 --shape 4096x4096x4096   # e5m2 A and B, one shape

At 4096^3 and 8192^3 (bf16 D; fp8_check.SPEED) the planner's pick and fp8_check.SPEED_TILINGS beside it (a
duplicate of the pick skipped) are emitted with --profile (wgmma_fp8: wgmma_tma's record per persistent CTA,
clock64 at CTA start, tile walk start, after the last K loop, at CTA end after the last TMA stores, and a
%globaltimer pair at CTA start and end). Per shape one child process under a timeout (a hang costs that shape's
remaining kernels; each kernel's result is written as soon as it is measured) runs every kernel on the same
random A and B: gpu_bench.run_kernel with `last`: warm-up launches, --repeats timed launches (CUDA events), the
records of the last launch. Then, as benchmarks/top4.py does for wgmma_tma: the measured cycles per CTA are the
mean clock64 span of the CTAs that walk the most tiles (top4.per_cta_measured), the SM clock the median
clock64 span / %globaltimer span of those CTAs, and the prediction at that clock is the fp8 planner's for the
same tiling with h200.yaml's clock_mhz replaced and no planner clock (top4.at_clock's way). Two small profiled
kernels are numpy-checked on the GPU first (python -m validation gpu). Nothing in the model is changed by this.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.fp8_check import SPEED, SPEED_TILINGS, _tag  # noqa: E402 - the same shapes and tilings

# small profiled kernels numpy-checked on the GPU: the picks' 128x256 s4 (two consumers, two N halves, bf16 D
# through the TMA stores, a partial last K block); one consumer, f32 D (registers -> global)
CHECKS = [((1000, 520, 784), ["TILE_M in [128, 128]", "TILE_N in [256, 256]", "STAGES in [4, 4]"], "bf16"),
          ((200, 136, 272), ["TILE_M in [64, 64]", "TILE_N in [64, 64]"], "f32")]


def spec_of(shape: tuple[int, int, int], tiling: list[str], out: str = "bf16", ab: tuple[str, str] = ("e4m3", "e4m3")):
    """The block-scaled fp8 spec (A's and B's types `ab`: e4m3 or e5m2 each) at `shape` with the tiling ranges."""
    from kernelgen.spec import parse_spec

    M, N, K = shape
    d: dict = {"M": M, "N": N, "K": K, "dtype": {"a": ab[0], "b": ab[1], "out": out}, "scale": "block128"}
    if tiling:
        d["tiling"] = tiling
    return parse_spec(d)


def compile_profiled(shape: tuple[int, int, int], tiling: list[str], d: Path, out: str = "bf16",
                     ab: tuple[str, str] = ("e4m3", "e4m3")) -> dict:
    """Plan (h200.yaml, --variant wgmma_fp8, the tiling ranges, A and B of types `ab`) and emit the pick with
    --profile into
    d/kernel.ptx; the row: shape, ranges, tiling key, the plan's cycles and cycles per CTA (at the planner's
    clock), its predicted phases (top4._phases) and the header's tiles per CTA."""
    from benchmarks.top4 import _phases
    from kernelgen.planner import plan, prediction_dict
    from kernelgen.variants import get
    from sim.hw import load_hw

    spec = spec_of(shape, tiling, out, ab)
    p = plan(spec, load_hw("h200"), "wgmma_fp8")
    ev = p.best
    d.mkdir(parents=True, exist_ok=True)
    ptx = get("wgmma_fp8").emit(spec, ev.tiling, prediction_dict(p), profile=True)
    (d / "kernel.ptx").write_text(ptx)
    terms = getattr(ev.model, "terms", None) or {}
    return {"shape": list(shape), "out": out, "ab": list(ab), "tiling_ranges": tiling, "pick": not tiling,
            "tiling": ev.tiling.key(),
            "ptx": str(d / "kernel.ptx"), "predicted_cycles": ev.cycles, "predicted_cycles_per_cta": ev.cycles_per_cta,
            "predicted_bound": ev.model.bound, "predicted_k_tile_terms": {
                k: round(float(terms[k]), 1) for k in ("tensor", "chain", "promote_fma", "issue", "tma_transfer",
                                                        "tma_issue", "tma_ring", "k_tile", "tail", "per_tile")
                if k in terms},
            **_phases(ev, shape)}


def at_clock(row: dict, clock_mhz: float) -> dict:
    """The row's tiling predicted with the SM at `clock_mhz` (h200.yaml's clock_mhz replaced, no planner clock:
    top4.at_clock's way, the fp8 spec): cycles per CTA and the phases."""
    from benchmarks.top4 import _phases, plan_at_clock

    spec = spec_of(tuple(row["shape"]), [], row.get("out", "bf16"), tuple(row.get("ab", ("e4m3", "e4m3"))))
    ev = plan_at_clock(spec, "wgmma_fp8", row["tiling"], clock_mhz)
    if ev is None:
        raise ValueError(f"no wgmma_fp8 tiling {row['tiling']} for {row['shape']}")
    ph = _phases(ev, tuple(row["shape"]))
    return {"predicted_at_clock": ev.cycles_per_cta,
            **{k.replace("predicted_", "predicted_at_clock_"): v for k, v in ph.items()}}


def fast_e4m3(count: int, rng: np.random.Generator, kind: str = "e4m3") -> np.ndarray:
    """sim.launch.random_array's fp8 distribution (normal values rounded to `kind`, e4m3 or e5m2), drawn from a
    pool of 2^22 of its values: its own rounding of 67M values takes ~15 s on a host core."""
    from sim.launch import random_array

    pool = random_array(kind, min(count, 1 << 22), rng)
    return pool[rng.integers(0, len(pool), size=count)] if count > len(pool) else pool


def child(ptxs: list[str], results: Path, repeats: int) -> int:
    """On the GPU: each kernel of one shape on the same A and B (run_kernel's inputs), the records of its last
    timed launch; one JSON line per kernel appended to `results` as soon as it is measured."""
    from benchmarks.gpucommon import run_kernel
    from sim.launch import read_metadata

    inputs: dict[str, Any] = {}
    rng = np.random.default_rng(1)
    for i, ptx in enumerate(ptxs):
        meta = read_metadata(Path(ptx).read_text()) or {}
        if not inputs:
            for p in meta["params"]:
                if p.get("role") in ("A", "B") and p.get("kind") == "buffer":
                    inputs[p["role"]] = fast_e4m3(int(p["count"]), rng, p["dtype"])
        t0 = time.time()
        try:
            r = run_kernel(Path(ptx), repeats, False, inputs=inputs, last=True)
            r.pop("prediction", None)
            r["seconds"] = time.time() - t0
        except Exception as e:  # noqa: BLE001 - record and go on
            r = {"error": f"{type(e).__name__}: {e}"[:400]}
        with results.open("a") as f:
            f.write(json.dumps({"index": i, **r}) + "\n")
    return 0


def fake_measurement(row: dict) -> dict:
    """A made-up run (--fake, no GPU): every CTA at 1.1x the predicted cycles per tile, 1,400 MHz."""
    tiles = row["tiles_per_cta_header"]
    base, per = row.get("predicted_base", 0), row.get("predicted_per_tile", row["predicted_cycles_per_cta"])
    cta = [int(1.1 * (base + n * per)) for n in tiles]
    return {"time_ms": max(cta) / 1.4e6, "per_cta_cycles": cta, "per_cta_ns": [int(c / 1.4) for c in cta],
            "phase_cycles": None, "grid": [len(tiles), 1, 1], "block": [384, 1, 1], "registers": 168,
            "device": "fake", "per_cta_from": "last"}


def analyse(row: dict, m: dict) -> None:
    """row += the measurement: time, per-CTA cycles over the busiest CTAs (top4.per_cta_measured), the SM clock,
    the prediction at that clock and predicted / measured; the raw per-CTA lists stay in the row."""
    from benchmarks.top4 import per_cta_measured

    cta = m.pop("per_cta_cycles", None) or []
    ns = m.pop("per_cta_ns", None)
    row.update(m)
    M, N, K = row["shape"]
    if row.get("time_ms"):
        row["tflops"] = 2 * M * N * K / (row["time_ms"] * 1e-3) / 1e12
    per_cta_measured(row, cta, row["tiles_per_cta_header"], ns)
    row["per_cta_cycles"], row["per_cta_ns"] = cta, ns
    mc, mhz = row.get("measured_cycles_per_cta"), row.get("measured_clock_mhz")
    if mc:
        row["predicted_over_measured_planner_clock"] = row["predicted_cycles_per_cta"] / mc
    if mc and mhz:
        try:
            row.update(at_clock(row, mhz))
            row["predicted_over_measured_per_cta"] = row["predicted_at_clock"] / mc
            row["within_10pct"] = abs(row["predicted_over_measured_per_cta"] - 1) <= 0.10
        except Exception as e:  # noqa: BLE001 - informative only
            row["predicted_at_clock_error"] = f"{type(e).__name__}: {e}"[:300]
    if row.get("time_ms") and mhz:  # the whole launch in cycles at the kernel's clock, beside the busiest CTA
        row["time_cycles_at_clock"] = row["time_ms"] * 1e3 * mhz
    tiles = row["tiles_per_cta_header"]
    if cta and len(cta) == len(tiles):
        top = max(tiles)
        busiest = [c for c, n in zip(cta, tiles) if n == top]
        row["measured_cycles_per_cta_spread"] = (max(busiest) - min(busiest)) / float(np.mean(busiest))
        fewer = [c for c, n in zip(cta, tiles) if n == top - 1]
        if fewer:  # the CTAs one tile short: the span difference is one tile's cycles (to set beside per_tile)
            row["measured_per_tile"] = float(np.mean(busiest) - np.mean(fewer))
            row["measured_base"] = float(np.mean(busiest)) - top * row["measured_per_tile"]


def run_gpu_checks(kdir: Path, timeout: int, ab: tuple[str, str] = ("e4m3", "e4m3")) -> list[dict]:
    """Each CHECKS kernel (profiled; A and B of types `ab`) through ``python -m validation gpu KERNEL.ptx --json``
    under `timeout`."""
    from benchmarks.gpucommon import _child

    rows = []
    for shape, tiling, out in CHECKS:
        row: dict = {"shape": list(shape), "out": out, "ab": list(ab), "tiling_ranges": tiling}
        try:
            c = compile_profiled(shape, tiling, kdir / f"check_{'x'.join(map(str, shape))}_{out}{_tag(tiling)}", out,
                                 ab)
            row["tiling"] = c["tiling"]
            d = _child(row, [sys.executable, "-m", "validation", "gpu", c["ptx"], "--json", "--repeats", "3"],
                       timeout, (0, 1))
            if d is not None:
                row.update(passed=bool(d["check"] and d["check"]["passed"]),
                           rel_err=d["check"] and d["check"].get("max_rel_err"), time_ms=d["time_ms"])
        except Exception as e:  # noqa: BLE001 - record and go on
            row["error"] = f"{type(e).__name__}: {e}"[:300]
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def summary(rows: list[dict]) -> str:
    lines = []
    for r in rows:
        if "error" in r and not r.get("measured_cycles_per_cta"):
            lines.append(f"{'x'.join(map(str, r['shape']))} {r.get('tiling')}: {r['error'][:120]}")
            continue
        pm = r.get("predicted_over_measured_per_cta")
        lines.append(f"{'x'.join(map(str, r['shape']))} {r['tiling']}{' (pick)' if r['pick'] else ''}: "
                     f"measured {r.get('measured_cycles_per_cta') or 0:,.0f} cyc/CTA at "
                     f"{r.get('measured_clock_mhz') or 0:,.0f} MHz, predicted {r.get('predicted_at_clock') or 0:,} "
                     f"-> {pm if pm is None else round(pm, 3)}; {r.get('tflops') or 0:,.0f} TFLOP/s")
    return "\n".join(lines)


def table(res: dict) -> str:
    """A markdown table of a run's rows (docs/wgmma-fp8.md): python3 benchmarks/fp8_cta.py --table FILE."""
    out = ["| shape | tiling | TFLOP/s | SM clock (MHz) | measured cycles/CTA (busiest) | predicted at that clock | "
           "predicted / measured | per tile measured / predicted |", "|---|---|---|---|---|---|---|---|"]
    for r in res["rows"]:
        name = r["tiling"].split("_p0")[0].replace("wgmma_fp8_", "") if r.get("tiling") else "-"
        if not r.get("measured_cycles_per_cta"):
            err = r.get("error", "-")[:60]
            out.append(f"| {'x'.join(map(str, r['shape']))} | {name} | - | - | - | - | {err} | - |")
            continue
        pt = (f"{r['measured_per_tile']:,.0f} / {r['predicted_at_clock_per_tile']:,}"
              if r.get("measured_per_tile") and r.get("predicted_at_clock_per_tile") else "-")
        pm = r.get("predicted_over_measured_per_cta")
        out.append(f"| {'x'.join(map(str, r['shape']))} | {name}{' (pick)' if r['pick'] else ''} | "
                   f"{r.get('tflops') or 0:,.0f} | {r.get('measured_clock_mhz') or 0:,.0f} | "
                   f"{r['measured_cycles_per_cta']:,.0f} ({r.get('measured_ctas_at_top')} CTAs x "
                   f"{r.get('measured_tiles_per_cta')} tiles) | {r.get('predicted_at_clock') or 0:,} | "
                   f"{'-' if pm is None else f'{pm:.3f}'} | {pt} |")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--repeats", type=int, default=100, help="timed launches per kernel before the read (default 100)")
    ap.add_argument("--timeout", type=int, default=150, help="seconds per shape's child process (default 150)")
    ap.add_argument("--fake", action="store_true", help="no GPU: a made-up measurement (tests the JSON assembly)")
    ap.add_argument("--no-checks", action="store_true")
    ap.add_argument("--ab", default="e4m3,e4m3", help="A's and B's fp8 types of the timed kernels (default e4m3,e4m3)")
    ap.add_argument("--shape", help="time this SPEED shape only (MxNxK)")
    ap.add_argument("--table", help="print the markdown table of a run's JSON and stop")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    ap.add_argument("--results", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        return child(a.child, Path(a.results), a.repeats)
    if a.table:
        print(table(json.loads(Path(a.table).read_text())))
        return 0
    if not a.out:
        ap.error("--out is required")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    ab = tuple(a.ab.split(","))
    if len(ab) != 2 or set(ab) - {"e4m3", "e5m2"}:
        ap.error(f"--ab expects two of e4m3, e5m2 joined by a comma, got {a.ab!r}")
    shapes = [s for s in SPEED if a.shape in (None, "x".join(map(str, s)))]
    if not shapes:
        ap.error(f"--shape {a.shape} is none of {', '.join('x'.join(map(str, s)) for s in SPEED)}")
    res: dict = {"date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"), "fake": a.fake,
                 "repeats": a.repeats, "ab": list(ab)}
    from benchmarks.gpucommon import nvidia_smi

    res["device"] = nvidia_smi("name,driver_version,clocks.max.sm,power.limit")
    kdir = Path(tempfile.mkdtemp(prefix="fp8_cta_"))  # the PTX stays off OUT (few files come back)
    res["checks"] = [] if (a.fake or a.no_checks) else run_gpu_checks(kdir, 90, ab)
    rows: list[dict] = []
    for shape in shapes:
        srows: list[dict] = []
        for tiling in [[]] + SPEED_TILINGS:
            try:
                r = compile_profiled(shape, tiling, kdir / f"{'x'.join(map(str, shape))}{_tag(tiling)}", "bf16", ab)
            except Exception as e:  # noqa: BLE001 - record and go on
                srows.append({"shape": list(shape), "tiling_ranges": tiling, "pick": not tiling, "tiling": None,
                              "error": f"compile: {type(e).__name__}: {e}"[:300]})
                continue
            if any(s.get("tiling") == r["tiling"] for s in srows):
                continue  # the pick forced again
            from sim.launch import read_metadata

            prof = (read_metadata(Path(r["ptx"]).read_text()) or {})["profile"]
            r["tiles_per_cta_header"] = prof["tiles_per_cta"]
            srows.append(r)
        todo = [r for r in srows if "ptx" in r]
        if a.fake:
            got = {i: fake_measurement(r) for i, r in enumerate(todo)}
        else:
            rf = kdir / f"results_{'x'.join(map(str, shape))}.jsonl"
            cmd = [sys.executable, str(Path(__file__).resolve()), "--child", *[r["ptx"] for r in todo],
                   "--results", str(rf), "--repeats", str(a.repeats)]
            err = None
            try:
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout, cwd=ROOT)
                if p.returncode:
                    err = (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1][:300]
            except subprocess.TimeoutExpired:
                err = f"timeout after {a.timeout} s (hang?)"
            got = {}
            if rf.exists():
                for line in rf.read_text().splitlines():
                    d = json.loads(line)
                    got[d.pop("index")] = d
            for i, r in enumerate(todo):
                if i not in got:
                    r["error"] = err or "no result"
        for i, r in enumerate(todo):
            if i in got:
                if "error" in got[i]:
                    r["error"] = got[i]["error"]
                else:
                    analyse(r, got[i])
            r.pop("ptx", None)
            print(json.dumps({k: v for k, v in r.items() if k not in ("per_cta_cycles", "per_cta_ns",
                                                                       "tiles_per_cta_header")})[:600], flush=True)
        rows += srows
    res["rows"] = rows
    res["seconds"] = time.time() - t0
    res["load_average"] = os.getloadavg()[0]
    (out / "fp8_cta.json").write_text(json.dumps(res, indent=1))
    print(summary(rows))
    ok = [r for r in rows if r.get("predicted_over_measured_per_cta")]
    print(f"{sum(r['within_10pct'] for r in ok)}/{len(rows)} kernels within 10% per CTA; {res['seconds']:.0f} s")
    return 0 if len(ok) == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
