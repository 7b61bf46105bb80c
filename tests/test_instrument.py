"""validation/instrument.py: the instrumented PTX passes ptxas, computes the same outputs in the
simulator, and its per-CTA clock64 spans agree with the simulator's own CTA times."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from sim.hw import load_hw
from sim.launch import launch_from_metadata, read_metadata
from sim.ptx.parser import parse_ptx
from sim.reference import check_from_metadata
from sim.timing import simulate
from validation.instrument import cta_spans, instrument_ptx

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "benchmarks" / "silicon" / "kernels"

# PTX with a launch header -> how far (cycles) the instrumented span may be from the uninstrumented
# kernel's simulated CTA time. sgemm_tiled's second CTA row has warps wholly past M that finish early and
# run their exit stamps (ld.param, st, red) while the others still compute: +91 cycles (2.5%) there.
CASES = {"examples/sgemm_tiled.ptx": 100, "benchmarks/silicon/kernels/block_reduce.ptx": 16,
         "benchmarks/silicon/kernels/gemm_16x16x16_f16_mma.ptx": 16}

PREDICATED = """
// @workbench {"version":1,"kernel":"early","grid":[2,1,1],"block":[64,1,1],"params":[
// placeholder
.version 8.0
.target sm_90a
.address_size 64

.visible .entry early(
\t.param .u64 early_out,
\t.param .u32 early_n
)
{
\t.reg .pred \t%p<3>;
\t.reg .b32 \t%r<6>;
\t.reg .b64 \t%rd<4>;

\tld.param.u64 \t%rd1, [early_out];
\tld.param.u32 \t%r1, [early_n];
\tmov.u32 \t%r2, %tid.x;
\tmov.u32 \t%r3, %ctaid.x;
\tmov.u32 \t%r4, %ntid.x;
\tmad.lo.s32 \t%r5, %r3, %r4, %r2;
\tsetp.ge.s32 \t%p1, %r5, %r1;
\t@%p1 ret;
\tsetp.eq.s32 \t%p2, %r2, 63;
\t@!%p2 bra $L_store;
\texit;
$L_store:
\tcvta.to.global.u64 \t%rd2, %rd1;
\tmul.wide.s32 \t%rd3, %r5, 4;
\tadd.s64 \t%rd2, %rd2, %rd3;
\tst.global.u32 \t[%rd2], %r5;
\tret;
}
"""


def _predicated_text() -> str:
    head = ('// @workbench {"version":1,"kernel":"early","grid":[2,1,1],"block":[64,1,1],"params":['
            '{"name":"early_out","kind":"buffer","dtype":"u32","count":128,"init":"zeros","role":"out"},'
            '{"name":"early_n","kind":"scalar","dtype":"u32","value":100}]}')
    return PREDICATED.replace(PREDICATED.split("\n.version")[0], head)


def _ptxas(text: str, tmp_path: Path) -> None:
    p = tmp_path / "k.ptx"
    p.write_text(text)
    r = subprocess.run(["ptxas", "-arch=sm_90a", str(p), "-o", str(tmp_path / "k.cubin")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def _run(text: str, warm: bool = True):
    meta = read_metadata(text)
    assert meta is not None
    launch = launch_from_metadata(meta, np.random.default_rng(0))
    before = launch.copy()
    r = simulate(parse_ptx(text), launch, load_hw("h200.yaml"), warm_l2=warm)
    return meta, before, r


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not on PATH")
@pytest.mark.parametrize("path", [*CASES, "<predicated>"])
def test_ptxas_accepts_instrumented(path, tmp_path):
    text = _predicated_text() if path == "<predicated>" else (ROOT / path).read_text()
    _ptxas(instrument_ptx(text).text, tmp_path)


def test_predicated_exits_are_bracketed():
    res = instrument_ptx(_predicated_text())
    body = res.text
    assert "@!%p1 bra $wbp_skip_0_0;" in body  # @%p1 ret -> skip the stamp when not exiting
    assert body.count("red.global.max.u64") == 3  # ret, exit, ret
    assert body.count("mov.u64 \t%wbp_d0, %clock64;") == 1
    meta = read_metadata(body)
    assert meta["profile"] == {"param": 2, "slots": 4, "layout": "warp_start_end", "warps_per_cta": 2}
    assert meta["params"][2]["count"] == 2 * 2 * 2
    _, before, r = _run(body)
    want = np.zeros(128, dtype=np.uint32)
    idx = np.arange(100)
    want[idx[(idx % 64) != 63]] = idx[(idx % 64) != 63]
    assert np.array_equal(r.outputs[0], want)
    spans = cta_spans(r.outputs[2], 2)
    assert sorted(spans) == [0, 1] and all(v > 0 for v in spans.values())


@pytest.mark.parametrize("path", CASES)
def test_same_outputs_and_spans(path):
    text = (ROOT / path).read_text()
    inst = instrument_ptx(text)
    meta0, before0, r0 = _run(text)
    meta1, before1, r1 = _run(inst.text)
    for i, arr in r0.outputs.items():
        assert np.array_equal(arr, r1.outputs[i], equal_nan=True), f"output {i} differs"
    chk = check_from_metadata(meta1, before1, r1.outputs)
    if chk is not None:
        assert chk["passed"]
    assert inst.param_index is not None and inst.warps_per_cta is not None
    spans = cta_spans(r1.outputs[inst.param_index], inst.warps_per_cta)
    assert len(spans) == len(r0.cycles_per_cta)
    # the instrumented span (first clock64 read to the last exit's read) against the simulator's own CTA
    # time of the uninstrumented kernel (launch to the last warp's completion)
    for c, span in spans.items():
        own = r0.cycles_per_cta[c]
        assert abs(span - own) <= CASES[path], (c, span, own)


def test_profile_phases_are_slot_differences_averaged_over_ctas():
    """validation.gpu._phase_means: per-phase mean of consecutive clock64 slots; they add up to the
    mean per-CTA span that _per_cta_cycles reports."""
    import numpy as np

    from validation.gpu import _per_cta_cycles, _phase_means

    rng = np.random.default_rng(3)
    starts = rng.integers(1 << 40, 1 << 41, size=7)
    steps = rng.integers(10, 5000, size=(7, 3))
    slots = np.concatenate([starts[:, None], starts[:, None] + np.cumsum(steps, axis=1)], axis=1).astype(np.uint64)
    phases = _phase_means(slots.ravel(), 4)
    assert np.allclose(phases, steps.mean(axis=0))
    assert abs(sum(phases) - np.mean(_per_cta_cycles(slots.ravel(), 4))) < 1e-6
    assert _phase_means(slots.ravel(), 2) == []
