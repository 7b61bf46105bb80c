"""Speed of the timing model as a user meets it (issue 17 item 1): `python -m sim run K.ptx --hw h200` in a
fresh process for the three kernels of benchmarks/sim_kernels.py, start-up, imports, parsing, the
lock-step records and the numpy check included, with the Python core (WORKBENCH_NATIVE=0) and with the
compiled one (sim/timing/native.py; only when built: `python -m sim native build`).

    PYTHONPATH=. python benchmarks/sim_cli_speed.py [--repeat N] [--kernels a,b] [--modes python,native]
                                                   [--json FILE]

Per kernel and mode, after one uncounted warm-up run (it writes the bytecode cache, in a temporary
PYTHONPYCACHEPREFIX, as an installed package has one), the best of N runs by the child's process (CPU)
time: warp instructions / process time and / wall time, and the 1-minute load average before and after.
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


def one(argv: list[str], native: bool, pycache: str) -> dict:
    # bytecode cached as in a user's installation (this machine sets PYTHONDONTWRITEBYTECODE, which would
    # add ~0.3 s of compiling the sources to every run), kept outside the tree
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONPYCACHEPREFIX=pycache)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if not native:
        env["WORKBENCH_NATIVE"] = "0"
    load0 = os.getloadavg()[0]
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "sim", "run", *argv, "--hw", "h200", "--seed", "0", "--json",
                          "--quiet", "--max-instructions", "10000000"], cwd=ROOT, env=env, capture_output=True,
                         text=True)
    wall = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    res = json.loads(out.stdout)
    n = res["warp_instructions"]
    proc = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return {"warp_instructions": n, "cycles": res["cycles"], "process_s": round(proc, 3), "wall_s": round(wall, 3),
            "per_s_process": round(n / proc), "per_s_wall": round(n / wall),
            "load": f"{load0:.2f} / {os.getloadavg()[0]:.2f}"}


def _built() -> bool:
    from sim.timing import native as nat

    return (nat.cache_dir() / nat.MANIFEST).exists()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--kernels", default=",".join(KERNELS))
    ap.add_argument("--modes", default="python,native")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    modes = a.modes.split(",")
    if "native" in modes and not _built():
        print("benchmarks/sim_cli_speed.py: the compiled core is not built; fix: python -m sim native build",
              file=sys.stderr)
        return 2
    out: dict = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "runs": {}}
    with tempfile.TemporaryDirectory() as tmp:
        pycache = str(pathlib.Path(tmp) / "pycache")
        for name in a.kernels.split(","):
            argv = command(name, pathlib.Path(tmp))
            for mode in modes:
                one(argv, mode == "native", pycache)  # warm-up: writes the bytecode cache, not counted
                best: dict = {}
                for _ in range(a.repeat):
                    got = one(argv, mode == "native", pycache)
                    if not best or got["process_s"] < best["process_s"]:
                        best = got
                out["runs"][f"{name}.{mode}"] = best
                print(f"{name} ({mode} core): {best['warp_instructions']:,} warp instructions, {best['cycles']:,} "
                      f"cycles, process {best['process_s']} s = {best['per_s_process']:,}/s, wall {best['wall_s']} s "
                      f"= {best['per_s_wall']:,}/s (load {best['load']})", flush=True)
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
