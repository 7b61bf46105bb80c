"""The verifier's bounds on data-dependent addresses (validation/formal/properties.py Verifier.bounds): a pointer
chase through a shared chain the kernel filled is proved under the stated assumption that a shared load returns
a value some store of the kernel wrote (every store fits the buffer); a chain whose stores do not fit, and an
index read from global memory, answer unknown naming the load's line (they were false `violated` witnesses: the
data decide them)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

pytest.importorskip("z3")

from validation.formal.cli import verify_text  # noqa: E402

# 64 threads fill chain[t] = 4 * ((5t + 1) & MASK); thread 0 follows n links, then writes where it ended.
CHASE = """.version 8.0
.target sm_90a
.address_size 64
.visible .entry chase(.param .u64 out, .param .u32 n)
{
    .reg .pred %p<4>;
    .reg .b32 %r<20>;
    .reg .b64 %rd<4>;
    .shared .align 16 .b32 chain[64];
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, chain;
    mad.lo.u32 %r4, %r2, 5, 1;
    and.b32 %r4, %r4, MASK;
    shl.b32 %r4, %r4, 2;
    shl.b32 %r5, %r2, 2;
    add.u32 %r6, %r3, %r5;
    st.shared.u32 [%r6], %r4;
    bar.sync 0;
    setp.ne.u32 %p1, %r2, 0;
    @%p1 bra DONE;
    mov.u32 %r7, 0;
    mov.u32 %r8, 0;
LINK:
    add.u32 %r9, %r3, %r7;
    ld.shared.u32 %r7, [%r9];
    add.u32 %r8, %r8, 1;
    setp.lt.u32 %p2, %r8, %r1;
    @%p2 bra LINK;
    st.global.u32 [%rd1], %r7;
DONE:
    ret;
}
"""

GATHER = """.version 8.0
.target sm_90a
.address_size 64
.visible .entry gather(.param .u64 out, .param .u64 table, .param .u64 idx)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<12>;
    .reg .f32 %f<2>;
    ld.param.u64 %rd1, [out];
    ld.param.u64 %rd2, [table];
    ld.param.u64 %rd3, [idx];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd4, %r1, 4;
    add.s64 %rd5, %rd3, %rd4;
    ld.global.u32 %r2, [%rd5];
    mul.wide.u32 %rd6, %r2, 4;
    add.s64 %rd7, %rd2, %rd6;
    ld.global.f32 %f1, [%rd7];
    add.s64 %rd8, %rd1, %rd4;
    st.global.f32 [%rd8], %f1;
    ret;
}
"""


def _bounds(text: str, **flags) -> dict:
    args = SimpleNamespace(kernel=None, grid="1,1,1", block="64,1,1", param=flags.get("param", []),
                           extent=flags.get("extent", []), dynamic_shared=None, timeout=60.0)
    rep = verify_text(text, "k.ptx", args)
    return next(p for p in rep["properties"] if p["name"] == "bounds")


def test_chase_through_a_filled_chain_is_proved_under_the_stated_assumption():
    b = _bounds(CHASE.replace("MASK", "63"), param=["p1=1..1000"], extent=["p0=4"])
    assert b["status"] == "proved", b
    assert "no read of uninitialised shared memory" in b["detail"] and "chain: <= 252, a multiple of 4" in b["detail"]


def test_chase_whose_stores_do_not_fit_is_unknown_naming_the_load():
    b = _bounds(CHASE.replace("MASK", "127"), param=["p1=1..1000"], extent=["p0=4"])
    assert b["status"] == "unknown" and b["witness"] is None, b
    assert "depends on data loaded at line(s) [27]" in b["detail"] and "still not proved" in b["detail"], b


def test_index_read_from_global_memory_is_unknown_not_violated():
    b = _bounds(GATHER, extent=["p0=256", "p1=1024", "p2=256"])
    assert b["status"] == "unknown" and "depends on data loaded at line(s) [15]" in b["detail"], b


def test_a_data_independent_overrun_stays_violated():
    b = _bounds(GATHER, extent=["p0=128", "p1=1024", "p2=256"])  # out holds 32 floats, 64 threads write
    assert b["status"] == "violated" and b["witness"]["buffer"].startswith("p0"), b
