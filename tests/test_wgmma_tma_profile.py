"""--profile of the persistent wgmma_tma kernel (kernelgen/variants/wgmma_tma.py: one clock64 record per
persistent CTA, written by thread 128) and its trace (per K step: the producer's issue, the consumer's full wait,
the previous stage's release; benchmarks/tma_trace.py), run in the simulator; the GPU runner's reading of the
records (validation/gpu.py: records no CTA wrote are dropped) and top4.py's per-CTA figure for a persistent grid."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from kernelgen.emit_common import PROFILE_SLOTS
from kernelgen.spec import parse_spec
from kernelgen.tiling import Tiling
from kernelgen.variants import wgmma_tma
from tests.kernel_checks import ptxas_clean, sim_check
from validation.gpu import _per_cta_cycles, _phase_means

ROOT = Path(__file__).resolve().parent.parent


def _spec():
    return parse_spec({"M": 136, "N": 72, "K": 136, "dtype": "bf16", "layout": {"a": "row", "b": "col"}})


T = Tiling("wgmma_tma", 64, 64, 64, 64, 64, 3, 0, 0, 8, 8, 0)  # 3 x 2 tiles of 3 K tiles, a ring of 3


def test_profile_one_record_per_persistent_cta():
    """The header: the profile param (its index counts the hidden A/B and the maps), one record per CTA of the
    persistent grid and each CTA's tile count; in the simulator over 2 CTAs (3 tiles each) the D check passes,
    each CTA's 4 slots rise (start, tile walk, last K loop, end) and the records of CTAs 2-5 of the buffer (sized
    for a CTA per tile) stay zero, which the GPU runner drops."""
    ptx = wgmma_tma.emit(_spec(), T, {}, profile=True)
    meta, _, out, _ = sim_check(ptx, 2, 1, corrupt=False)
    prof = meta["profile"]
    assert meta["params"][prof["param"]]["role"] == "profile"
    assert prof["slots"] == PROFILE_SLOTS and prof["records"] == 6 and prof["tiles_per_cta"] == [1] * 6
    assert wgmma_tma.profile_tiles(T, (136, 72)) == [1] * 6
    assert wgmma_tma.profile_tiles(T, (64 * 107, 192)) == [3] * 57 + [2] * 75  # 321 tiles over 132 CTAs
    rec = out[prof["param"]].view(np.uint64).reshape(-1, PROFILE_SLOTS).astype(np.int64)
    assert (rec[2:] == 0).all() and (rec[:2] > 0).all()
    assert (np.diff(rec[:2], axis=1) > 0).all()
    spans = _per_cta_cycles(out[prof["param"]], PROFILE_SLOTS)
    assert spans == [int(x) for x in rec[:2, 3] - rec[:2, 0]]
    assert abs(sum(_phase_means(out[prof["param"]], PROFILE_SLOTS)) - np.mean(spans)) < 1e-6
    # %globaltimer at each CTA's start and end (the SM clock the cycles ran at), the last param
    tm = prof["timer"]["param"]
    assert tm == len(meta["params"]) - 1 and meta["params"][tm]["role"] == "timer" and meta["params"][tm]["count"] == 12
    ns = out[tm].view(np.uint64).reshape(-1, 2).astype(np.int64)
    assert (ns[:2, 1] > ns[:2, 0]).all() and (ns[2:] == 0).all()
    # the profile-free kernel has none of it
    from sim.launch import read_metadata

    assert "profile" not in read_metadata(wgmma_tma.emit(_spec(), T, {}))


def test_trace_steps_and_analysis():
    """trace=N: the buffer grows by 10 u64 per K step and CTA after the records (the header's count and extent):
    the producer's two slots and four per consumer warpgroup; in the simulator every CTA records its 9 K steps
    (3 tiles x 3 K tiles, counted across tiles) in the slots of its one consumer (the second's stay 0), in order
    (issue <= issued; full <= wgmma issued <= wait_group returned <= release), nothing past them, and
    tma_trace.analyse reads the buffer."""
    ptx = wgmma_tma.emit(_spec(), T, {}, trace=12)
    meta, _, out, _ = sim_check(ptx, 2, 1, corrupt=False)
    prof = meta["profile"]
    assert prof["trace"] == {"steps": 12, "slots": list(wgmma_tma.TRACE_SLOTS)}
    ns = len(wgmma_tma.TRACE_SLOTS)
    n = 6 * (PROFILE_SLOTS + ns * 12)
    assert meta["params"][prof["param"]]["count"] == n
    buf = out[prof["param"]].view(np.uint64).astype(np.int64)
    tr = buf[2 * PROFILE_SLOTS:2 * PROFILE_SLOTS + 2 * ns * 12].reshape(2, 12, ns)
    assert (tr[:, :9, :6] > 0).all() and (tr[:, 9:] == 0).all() and (tr[:, :, 6:] == 0).all()
    assert (tr[:, :9, 1] >= tr[:, :9, 0]).all() and (np.diff(tr[:, :9, 2:6], axis=2) >= 0).all()
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import tma_trace

    got = tma_trace.analyse(buf, 2, 3, 12, timer=out[prof["timer"]["param"]])
    assert got["steps"] == 9 and got["ctas"] == 2 and len(got["cta0"]["full"]) == 9
    assert got["clock_mhz"] and got["clock_mhz"] > 0  # the simulator's timer is its clock: 1000 "MHz"


def test_top4_per_cta_over_the_busiest_ctas():
    """top4.py: a persistent kernel's measured per-CTA cycles are the mean over the CTAs that walk the most tiles
    (the slowest CTA the model predicts), with all CTAs' mean beside it; without tile counts the plain mean."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import top4

    row: dict = {}
    top4.per_cta_measured(row, [400, 300, 410, 290], [4, 3, 4, 3])
    assert row["measured_cycles_per_cta"] == 405 and row["measured_cycles_per_cta_all"] == 350
    assert (row["measured_tiles_per_cta"], row["measured_ctas_at_top"]) == (4, 2)
    row = {}
    top4.per_cta_measured(row, [400, 300, 410, 290], [4, 3, 4, 3], [250, 200, 270, 190])
    assert row["measured_clock_mhz"] == np.median([1600, 410 / 270 * 1e3])
    row = {}
    top4.per_cta_measured(row, [400, 300], None)
    assert row["measured_cycles_per_cta"] == 350
    assert top4.parse_case("bf16_bf16_64x4096x7168") == ("bf16", "bf16", (64, 4096, 7168))
    assert top4.parse_case("1024x1024x1024") == ("f16", "f32", (1024, 1024, 1024))
    assert [c[:2] for c in top4.cases("bench")[:2]] == [("bf16", "bf16"), ("f16", "f16")]
    assert len(top4.cases("bench")) == 24 and top4.cases("bench")[0][2][0] <= 128


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not on PATH")
def test_profile_and_trace_assemble_without_spills(tmp_path):
    """Two consumers (setmaxnreg 40/232 needs exactly 168 registers at entry) with the profile record and with the
    trace: ptxas -arch=sm_90a, no spills, no warnings."""
    spec = parse_spec({"M": 4096, "N": 4096, "K": 4096, "dtype": {"a": "bf16", "b": "bf16", "out": "bf16"}})
    t = Tiling("wgmma_tma", 256, 128, 64, 128, 128, 3, 0, 0, 8, 8, 0)
    ptxas_clean(wgmma_tma.emit(spec, t, {}, profile=True), tmp_path, True)
    ptxas_clean(wgmma_tma.emit(spec, t, {}, trace=256), tmp_path, True)


def test_runner_reads_the_profile_again_after_the_timed_launches(monkeypatch):
    """validation.gpu's read_after: the profile and timer buffers are copied back once more after the timed runs
    (the last launch's records, the clock settled), beside the checked launch's outputs (fake driver)."""
    import validation.tensormap as tm
    from sim.launch import launch_from_metadata, read_metadata
    from tests.test_gpu_tma import Recorder, _FakeCuda
    from validation.gpu import _run_in_context
    from validation.gpu_tma import tensormap_params, without_tensormaps

    class Cuda(_FakeCuda):
        reads = 0

        def memcpy_dtoh(self, dst, src) -> None:
            Cuda.reads += 1
            dst.fill(Cuda.reads)

    ptx = wgmma_tma.emit(_spec(), T, {}, profile=True)
    meta = read_metadata(ptx)
    launch = launch_from_metadata(without_tensormaps(meta), np.random.default_rng(0))
    monkeypatch.setattr(tm, "encode_tiled", Recorder())
    monkeypatch.setattr(tm, "prepare_cuda_python", lambda *a, **k: (lambda: None))
    m = _run_in_context(Cuda(), "fake", ptx, launch, 1, 2, None, None, PROFILE_SLOTS, None, 0,
                        tensormap_params(meta), ("profile", "timer"))
    roles = [a.role for a in launch.args]
    after = m.extra["after"]
    assert sorted(after) == [roles.index("profile"), roles.index("timer")]
    assert all((after[i] > m.outputs[i]).all() for i in after)  # read later than the checked launch's copies


def test_report_phases_follow_the_persistent_record():
    """kernelgen.report.phases of a wgmma_tma plan split the CTA as its profile record does: setup (prologue less
    the first stage's fill), the tile walk to the last K loop's end, the last epilogue and the stores' tail; they
    add up to the model's per-CTA cycles."""
    from kernelgen.planner import plan
    from kernelgen.report import phases
    from sim.hw import load_hw

    p = plan(_spec(), load_hw("h200"), "wgmma_tma")
    m = p.best.model
    ph = phases(p)
    assert ph["prologue"] == round(m.pre_cycles - m.terms["fill"])
    assert abs(sum(ph.values()) - p.best.cycles_per_cta) <= 3
