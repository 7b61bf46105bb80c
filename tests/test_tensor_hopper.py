"""Hopper matrix instructions on tiny hand-written kernels, checked against numpy: stmatrix,
fence.proxy.async and (tests/test_wgmma.py) wgmma."""

from __future__ import annotations

import numpy as np
import pytest

from sim.functional.runner import run_functional
from sim.launch import Arg, Launch
from sim.ptx.parser import parse_ptx
from tests.simhelp import HEADER, ptxas_ok


def _stmatrix_kernel(nmat: int, trans: bool) -> str:
    regs = ", ".join(f"%r{i + 1}" for i in range(nmat))
    tr = ".trans" if trans else ""
    return HEADER + f""".visible .entry k(.param .u64 k_out, .param .u64 k_in)
{{
    .reg .b32 %r<12>;
    .reg .b64 %rd<8>;
    .shared .align 16 .b8 smem[512];
    ld.param.u64 %rd1, [k_out];
    ld.param.u64 %rd2, [k_in];
    cvta.to.global.u64 %rd1, %rd1;
    cvta.to.global.u64 %rd2, %rd2;
    mov.u32 %r0, %tid.x;
    mul.wide.u32 %rd3, %r0, 16;
    add.s64 %rd4, %rd2, %rd3;
    ld.global.v4.u32 {{%r1, %r2, %r3, %r4}}, [%rd4];
    mul.lo.u32 %r5, %r0, 5;
    and.b32 %r5, %r5, 31;
    shl.b32 %r5, %r5, 4;
    mov.u32 %r6, smem;
    add.u32 %r5, %r5, %r6;
    stmatrix.sync.aligned.m8n8.x{nmat}{tr}.shared.b16 [%r5], {{{regs}}};
    fence.proxy.async.shared::cta;
    bar.sync 0;
    shl.b32 %r7, %r0, 4;
    add.u32 %r7, %r7, %r6;
    ld.shared.v4.u32 {{%r1, %r2, %r3, %r4}}, [%r7];
    add.s64 %rd5, %rd1, %rd3;
    st.global.v4.u32 [%rd5], {{%r1, %r2, %r3, %r4}};
    ret;
}}
"""


@pytest.mark.parametrize("trans", [False, True])
@pytest.mark.parametrize("nmat", [1, 2, 4])
def test_stmatrix_layout(nmat, trans, tmp_path):
    """Lane i names row slot (5i mod 32) for row i%8 of matrix i//8; register j of lane (g, t)
    holds elements (g, 2t), (g, 2t+1) of matrix j (transposed with .trans)."""
    ptx = _stmatrix_kernel(nmat, trans)
    ptxas_ok(ptx, tmp_path)
    rng = np.random.default_rng()
    vals = rng.integers(1, 2**16, (32, 4, 2), dtype=np.uint16)  # lane, register, half
    out = np.full(32 * 8, 0xBEEF, dtype=np.uint16)
    args = [Arg("buffer", "uint16", array=out), Arg("buffer", "uint16", array=vals.reshape(-1))]
    res = run_functional(parse_ptx(ptx, "st.ptx"), Launch("k", (1, 1, 1), (32, 1, 1), args))
    got = res.outputs[0].reshape(32, 8)
    want = np.zeros((32, 8), dtype=np.uint16)  # shared memory starts zeroed; unnamed rows stay so
    lane = np.arange(32)
    g, t = lane // 4, lane % 4
    for j in range(nmat):
        mat = np.zeros((8, 8), dtype=np.uint16)
        for h in range(2):
            if trans:
                mat[2 * t + h, g] = vals[:, j, h]
            else:
                mat[g, 2 * t + h] = vals[:, j, h]
        for r in range(8):
            want[(5 * (8 * j + r)) % 32] = mat[r]
    assert np.array_equal(got, want)
