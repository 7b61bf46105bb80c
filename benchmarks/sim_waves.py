"""A whole-grid timed GEMM simulation wave by wave in several processes (issue 17: the full 4096^3 h200
GEMM on this 2-core machine): `python -m sim run K.ptx --by-waves --jobs J`, measured from outside.

    PYTHONPATH=. python benchmarks/sim_waves.py --gemm 4096 [--hw h200] [--jobs 2]
        [--stop-per-wave N] [--sample-ctas N] [--wave W] [--core python|compiled] [--json FILE]

Compiles `kernelgen compile --gemm NxNxN --hw HW --variant mma --dtype f16`, runs the simulator in a child
process and records: wall time, process time (the children's user + system, all processes), the peak of
the proportional set size (PSS, /proc/PID/smaps_rollup: pages shared after fork counted once) summed over
the process tree, sampled every second, the 1-minute load average at start and end, and the run's JSON
(cycles, waves, check). With --stop-per-wave N the child calls sim.timing.sampling.simulate_by_waves
itself (the command line would refuse the budget up front) and each wave stops after about N warp
instructions (the simulator's budget error; the run stops when the first wave passes it): a fraction
of the run, for a projection; the JSON then holds the warp instructions the waves timed (`projection`).
--sample-ctas N runs the sampled estimate instead. --wave W times wave W alone, in one process (the L2
handed over from the waves before it by footprints, as in the full run): its process time, with the
set-up's apart, projects the full run (`projection`: the waves' times over --jobs processes, plus the
set-up). The JSON's `core` says which timing core the wave processes ran: "compiled" where
`python -m sim native build` has built sim/timing/native.py's core for these sources, else "python";
--core python forces the Python core (WORKBENCH_NATIVE=0), --core compiled refuses to run without a build.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import platform
import resource
import subprocess
import sys
import tempfile
import time
from typing import Any, cast

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _tree(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            kids = pathlib.Path(f"/proc/{p}/task/{p}/children").read_text().split()
        except OSError:
            continue
        todo += [int(k) for k in kids]
    return out


def _pss_kb(pid: int) -> int:
    try:
        for line in pathlib.Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


class _Seen:
    """The progress of the wave processes as the parent reads it: warp instructions timed in all waves."""

    count = 0

    def update(self, ctas: int, count: int, cycles: int | None) -> None:
        self.count = count


def child(ptx: str, hw_name: str, jobs: int, stop: int) -> int:
    """simulate_by_waves with each wave's budget `stop` (exit 2 with the budget error on stderr), and the
    numpy check of the outputs (as `sim run` makes it); SIGTERM (--wall-limit) stops the waves and
    prints what they timed (exit 3)."""
    import signal

    import numpy as np

    sys.path.insert(0, str(ROOT))
    from sim.cli import build_launch, build_parser
    from sim.errors import ExecutionError
    from sim.hw import load_hw
    from sim.launch import read_metadata
    from sim.ptx.parser import parse_file
    from sim.reference import check_from_metadata
    from sim.timing.sampling import simulate_by_waves

    prog = parse_file(ptx)
    meta = read_metadata(prog.text, ptx)
    launch = build_launch(prog, build_parser().parse_args(["run", ptx, "--hw", hw_name]), meta,
                          np.random.default_rng(1))
    before = launch.copy()
    seen = _Seen()

    def stopped(signum: int, frame: Any) -> None:
        raise _Stopped

    signal.signal(signal.SIGTERM, stopped)
    try:
        r = simulate_by_waves(prog, launch, load_hw(hw_name), stop, progress=cast(Any, seen), jobs=jobs)
    except ExecutionError as e:  # a wave's budget: the others stop with it; what every wave had timed
        print(json.dumps({"warp_instructions_timed": seen.count}))
        print(e, file=sys.stderr)
        return 2
    except _Stopped:  # the waves' processes end as their pool closes
        print(json.dumps({"warp_instructions_timed": seen.count}))
        print("stopped at the wall-clock limit", file=sys.stderr)
        return 3
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    chk = check_from_metadata(meta, before, r.outputs, False)
    print(json.dumps({"cycles": r.cycles, "warp_instructions": r.warp_instructions, **r.to_json(), "check": chk,
                      "prediction": (meta or {}).get("prediction")}, default=str))
    return 0


def one_wave(ptx: str, hw_name: str, w: int, stop: int) -> int:
    """Wave w alone in this process (simulate_waves(only={w}), replaying, as a wave process of the full
    run does), stopped after about `stop` warp instructions (the budget error); prints its warp
    instructions, cycles, the set-up's and the wave's process time, the core."""
    import numpy as np

    sys.path.insert(0, str(ROOT))
    from sim.cli import build_launch, build_parser
    from sim.errors import ExecutionError
    from sim.hw import load_hw
    from sim.launch import read_metadata
    from sim.ptx.parser import parse_file
    from sim.timing.footprint import Footprints
    from sim.timing.sampling import _prepared, core_name, simulate_waves

    p0 = time.process_time()
    prog = parse_file(ptx)
    hw = load_hw(hw_name)
    launch = build_launch(prog, build_parser().parse_args(["run", ptx, "--hw", hw_name]),
                          read_metadata(prog.text, ptx), np.random.default_rng(1))
    with np.errstate(all="ignore"):
        P, regs, lay = _prepared(prog, launch, hw, None, "--wave does not run cluster launches")
        fp = Footprints(prog, launch, hw.l2.sector, stop)
        seen = _Seen()
        p1 = time.process_time()
        try:
            r = simulate_waves(prog, launch, hw, P, lay, lay.groups, fp, regs, stop, seen, replay=True, only={w})
            count, cycles, whole = r.count, r.cycles[w], True
        except ExecutionError:  # the budget: what the wave timed until then
            count, cycles, whole = seen.count, None, False
    p2 = time.process_time()
    with np.errstate(all="ignore"):
        per_cta = launch_instructions_per_cta(prog, launch)
    ctas = [sum(len(g) for g in lay.groups if lay.wave_of(g) == v) for v in range(lay.waves)]
    print(json.dumps({"wave": w, "waves": lay.waves, "ctas": ctas[w], "whole_wave": whole,
                      "warp_instructions": count, "cycles": cycles, "setup_s": round(p1 - p0, 1),
                      "wave_s": round(p2 - p1, 1), "per_s": round(count / max(p2 - p1, 1e-9)), "core": core_name(),
                      "wave_ctas": ctas,
                      "wave_instructions": [n * per_cta for n in ctas]}))
    return 0


def launch_instructions_per_cta(prog: Any, launch: Any) -> int:
    """Warp instructions of the middle CTA run functionally on a fresh launch (as sim.estimate counts a
    launch; a GEMM's CTAs all run the same)."""
    from sim.functional.runner import make_cluster, prepare, run_cta_functional

    Q = prepare(prog, launch)
    mid = Q.ctas[len(Q.ctas) // 2]
    return run_cta_functional(Q, make_cluster(Q, [mid])[0], [10**9, 10**9])


class _Stopped(Exception):
    """SIGTERM in the child (--wall-limit)."""


def main(argv: list[str] | None = None) -> int:
    if (argv or sys.argv[1:])[:1] == ["--child"]:
        c = (argv or sys.argv[1:])[1:]
        return child(c[0], c[1], int(c[2]), int(c[3]))
    if (argv or sys.argv[1:])[:1] == ["--one-wave"]:
        c = (argv or sys.argv[1:])[1:]
        return one_wave(c[0], c[1], int(c[2]), int(c[3]))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gemm", type=int, default=4096)
    ap.add_argument("--hw", default="h200")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--stop-per-wave", type=int, default=None)
    ap.add_argument("--sample-ctas", type=int, default=None)
    ap.add_argument("--wall-limit", type=float, default=None,
                    help="seconds of wall time after which the run is stopped (SIGTERM) and what the waves "
                         "timed is recorded as a projection")
    ap.add_argument("--wave", type=int, default=None, help="time this wave alone, in one process (a projection)")
    ap.add_argument("--core", choices=("python", "compiled"), default=None,
                    help="the timing core (default: the compiled one where built, else Python)")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    env = {**os.environ, "PYTHONPATH": f"{ROOT}:{os.environ.get('PYTHONPATH', '')}"}
    if a.core == "python":
        env["WORKBENCH_NATIVE"] = "0"
    elif a.core == "compiled":
        sys.path.insert(0, str(ROOT))
        from sim.timing import native

        if not (native.cache_dir() / native.MANIFEST).exists() or not native.enabled():
            print("benchmarks/sim_waves.py: --core compiled: no build of the compiled core for these sources; "
                  "fix: python -m sim native build", file=sys.stderr)
            return 2
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="sim_waves_"))
    n = a.gemm
    subprocess.run([sys.executable, "-m", "kernelgen", "compile", "--hw", a.hw, "--gemm", f"{n}x{n}x{n}",
                    "--dtype", "f16", "--variant", "mma", "-o", str(tmp / "k")], check=True, env=env,
                   capture_output=True)
    mode = ["--sample-ctas", str(a.sample_ctas)] if a.sample_ctas else ["--by-waves"]
    cmd = [sys.executable, "-m", "sim", "run", str(tmp / "k" / "kernel.ptx"), "--hw", a.hw, "--seed", "1", "--json",
           "--quiet", "--max-instructions", str(10**9), "--jobs", str(a.jobs), *mode]
    if a.stop_per_wave or a.wall_limit:
        cmd = [sys.executable, __file__, "--child", str(tmp / "k" / "kernel.ptx"), a.hw, str(a.jobs),
               str(a.stop_per_wave or 10**9)]
    if a.wave is not None:
        cmd = [sys.executable, __file__, "--one-wave", str(tmp / "k" / "kernel.ptx"), a.hw, str(a.wave),
               str(a.stop_per_wave or 10**9)]
    load0 = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    peak = 0
    stopped = False
    while proc.poll() is None:
        peak = max(peak, sum(_pss_kb(p) for p in _tree(proc.pid)))
        if a.wall_limit and not stopped and time.perf_counter() - t > a.wall_limit:
            proc.terminate()
            stopped = True
        try:
            proc.wait(1.0)
        except subprocess.TimeoutExpired:
            pass
    out, err = proc.communicate()
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    res: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "command": " ".join(["python", *[pathlib.Path(c).name if c.startswith("/") else c for c in cmd[1:]]]),
        "kernel": f"kernelgen compile --gemm {n}x{n}x{n} --hw {a.hw} --variant mma --dtype f16",
        "exit": proc.returncode, "wall_s": round(wall, 1), "process_s": round(cpu, 1),
        "peak_pss_mb": round(peak / 1024, 1), "load_1min": [load0, os.getloadavg()[0]],
        "stderr_tail": err.strip().splitlines()[-3:]}
    if proc.returncode == 0 and a.wave is not None:
        r = json.loads(out)
        res.update(r)
        # the full run: set-up once in the parent (prepare, footprints), then the waves dealt to --jobs
        # processes, each at the rate this one measured (per warp instruction; the last wave may be partial)
        per_ins = r["wave_s"] / max(1, r["warp_instructions"])
        lanes = [0.0] * max(1, a.jobs)
        for n_ins in r["wave_instructions"]:
            lanes[lanes.index(min(lanes))] += n_ins * per_ins
        part = "whole" if r["whole_wave"] else f"its first {r['warp_instructions']:,}"
        res["projection"] = {"wave_s": round(per_ins * r["wave_instructions"][a.wave]),
                             "full_wall_s_idle": round(r["setup_s"] + max(lanes)),
                             "full_process_s": round(r["setup_s"] + per_ins * sum(r["wave_instructions"])),
                             "note": f"set-up + the {r['waves']} waves over {a.jobs} processes, each at "
                                     f"{r['per_s']:,} warp instructions/s of process time as wave {a.wave} "
                                     f"measured ({part}); "
                                     "wall assumes each process has a core"}
    elif proc.returncode == 0:
        r = json.loads(out)
        res.update(cycles=r["cycles"], warp_instructions=r["warp_instructions"], sampled=r.get("sampled"),
                   check=r.get("check"), predicted_cycles=(r.get("prediction") or {}).get("cycles"),
                   core=(r.get("sampled") or {}).get("core"),
                   per_s_process=round(r["warp_instructions"] / max(cpu, 1e-9)))
    elif proc.returncode == 3 and stopped:  # --wall-limit: what the waves had timed when stopped
        timed = json.loads(out)["warp_instructions_timed"]
        res["projection"] = {"warp_instructions_timed": timed, "per_s_process": round(timed / max(cpu, 1e-9)),
                             "note": f"stopped at the wall-clock limit ({a.wall_limit:.0f} s); process time "
                                     "includes the set-up (prepare, footprints, L2 hand-over)"}
    elif a.stop_per_wave and "more than" in err:
        # what the waves running in parallel had timed when the first passed its budget (the run stops
        # there; before 2026-12-01 18:20 UTC the queued waves ran to their budgets too, uncounted)
        timed = json.loads(out)["warp_instructions_timed"]
        res["projection"] = {"warp_instructions_timed": timed, "per_s_process": round(timed / max(cpu, 1e-9)),
                             "note": "the first waves, stopped when one passed its budget; process time "
                                     "includes the set-up (prepare, footprints, L2 hand-over)"}
    text = json.dumps(res, indent=1)
    print(text)
    if a.json:
        pathlib.Path(a.json).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
