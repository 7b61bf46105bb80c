"""Lock-step functional execution (sim/functional/lockstep.py) gives the sequential order's outputs and
warp-instruction counts: where the warps' accesses cannot tell the orders apart it runs in lock-step,
where they can (a race between warps of a CTA, or between CTAs) it reruns the way that gives the
sequential answer, and says so."""

from __future__ import annotations

import numpy as np
import pytest

from sim.functional.runner import run_functional
from sim.launch import Arg, Launch
from sim.ptx.parser import parse_ptx
from tests.simhelp import HEADER


def _kernel(body: str, shared_words: int = 64) -> str:
    return HEADER + f""".visible .entry k(.param .u64 k_out)
{{
    .reg .b32 %r<20>;
    .reg .b64 %rd<20>;
    .reg .f32 %f<8>;
    .reg .pred %p<8>;
    .shared .align 4 .b32 s[{shared_words}];
    ld.param.u64 %rd1, [k_out];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r0, %tid.x;
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r9, s;
{body}
    ret;
}}
"""


def _both(ptx: str, grid: int, block: int, n_out: int):
    """(lock-step result, sequential result) of k(out) on a zeroed u32 out buffer."""
    got = []
    for lockstep in (True, False):
        launch = Launch("k", (grid, 1, 1), (block, 1, 1),
                        [Arg("buffer", "uint32", array=np.zeros(n_out, dtype=np.uint32))])
        got.append(run_functional(parse_ptx(ptx, "k.ptx"), launch, lockstep=lockstep))
    return got


# thread t stores t+1 to s[t], then reads s[(t + 32) % 64]: the other warp's word, into out[t]
_EXCHANGE = """
    add.u32 %r2, %r0, 1;
    shl.b32 %r3, %r0, 2;
    add.u32 %r4, %r9, %r3;
    st.shared.u32 [%r4], %r2;
    {barrier}
    add.u32 %r5, %r0, 32;
    and.b32 %r5, %r5, 63;
    shl.b32 %r5, %r5, 2;
    add.u32 %r5, %r9, %r5;
    ld.shared.u32 %r6, [%r5];
    mul.wide.u32 %rd2, %r0, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r6;
"""


def test_barrier_separated_exchange_runs_in_lockstep():
    ls, seq = _both(_kernel(_EXCHANGE.format(barrier="bar.sync 0;")), 1, 64, 64)
    assert ls.mode == "lockstep" and seq.mode == "sequential"
    assert np.array_equal(ls.outputs[0], seq.outputs[0])
    assert ls.outputs[0].tolist() == [((t + 32) % 64) + 1 for t in range(64)]
    assert ls.warp_instructions == seq.warp_instructions


def test_race_between_warps_falls_back_to_the_warp_order():
    """Without the barrier warp 0 reads warp 1's words before warp 1 runs (the sequential order), where
    lock-step would read them after: the shared log names the conflict and the launch runs warp by warp."""
    ls, seq = _both(_kernel(_EXCHANGE.format(barrier="")), 1, 64, 64)
    assert ls.mode == "sequential"
    assert "two warps of a CTA access a shared word" in ls.refused[0]
    assert np.array_equal(ls.outputs[0], seq.outputs[0])
    assert ls.outputs[0][:32].tolist() == [0] * 32  # warp 0 ran first: warp 1 had stored nothing
    assert ls.outputs[0][32:].tolist() == list(range(1, 33))


# thread 0 of each CTA: out[0] = out[0] + ctaid + 1, a read-modify-write that is no atomic
_ACCUMULATE = """
    setp.ne.u32 %p1, %r0, 0;
    @%p1 bra DONE;
    ld.global.u32 %r2, [%rd1];
    add.u32 %r2, %r2, %r1;
    add.u32 %r2, %r2, 1;
    st.global.u32 [%rd1], %r2;
DONE:
"""


def test_race_between_ctas_reruns_one_cta_at_a_time():
    """CTAs that meet in global memory: one batch would let every CTA read 0 (out[0] = 4); one CTA at a
    time gives the sequential 1 + 2 + 3 + 4."""
    ls, seq = _both(_kernel(_ACCUMULATE), 4, 64, 1)
    assert ls.mode == "lockstep per CTA"
    assert "two CTAs of the batch" in ls.refused[0]
    assert ls.outputs[0].tolist() == seq.outputs[0].tolist() == [10]
    assert ls.warp_instructions == seq.warp_instructions


