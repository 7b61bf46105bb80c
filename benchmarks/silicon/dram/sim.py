"""The cases of benchmarks/silicon/dram/probe.py simulated (SASS mode by default) on h200.yaml with an empty L2 (the
probe flushes it before every launch), reduced as probe.summarize does, beside the H200's figures when a measured
dram_probe.json is given. Grids beyond 16 CTAs are sampled (the CTAs of the first cores, --sample).

    PYTHONPATH=. python3 benchmarks/silicon/dram/sim.py [--measured DATA.json] [--only stream_u1:528 ...]
        [--isa ptx|sass] [--sample 16] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

from benchmarks.silicon.dram.probe import summarize  # noqa: E402

PER = 32768  # float4 per stream CTA (dram_host.cu PER)
PER_BG = 4 * PER  # the chase's background CTAs (dram_host.cu PER_BG): they outlast the walk's steps 8..96
STEPS = 256
SMS = 132


def cases() -> list[tuple[str, int, int]]:
    """(kernel, grid, stream CTAs) in dram_host.cu's order."""
    out = []
    for k in ("stream_u1", "stream_u2", "stream_u4"):
        out += [(k, g, g) for g in (1, 4, 16, 33, 66)] + [(k, SMS * p, SMS * p) for p in (1, 2, 4, 8)]
    out.append(("chase_u0", 1, 0))
    out += [(k, SMS * p + 1, SMS * p) for k in ("chase_u1", "chase_u4") for p in (1, 4)]
    return out


def ptx() -> str:
    """dram_dev.ptx (nvcc -ptx -arch=sm_90a -O2 dram_dev.cu, committed), or nvcc's output when the file is absent."""
    if (HERE / "dram_dev.ptx").exists():
        return (HERE / "dram_dev.ptx").read_text()
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "dram.ptx"
        subprocess.run(["nvcc", "-ptx", "-arch=sm_90a", "-O2", str(HERE / "dram_dev.cu"), "-o", str(out)], check=True)
        return out.read_text()


def chain(words: int) -> np.ndarray:
    """dram_host.cu's walk: word offsets stepping 1 MiB + 4 KiB + 128 B."""
    c = np.zeros(words, np.uint32)
    stride = ((1 << 20) + 4096 + 128) // 4
    idx = [(s * stride) % words for s in range(STEPS + 1)]
    for s in range(STEPS):
        c[idx[s]] = idx[s + 1]
    return c


def simulate_case(text: str, kernel: str, grid: int, ctas: int, hw, isa: str, sample: int | None) -> dict:
    from sim.launch import Arg, Launch

    chase = kernel.startswith("chase")
    per = PER_BG if chase else PER
    big = np.ones(max(ctas, 1) * per * 4, np.float32)
    args = [Arg("buffer", "f32", array=big, name="in"),
            Arg("buffer", "f32", array=np.zeros((grid + 1) * 256, np.float32), name="out"),
            Arg("scalar", "s64", value=per),
            Arg("buffer", "s64", array=np.zeros(max(ctas, 1) * 16, np.int64), name="T")]
    if chase:
        args += [Arg("buffer", "u32", array=chain(64 << 20), name="chain"), Arg("scalar", "s32", value=STEPS),
                 Arg("buffer", "s64", array=np.zeros(STEPS + 1, np.int64), name="C")]
    launch = Launch(kernel, (grid, 1, 1), (256, 1, 1), args)
    n = sample if sample and grid > sample else None
    if isa == "sass":
        from sim.sass.timing import simulate_sass

        r = simulate_sass(text, launch, hw, "dram_dev.ptx", sample_ctas=n)
    else:
        from sim.ptx.parser import parse_ptx
        from sim.timing import simulate

        r = simulate(parse_ptx(text, "dram_dev.ptx"), launch, hw, sample_ctas=n)
    T = r.outputs[3].view(np.int64)
    spans = []
    for c in range(ctas):
        st = T[c * 16:(c + 1) * 16]
        if st[1] > 0 or st[0] > 0:
            spans.append(int(max(st[1::2]) - min(st[0::2])))
    row = {"kernel": kernel, "grid": grid, "stream_ctas": ctas, "per_float4": per, "rep": 0, "ms": 1.0,
           "cta_spans": spans}
    if chase:
        C = r.outputs[6].view(np.int64)
        row["steps"] = [int(C[s + 1] - C[s]) for s in range(STEPS)]
    return row


def main() -> int:
    from sim.hw import load_hw

    ap = argparse.ArgumentParser()
    ap.add_argument("--measured", help="dram_probe.json from the H200 (probe.py)")
    ap.add_argument("--only", nargs="*", help="KERNEL:GRID")
    ap.add_argument("--isa", choices=("ptx", "sass"), default="sass")
    ap.add_argument("--sample", type=int, default=16)
    ap.add_argument("--hw", default="h200.yaml")
    ap.add_argument("--out", help="write the simulated rows and summary here")
    a = ap.parse_args()
    hw = load_hw(a.hw)
    text = ptx()
    meas = {}
    if a.measured:
        for r in json.loads(Path(a.measured).read_text())["summary"]:
            meas[(r["kernel"], r["grid"])] = r
    rows = []
    for k, g, n in cases():
        if a.only and f"{k}:{g}" not in a.only:
            continue
        t0 = time.time()
        rows.append(simulate_case(text, k, g, n, hw, a.isa, a.sample))
        s = summarize([rows[-1]])[0]
        m = meas.get((k, g), {})
        figs = [f for f in ("per_cta_median", "bytes_per_cycle", "step_median", "step_p10", "step_p90") if f in s]
        print(f"{k:10s} grid={g:4d} " + "  ".join(f"{f}={s[f]}" + (f" (H200 {m[f]})" if f in m else "")
                                                  for f in figs) + f"  [{time.time() - t0:.0f} s]", flush=True)
    if a.out:
        Path(a.out).write_text(json.dumps({"isa": a.isa, "rows": rows, "summary": summarize(rows)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
