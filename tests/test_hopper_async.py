"""Hopper asynchronous PTX: mbarrier phases, transaction counts, waits that yield, deadlocks named."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sim.errors import ExecutionError, PtxError
from sim.functional.runner import run_functional
from sim.hw import load_hw
from sim.launch import Arg, Launch
from sim.ptx.parser import parse_ptx
from sim.timing import simulate
from tests.simhelp import HEADER, ptxas_ok

FIX = Path(__file__).parent / "fixtures" / "hopper"


def _pc_launch(rng) -> tuple[Launch, np.ndarray]:
    inp = rng.integers(1, 1 << 20, 64).astype(np.uint32)
    out = np.full(64, 0xFFFFFFFF, np.uint32)
    return Launch("mbar_pc", (1, 1, 1), (64, 1, 1), [Arg("buffer", "uint32", array=out),
                                                       Arg("buffer", "uint32", array=inp)]), inp


def test_mbarrier_producer_consumer_functional_and_timed(tmp_path):
    path = FIX / "mbarrier_pc.ptx"
    text = path.read_text()
    ptxas_ok(text, tmp_path)
    launch, inp = _pc_launch(np.random.default_rng(3))
    want = inp.astype(np.int64) * 3 + 1
    res = run_functional(parse_ptx(text, str(path)), launch)
    assert np.array_equal(res.outputs[0].astype(np.int64), want)
    launch, inp = _pc_launch(np.random.default_rng(4))
    timed = simulate(parse_ptx(text, str(path)), launch, load_hw("h200"))
    assert np.array_equal(timed.outputs[0].astype(np.int64), inp.astype(np.int64) * 3 + 1)
    assert timed.cycles > 0


def _one_warp(body: str) -> str:
    return HEADER + f""".visible .entry k(.param .u64 k_out)
{{
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    .reg .pred %p<4>;
    .shared .align 8 .b64 mb;
    ld.param.u64 %rd1, [k_out];
    mov.u32 %r1, mb;
{body}
    ret;
}}
"""


def _run_one(body: str, n: int = 4) -> np.ndarray:
    out = np.full(n, 0xFFFFFFFF, np.uint32)
    res = run_functional(parse_ptx(_one_warp(body), "mb.ptx"),
                         Launch("k", (1, 1, 1), (32, 1, 1), [Arg("buffer", "uint32", array=out)]))
    return res.outputs[0]


def test_phase_tx_count_and_returned_state(tmp_path):
    body = """
    mov.u32 %r0, %tid.x;
    setp.ne.u32 %p3, %r0, 0;
    @%p3 bra $END;
    mbarrier.init.shared::cta.b64 [%r1], 2;
    mbarrier.expect_tx.shared::cta.b64 [%r1], 64;
    mbarrier.arrive.shared::cta.b64 %rd2, [%r1], 2;
    mbarrier.test_wait.parity.shared::cta.b64 %p1, [%r1], 0;
    selp.u32 %r2, 1, 0, %p1;
    st.global.u32 [%rd1], %r2;
    mbarrier.complete_tx.shared::cta.b64 [%r1], 64;
    mbarrier.test_wait.parity.shared::cta.b64 %p1, [%r1], 0;
    selp.u32 %r2, 1, 0, %p1;
    st.global.u32 [%rd1+4], %r2;
    mbarrier.test_wait.shared::cta.b64 %p2, [%r1], %rd2;
    selp.u32 %r2, 1, 0, %p2;
    st.global.u32 [%rd1+8], %r2;
    mbarrier.test_wait.parity.shared::cta.b64 %p1, [%r1], 1;
    selp.u32 %r2, 1, 0, %p1;
    st.global.u32 [%rd1+12], %r2;
    mbarrier.inval.shared::cta.b64 [%r1];
$END:"""
    ptxas_ok(_one_warp(body), tmp_path)
    # tx pending: phase 0 open; tx done: phase 0 complete, its state too; phase 1 (parity 1) still open
    got = _run_one(body)
    assert list(got) == [0, 1, 1, 0]  # a false test_wait yields the warp, which later goes on


def test_deadlocked_try_wait_is_one_line_error_naming_the_line(tmp_path):
    body = """
    mbarrier.init.shared::cta.b64 [%r1], 1;