# each warp's lanes add 1 to out[warp * 4 + lane % 4]: eight lanes per address, within one warp
_ATOMICS = """
    shr.u32 %r2, %r0, 5;
    and.b32 %r3, %r0, 3;
    shl.b32 %r2, %r2, 2;
    add.u32 %r2, %r2, %r3;
    mul.wide.u32 %rd2, %r2, 4;
    add.s64 %rd3, %rd1, %rd2;
    atom.global.add.u32 %r4, [%rd3], 1;
    mul.wide.u32 %rd4, %r0, 4;
    add.s64 %rd5, %rd1, %rd4;
    st.global.u32 [%rd5+64], %r4;
"""


def test_atomics_within_a_warp_return_the_lane_order_values():
    ls, seq = _both(_kernel(_ATOMICS), 1, 128, 16 + 128)
    assert ls.mode == "lockstep"
    assert np.array_equal(ls.outputs[0], seq.outputs[0])
    assert ls.outputs[0][:16].tolist() == [8] * 16
    assert ls.outputs[0][16:16 + 32].tolist() == [t // 4 for t in range(32)]  # lane order: 0..7 per address


@pytest.mark.parametrize("name", ["block_reduce.h200", "divergent_loop.npu7nm", "cp_async_v4.h200", "mma_f16.h200"])
def test_recorded_fixtures_run_in_lockstep(name):
    """Warps that diverge from one another (block_reduce, divergent_loop), cp.async groups, mma.sync: the
    recorded set's functional figures come from lock-step (tests/test_sim_recorded.py pins them)."""
    from tests.recorded_sim import ENTRIES, build

    prog, launch = build(*ENTRIES[name])
    assert run_functional(prog, launch).mode == "lockstep"


def test_timing_model_replays_lockstep_records(monkeypatch):
    """The timing model steps through the lock-step run's records instead of executing: the same
    SimResult, outputs included, as executing in its own order."""
    import sim.timing.engine as engine
    from sim.functional.replay import recorded
    from sim.hw import load_hw
    from sim.timing import simulate

    ptx = _kernel(_EXCHANGE.format(barrier="bar.sync 0;"))

    def run():
        launch = Launch("k", (1, 1, 1), (64, 1, 1), [Arg("buffer", "uint32", array=np.zeros(64, dtype=np.uint32))])
        return parse_ptx(ptx, "k.ptx"), launch

    assert recorded(*run(), 10**6) is not None
    replayed = simulate(*run(), load_hw("h200"))
    monkeypatch.setattr(engine, "replay_for", lambda *a: None)
    executed = simulate(*run(), load_hw("h200"))
    assert replayed.to_json() == executed.to_json()
    assert replayed.outputs[0].tolist() == executed.outputs[0].tolist()


def test_no_replay_where_the_timing_order_could_differ():
    """CTAs that meet in global memory may run side by side in the timing model: no records then."""
    from sim.functional.replay import recorded

    launch = Launch("k", (4, 1, 1), (64, 1, 1), [Arg("buffer", "uint32", array=np.zeros(1, dtype=np.uint32))])
    assert recorded(parse_ptx(_kernel(_ACCUMULATE), "k.ptx"), launch, 10**6) is None
    launch = Launch("k", (1, 1, 1), (64, 1, 1), [Arg("buffer", "uint32", array=np.zeros(64, dtype=np.uint32))])
    assert recorded(parse_ptx(_kernel(_EXCHANGE.format(barrier="bar.sync 0;")), "k.ptx"), launch, 10**6) is not None


# warp 0 alone meets a guarded barrier; lanes 48..63 of warp 1 and all of warp 2 exit; the rest store 3 * tid
_PARTING = """
    setp.lt.u32 %p1, %r0, 32;
    @%p1 bar.sync 0;
    setp.ge.u32 %p2, %r0, 48;
    @%p2 ret;
    mul.lo.u32 %r2, %r0, 3;
    mul.wide.u32 %rd2, %r0, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r2;
"""


def test_warps_part_at_a_guarded_barrier_and_a_partial_exit():
    ls, seq = _both(_kernel(_PARTING), 1, 96, 96)
    assert ls.mode == "lockstep"
    assert ls.outputs[0].tolist() == seq.outputs[0].tolist() == [3 * t if t < 48 else 0 for t in range(96)]
    assert ls.warp_instructions == seq.warp_instructions
