"""The cases of benchmarks/sass_probe/micro.py simulated in SASS mode on h200.yaml (one launch each: the
simulator has no cold code beyond the modelled entry), reduced by micro.summarize, beside the H200's figures
when a measured sass_micro.json is given.

    PYTHONPATH=. python3 benchmarks/sass_probe/micro_sim.py [--measured benchmarks/data/sass_micro_*.json]
        [--only CASE ...] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from benchmarks.sass_probe.micro import summarize  # noqa: E402

HERE = Path(__file__).resolve().parent
WS = (1, 2, 4, 8, 16, 32)
BW = (4, 8, 16, 32)


def ptx() -> str:
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "micro.ptx"
        subprocess.run(["nvcc", "-ptx", "-arch=sm_90a", "-O2", str(HERE / "micro_dev.cu"), "-o", str(out)], check=True)
        return out.read_text()


def cases() -> list[tuple[str, str, int, list[tuple[str, object]], int, int]]:
    """(case, kernel, warps, args as (kind, value), stamps, param) in micro_host.cu's order (streams left out)."""
    tin = ("in", None)
    out: list[tuple[str, str, int, list[tuple[str, object]], int, int]] = []
    for w in WS:
        out.append(("bar_only", "bar_only", w, [("s32", 512), ("T", None)], w * 2, 512))
    for w in WS[1:]:
        out.append(("bar_skew", "bar_skew", w, [("T", None)], w * 64, 32))
    for w in BW:
        for it in (64, 256):
            out.append(("bar_loop", "bar_loop", w, [tin, ("out", None), ("s32", it), ("T", None)], w * 2, it))
    for k in ("lds_rate", "lds_rate_c2"):
        for w in BW:
            out.append((k, k, w, [("out", None), ("s32", 64), ("T", None)], w * 2, 64))
    for k in ("pipe_add_lop", "pipe_add_ffma", "pipe_lop_only"):
        for w in (4, 8):
            out.append((k, k, w, [tin, ("out", None), ("s32", 64), ("T", None)], w * 2, 64))
    return out


def simulate_case(text: str, kernel: str, warps: int, spec: list, nT: int, hw) -> list[int]:
    from sim.launch import Arg, Launch
    from sim.sass.timing import simulate_sass

    hin = (np.arange(4096) % 97).astype(np.float32) * 0.25
    hin.view(np.uint32)[:4] = [3, 7, 0x3F800001, 0x3C000000]
    args, t_index = [], 0
    for i, (kind, v) in enumerate(spec):
        if kind == "in":
            args.append(Arg("buffer", "f32", array=hin.copy(), name="in"))
        elif kind == "out":
            args.append(Arg("buffer", "f32", array=np.zeros(32 * warps, np.float32), name="out"))
        elif kind == "T":
            args.append(Arg("buffer", "s64", array=np.zeros(nT, np.int64), name="T"))
            t_index = i
        else:
            args.append(Arg("scalar", kind, value=v))
    launch = Launch(kernel, (1, 1, 1), (32 * warps, 1, 1), args)
    r = simulate_sass(text, launch, hw, "micro_dev.ptx", warm_l2=True)
    return [int(x) for x in r.outputs[t_index].view(np.int64)]


def main() -> int:
    from sim.hw import load_hw

    ap = argparse.ArgumentParser()
    ap.add_argument("--measured", help="sass_micro.json from the H200 (micro.py)")
    ap.add_argument("--only", nargs="*", help="case names")
    ap.add_argument("--out", help="write the simulated summary here")
    a = ap.parse_args()
    hw = load_hw("h200.yaml")
    text = ptx()
    sim = []
    for case, kernel, w, spec, nT, p in cases():
        if a.only and case not in a.only:
            continue
        T = simulate_case(text, kernel, w, spec, nT, hw)
        sim.append({"case": case, "kernel": kernel, "grid": 1, "block": 32 * w, "param": p, "rep": 0, "launch": 2,
                    "ms": 0.0, "T": T})
    rows = summarize(sim)
    meas = {}
    if a.measured:
        for r in json.loads(Path(a.measured).read_text())["summary"]:
            meas[(r["case"], r["warps"], r["param"])] = r
    for r in rows:
        m = meas.get((r["case"], r["warps"], r["param"]), {})
        figs = [k for k in r if k not in ("case", "warps", "param")]
        print(f"{r['case']:14s} w={r['warps']:2d} p={r['param']:4d} " +
              "  ".join(f"{k}={r[k]}" + (f" (H200 {m[k]})" if k in m else "") for k in figs))
    if a.out:
        Path(a.out).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
