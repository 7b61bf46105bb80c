"""Helpers shared by the simulator tests: fixture case -> Launch, tiny PTX kernels run on one warp."""

from __future__ import annotations

import numpy as np

from sim.functional.runner import run_functional
from sim.launch import Arg, Launch
from sim.ptx.parser import parse_ptx


def case_launch(case, args, sizes=None) -> Launch:
    grid, block = case.launch(sizes)
    out = []
    for a in args:
        if isinstance(a, np.ndarray):
            out.append(Arg("buffer", str(a.dtype), array=a.copy()))
        else:
            out.append(Arg("scalar", a[1], value=a[0]))
    return Launch(case.kernel, grid, block, out)


HEADER = ".version 8.0\n.target sm_90a\n.address_size 64\n"


def run_snippet(body: str, regs: str, out_type: str, n_out: int, inputs: dict | None = None,
                threads: int = 32) -> np.ndarray:
    """Run `body` in a one-CTA kernel `k(u64 out, u64 in)`; %rd1 = out, %rd2 = in, %r0 = tid.x.

    The body stores its results itself; returns the `out` buffer as `out_type` numpy values.
    """
    ptx = HEADER + f""".visible .entry k(.param .u64 k_out, .param .u64 k_in)
{{
    .reg .b32 %r<40>;
    .reg .b64 %rd<40>;
    .reg .f32 %f<40>;
    .reg .f64 %fd<20>;
    .reg .b16 %rs<20>;
    .reg .pred %p<20>;
{regs}
    ld.param.u64 %rd1, [k_out];
    ld.param.u64 %rd2, [k_in];
    mov.u32 %r0, %tid.x;
{body}
    ret;
}}
"""
    prog = parse_ptx(ptx, "snippet.ptx")
    out = np.zeros(n_out, dtype=out_type)
    inp = np.asarray(inputs["data"]) if inputs else np.zeros(4, dtype=np.uint32)
    launch = Launch("k", (1, 1, 1), (threads, 1, 1),
                    [Arg("buffer", str(out.dtype), array=out), Arg("buffer", str(inp.dtype), array=inp)])
    res = run_functional(prog, launch)
    return res.outputs[0]


def ptxas_ok(ptx: str, tmp_path) -> None:
    """ptxas -arch=sm_90a accepts `ptx` (skipped where no ptxas is installed)."""
    import subprocess

    from sim.sass.tools import find_tool

    exe = find_tool("ptxas")
    if exe is None:
        return
    f = tmp_path / "k.ptx"
    f.write_text(ptx)
    r = subprocess.run([str(exe), "-arch=sm_90a", str(f), "-o", str(tmp_path / "k.cubin")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
