"""SASS mode's lock-step run ahead (sim/sass/lockstep.py, issue 11's speed goal) changes nothing: whole SimResults
(cycles, per-CTA spans, stalls, outputs, trace) equal stepping's ($WORKBENCH_SASS_LOCKSTEP=0), and launches whose
result could depend on the order warps run in (races between warps or CTAs, clock reads) are refused and stepped."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from sim.hw import load_hw
from sim.launch import Arg, Launch
from sim.sass.tools import tools_available

needs_tools = pytest.mark.skipif(not tools_available(), reason="SASS mode needs ptxas and nvdisasm")


def _digest(r) -> str:
    from sim.result import jsonable

    h = hashlib.sha256(json.dumps(r.to_json(), default=jsonable, sort_keys=True).encode())
    for i in sorted(r.outputs):
        h.update(np.ascontiguousarray(r.outputs[i]).tobytes())
    h.update(json.dumps(r.trace, default=jsonable, sort_keys=True).encode())
    return h.hexdigest()


def _both(monkeypatch, text: str, launch, file: str = "<ptx>") -> tuple[list[str], list[str]]:
    """(digests stepping / lock-step, SassTiming.lockstep of each cycle loop run)."""
    import sim.sass.timing as timing

    seen: list[str] = []
    run0 = timing.SassTiming.run

    def run(self):
        seen.append(self.lockstep)
        return run0(self)
    monkeypatch.setattr(timing.SassTiming, "run", run)
    hw = load_hw("h200.yaml")
    out = []
    for flag in ("0", "1"):
        monkeypatch.setenv("WORKBENCH_SASS_LOCKSTEP", flag)
        out.append(_digest(timing.simulate_sass(text, launch(), hw, file, trace=True)))
    return out, seen


@needs_tools
@pytest.mark.parametrize("name", ["block_reduce", pytest.param("sgemm_tiled", marks=pytest.mark.slow),
                                  pytest.param("divergent_loop", marks=pytest.mark.slow)])
def test_sass_lockstep_equals_stepping(monkeypatch, name):
    """Barriers, shuffles, reductions, shared tiles, divergent loops: the same SimResult, and it did run ahead."""
    from tests.fixtures.cases import by_name
    from validation.calibrate import to_launch

    c = by_name(name)

    def launch():
        L = to_launch(c, c.make_args(np.random.default_rng(0), c.sizes))
        L.grid, L.block = c.grid(c.sizes), c.block(c.sizes)
        return L
    (a, b), seen = _both(monkeypatch, c.ptx_path.read_text(), launch, str(c.ptx_path))
    assert seen == ["off", ""]
    assert a == b


HEAD = ".version 8.0\n.target sm_90a\n.address_size 64\n"


def _skew() -> str:
    """Warp 1 of CTA 1 takes a detour (a loop of p trips) before the barrier the others wait at, so the wide warp of
    the batch splits at the branch and again at the barrier (CTA 0 released, CTA 1 not); then odd lanes loop
    longer than even ones (divergence inside each warp) and every thread reads its neighbour's shared word."""
    return HEAD + """.visible .entry k(.param .u64 k_out, .param .u32 k_p)
{
.reg .pred %p<4>;
.reg .b32 %r<20>;
.reg .b64 %rd<6>;
.shared .align 4 .b8 sm[512];
ld.param.u64 %rd1, [k_out];
ld.param.u32 %r9, [k_p];
cvta.to.global.u64 %rd2, %rd1;
mov.u32 %r1, %tid.x;
mov.u32 %r2, %ctaid.x;
shr.u32 %r3, %r1, 5;
mul.lo.u32 %r4, %r1, 3;
setp.eq.u32 %p1, %r2, 1;
setp.eq.u32 %p2, %r3, 1;
and.pred %p3, %p1, %p2;
@!%p3 bra BACK;
mov.u32 %r5, 0;
SLOW:
add.u32 %r4, %r4, 7;
mul.lo.u32 %r4, %r4, 5;
add.u32 %r5, %r5, 1;
setp.lt.u32 %p1, %r5, %r9;
@%p1 bra SLOW;
BACK:
and.b32 %r6, %r1, 1;
add.u32 %r6, %r6, %r9;
mov.u32 %r7, 0;
ODD:
xor.b32 %r4, %r4, %r7;
add.u32 %r7, %r7, 1;
setp.lt.u32 %p1, %r7, %r6;
@%p1 bra ODD;
shl.b32 %r10, %r1, 2;
mov.u32 %r11, sm;
add.u32 %r12, %r11, %r10;
st.shared.u32 [%r12], %r4;
bar.sync 0;
add.u32 %r13, %r1, 1;
and.b32 %r13, %r13, 127;
shl.b32 %r13, %r13, 2;
add.u32 %r13, %r11, %r13;
ld.shared.u32 %r14, [%r13];
mad.lo.u32 %r15, %r2, 128, %r1;
mul.wide.u32 %rd3, %r15, 4;
add.s64 %rd4, %rd2, %rd3;
st.global.u32 [%rd4], %r14;
ret;
}
"""


