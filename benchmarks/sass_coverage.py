"""SASS functional coverage: which silicon-suite kernels run in SASS mode, and what stops the others.

    python3 benchmarks/sass_coverage.py [--compare] [--only NAME ...]   # writes docs/sass-coverage.md

For every row of benchmarks/silicon/suite.py (its kernels/<name>.ptx, launched from the header; rows
with ``sample`` run only that many CTAs) run sim.sass.exec.run_sass_functional and record: ran, or the
one-line error (the first unsupported opcode it reached). ``--compare`` also runs the PTX functional
model on the same inputs and says whether the outputs are equal. ``static gaps`` lists opcodes in the
kernel's SASS that the functional model's table lacks (not reached by this launch, or the error's).
Needs ptxas + nvdisasm (pip install -e ".[sass]").
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
OUT = ROOT / "docs" / "sass-coverage.md"
CLOCK_OUTPUTS = {"clock64_bracket": {0}}  # clock readings: instruction counts in both models, not comparable


def _gaps(ptx: str, kernel: str) -> list[str]:
    from sim.sass import disassemble
    from sim.sass.exec import CONTROL, OPS

    k = disassemble(ptx)[kernel]
    return sorted({i.opcode for i in k.instructions if i.opcode not in OPS and i.opcode not in CONTROL})


def _equal(a: dict[int, np.ndarray], b: dict[int, np.ndarray], clocks: set[int]) -> str:
    diff = [i for i in a if i not in clocks and not np.array_equal(a[i].view(np.uint8), b[i].view(np.uint8))]
    if not diff:
        return "equal" + (" (clock output skipped)" if clocks else "")
    rel = []
    for i in diff:
        x, y = a[i].astype(np.float64), b[i].astype(np.float64)
        ok = ~np.isnan(x) & ~np.isnan(y)
        rel.append(f"arg{i} {np.linalg.norm(x[ok] - y[ok]) / max(np.linalg.norm(x[ok]), 1e-30):.1e}")
    return "differ: " + ", ".join(rel)


def run_one(k, compare: bool) -> dict[str, str]:
    from sim.functional.runner import run_functional
    from sim.launch import launch_from_metadata, read_metadata
    from sim.ptx.parser import parse_ptx
    from sim.sass.exec import run_sass_functional

    ptx = k.ptx.read_text()
    launch = launch_from_metadata(read_metadata(ptx, str(k.ptx)) or {}, np.random.default_rng(0))
    if k.sample:
        launch.grid = (min(launch.grid[0], k.sample), launch.grid[1], launch.grid[2])
    row = {"name": k.name, "group": k.group, "gaps": ", ".join(_gaps(ptx, launch.kernel)) or "-"}
    t = time.perf_counter()
    try:
        got = run_sass_functional(ptx, launch.copy(), file=str(k.ptx.relative_to(ROOT)))
    except Exception as e:  # noqa: BLE001 - the error is the finding
        row.update(status="error", detail=str(e).replace("|", "\\|"), instrs="-", secs="-", equal="-")
        return row
    row.update(status="runs", detail="", instrs=f"{got.warp_instructions:,}",
               secs=f"{time.perf_counter() - t:.1f}", equal="-")
    if compare:
        want = run_functional(parse_ptx(ptx, str(k.ptx)), launch.copy())
        row["equal"] = _equal(want.outputs, got.outputs, CLOCK_OUTPUTS.get(k.name, set()))
    return row


def main() -> None:
    from benchmarks.silicon.suite import SUITE
    from sim.sass import tools_available
    from sim.sass.tools import find_tool, tool_version

    ap = argparse.ArgumentParser()
    ap.add_argument("--compare", action="store_true", help="also run the PTX model and compare outputs")
    ap.add_argument("--only", nargs="*")
    a = ap.parse_args()
    if not tools_available():
        raise SystemExit('ptxas/nvdisasm not found: pip install -e ".[sass]"')
    rows = []
    for k in SUITE:
        if a.only and k.name not in a.only:
            continue
        rows.append(run_one(k, a.compare))
        r = rows[-1]
        print(f"{r['name']:28} {r['status']:6} {r['equal']:10} {r['detail'][:100]}", flush=True)
    runs = sum(r["status"] == "runs" for r in rows)
    ptxas = find_tool("ptxas")
    lines = [
        "# SASS functional coverage (benchmarks/sass_coverage.py)", "",
        f"{time.strftime('%Y-%m-%d')}, {platform.machine()}; ptxas `{tool_version(ptxas) if ptxas else '?'}` "
        "at `-arch=sm_90a`. Every kernel of the silicon suite (benchmarks/silicon/suite.py) run by "
        "`sim.sass.exec.run_sass_functional` from its header launch (rows with `sample` on that many CTAs), "
        f"inputs from seed 0{'; `equal`: outputs bit-identical to the PTX functional model' if a.compare else ''}. "
        "`static gaps`: opcodes in the kernel's SASS that the functional model's table lacks (unreached here).", "",
        f"**{runs} of {len(rows)} suite kernels run in SASS mode.**", "",
        "| kernel | group | SASS mode | warp instrs | seconds | vs PTX model | static gaps | first unsupported |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['name']} | {r['group']} | {r['status']} | {r['instrs']} | {r['secs']} | {r['equal']} | "
                     f"{r['gaps']} | {r['detail']} |")
    if not a.only:
        OUT.write_text("\n".join(lines) + "\n")
        print(f"wrote {OUT.relative_to(ROOT)}: {runs} of {len(rows)} run")


if __name__ == "__main__":
    main()
