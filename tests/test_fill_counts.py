"""models/bound.py fill_bound takes an mma candidate's head_alu and mmas per K tile from Mma.fill_counts (the
K-loop head run alone, memoised by what its instructions depend on) instead of a counting build of the whole
kernel, and the PTX registers only where they move the residency: the same figures as the counts, the same
bound, and a planner that searches exhaustively rather than trust a fill_counts that differs."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import kernelgen.models.bound as bound
from kernelgen.cli import load_any_spec
from kernelgen.models.bound import fill_bound
from kernelgen.models.movement import movement
from kernelgen.models.registers import estimate
from kernelgen.spec import GemmSpec, parse_spec, shorthand
from kernelgen.variants import mma
from sim.hw import HwConfig, load_hw

SEEDS = Path(__file__).resolve().parent.parent / "examples/seeds"


def _seed_spec() -> tuple[GemmSpec, HwConfig]:
    spec, hw, _ = load_any_spec(str(SEEDS / "hardware.yaml"), str(SEEDS / "gemm.dgemm"), None, "f16", "f16", None,
                                "4096x4096x4096")
    return spec, hw


def _specs() -> list[GemmSpec]:
    """Blocked layouts and non-power-of-two tiles (the seed), odd edges, s8, col-major operands, an epilogue."""
    return [_seed_spec()[0], shorthand("4096x4096x4096", "f16"), shorthand("1000x520x264", "bf16"),
            shorthand("256x256x512", "s8"),
            parse_spec({"name": "cols", "M": 512, "N": 384, "K": 256, "dtype": {"a": "f16", "b": "f16", "acc": "f32",
                                                                                "out": "f32"},
                        "layout": {"a": "col", "b": "row", "c": "col"}, "beta": 1.0, "epilogue": ["bias", "gelu"]})]


def _check_counts(spec: GemmSpec, samples: int) -> int:
    n = 0
    ts = mma.VARIANT.tilings(spec)
    for t in ts[::max(1, len(ts) // samples)]:
        c = mma.VARIANT.counts(spec, t)
        assert mma.VARIANT.fill_counts(spec, t) == (c.head_alu, c.iter.get("tensor", 0)), t.key()
        n += 1
    return n


@pytest.mark.parametrize("which", range(5))
def test_fill_counts_equal_the_counts_on_a_sample(which: int) -> None:
    assert _check_counts(_specs()[which], 30) > 10


@pytest.mark.slow
@pytest.mark.parametrize("which", range(5))
def test_fill_counts_equal_the_counts_on_whole_spaces(which: int) -> None:
    assert _check_counts(_specs()[which], 1 << 30) > 100


def _check_bounds(spec: GemmSpec, hw: HwConfig, every: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """fill_bound with fill_counts equals fill_bound from the counts (the variant without fill_counts)."""
    shape = spec.nominal()
    cases = []
    for t in mma.VARIANT.tilings(spec)[::every]:
        mv = movement(spec, t, hw, shape)
        cases.append((spec, t, hw, shape, mv.smem_bytes, mv.dram_cycles, 1.0 - mv.l2_hit_rate,
                      estimate(spec, t, hw.registers.per_thread).per_thread))
    fast = [fill_bound(*a) for a in cases]
    monkeypatch.delattr(mma.Mma, "fill_counts")
    bound._FILL.clear()  # fill_bound's memo of the figures it took from fill_counts
    slow = [fill_bound(*a) for a in cases]
    bound._FILL.clear()
    assert fast == slow
    assert len(set(fast)) > 5


@pytest.mark.parametrize("hwname", ["seed", "npu7nm", "h200", "seed-regs"])
def test_fill_bound_without_a_build_equals_the_counted_one(hwname: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """On the seed hardware and npu7nm ([arch] unset; registers never limit their residency), h200 ([arch]:
    the predicted registers), and the seed hardware with a register file that makes the PTX registers set
    the residency (fill_bound then counts)."""
    spec, hw = _seed_spec()
    if hwname == "seed-regs":
        hw = dataclasses.replace(hw, core=dataclasses.replace(hw.core, registers=32768))
    elif hwname != "seed":
        hw = load_hw(hwname)
    _check_bounds(spec, hw, 97, monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize("hwname", ["seed", "npu7nm", "h200"])
def test_fill_bound_without_a_build_on_whole_spaces(hwname: str, monkeypatch: pytest.MonkeyPatch) -> None:
    spec, hw = _seed_spec()
    _check_bounds(spec, hw if hwname == "seed" else load_hw(hwname), 1, monkeypatch)
    monkeypatch.undo()
    spec = shorthand("1000x520x264", "bf16")
    _check_bounds(spec, hw if hwname == "seed" else load_hw(hwname), 1, monkeypatch)


def test_planner_refuses_a_fill_count_that_differs(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fill_counts that differs from the counts of a candidate being timed makes plan() search exhaustively
    (and say so) rather than trust bounds taken from it."""
    from kernelgen.planner import enumerate_tilings, plan

    spec, hw = shorthand("256x128x64"), load_hw("npu7nm")
    only = enumerate_tilings(spec, "mma")[::60]
    monkeypatch.setattr(mma.Mma, "fill_counts", lambda self, spec, t: (0, 0))
    p = plan(spec, hw, only=only, exhaustive=False)
    assert p.exhaustive and "fill_counts" in p.log[0]


@pytest.mark.parametrize("which", range(5))
def test_counting_builds_equal_the_written_kernels_counts(which: int) -> None:
    """A counting build (PtxBuilder parts replayed from their records, ptxbuild.part) sums what the kernel
    written instruction by instruction does: tokens by region, the marks, the registers."""
    from kernelgen.counting import tally
    from kernelgen.tiling import operand_tiles

    spec = _specs()[which]
    ts = mma.VARIANT.tilings(spec)
    for t in ts[::max(1, len(ts) // 12)]:
        a, b = operand_tiles(spec, t)
        copies = (a.chunks // t.threads, b.chunks // t.threads)
        assert tally(mma._build(spec, t, "k", False, True)[0], copies) == \
            tally(mma._build(spec, t, "k", False, False)[0], copies), t.key()