@needs_tools
def test_sass_lockstep_splits_and_joins_nothing_else(monkeypatch):
    """A warp-uniform branch taken by one warp of one CTA, a CTA barrier reached by the CTAs of a wide warp at
    different times, divergence inside warps: the same SimResult as stepping, run ahead."""
    def launch():
        return Launch("k", (3, 1, 1), (128, 1, 1), [Arg("buffer", "u32", array=np.zeros(384, dtype=np.uint32)),
                                                    Arg("scalar", "u32", value=5)])
    (a, b), seen = _both(monkeypatch, _skew(), launch)
    assert seen == ["off", ""]
    assert a == b


def _race(kind: str) -> str:
    """shared: every thread stores its tid to one shared word, then thread 0 copies it out (warps race);
    global: thread 0 of every CTA stores its CTA id to out[0] (CTAs race); clock: every thread stores %clock."""
    body = {
        "shared": """mov.u32 %r3, sm;
st.shared.u32 [%r3], %r1;
bar.sync 0;
setp.ne.u32 %p1, %r1, 0;
@%p1 bra DONE;
ld.shared.u32 %r4, [%r3];
st.global.u32 [%rd2], %r4;
DONE:
""",
        "global": """setp.ne.u32 %p1, %r1, 0;
@%p1 bra DONE;
st.global.u32 [%rd2], %r2;
DONE:
""",
        "clock": """mov.u32 %r4, %clock;
mul.wide.u32 %rd3, %r1, 4;
add.s64 %rd4, %rd2, %rd3;
st.global.u32 [%rd4], %r4;
""",
    }[kind]
    return HEAD + """.visible .entry k(.param .u64 k_out)
{
.reg .pred %p<2>;
.reg .b32 %r<8>;
.reg .b64 %rd<6>;
.shared .align 4 .b8 sm[16];
ld.param.u64 %rd1, [k_out];
cvta.to.global.u64 %rd2, %rd1;
mov.u32 %r1, %tid.x;
mov.u32 %r2, %ctaid.x;
""" + body + "ret;\n}\n"


@needs_tools
@pytest.mark.parametrize("kind,why", [("shared", "Refused: two warps of a CTA access a shared word"),
                                      ("global", "Refused: two warps or CTAs access a global word"),
                                      ("clock", "off")])
def test_sass_lockstep_refuses_order_dependent_launches(monkeypatch, kind, why):
    """Launches whose outputs depend on the order warps run in are stepped (same SimResult as with lock-step off)."""
    def launch():
        return Launch("k", (2, 1, 1), (64, 1, 1), [Arg("buffer", "u32", array=np.zeros(64, dtype=np.uint32))])
    (a, b), seen = _both(monkeypatch, _race(kind), launch)
    # (a refusal found while timing starts the timing again, stepping: three runs; a refusal before it, two)
    assert seen[0] == "off" and seen[-1].startswith(why) and len(seen) == (2 if why == "off" else 3), seen
    assert a == b
