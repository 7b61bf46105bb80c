"""Warpgroup MMA in SASS mode (sim/sass/exec_gmma.py, sim/sass/timing.py): every form ptxas writes
(HGMMA f16/bf16/tf32 with descriptors or A from registers, negA/tnspA/tnspB, a runtime or false
scale-d, IGMMA s8.u8, QGMMA e5m2.e4m3, f16 accumulators) gives bit for bit the PTX functional model's
accumulators, and the timing queues each warp's MACs on its tensor unit (wgmma.*_macs, latency) and
holds WARPGROUP.DEPBAR until the group is done."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sim.functional.runner import run_functional
from sim.hw import load_hw
from sim.launch import Arg, Launch
from sim.ptx.parser import parse_ptx
from sim.sass.tools import tools_available

FIX = Path(__file__).resolve().parent / "fixtures"
FORMS = (FIX / "sass" / "gmma_forms.ptx").read_text()
needs_tools = pytest.mark.skipif(not tools_available(), reason="ptxas / nvdisasm not installed")


def _launch(acc: int) -> Launch:
    data = np.random.default_rng(5).integers(0, 0x40, 16384, dtype=np.uint8).view(np.uint32)
    return Launch("gmma_forms", (1, 1, 1), (128, 1, 1), [Arg("buffer", "u32", array=data.copy()),
                                                        Arg("buffer", "u32", array=np.zeros(128 * 24, np.uint32)),
                                                        Arg("scalar", "u32", value=acc)])


@needs_tools
@pytest.mark.parametrize("acc", [0, 1])
def test_every_gmma_form_equals_ptx_mode(acc):
    from sim.sass.exec import run_sass_functional

    want = run_functional(parse_ptx(FORMS, "gmma_forms.ptx"), _launch(acc)).outputs[1]
    got = run_sass_functional(FORMS, _launch(acc), "sm_90a", "gmma_forms.ptx").outputs[1]
    assert np.array_equal(got, want)
    assert np.count_nonzero(want) > 128 * 20  # every form wrote results
    if acc:  # scale-d true adds C: the first form differs from the acc=0 run
        off = run_functional(parse_ptx(FORMS, "gmma_forms.ptx"), _launch(0)).outputs[1]
        assert not np.array_equal(want.reshape(128, 24)[:, :4], off.reshape(128, 24)[:, :4])


@needs_tools
def test_gmma_timing_queues_macs_and_depbar_waits_for_the_group():
    """The seven GMMAs of each warp queue on its tensor unit: 16 x 8 x K MACs each at wgmma.*_macs per
    cycle; WARPGROUP.DEPBAR issues only after the last one's MACs + wgmma.latency."""
    from sim.sass.timing import simulate_sass

    hw = load_hw("h200.yaml")
    r = simulate_sass(FORMS, _launch(1), hw, "gmma_forms.ptx", trace=True)
    assert r.trace is not None
    ev = [e for e in r.trace if e.get("ph") == "X" and e["tid"] == 0]  # warp 0's instructions
    g = [e for e in ev if "GMMA" in e["name"]]
    dep = next(e for e in ev if e["name"].startswith("WARPGROUP.DEPBAR"))
    wg = hw.wgmma
    macs = [(16 * 8 * 16, wg.f16_macs), (16 * 8 * 16, wg.f16_macs), (16 * 8 * 16, wg.f16_macs),
            (16 * 8 * 8, wg.tf32_macs), (16 * 8 * 32, wg.int8_macs), (16 * 8 * 32, wg.fp8_macs),
            (16 * 8 * 16, wg.f16_macs)]
    assert len(g) == 7
    queued = 0
    for e, (n, rate) in zip(g, macs):
        queued = max(e["ts"] + wg.issue, queued) + -(-n // rate)
        assert e["ts"] + e["dur"] == queued + wg.latency
    assert dep["ts"] >= queued + wg.latency
    assert r.outputs[1].any()


def test_a_gmma_on_hardware_without_wgmma_is_one_line():
    """npu7nm has no arch (SASS timing needs one); a hw with an arch but no wgmma section names it."""
    import dataclasses

    from sim.errors import ExecutionError
    from sim.sass.timing import simulate_sass

    if not tools_available():
        pytest.skip("ptxas / nvdisasm not installed")
    hw = dataclasses.replace(load_hw("h200.yaml"), wgmma=None)
    with pytest.raises(ExecutionError, match="no 'wgmma:' section"):
        simulate_sass(FORMS, _launch(1), hw, "gmma_forms.ptx")


@pytest.mark.slow
@needs_tools
@pytest.mark.parametrize("name", ["triton_matmul_f16_64x64x32", "triton_matmul_f16_128x128x64",
                                  "triton_matmul_bf16_128x256x64", "triton_matmul_fp8_128x128x128"])
def test_triton_wgmma_matmuls_in_sass_equal_ptx_mode(name):
    """Triton's matmuls (HGMMA .tnspB, bf16, QGMMA e4m3; SGXT, F2FP.PACK_AB, UIADD3.64 around them): the
    SASS functional model's output is bit for bit the PTX functional model's (3 x 3 CTAs each, 4-17 s)."""
    import json

    from sim.sass.exec import run_sass_functional
    from tests.test_wgmma_triton import _inputs

    text = (FIX / "triton" / f"{name}.ptx").read_text()
    meta = json.loads((FIX / "triton" / f"{name}.json").read_text())
    M, N, K = meta["M"], meta["N"], meta["K"]
    rng = np.random.default_rng(0)
    a, _ = _inputs(rng, meta["dtype"], (M, K))
    b, _ = _inputs(rng, meta["dtype"], (K, N))
    args = [Arg("buffer", str(a.dtype), array=a.reshape(-1)), Arg("buffer", str(b.dtype), array=b.reshape(-1)),
            Arg("buffer", "uint16", array=np.full(M * N, 0x7E00, dtype=np.uint16))]
    args += [Arg("scalar", "u32", value=v) for v in (M, N, K, K, N, N)]
    args += [Arg("buffer", "uint8", array=np.zeros(1 << 16, np.uint8)) for _ in range(2)]
    prog = parse_ptx(text, name)
    g = meta["grid"]
    launch = Launch(next(iter(prog.kernels)), (g[0], g[1], 1), tuple(meta["block"]), args,
                    dynamic_shared=meta["shared"])
    want = run_functional(prog, launch.copy()).outputs[2]
    got = run_sass_functional(text, launch.copy(), "sm_90a", name).outputs[2]
    assert np.array_equal(got, want)
