"""Simulated vs measured per-CTA cycles of the Hopper GEMM kernels (wgmma_tma bf16, wgmma_fp8 e4m3 / e5m2), one
CTA each, so the comparison is the core's pipeline (TMA ring, wgmma, promotion, epilogue), not DRAM sharing:

    python3 benchmarks/hopper_sim.py compile --dir .hopper_sim          # kernelgen --profile kernels, here
    (device) python3 benchmarks/hopper_sim.py gpu --dir .hopper_sim --out $OUT        # -> OUT/hopper_gpu.json
    python3 benchmarks/hopper_sim.py simulate --dir .hopper_sim --out benchmarks/data/hopper_sim_DATE.json
    python3 benchmarks/hopper_sim.py table --sim SIM.json --measured GPU.json

Both sides read the same thing: the kernels' own --profile record (clock64 at CTA start and at CTA end after the
last TMA store, wgmma_tma._profile_setup), on the H200 from the last of --repeats launches (inputs warm in the L2,
clock settled), in the simulator from one run with the buffers warm in its L2 (`warm_l2`), in PTX mode and in
SASS mode (the SASS ptxas writes, timed by its control codes). The planner's per-CTA prediction is beside them.
No model or simulator constant is changed by this.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FP8 = {"dtype": {"a": "e4m3", "b": "e4m3", "out": "bf16"}, "scale": "block128"}
E5M2 = {"dtype": {"a": "e5m2", "b": "e5m2", "out": "bf16"}, "scale": "block128"}
BF16 = {"dtype": {"a": "bf16", "b": "bf16", "out": "bf16"}}


def _tiles(m: int, n: int, s: int) -> list[str]:
    return [f"TILE_M in [{m}, {m}]", f"TILE_N in [{n}, {n}]", f"STAGES in [{s}, {s}]"]


# (name, variant, spec): one output tile each (grid 1), the picks' tiles of docs/wgmma-fp8.md and docs/benchmarks.md
CASES: list[tuple[str, str, dict[str, Any]]] = [
    ("fp8_128x256_s4_k4096", "wgmma_fp8", {"M": 128, "N": 256, "K": 4096, **FP8, "tiling": _tiles(128, 256, 4)}),
    ("fp8_128x256_s4_k16384", "wgmma_fp8", {"M": 128, "N": 256, "K": 16384, **FP8, "tiling": _tiles(128, 256, 4)}),
    ("fp8_128x128_s3_k4096", "wgmma_fp8", {"M": 128, "N": 128, "K": 4096, **FP8, "tiling": _tiles(128, 128, 3)}),
    ("fp8e5m2_128x256_s4_k4096", "wgmma_fp8", {"M": 128, "N": 256, "K": 4096, **E5M2,
                                               "tiling": _tiles(128, 256, 4)}),
    ("bf16_128x256_s3_k4096", "wgmma_tma", {"M": 128, "N": 256, "K": 4096, **BF16, "tiling": _tiles(128, 256, 3)}),
    ("bf16_64x64_s5_k4096", "wgmma_tma", {"M": 64, "N": 64, "K": 4096, **BF16, "tiling": _tiles(64, 64, 5)}),
]


def cmd_compile(d: Path) -> None:
    from kernelgen.planner import plan, prediction_dict
    from kernelgen.spec import parse_spec
    from kernelgen.variants import get
    from sim.hw import load_hw

    for name, variant, spec in CASES:
        s = parse_spec(spec, name)
        p = plan(s, load_hw("h200"), variant)
        out = d / name
        out.mkdir(parents=True, exist_ok=True)
        (out / "kernel.ptx").write_text(get(variant).emit(s, p.best.tiling, prediction_dict(p), profile=True))
        (out / "plan.json").write_text(json.dumps({"tiling": p.best.tiling.key(),
                                                   "predicted_cycles_per_cta": p.best.cycles_per_cta}))
        print("compiled", out, p.best.tiling.key(), flush=True)


def _profile_cycles(meta: dict, outputs: dict) -> float:
    """Mean over the CTAs of the profile record's last - first clock64 (validation.gpu's reading)."""
    from validation.gpu import _per_cta_cycles

    prof = meta["profile"]
    return float(np.mean(_per_cta_cycles(np.asarray(outputs[prof["param"]]), prof.get("slots"))))


def cmd_simulate(d: Path, out: Path) -> None:
    from benchmarks.gpucommon import simulate_isa
    from sim.launch import launch_from_metadata, read_metadata

    rows = []
    for name, variant, _ in CASES:
        text = (d / name / "kernel.ptx").read_text()
        meta = read_metadata(text)
        row: dict[str, Any] = {"name": name, "variant": variant, **json.loads((d / name / "plan.json").read_text())}
        for mode in ("ptx", "sass"):
            t0 = time.time()
            launch = launch_from_metadata(meta, np.random.default_rng(0))
            r = simulate_isa(text, launch, mode, name, warm_l2=True)
            row[f"{mode}_profile_cycles"] = _profile_cycles(meta, r.outputs)
            row[f"{mode}_cycles"] = r.cycles
            row[f"{mode}_seconds"] = round(time.time() - t0, 1)
        rows.append(row)
        print(json.dumps(row), flush=True)
    out.write_text(json.dumps({"date": time.strftime("%Y-%m-%d"), "hw": "h200", "rows": rows}, indent=1))
    print("wrote", out)


def cmd_gpu(d: Path, out: Path, repeats: int) -> None:
    from benchmarks.gpucommon import nvidia_smi, run_kernel

    rows = []
    for name, variant, _ in CASES:
        try:
            r = run_kernel(d / name / "kernel.ptx", repeats, True, last=True)
            rows.append({"name": name, "variant": variant, "per_cta_cycles": r["per_cta_cycles"],
                         "per_cta_ns": r["per_cta_ns"], "time_ms": r["time_ms"],
                         "check_passed": bool(r["check"] and r["check"]["passed"]),
                         "rel_err": r["check"] and r["check"].get("max_rel_err"), "registers": r["registers"]})
        except Exception as e:  # noqa: BLE001 - record and go on
            rows.append({"name": name, "variant": variant, "error": f"{type(e).__name__}: {e}"[:300]})
        print(json.dumps(rows[-1]), flush=True)
    out.mkdir(parents=True, exist_ok=True)
    (out / "hopper_gpu.json").write_text(json.dumps({
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "repeats": repeats,
        "device": nvidia_smi("name,driver_version,clocks.max.sm"), "rows": rows}, indent=1))


def table(sim: dict, meas: dict) -> str:
    by = {r["name"]: r for r in meas["rows"]}
    lines = ["| kernel | tiling | measured | PTX mode | err | SASS mode | err | predicted | err |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in sim["rows"]:
        m = by.get(r["name"], {})
        mc = float(np.mean(m["per_cta_cycles"])) if m.get("per_cta_cycles") else float("nan")
        cells = []
        for v in (r["ptx_profile_cycles"], r["sass_profile_cycles"], r["predicted_cycles_per_cta"]):
            cells += [f"{v:,.0f}", f"{(v - mc) / mc * 100:+.1f}%"]
        tiling = r["tiling"].split("_p0")[0]
        lines.append(f"| {r['name']} | {tiling} | {mc:,.0f} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["compile", "simulate", "gpu", "table"])
    ap.add_argument("--dir", default=".hopper_sim")
    ap.add_argument("--out")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--sim")
    ap.add_argument("--measured")
    a = ap.parse_args()
    d = Path(a.dir)
    if a.cmd == "compile":
        cmd_compile(d)
    elif a.cmd == "simulate":
        cmd_simulate(d, Path(a.out or f"benchmarks/data/hopper_sim_{time.strftime('%Y-%m-%d')}.json"))
    elif a.cmd == "gpu":
        if not a.out:
            ap.error("--out is required")
        cmd_gpu(d, Path(a.out), a.repeats)
    else:
        if not (a.sim and a.measured):
            ap.error("table needs --sim and --measured")
        print(table(json.loads(Path(a.sim).read_text()), json.loads(Path(a.measured).read_text())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
