"""Speed of the timing model as a user meets it (issue 17 item 1): `python -m sim run K.ptx --hw h200` in a
fresh process for the three kernels of benchmarks/sim_kernels.py, start-up, imports, parsing, the
lock-step records and the numpy check included, with the Python core (WORKBENCH_NATIVE=0) and with the
compiled one (sim/timing/native.py; only when built: `python -m sim native build`), and functional only
(`--functional`).

    PYTHONPATH=. python benchmarks/sim_cli_speed.py [--repeat N] [--kernels a,b] [--modes python,native,functional]
                                                   [--against DIR] [--json FILE]

Per kernel and mode, after one uncounted warm-up run (it writes the bytecode cache, in a temporary
PYTHONPYCACHEPREFIX, as an installed package has one), N runs: the median and the best by the child's
process (CPU) time, warp instructions / process time and / wall time, and the 1-minute load average
before and after. --against DIR (another checkout, e.g. `git archive` of main, with its compiled core
built in the same WORKBENCH_NATIVE_DIR) runs the same measurements there too, alternating run by run with
this tree's, so that both see the same load ("before" / "after").
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import resource
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.sim_kernels import KERNELS  # noqa: E402


def command(name: str, d: pathlib.Path) -> list[str]:
    """The `python -m sim run` arguments of one kernel (its PTX, and the buffers it needs, written under d)."""
    import numpy as np

    if name == "sgemm_128":
        from tests.fixtures.cases import by_name

        c = by_name("sgemm_tiled")
        s = {"M": 128, "N": 128, "K": 128}
        args = []
        for i, a in enumerate(c.make_args(np.random.default_rng(0), s)):
            if isinstance(a, np.ndarray):
                np.save(d / f"arg{i}.npy", a)
                args += ["--arg", f"@{d / f'arg{i}.npy'}"]
            else:
                args += ["--arg", str(a[0])]
        grid, block = c.grid(s), c.block(s)
        return [str(c.ptx_path), "--grid", ",".join(map(str, grid)), "--block", ",".join(map(str, block)), *args]
    if name == "mma_f16_256":
        from kernelgen.cli import compile_kernel

        (d / "mma.ptx").write_text(compile_kernel("h200", None, "256x256x256", "f16", "f32", "mma")["kernel.ptx"])
        return [str(d / "mma.ptx")]
    if name == "reduce6":
        from benchmarks.silicon.common import load
        from benchmarks.silicon.suite import SUITE

        k = next(k for k in SUITE if k.name == "reduce6")
        (d / "reduce6.ptx").write_text(load(k).text)
        return [str(d / "reduce6.ptx")]
    raise ValueError(name)


def one(argv: list[str], mode: str, pycache: str, root: pathlib.Path = ROOT) -> dict:
    # bytecode cached as in a user's installation (this machine sets PYTHONDONTWRITEBYTECODE, which would
    # add ~0.3 s of compiling the sources to every run), kept outside the tree
    env = dict(os.environ, PYTHONPATH=str(root), PYTHONPYCACHEPREFIX=pycache)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if mode != "native":
        env["WORKBENCH_NATIVE"] = "0"
    extra = ["--functional"] if mode == "functional" else []
    load0 = os.getloadavg()[0]
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "sim", "run", *argv, "--hw", "h200", "--seed", "0", "--json",
                          "--quiet", "--max-instructions", "10000000", *extra], cwd=root, env=env,
                         capture_output=True, text=True)
    wall = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    res = json.loads(out.stdout)
    n = res["warp_instructions"]
    proc = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return {"warp_instructions": n, "cycles": res.get("cycles"), "process_s": round(proc, 3), "wall_s": round(wall, 3),
            "per_s_process": round(n / proc), "per_s_wall": round(n / wall),
            "load": f"{load0:.2f} / {os.getloadavg()[0]:.2f}"}


def summary(runs: list[dict]) -> dict:
    """The median and the best run by process time, with every run's process time and load."""
    by = sorted(runs, key=lambda r: r["process_s"])
    med = by[len(by) // 2]
    return {**med, "best_per_s_process": by[0]["per_s_process"], "runs": len(runs),
            "process_s_all": [r["process_s"] for r in runs], "loads": [r["load"] for r in runs]}


def _built(root: pathlib.Path = ROOT) -> bool:
    env = dict(os.environ, PYTHONPATH=str(root))
    out = subprocess.run([sys.executable, "-m", "sim", "native", "status"], cwd=root, env=env, capture_output=True,
                         text=True)
    return out.returncode == 0 and ": built" in out.stdout


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--kernels", default=",".join(KERNELS))
    ap.add_argument("--modes", default="python,native")
    ap.add_argument("--against", default=None, help="another checkout measured alternately (\"before\")")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    modes = a.modes.split(",")
    trees = {"after": ROOT} if not a.against else {"before": pathlib.Path(a.against).resolve(), "after": ROOT}
    for root in trees.values():
        if "native" in modes and not _built(root):
            print(f"benchmarks/sim_cli_speed.py: the compiled core of {root} is not built; "
                  f"fix: (cd {root} && python -m sim native build)", file=sys.stderr)
            return 2
    out: dict = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "statistic": "median of --repeat",
                 "trees": {k: str(v) for k, v in trees.items()}, "runs": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for name in a.kernels.split(","):
            argv = command(name, pathlib.Path(tmp))
            for mode in modes:
                got: dict[str, list[dict]] = {k: [] for k in trees}
                for k, root in trees.items():  # warm-up: writes the bytecode cache, not counted
                    one(argv, mode, str(pathlib.Path(tmp) / f"pycache-{k}"), root)
                for _ in range(a.repeat):
                    for k, root in trees.items():
                        got[k].append(one(argv, mode, str(pathlib.Path(tmp) / f"pycache-{k}"), root))
                for k in trees:
                    best = out["runs"][f"{name}.{mode}" + ("" if len(trees) == 1 else f".{k}")] = summary(got[k])
                    print(f"{name} ({mode}{'' if len(trees) == 1 else ', ' + k}): {best['warp_instructions']:,} warp "
                          f"instructions, {best['cycles']} cycles, median process {best['process_s']} s = "
                          f"{best['per_s_process']:,}/s (best {best['best_per_s_process']:,}/s), wall "
                          f"{best['wall_s']} s (load {best['load']}; all {best['process_s_all']})", flush=True)
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
