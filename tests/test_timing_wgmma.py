"""Timeline tests of wgmma timing: a warp's 16 x N x K share of a wgmma queues its MACs on its
scheduler's tensor unit (wgmma.issue cycles at issue, then 16*N*K / wgmma.<type>_macs cycles of
MACs behind earlier wgmma work) and completes wgmma.latency cycles later; wait_group N issues when
all but the newest N committed groups are complete."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from sim.errors import ExecutionError
from sim.hw import load_hw
from sim.launch import Arg, Launch
from sim.ptx.parser import parse_ptx
from sim.timing import simulate
from tests.test_timing import hw_small, t_of

HEAD = """.version 8.0
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 k_param_0)
{
.reg .pred %p<4>;
.reg .f32 %f<130>;
.reg .b64 %rd<8>;
.shared .align 1024 .b8 sm[4096];
mov.b64 %rd3, 0;
setp.ne.u64 %p1, %rd3, 0;
wgmma.fence.sync.aligned;
"""
ACC = "{" + ", ".join(f"%f{i}" for i in range(64)) + "}"
ACC2 = "{" + ", ".join(f"%f{i}" for i in range(64, 128)) + "}"


def mma(acc: str = ACC, shape: str = "m64n128k16.f32.f16.f16", tail: str = ", 1, 1, 0, 0") -> str:
    return f"wgmma.mma_async.sync.aligned.{shape} {acc}, %rd3, %rd3, %p1{tail};\n"


COMMIT = "wgmma.commit_group.sync.aligned;\n"


def wait(n: int) -> str:
    return f"wgmma.wait_group.sync.aligned {n};\n"


def hw_wg(issue: int = 2, latency: int = 10):
    hw = load_hw("h200")
    assert hw.wgmma is not None
    return dataclasses.replace(hw, wgmma=dataclasses.replace(hw.wgmma, issue=issue, latency=latency))


def run(body: str, hw=None):
    prog = parse_ptx(HEAD + body + "ret;\n}\n", "t.ptx")
    buf = np.zeros(16, dtype=np.uint32)
    launch = Launch("k", (1, 1, 1), (128, 1, 1), [Arg("buffer", "u32", array=buf)])
    res = simulate(prog, launch, hw or hw_wg(), trace=True, lookahead=1)
    log = [(e["name"], e["ts"], e["tid"]) for e in res.trace if e.get("ph") == "X" and e["tid"] < 100000]
    warp0 = min(tid for _, _, tid in log)
    return log, warp0


def test_one_wgmma_latency_is_issue_macs_and_fixed_latency():
    log, w = run(mma() + COMMIT + wait(0) + "add.f32 %f129, %f0, 1.0;\n")
    t0 = t_of(log, "wgmma.mma_async", warp=w)
    # m64n128k16 f16: this warp's 16 x 128 x 16 MACs at 512 per cycle = 64 cycles
    assert t_of(log, "wgmma.wait_group", warp=w) - t0 == 2 + 64 + 10
    assert t_of(log, "add.f32", warp=w) - t_of(log, "wgmma.wait_group", warp=w) == 1


def test_back_to_back_wgmmas_queue_on_the_tensor_unit():
    log, w = run(mma() + mma(ACC2) + mma() + mma(ACC2) + COMMIT + wait(0))
    issues = [t_of(log, "wgmma.mma_async", i, warp=w) for i in range(4)]
    assert np.diff(issues).tolist() == [2, 2, 2]  # wgmma.issue holds the unit; the MACs queue behind
    assert t_of(log, "wgmma.wait_group", warp=w) - issues[0] == 2 + 4 * 64 + 10


def test_wait_group_n_leaves_the_newest_groups_pending():
    log, w = run(mma() + COMMIT + mma(ACC2) + COMMIT + wait(1) + wait(0))
    t0 = t_of(log, "wgmma.mma_async", warp=w)
    assert t_of(log, "wgmma.wait_group.sync.aligned 1", warp=w) - t0 == 2 + 64 + 10
    assert t_of(log, "wgmma.wait_group.sync.aligned 0", warp=w) - t0 == 2 + 2 * 64 + 10


@pytest.mark.parametrize("shape,tail,cycles", [
    ("m64n256k8.f32.tf32.tf32", ", 1, 1", 16 * 256 * 8 // 256),
    ("m64n64k32.f32.e4m3.e4m3", ", 1, 1", 16 * 64 * 32 // 1024),
])
def test_mac_rate_follows_the_input_type(shape, tail, cycles):
    n = int(shape.split("n")[1].split("k")[0])
    acc = "{" + ", ".join(f"%f{i}" for i in range(n // 2)) + "}"
    log, w = run(mma(acc, shape, tail) + COMMIT + wait(0))
    assert t_of(log, "wgmma.wait_group", warp=w) - t_of(log, "wgmma.mma_async", warp=w) == 2 + cycles + 10


def test_hardware_without_wgmma_stops_naming_the_line():
    with pytest.raises(ExecutionError, match=r"t\.ptx:13: .*wgmma.*no 'wgmma:' section"):
        run(mma() + COMMIT + wait(0), hw=hw_small())
