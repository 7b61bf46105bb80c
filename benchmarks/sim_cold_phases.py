"""Where a cold `python -m sim run K.ptx --hw h200 --json --quiet` spends its process time, phase by phase
(issue 17 item 1: the 100K warp instructions/s goal as a user runs it). For each kernel of
benchmarks/sim_kernels.py, N fresh processes run sim.cli.main exactly as `python -m sim run` does, with
timers wrapped around the functions cmd_run calls (parse, load_hw, launch, the estimate, the lock-step
records, the timing core, the result, the numpy check, the output); the bytecode cache is warm as in a
user's installation (PYTHONPYCACHEPREFIX in a temporary folder; this machine sets PYTHONDONTWRITEBYTECODE).

    PYTHONPATH=. python benchmarks/sim_cold_phases.py [--repeat N] [--kernels a,b] [--against DIR] [--json FILE]

--against DIR (another checkout, e.g. `git archive` of main, with its compiled core built) times the same
phases there too, alternating run by run with this tree's ("before" / "after"). The child does what each
tree's sim/__main__.py does around importing sim.cli (read from its source: the collector's threshold and
freeze, OPENBLAS_THREAD_TIMEOUT while numpy loads), so both trees are timed as `python -m sim` runs them.

Printed: per kernel and phase the median and the least process time over the runs (seconds), and the 1-minute load
before and after. "interpreter" is the process time when the child's first line runs (python's start-up,
site and its .pth files); "imports" is importing sim.cli and the modules a timing run imports later (numpy,
sim.timing and its compiled core, the parser, sim.hw, yaml).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent

PHASES = ("interpreter", "imports", "parse", "load_hw", "launch", "estimate", "records", "timing core",
          "result", "check", "output", "other")


def child(argv: list[str]) -> dict[str, float]:
    """In the fresh process: run `python -m sim run ARGV` through sim.cli.main with the phases timed."""
    clock = time.process_time
    t: dict[str, float] = {p: 0.0 for p in PHASES}
    t["interpreter"] = clock()
    t0 = clock()
    # what the tree's sim/__main__.py does around importing sim.cli, as `python -m sim` would: the collector's
    # threshold and freeze, OpenBLAS's thread timeout (read from its source: trees differ)
    main_src = (pathlib.Path(sys.path[0]) / "sim" / "__main__.py").read_text()
    blas = "OPENBLAS_THREAD_TIMEOUT" in main_src and "OPENBLAS_THREAD_TIMEOUT" not in os.environ
    if blas:
        os.environ["OPENBLAS_THREAD_TIMEOUT"] = "4"
    if "gc.set_threshold(10_000" in main_src:
        gc.set_threshold(10_000, *gc.get_threshold()[1:])
    if "gc.disable()" in main_src:
        gc.disable()
    import sim.cli as cli
    import sim.hw
    import sim.launch
    import sim.ptx.parser
    import sim.reference
    import sim.timing
    import sim.timing.engine as engine

    if blas:
        del os.environ["OPENBLAS_THREAD_TIMEOUT"]
    if "gc.freeze()" in main_src:
        gc.freeze()
    gc.enable()
    t["imports"] = clock() - t0

    def timed(name: str, f):
        def g(*a, **k):
            s = clock()
            try:
                return f(*a, **k)
            finally:
                t[name] += clock() - s
        return g

    sim.ptx.parser.parse_file = timed("parse", sim.ptx.parser.parse_file)
    sim.hw.load_hw = timed("load_hw", sim.hw.load_hw)
    cli.build_launch = timed("launch", cli.build_launch)
    cli.check_memory_of = timed("launch", cli.check_memory_of)
    sim.launch.read_metadata = timed("launch", sim.launch.read_metadata)
    cli.refuse_over_budget = timed("estimate", cli.refuse_over_budget)
    engine.replay_for = timed("records", engine.replay_for)
    engine.run_events = timed("timing core", engine.run_events)
    engine._result = timed("result", engine._result)
    sim.reference.check_from_metadata = timed("check", sim.reference.check_from_metadata)
    cli.render_text = timed("output", cli.render_text)
    setattr(cli, "json", type("J", (), {"dumps": staticmethod(timed("output", json.dumps))}))  # noqa: B010
    out = sys.stdout
    sys.stdout = open(os.devnull, "w")
    t1 = clock()
    try:
        rc = cli.main(["run", *argv])
    finally:
        sys.stdout = out
    total_main = clock() - t1
    t["other"] = total_main - sum(t[p] for p in PHASES if p not in ("interpreter", "imports", "other"))
    t["total"] = clock()
    t["rc"] = rc
    return t


def run_one(argv: list[str], pycache: str, root: pathlib.Path = ROOT) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=str(root), PYTHONPYCACHEPREFIX=pycache)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    # the child is this file's `child`, run against the sources of `root`
    code = (f"import sys, json; sys.path.insert(0, {str(root)!r}); sys.path.insert(1, {str(ROOT / 'benchmarks')!r}); "
            f"from sim_cold_phases import child; print(json.dumps(child({argv!r})))")
    out = subprocess.run([sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    sys.path.insert(0, str(ROOT))
    from benchmarks.sim_cli_speed import command
    from benchmarks.sim_kernels import KERNELS

    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--kernels", default=",".join(KERNELS))
    ap.add_argument("--against", default=None, help="another checkout measured alternately (\"before\")")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    trees = {"after": ROOT} if not a.against else {"before": pathlib.Path(a.against).resolve(), "after": ROOT}
    res: dict = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "statistic": "median and min",
                 "trees": {k: str(v) for k, v in trees.items()}, "kernels": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.kernels.split(","):
            argv = command(name, pathlib.Path(tmp)) + ["--hw", "h200", "--seed", "0", "--json", "--quiet",
                                                        "--max-instructions", "10000000"]
            runs: dict[str, list[dict]] = {k: [] for k in trees}
            load0 = os.getloadavg()[0]
            for k, root in trees.items():  # warm-up: writes the bytecode cache
                run_one(argv, str(pathlib.Path(tmp) / f"pycache-{k}"), root)
            for _ in range(a.repeat):
                for k, root in trees.items():
                    runs[k].append(run_one(argv, str(pathlib.Path(tmp) / f"pycache-{k}"), root))
            load1 = os.getloadavg()[0]
            for k, got in runs.items():
                med = {p: sorted(r[p] for r in got)[len(got) // 2] for p in (*PHASES, "total")}
                low = {p: min(r[p] for r in got) for p in (*PHASES, "total")}
                res["kernels"][name + ("" if len(trees) == 1 else f".{k}")] = {
                    "median_s": {p: round(v, 3) for p, v in med.items()},
                    "min_s": {p: round(v, 3) for p, v in low.items()},
                    "total_s_all": [round(r["total"], 3) for r in got], "load": f"{load0:.2f} / {load1:.2f}"}
                print(f"{name}{'' if len(trees) == 1 else ', ' + k} (load {load0:.2f} / {load1:.2f}; totals "
                      f"{[round(r['total'], 2) for r in got]}):")
                print("  median " + "  ".join(f"{p} {med[p]:.3f}" for p in (*PHASES, "total")), flush=True)
                print("  min    " + "  ".join(f"{p} {low[p]:.3f}" for p in (*PHASES, "total")), flush=True)
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
