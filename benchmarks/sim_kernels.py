"""The three kernels of the simulator speed goal (issue 17): sgemm 128^3 (the sgemm_tiled fixture), a
kernelgen mma f16 256^3 GEMM, and CUDA samples' reduce6 (benchmarks/silicon, the public reduction kernel),
all on h200.yaml. `KERNELS` names them; `build(name)` gives a fresh (program, launch, hw) each call."""

from __future__ import annotations

import pathlib
import sys
from typing import Any

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

KERNELS = ("sgemm_128", "mma_f16_256", "reduce6")


def build(name: str) -> tuple[Any, Any, Any]:
    from sim.hw import load_hw
    from sim.ptx.parser import parse_ptx

    hw = load_hw("h200")
    if name == "sgemm_128":
        from tests.fixtures.cases import by_name
        from validation.calibrate import to_launch

        c = by_name("sgemm_tiled")
        s = {"M": 128, "N": 128, "K": 128}
        L = to_launch(c, c.make_args(np.random.default_rng(0), s))
        L.grid, L.block = c.grid(s), c.block(s)
        return parse_ptx(c.ptx_path.read_text(), str(c.ptx_path)), L, hw
    if name == "mma_f16_256":
        from kernelgen.cli import compile_kernel
        from sim.launch import launch_from_metadata, read_metadata

        ptx = compile_kernel("h200", None, "256x256x256", "f16", "f32", "mma")["kernel.ptx"]
        prog = parse_ptx(ptx, "mma_f16_256.ptx")
        return prog, launch_from_metadata(read_metadata(ptx, prog.file), np.random.default_rng(0)), hw
    if name == "reduce6":
        from benchmarks.silicon.common import load, make_launch
        from benchmarks.silicon.suite import SUITE

        k = next(k for k in SUITE if k.name == "reduce6")
        ld = load(k)
        return parse_ptx(ld.text, str(k.ptx)), make_launch(ld), hw
    raise ValueError(f"unknown kernel {name!r}: one of {', '.join(KERNELS)}")
