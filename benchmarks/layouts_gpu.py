"""Issue 15: every storage layout case (validation.cases.LAYOUT_CASES) on the real GPU, numpy-checked.

    source .devwheels/install.sh && PYTHONPATH=$PWD python3 benchmarks/layouts_gpu.py $OUT/layouts.json

Each case is planned for h200 twice (the smallest CTA, validation.layout_check.small_tiling, and the
planner's pick), each non-power-of-two tile case (validation.cases.NPOT_CASES) once (the planner's
pick), run once through validation.gpu with inputs built from dense matrices and stored in
the case's layouts (padding NaN, so a read of it shows), and D, read back through layout.c, compared
with numpy; the header's own check (sim/reference.py) runs on the same buffers. One line per kernel,
a JSON file with every result; exit 1 when one fails. About a minute.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main(out: str) -> int:
    from sim.hw import load_hw
    from validation.cases import LAYOUT_CASES, NPOT_CASES
    from validation.gpu import run_on_gpu
    from validation.layout_check import emit_case, layout_spec, run_case

    def gpu(text, launch):
        return run_on_gpu(text, launch, warmup=0, repeats=1).outputs

    hw = load_hw("h200")
    rows, failed = [], 0
    todo = [(c, ("small", "planner"), ()) for c in LAYOUT_CASES] + [(c[:4], ("planner",), c[4]) for c in NPOT_CASES]
    for (variant, dtype, shape, layouts), picks, tiling in todo:
        spec = layout_spec(variant, dtype, shape, layouts, tiling)
        for pick in picks:
            t0 = time.perf_counter()
            text, t = emit_case(spec, hw, variant, pick)
            try:
                r = run_case(spec, text, gpu)
                err = None
            except Exception as e:  # noqa: BLE001 - one kernel's failure is reported, the others still run
                r, err = {"passed": False}, f"{type(e).__name__}: {e}"
            failed += not r["passed"]
            row = {"variant": variant, "dtype": dtype, "shape": list(shape), "layouts": list(layouts), "pick": pick,
                   "spec_tiling": list(tiling),
                   "tiling": t.key(), **r, "error": err, "seconds": round(time.perf_counter() - t0, 2)}
            rows.append(row)
            print(f"{variant:4s} {dtype:4s} {'x'.join(map(str, shape)):10s} {'/'.join(layouts):40s} {pick:7s} "
                  f"{t.key():40s} {'PASS' if r['passed'] else 'FAIL'} "
                  + (f"dense err {r['dense_err']:.2e}" if err is None else err), flush=True)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps({"results": rows, "failed": failed}, indent=1) + "\n")
    print(f"{len(rows) - failed} of {len(rows)} layout kernels passed the dense numpy check on the GPU")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "layouts_gpu.json"))
