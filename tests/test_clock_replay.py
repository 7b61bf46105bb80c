"""A kernel whose %clock64 values reach only global stores (a profiling wrapper, as the silicon suite's
reduce6 has) replays lock-step records (sim/functional/replay.py ClockStores) with the same SimResult
as executing warp by warp; a clock value used otherwise keeps the kernel executing."""

from __future__ import annotations

import numpy as np
import pytest

import sim.timing.engine as eng
from sim.functional.replay import ClockStores, recorded
from sim.functional.runner import prepare
from sim.hw import load_hw
from sim.launch import Arg, Launch
from sim.ptx.parser import parse_ptx
from tests.simhelp import HEADER

# each thread: out[i] = tid * 3; the first clock read by all lanes, again by lanes < 16 (divergent), one at
# the end; lane-elected per-thread slots: st of the first value, red.max of the last
KERNEL = HEADER + """.visible .entry k(.param .u64 k_out, .param .u64 k_prof)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<10>;
    .reg .pred %p<3>;
    mov.u64 %rd0, %clock64;
    ld.param.u64 %rd1, [k_out];
    mov.u32 %r0, %tid.x;
    mov.u32 %r1, %ctaid.x;
    mad.lo.u32 %r2, %r1, 64, %r0;
    mul.wide.u32 %rd2, %r2, 4;
    add.s64 %rd3, %rd1, %rd2;
    mul.lo.u32 %r3, %r0, 3;
    st.global.u32 [%rd3], %r3;
    setp.lt.u32 %p1, %r0, 16;
    @%p1 mov.u64 %rd0, %clock64;
    bar.sync 0;
    mov.u64 %rd4, %clock64;
    ld.param.u64 %rd5, [k_prof];
    mul.wide.u32 %rd6, %r2, 16;
    add.s64 %rd7, %rd5, %rd6;
    st.global.u64 [%rd7], %rd0;
    red.global.max.u64 [%rd7+8], %rd4;
    ret;
}
"""


def _launch(text: str) -> tuple:
    prog = parse_ptx(text, "clock.ptx")
    out = np.zeros(128, dtype=np.uint32)
    prof = np.zeros(2 * 128, dtype=np.uint64)
    launch = Launch("k", (2, 1, 1), (64, 1, 1),
                    [Arg("buffer", "uint32", array=out), Arg("buffer", "uint64", array=prof)])
    return prog, launch


def _both(text: str, monkeypatch: pytest.MonkeyPatch) -> tuple:
    hw = load_hw("h200")
    prog, launch = _launch(text)
    replayed = eng.simulate(prog, launch.copy(), hw)
    monkeypatch.setattr(eng, "replay_for", lambda *a, **k: None)  # execute warp by warp, as before
    executed = eng.simulate(prog, launch.copy(), hw)
    return replayed, executed


def test_clock_fed_stores_replay_identically(monkeypatch: pytest.MonkeyPatch) -> None:
    prog, launch = _launch(KERNEL)
    assert ClockStores.of(prepare(prog, launch)) is not None
    assert recorded(prog, launch.copy(), 10**6) is not None  # it replays
    replayed, executed = _both(KERNEL, monkeypatch)
    assert replayed.to_json() == executed.to_json()
    for k in executed.outputs:
        assert np.array_equal(replayed.outputs[k], executed.outputs[k])
    prof = replayed.outputs[1].reshape(128, 2)
    assert (prof[:, 1] > prof[:, 0]).all() and (prof[:, 1] > 16).all()  # cycles, not instruction counts
    assert not np.array_equal(prof[:16, 0], prof[16:32, 0])  # the divergent read's lanes stored a later cycle


def test_a_clock_value_in_arithmetic_executes() -> None:
    text = KERNEL.replace("st.global.u64 [%rd7], %rd0;", "sub.s64 %rd8, %rd4, %rd0;\n    st.global.u64 [%rd7], %rd8;")
    prog, launch = _launch(text)
    assert ClockStores.of(prepare(prog, launch)) is None
    assert recorded(prog, launch, 10**6) is None


def test_a_clock_fed_word_read_back_executes(monkeypatch: pytest.MonkeyPatch) -> None:
    # a thread reads the slot it stored the clock in: the lock-step value would reach out[]
    text = KERNEL.replace("    ret;", "    ld.global.u64 %rd9, [%rd7];\n    cvt.u32.u64 %r4, %rd9;\n"
                                      "    st.global.u32 [%rd3], %r4;\n    ret;")
    prog, launch = _launch(text)
    assert ClockStores.of(prepare(prog, launch)) is not None  # statically fine, refused by the run
    assert recorded(prog, launch, 10**6) is None
    replayed, executed = _both(text, monkeypatch)
    assert replayed.to_json() == executed.to_json()
