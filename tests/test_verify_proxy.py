"""validation.formal's async_proxy property (the PTX ISA's proxy rule: a fence.proxy.async between a generic-proxy
write of shared bytes and an async-proxy read of them) kept apart from the wgmma discipline, on one small
warpgroup kernel: 128 threads fill an 8 KiB tile (st.shared or cp.async), meet at a barrier, fence, and run one
wgmma m64n8k16 on it. Each planted bug is one edit; each is reported by its own property with a witness."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

pytest.importorskip("z3")

from validation.formal.cli import verify_text  # noqa: E402
from validation.formal.properties import NAMES  # noqa: E402

STORE = "\n".join(f"    st.shared.v4.u32 [%r3+{i * 2048}], {{%r2, %r2, %r2, %r2}};" for i in range(4))
CP_ASYNC = "\n".join(f"    cp.async.ca.shared.global [%r3+{i * 2048}], [%rd3+{i * 2048}], 16;" for i in range(4)) + \
    "\n    cp.async.commit_group;\n    cp.async.wait_group 0;"
FENCE = "    fence.proxy.async.shared::cta;"
WAIT = "    wgmma.wait_group.sync.aligned 0;"


def kernel(fill: str = STORE, fence: str = FENCE, in_flight: str = "") -> str:
    """``fill`` writes the tile (thread t: bytes 16t.. of each 2 KiB quarter), ``fence`` follows the barrier,
    ``in_flight`` lies between the wgmma's commit and its wait."""
    return "\n".join([
        ".version 8.4", ".target sm_90a", ".address_size 64",
        ".visible .entry tile(.param .u64 in, .param .u64 out)", "{",
        "    .reg .b32 %r<16>;", "    .reg .f32 %f<8>;", "    .reg .b64 %rd<12>;",
        "    .shared .align 1024 .b8 sm[8192];",
        "    ld.param.u64 %rd1, [in];", "    ld.param.u64 %rd2, [out];",
        "    cvta.to.global.u64 %rd1, %rd1;", "    cvta.to.global.u64 %rd2, %rd2;",
        "    mov.u32 %r1, %tid.x;", "    shl.b32 %r4, %r1, 4;", "    mov.u32 %r5, sm;", "    add.u32 %r3, %r5, %r4;",
        "    cvt.u64.u32 %rd4, %r4;", "    add.s64 %rd3, %rd1, %rd4;", "    mov.u32 %r2, 0;",
        fill, "    bar.sync 0;", fence,
        # no-swizzle K-major descriptors: start >> 4 | (128 >> 4) << 16 | (256 >> 4) << 32; B 4096 bytes on
        "    shr.u32 %r8, %r5, 4;", "    and.b32 %r8, %r8, 16383;", "    or.b32 %r8, %r8, 524288;",
        "    cvt.u64.u32 %rd5, %r8;", "    or.b64 %rd5, %rd5, 68719476736;", "    add.s64 %rd6, %rd5, 256;",
        "    mov.f32 %f0, 0f00000000;", "    mov.f32 %f1, 0f00000000;", "    mov.f32 %f2, 0f00000000;",
        "    mov.f32 %f3, 0f00000000;", "    wgmma.fence.sync.aligned;",
        "    wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%f0,%f1,%f2,%f3}, %rd5, %rd6, 1, 1, 1, 0, 0;",
        "    wgmma.commit_group.sync.aligned;", in_flight, WAIT,
        "    cvt.u64.u32 %rd7, %r4;", "    add.s64 %rd8, %rd2, %rd7;",
        "    st.global.v4.f32 [%rd8], {%f0, %f1, %f2, %f3};",
        "    ret;", "}", ""])


def verify(text: str) -> dict:
    args = SimpleNamespace(kernel=None, grid="1,1,1", block="128,1,1", param=[], extent=["p0=8192", "p1=2048"],
                           dynamic_shared=None, timeout=60.0)
    return verify_text(text, "tile.ptx", args)


def statuses(rep: dict) -> dict:
    return {p["name"]: p["status"] for p in rep["properties"]}


def only(rep: dict, bad: dict) -> dict:
    assert statuses(rep) == {n: bad.get(n, "proved") for n in NAMES}, json.dumps(rep)[:3000]
    p = next(p for p in rep["properties"] if p["status"] == "violated")
    assert p["line"] and "thread" in p["witness"] and "block" in p["witness"], p
    return p


@pytest.mark.parametrize("fill", [STORE, CP_ASYNC], ids=["st.shared", "cp.async"])
def test_fenced_tile_proved(fill):
    rep = verify(kernel(fill))
    assert statuses(rep) == {n: "proved" for n in NAMES}, json.dumps(rep)[:3000]
    assert "1 wgmma" in next(p for p in rep["properties"] if p["name"] == "async_proxy")["detail"]


def test_store_without_the_proxy_fence_is_an_async_proxy_violation():
    p = only(verify(kernel(fence="")), {"async_proxy": "violated"})
    w = p["witness"]
    assert w["writer"] == "st/atom.shared" and "st.shared" in w["access"] and w["wgmma_line"] > p["line"]
    assert 0 <= w["address"] < 8192 and w["address"] % 2048 == 16 * w["other_thread"][0]  # that thread's bytes
    assert "no fence.proxy.async" in p["detail"] and "PTX ISA, cp.async" not in p["detail"]


def test_cp_async_without_the_proxy_fence_is_an_async_proxy_violation_with_the_isa_reason():
    # the Triton 3.6 / CUTLASS sm90 cp.async + wgmma pattern: the wgmma discipline holds, the proxy rule does not
    p = only(verify(kernel(CP_ASYNC, fence="")), {"async_proxy": "violated"})
    w = p["witness"]
    assert w["writer"] == "cp.async" and "cp.async" in w["access"]  # the writer: any thread, the reader's too
    assert 0 <= w["address"] < 8192 and w["address"] % 2048 == 16 * w["other_thread"][0]
    assert "generic proxy" in p["detail"] and "once its cp.async group completes" in p["detail"]


def test_accumulator_touched_in_flight_is_a_wgmma_violation_not_a_proxy_one():
    p = only(verify(kernel(in_flight="    mov.f32 %f1, 0f3F800000;")), {"wgmma": "violated"})
    assert p["witness"]["register"] == "%f1" and "before a wgmma.wait_group retires it" in p["detail"]


def test_fence_before_the_barrier_by_the_writer_also_orders():
    # the writer's own fence after its stores, then the barrier (CUTLASS's smem-store -> GMMA order)
    text = kernel(fence="").replace("    bar.sync 0;", FENCE + "\n    bar.sync 0;")
    assert statuses(verify(text)) == {n: "proved" for n in NAMES}