$W:
    mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r1], 0;
    @!%p1 bra $W;"""
    ptxas_ok(_one_warp(body), tmp_path)
    with pytest.raises(ExecutionError) as e:
        _run_one(body)
    msg = str(e.value)
    assert "\n" not in msg and "mb.ptx:15" in msg and "deadlock" in msg and "try_wait" in msg


def test_use_before_init_and_unknown_modifier_are_errors():
    with pytest.raises(ExecutionError, match="before mbarrier.init"):
        _run_one("    mbarrier.arrive.shared::cta.b64 %rd2, [%r1];")
    with pytest.raises(PtxError, match="mb.ptx:12"):
        parse_ptx(_one_warp("    mbarrier.pending_count.b64 %r2, %rd2;"), "mb.ptx")


def test_elect_setmaxnreg_griddepcontrol(tmp_path):
    body = """
    griddepcontrol.wait;
    setmaxnreg.inc.sync.aligned.u32 232;
    mov.u32 %r0, %tid.x;
    setp.ge.u32 %p2, %r0, 5;
    @!%p2 bra $END;
    elect.sync %r2|%p1, 0xFFFFFFF0;
    @!%p1 bra $END;
    st.global.u32 [%rd1], %r2;
    st.global.u32 [%rd1+4], %r0;
    griddepcontrol.launch_dependents;
$END:"""
    ptxas_ok(_one_warp(body), tmp_path)
    got = _run_one(body, 2)
    assert list(got) == [5, 5]


def test_barrier_cluster_of_one_cta_orders_shared_memory(tmp_path):
    text = HEADER + """.visible .entry k(.param .u64 k_out)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    .shared .align 4 .b32 buf[64];
    ld.param.u64 %rd1, [k_out];
    mov.u32 %r0, %tid.x;
    mov.u32 %r1, buf;
    shl.b32 %r2, %r0, 2;
    add.u32 %r3, %r1, %r2;
    add.u32 %r4, %r0, 7;
    st.shared.u32 [%r3], %r4;
    barrier.cluster.arrive.release;
    barrier.cluster.wait.acquire;
    xor.b32 %r5, %r0, 63;
    shl.b32 %r5, %r5, 2;
    add.u32 %r5, %r1, %r5;
    ld.shared.u32 %r6, [%r5];
    mul.wide.u32 %rd2, %r0, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r6;
    ret;
}
"""
    ptxas_ok(text, tmp_path)
    out = np.full(64, 0xFFFFFFFF, np.uint32)
    res = run_functional(parse_ptx(text, "c.ptx"), Launch("k", (1, 1, 1), (64, 1, 1),
                                                          [Arg("buffer", "uint32", array=out)]))
    assert list(res.outputs[0]) == [(t ^ 63) + 7 for t in range(64)]


def test_cluster_special_registers_describe_a_cluster_of_one(tmp_path):
    body = """
    mov.u32 %r0, %tid.x;
    setp.ne.u32 %p1, %r0, 0;
    @%p1 bra $END;
    mov.u32 %r2, %cluster_ctarank;
    st.global.u32 [%rd1], %r2;
    mov.u32 %r2, %cluster_nctarank;
    st.global.u32 [%rd1+4], %r2;
    mov.u32 %r2, %clusterid.x;
    st.global.u32 [%rd1+8], %r2;
    mov.u32 %r2, %cluster_nctaid.x;
    st.global.u32 [%rd1+12], %r2;
$END:"""
    ptxas_ok(_one_warp(body), tmp_path)
    assert list(_run_one(body)) == [0, 1, 0, 1]


def test_mapa_to_own_cta_and_other_rank_stops(tmp_path):
    body = """
    mov.u32 %r0, %tid.x;
    setp.ne.u32 %p1, %r0, 0;
    @%p1 bra $END;
    mapa.shared::cluster.u32 %r2, %r1, %r3;
    mbarrier.init.shared::cta.b64 [%r1], 1;
    mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%r2];
    mbarrier.test_wait.parity.shared::cta.b64 %p2, [%r1], 0;
    selp.u32 %r4, 1, 0, %p2;
    st.global.u32 [%rd1], %r4;
$END:"""
    ptxas_ok(_one_warp(body), tmp_path)
    assert _run_one(body, 1)[0] == 1
    with pytest.raises(ExecutionError, match="mb.ptx:.*rank 1"):
        _run_one(body.replace("%r2, %r1, %r3;", "%r2, %r1, 1;"), 1)


def test_tma_without_a_tensor_map_stops_naming_the_line():
    body = ("    mbarrier.init.shared::cta.b64 [%r1], 1;\n"
            "    cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes "
            "[%r1], [%rd1, {%r2, %r3}], [%r1];")
    with pytest.raises(ExecutionError, match=r"mb.ptx:13: .*holds no tensor map"):
        _run_one(body)
