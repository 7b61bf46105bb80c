"""Whole-SimResult sha256 of PTX-mode timing runs of the three speed kernels (benchmarks/sim_kernels.py):
to_json + output bytes + trace, as benchmarks/sass_speed_hashes.py does for SASS mode. Run it before and
after a speed change and compare the lines: they must be identical.

    PYTHONPATH=. python benchmarks/sim_result_hashes.py [--json FILE]

Rows: sgemm_128, mma_f16_256, reduce6 (untraced) and reduce6_traced, sgemm_128_traced (the Chrome trace
hashed too); each line also says whether the compiled core ran (sim/timing/native.py).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from benchmarks.sass_speed_hashes import digest  # noqa: E402


def main() -> int:
    from benchmarks.sim_kernels import build
    from sim.timing import simulate
    from sim.timing.native import active

    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    a = ap.parse_args()
    rows = {}
    for name, trace in (("sgemm_128", False), ("mma_f16_256", False), ("reduce6", False), ("reduce6", True),
                        ("sgemm_128", True)):
        prog, launch, hw = build(name)
        p = time.process_time()
        r = simulate(prog, launch, hw, trace=trace)
        cpu = time.process_time() - p
        key = name + ("_traced" if trace else "")
        rows[key] = digest(r)[:12]
        print(f"{key:18s} {rows[key]}  cycles {r.cycles}  warp inst {r.warp_instructions}  cpu {cpu:.2f} s  "
              f"core {'compiled' if active() else 'python'}", flush=True)
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
