"""The TMA fixtures of validation/tma_cases.py (im2col load, CTA-to-CTA bulk copies and bulk reductions) on
the H200 and in the simulator, side by side, as validation/gpu_cluster.py does for the cluster fixtures
(same compile and launch: ptxas -arch=sm_90a, cuLaunchKernelEx; tensor maps encoded by
validation/tensormap.encode_spec, i.e. cuTensorMapEncodeIm2col for the im2col map).

    source .devwheels/install.sh >/dev/null 2>&1; export PYTHONPATH=$PWD
    python3 -m validation.gpu_tma_cases --out $OUT/tma_cases.json

Writes the JSON (per case: GPU / numpy / simulator agreement in differing elements, GPU microseconds,
simulated cycles) and $OUT/tma_cases_gpu.npz (the GPU's output buffers, for offline comparison). For the
im2col case it also says which reading of the im2col traversal the GPU's bytes match (im2col_variants)."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

from validation import tma_cases
from validation.gpu_cluster import compile_cubin, run_case, run_gpu, sass_entry, start_result


def im2col_variants(case: tma_cases.TmaCase, gpu_out: np.ndarray) -> dict[str, int]:
    """Differing elements between the GPU's columns and three readings of the traversal: the one the
    simulator implements ("absolute": the instruction's coordinates are the start pixel), "lower_relative"
    (start = coordinates + lower corner) and "upper_inclusive" (bounding box to dims + upper)."""
    launch = case.launch()
    t = launch.args[4].array.reshape(tma_cases.IM_N, tma_cases.IM_H, tma_cases.IM_W, tma_cases.IM_C)  # type: ignore[union-attr]
    out: dict[str, int] = {}
    for name, shift, extra in (("absolute", 0, 0), ("lower_relative", 1, 0), ("upper_inclusive", 0, 1)):
        cols = []
        for by in range(case.grid[1]):
            c, w, h, n = tma_cases.IM_STARTS[by]
            if shift:
                w, h = w + tma_cases.IM_LOWER[0], h + tma_cases.IM_LOWER[1]
            for bx in range(case.grid[0]):
                cols.append(tma_cases.im2col_reference(t, (c, w, h, n), (bx % 3, bx // 3), extra))
        want = np.stack(cols).ravel()
        out[name] = int(np.sum(want.view(np.uint32) != gpu_out.view(np.uint32)))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--no-gpu", action="store_true", help="simulator and numpy only")
    args = ap.parse_args(argv)
    result, gpu = start_result(args.no_gpu)
    arrays: dict[str, np.ndarray] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for case in tma_cases.CASES:
            entry = run_case(case, Path(tmp), gpu)
            entry.update(sass_entry(case))
            if gpu and "gpu_error" not in entry:
                try:
                    cubin, _ = compile_cubin(case.ptx, Path(tmp))
                    outs, _ = run_gpu(case, cubin, repeats=1)
                    for i, a in outs.items():
                        arrays[f"{case.name}_{i}"] = a
                    if case.kernel == "tma_im2col":
                        entry["im2col_variants"] = im2col_variants(case, outs[0])
                except Exception as e:  # noqa: BLE001 - recorded per case
                    entry["gpu_outputs_error"] = f"{type(e).__name__}: {e}"
            result["cases"].append(entry)
            print(json.dumps({k: v for k, v in entry.items() if k not in ("gpu_us_all", "sim_cycles_per_cta",
                                                                         "gpu_traceback")}), flush=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1, default=list) + "\n")
    if arrays:
        np.savez_compressed(out.with_name(out.stem + "_gpu.npz"), **arrays)  # type: ignore[arg-type]
    ok = all(c["passed"] for c in result["cases"]) and "device_error" not in result
    print(f"{sum(c['passed'] for c in result['cases'])}/{len(result['cases'])} cases passed; wrote {out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
