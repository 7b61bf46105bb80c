"""Measure ptxas register counts per shape family and write registers_calibration.json.

    python -m kernelgen.models.calibrate_registers      (needs ptxas on the PATH; ~minutes)

For each calibration key (variant, thread/warp tile, TILE_K, copy width, epilogue flavour) it
emits one kernel per block size (key :T<threads>), runs ``ptxas -arch=sm_90a -v`` and stores the
median of measured / analytic (models.registers.live_ranges).
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import re
import statistics
import subprocess
import tempfile
from pathlib import Path

from kernelgen.models.registers import CALIBRATION, calibration_key, live_ranges
from kernelgen.spec import parse_spec
from kernelgen.variants import get, names
from sim import atomic


def ptxas_registers(ptx: str) -> tuple[int, bool]:
    with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
        f.write(ptx)
    try:
        out = subprocess.run(["ptxas", "-arch=sm_90a", "-v", f.name, "-o", "/dev/null"],
                             capture_output=True, text=True, check=True).stderr
    finally:
        Path(f.name).unlink()
    m = re.search(r"Used (\d+) registers", out)
    if m is None:
        raise RuntimeError(f"ptxas -v printed no register count:\n{out}")
    regs = int(m.group(1))
    return regs, "0 bytes spill stores" not in out


def specs():
    base = {"M": 256, "N": 256, "K": 256}
    yield parse_spec({**base, "dtype": "f16"})
    epi = {"beta": 0.5, "epilogue": ["bias", "gelu"], "layout": {"a": "col", "b": "row", "c": "col"}}
    yield parse_spec({**base, "dtype": "f16", **epi})
    odd = {"M": 33, "N": 17, "K": 33}  # 1-element copies
    yield parse_spec({**odd, "dtype": "bf16"})
    yield parse_spec({**odd, "dtype": {"a": "bf16", "out": "f16"}, **epi})

def main(argv: list[str] | None = None) -> None:
    """``--only NAME`` recalibrates one variant and merges into the existing table."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    only = args[args.index("--only") + 1] if "--only" in args else None
    jobs: dict[str, list] = {}
    for spec in specs():
        for variant in names():
            if only and variant != only:
                continue
            for t in get(variant).tilings(spec):
                k = f"{calibration_key(spec, t)}:T{t.threads}"
                if get(variant).calibrate_by_grid:
                    k += f":g{t.grid_n}"
                lst = jobs.setdefault(k, [])
                if not lst:
                    lst.append((spec, t))

    def run(item):
        spec, t = item
        regs, spill = ptxas_registers(get(t.variant).emit(spec, t, {}))
        return (calibration_key(spec, t), t.threads, t.variant, t.grid_n, regs / sum(live_ranges(spec, t)),
                spill)

    todo = [it for lst in jobs.values() for it in lst]
    ratios: dict[str, list[float]] = {}
    with cf.ThreadPoolExecutor(8) as ex:
        for k, threads, variant, grid_n, r, spill in ex.map(run, todo):
            if not spill:
                ratios.setdefault(k, []).append(r)
                ratios.setdefault(f"{k}:T{threads}", []).append(r)
                if get(variant).calibrate_by_grid:
                    ratios[f"{k}:T{threads}:g{grid_n}"] = [r]
    table = {}
    if only:
        try:
            table = {k: v for k, v in json.loads(CALIBRATION.read_text()).items()
                     if not k.startswith(only + ":")}
        except (OSError, ValueError):
            pass
    table.update({k: round(statistics.median(v), 4) for k, v in ratios.items()})
    table = dict(sorted(table.items()))
    atomic.write_text(CALIBRATION, json.dumps(table, indent=0, sort_keys=True) + "\n")
    print(f"{len(todo)} kernels, {len(table)} keys -> {CALIBRATION}")


if __name__ == "__main__":
    main()
