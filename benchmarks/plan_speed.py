"""Planner speed as a user meets it (issues 10 and 17; targets: `search.seconds` under 1 s from a fresh
process at 4096^3 and 8192^3, `python -m kernelgen compile --hw h200 --gemm 4096x4096x4096 -o DIR` under
2 s end to end).

Every figure is the median of RUNS fresh subprocesses (what `kernelgen compile` pays: imports, the
emitters' counting passes and the line-latency tables are all built then): the plan call's wall and
process time and plan.json's `search.seconds` (imports excluded), and the documented
`python -m kernelgen compile --hw HW --gemm MxNxK -o DIR` command's wall clock (the whole process:
interpreter start, imports, search, emit, the four files) and child process time, with the
`search.seconds` its plan.json reports.
With `--before DIR` (another checkout, e.g. `git archive COMMIT | tar -x -C DIR`) each row is measured
in both trees, alternating run by run so that both see the same load. The machine is shared: the
1-minute load average at the start and the end of every row is printed next to it; process time is
the figure less disturbed by other load (it still grows on a loaded machine: shared caches and cores).

    python3 benchmarks/plan_speed.py [--before DIR] [--runs 5] [--hw h200] [--hw seed] [--compile-only]
    # writes the top of benchmarks/plan_speed.md (its header and the two generated tables; every other section,
    # written by hand, is kept)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHAPES = ("1024x1024x1024", "4096x4096x4096", "8192x8192x8192")
COMPILE_SHAPES = ("4096x4096x4096", "8192x8192x8192")
HWS = ("h200", "npu7nm")
_COLD = ("import sys, time; sys.path.insert(0, sys.argv[1]); from kernelgen.planner import plan; "
         "from kernelgen.cli import load_any_spec; "
         "seed = sys.argv[2] == 'seed'; "
         "spec, hw, _ = load_any_spec('examples/seeds/hardware.yaml' if seed else sys.argv[2], "
         "'examples/seeds/gemm.dgemm' if seed else None, None if seed else sys.argv[3], 'f16', 'f32', None, "
         "sys.argv[3] if seed else None); "
         "kw = {'exhaustive': False} if sys.argv[4] == 'bounded' else {}; "
         "w, t = time.perf_counter(), time.process_time(); p = plan(spec, hw, **kw); "
         "print(time.perf_counter() - w, time.process_time() - t, p.seconds, len(p.survivors), p.best.tiling.key())")
# "seed" as a hw name: the seed's gemm.dgemm on its hardware.yaml (examples/seeds, issue 15), compiled with
# `deepgemm compile --hardware examples/seeds/hardware.yaml --op examples/seeds/gemm.dgemm --shape S --output DIR`
SEED_SHAPES = ("4096x4096x4096",)


def _env(tree: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(tree)}


def cold_plan(tree: Path, hwname: str, shape: str, search: str = "exhaustive") -> tuple[list[float], int, str]:
    """[wall, process, search.seconds] of one plan in a fresh process, the candidates it timed, its choice.
    search: "exhaustive" (plan's default) or "bounded" (exhaustive=False, kernelgen compile's default)."""
    out = subprocess.run([sys.executable, "-c", _COLD, str(tree), hwname, shape, search], capture_output=True,
                         text=True, check=True, env=_env(tree), cwd=tree).stdout.split()
    return [float(out[0]), float(out[1]), float(out[2])], int(out[3]), out[4]


def cold_bounded(tree: Path, hwname: str, shape: str) -> tuple[list[float], int, str]:
    return cold_plan(tree, hwname, shape, "bounded")


def cold_compile(tree: Path, hwname: str, shape: str) -> tuple[list[float], int, str]:
    """[wall, child process time, plan.json search.seconds] of one `python -m kernelgen compile`."""
    with tempfile.TemporaryDirectory() as out:
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        w = time.perf_counter()
        cmd = ([sys.executable, "-m", "validation.deepgemm", "compile", "--hardware", "examples/seeds/hardware.yaml",
                "--op", "examples/seeds/gemm.dgemm", "--shape", shape, "--output", out] if hwname == "seed" else
               [sys.executable, "-m", "kernelgen", "compile", "--gemm", shape, "--hw", hwname, "-o", out])
        subprocess.run(cmd, capture_output=True, text=True, check=True, env=_env(tree), cwd=tree)
        wall = time.perf_counter() - w
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        plan = json.loads((Path(out) / "plan.json").read_text())
    proc = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return [wall, proc, float(plan["search"]["seconds"])], int(plan["search"]["survivors"]), plan["tiling"]["key"]


Run = tuple[list[float], int, str]  # figures, candidates timed, chosen tiling
Fn = Callable[[Path, str, str], Run]


def medians(cols: list[tuple[Fn, Path]], hwname: str, shape: str, runs: int) -> list[Run]:
    """Per (fn, tree): the medians of `runs` calls (alternating run by run), candidates timed, choice."""
    got: list[list[list[float]]] = [[] for _ in cols]
    meta: list[tuple[int, str]] = [(0, "")] * len(cols)
    for _ in range(runs):
        for i, (fn, tree) in enumerate(cols):
            fig, cands, key = fn(tree, hwname, shape)
            got[i].append(fig)
            meta[i] = (cands, key)
    return [([statistics.median(col) for col in zip(*g)], *m) for g, m in zip(got, meta)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", type=Path, help="a checkout of the code before the change, measured alongside")
    ap.add_argument("--runs", type=int, default=5, help="fresh processes per figure (median)")
    ap.add_argument("--hw", action="append", help=f"hardware to measure (default: {', '.join(HWS)}; 'seed': the "
                    "seed's gemm.dgemm on its hardware.yaml, compiled with deepgemm)")
    ap.add_argument("--compile-only", action="store_true", help="only the `kernelgen compile` rows")
    ap.add_argument("--no-write", action="store_true", help="print the rows only, leave plan_speed.md as it is")
    args = ap.parse_args(argv)
    before: list[Path] = [args.before.resolve()] if args.before else []
    plan_cols: list[tuple[str, Fn, Path]] = [("before", cold_plan, t) for t in before] + [
        ("exhaustive", cold_plan, ROOT), ("bounded", cold_bounded, ROOT)]
    compile_cols: list[tuple[str, Fn, Path]] = [("before", cold_compile, t) for t in before] + [
        ("after", cold_compile, ROOT)]
    plans, compiles = [], []
    for hwname in args.hw or HWS:
        for shape in () if args.compile_only else SEED_SHAPES if hwname == "seed" else SHAPES:
            load = os.getloadavg()[0]
            got = medians([(fn, tree) for _, fn, tree in plan_cols], hwname, shape, args.runs)
            loads = f"{load:.1f}-{os.getloadavg()[0]:.1f}"
            for (name, _, _), (fig, cands, key) in zip(plan_cols, got):
                plans.append(f"| {hwname} | {shape} | {name} | {cands:,} | {fig[0]:.2f} | {fig[1]:.2f} | "
                             f"{fig[2]:.2f} | {loads} | {key} |")
                print(plans[-1], flush=True)
        for shape in SEED_SHAPES if hwname == "seed" else COMPILE_SHAPES:
            load = os.getloadavg()[0]
            got = medians([(fn, tree) for _, fn, tree in compile_cols], hwname, shape, args.runs)
            loads = f"{load:.1f}-{os.getloadavg()[0]:.1f}"
            for (name, _, _), (fig, cands, _) in zip(compile_cols, got):
                compiles.append(f"| {hwname} | {shape} | {name} | {cands:,} | {fig[0]:.2f} | {fig[1]:.2f} | "
                                f"{fig[2]:.2f} | {loads} |")
                print(compiles[-1], flush=True)
    lines = ["# Planner speed (benchmarks/plan_speed.py)", "",
             f"{time.strftime('%Y-%m-%d %H:%M')}, {platform.machine()}, {os.cpu_count()} cores (shared), Python "
             f"{platform.python_version()}. f16 GEMMs, whole candidate space. Every figure is the median of "
             f"{args.runs} fresh processes" + (f"; before = {args.before}" if args.before else "") +
             "; exhaustive and bounded = this tree's plan() and plan(exhaustive=False) (kernelgen compile's "
             "default); the columns alternate run by run. Timed: the candidates the search timed (survivors). "
             "Load: 1-minute load average when the row started and when it ended.", "",
             "## Plan (the planner's modules imported before the clock starts)", "",
             "| hw | shape | search | timed | wall s | process s | search.seconds | load | chosen |",
             "|---|---|---|---|---|---|---|---|---|", *plans, "",
             "## `python -m kernelgen compile --hw HW --gemm SHAPE -o DIR` end to end (fresh process)", "",
             "| hw | shape | tree | timed | wall s | process s | search.seconds | load |",
             "|---|---|---|---|---|---|---|---|", *compiles]
    if args.no_write:
        return 0
    md = ROOT / "benchmarks/plan_speed.md"
    md.write_text(_merged(lines, md.read_text() if md.exists() else ""))
    return 0


def _merged(lines: list[str], old: str) -> str:
    """The new header and generated tables, then every section of ``old`` but its header and the tables an
    earlier run generated (the dated sections written by hand are kept, in their order)."""
    generated = {ln for ln in lines if ln.startswith("## ")}
    kept, keep = [], False
    for ln in old.splitlines():
        if ln.startswith("## "):
            keep = ln not in generated
        if keep:
            kept.append(ln)
    return "\n".join(lines) + "\n" + ("\n" + "\n".join(kept) + "\n" if kept else "")


if __name__ == "__main__":
    raise SystemExit(main())
