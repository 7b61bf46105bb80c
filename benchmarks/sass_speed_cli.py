"""Issue 11's speed goal measured as a user runs it: ``python -m sim run K.ptx --hw hwconfigs/h200.yaml --isa sass``
vs ``--isa ptx``, one fresh process each, on sgemm 128^3 (tests/fixtures/cuda/sgemm_tiled.ptx) and the kernelgen mma
f16 256^3 GEMM. Per mode: the process's CPU time (user + system, from the child's rusage: ptxas/nvdisasm children
included), its warp instructions (each mode's own: SASS has other instructions than the PTX) and their rate, and
the 1-minute load average at the start; the ratio SASS / PTX of warp instructions per CPU second. --repeat rounds of
PTX then SASS back to back; the median run of each mode (and the median of the rounds' own ratios). Which PTX timing
core ran (python / compiled: `python -m sim native build`, $WORKBENCH_NATIVE=0 turns it off) is in the row.

    PYTHONPATH=. python benchmarks/sass_speed_cli.py [--repeat N] [--json FILE] [--only sgemm_128 mma_f16_256]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def commands(tmp: Path) -> dict[str, list[str]]:
    """The sim run arguments (after the PTX path) of each kernel, its inputs written under tmp."""
    import numpy as np

    sys.path.insert(0, str(ROOT))
    from kernelgen.cli import compile_kernel

    r = np.random.default_rng(0)
    np.save(tmp / "A.npy", r.standard_normal(128 * 128).astype(np.float32))
    np.save(tmp / "B.npy", r.standard_normal(128 * 128).astype(np.float32))
    (tmp / "mma.ptx").write_text(compile_kernel("h200", None, "256x256x256", "f16", "f32", "mma")["kernel.ptx"])
    sgemm = [str(ROOT / "tests/fixtures/cuda/sgemm_tiled.ptx"), "--grid", "8,8,1", "--block", "16,16,1",
             "--arg", f"@{tmp / 'A.npy'}", "--arg", f"@{tmp / 'B.npy'}", "--arg", "zeros:f32:16384",
             "--arg", "128", "--arg", "128", "--arg", "128", "--arg", "1.5", "--arg", "-0.5"]
    return {"sgemm_128": sgemm, "mma_f16_256": [str(tmp / "mma.ptx")]}


def run_once(args: list[str], isa: str) -> dict:
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run([sys.executable, "-m", "sim", "run", *args, "--hw", "hwconfigs/h200.yaml", "--isa", isa,
                        "--json"], capture_output=True, text=True, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise SystemExit(f"sim run --isa {isa} failed: {p.stderr.strip()[-500:]}")
    out = p.stdout
    d = json.loads(out[out.index("{"):out.rindex("}") + 1])
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    n = int(d["warp_instructions"])
    return {"isa": d.get("isa", isa), "warp_instructions": n, "cycles": d.get("cycles"), "cpu_s": round(cpu, 2),
            "per_s_cpu": round(n / cpu), "load1": round(load, 1)}


def core() -> str:
    """Which PTX timing core the child processes get: "compiled" when a build for the sources exists and
    $WORKBENCH_NATIVE is not 0 (sim/timing/native.py), else "python"."""
    p = subprocess.run([sys.executable, "-m", "sim", "native", "status"], capture_output=True, text=True, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    out = p.stdout
    return "compiled" if "built" in out and "enabled" in out and "disabled" not in out else "python"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--json")
    ap.add_argument("--only", nargs="*")
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for name, args in commands(Path(d)).items():
            if a.only and name not in a.only:
                continue
            row: dict = {"kernel": name, "core": core()}
            runs: dict[str, list[dict]] = {"ptx": [], "sass": []}
            for _ in range(a.repeat):  # PTX and SASS back to back, so that both see the same load
                for isa in ("ptx", "sass"):
                    runs[isa].append(run_once(args, isa))
            for isa in ("ptx", "sass"):
                rs = sorted(runs[isa], key=lambda r: r["per_s_cpu"])
                row[isa] = rs[len(rs) // 2]  # the median run
                row[isa + "_runs"] = runs[isa]
            row["ratio_sass_over_ptx"] = round(row["sass"]["per_s_cpu"] / row["ptx"]["per_s_cpu"], 2)
            pairs = sorted(s["per_s_cpu"] / p["per_s_cpu"] for p, s in zip(runs["ptx"], runs["sass"]))
            row["ratio_pairs_median"] = round(pairs[len(pairs) // 2], 2)
            rows.append(row)
            print(f"{name:12s} " + "  ".join(
                f"{m.upper()} {row[m]['per_s_cpu']:,} warp inst/s CPU ({row[m]['warp_instructions']:,} in "
                f"{row[m]['cpu_s']} s, load {row[m]['load1']}; median of {a.repeat})" for m in ("ptx", "sass"))
                + f"  ratio {row['ratio_sass_over_ptx']} (pairs {row['ratio_pairs_median']}, {row['core']} core)",
                flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
