"""Whole-SimResult sha256 of SASS-mode runs (to_json + output bytes + trace), to check that a speed change of SASS
mode leaves every result bit-identical: run it before and after, compare the printed lines.

    PYTHONPATH=. python benchmarks/sass_speed_hashes.py [--only NAME ...] [--json FILE]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import pathlib
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

FIXTURES = ("divergent_loop", "block_reduce", "sgemm_tiled")
SUITE = ("transposeCoalesced", "shfl_scan_test", "histogram256", "softmax_forward", "reduce6", "bar_4w",
         "diverge_halves", "matrixMul_16", "mma_f16_m16n8k16", "cp_async_v4")


def cases() -> dict:
    """name -> a function giving (ptx text, launch, file, simulate_sass keywords)."""
    from benchmarks.sass_speed import _source
    from benchmarks.sim_kernels import build

    out: dict = {}
    for name in ("sgemm_128", "mma_f16_256"):
        out[name] = (lambda n=name: (_source(n), build(n)[1], build(n)[0].file, {}))
    out["sgemm_128_traced"] = lambda: (_source("sgemm_128"), build("sgemm_128")[1], build("sgemm_128")[0].file,
                                       {"trace": True})

    def fixture(name: str):
        from tests.fixtures.cases import by_name
        from validation.calibrate import to_launch

        c = by_name(name)
        s = c.sizes
        launch = to_launch(c, c.make_args(np.random.default_rng(0), s))
        launch.grid, launch.block = c.grid(s), c.block(s)
        return c.ptx_path.read_text(), launch, str(c.ptx_path), {}
    for name in FIXTURES:
        out[name] = (lambda n=name: fixture(n))

    def wgmma_tma():
        from kernelgen.spec import parse_spec
        from kernelgen.tiling import Tiling
        from kernelgen.variants import get
        from sim.launch import launch_from_metadata, read_metadata

        spec = parse_spec({"M": 128, "N": 128, "K": 128, "dtype": "bf16", "layout": {"a": "row", "b": "col"}})
        text = get("wgmma_tma").emit(spec, Tiling("wgmma_tma", 128, 128, 64, 64, 128, 3, 0, 0, 8, 8, 0), {})
        return text, launch_from_metadata(read_metadata(text), np.random.default_rng(1)), "wgmma_tma.ptx", {}
    out["wgmma_tma"] = wgmma_tma

    def suite(name: str):
        from benchmarks.silicon.common import load, make_launch
        from benchmarks.silicon.suite import SUITE as ALL

        k = next(k for k in ALL if k.name == name)
        ld = load(k)
        return ld.text, make_launch(ld), str(k.ptx), {}
    for name in SUITE:
        out[name] = (lambda n=name: suite(n))

    def raw(name: str):  # the suite kernel as compiled, without the clock64 profiling (so it may run lock-step)
        from benchmarks.silicon.suite import SUITE as ALL
        from sim.launch import launch_from_metadata, read_metadata

        k = next(k for k in ALL if k.name == name)
        text = k.ptx.read_text()
        meta = read_metadata(text, str(k.ptx))
        assert meta is not None
        return text, launch_from_metadata(meta, np.random.default_rng(0)), str(k.ptx), {}
    for name in SUITE:
        out[name + "_raw"] = (lambda n=name: raw(n))
    return out


def digest(r) -> str:
    from sim.result import jsonable

    h = hashlib.sha256(json.dumps(r.to_json(), default=jsonable, sort_keys=True).encode())
    for i in sorted(r.outputs):
        h.update(str(i).encode())
        h.update(np.ascontiguousarray(r.outputs[i]).tobytes())
    h.update(json.dumps(r.trace, default=jsonable, sort_keys=True).encode())
    return h.hexdigest()[:16]


def main() -> int:
    from sim.hw import load_hw
    from sim.sass.timing import simulate_sass

    ap = argparse.ArgumentParser()
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--json")
    a = ap.parse_args()
    import sim.sass.timing as timing

    hw = load_hw("h200")
    rows = {}
    seen: list[str] = []
    run0 = timing.SassTiming.run

    def run(self):  # note whether the run went lock-step (SassTiming.lockstep)
        seen.append(self.lockstep)
        return run0(self)
    timing.SassTiming.run = run  # type: ignore[method-assign]
    for name, make in cases().items():
        if a.only and name not in a.only:
            continue
        text, launch, file, kw = make()
        p = time.process_time()
        r = simulate_sass(text, launch, hw, file, **kw)
        cpu = time.process_time() - p
        rows[name] = digest(r)
        print(f"{name:20s} {rows[name]}  cycles {r.cycles}  warp inst {r.warp_instructions}  cpu {cpu:.2f} s"
              f"  lockstep {seen[-1] or 'yes'}",
              flush=True)
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
