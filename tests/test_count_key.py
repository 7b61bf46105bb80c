"""The counting pass shared by tilings with the same count_key, and the counts of more than 3 stages
taken from the builds at 2 and 3 (kernelgen.counting.by_stages), give for every tiling of several specs
(the counts read no hardware model) the Counts its own build would, dict keys in the same order."""

from __future__ import annotations

import pytest

from kernelgen.counting import count_key, tally
from kernelgen.spec import shorthand
from kernelgen.tiling import operand_tiles
from kernelgen.variants import mma, simt, wgmma


@pytest.mark.parametrize(("shape", "dtype"), [("4096x4096x4096", "f16"), ("1000x520x264", "bf16"),
                                              ("128x64x32", "f16")])
def test_count_key_matches_own_count(shape: str, dtype: str) -> None:
    for mod in (simt, mma, wgmma):
        spec = shorthand(shape, dtype)
        tilings = mod.VARIANT.tilings(spec)
        if mod is wgmma and not tilings:
            continue
        assert tilings
        shared = 0
        for t in tilings:
            a, b = operand_tiles(spec, t)
            own = tally(mod._build(spec, t, "k", False, True)[0],
                        (a.chunks // t.threads, b.chunks // t.threads))
            got = mod.VARIANT.counts(spec, t)
            assert got == own, t.key()
            assert [list(getattr(got, r)) for r in ("pre", "iter", "post", "pre_after")] == \
                [list(getattr(own, r)) for r in ("pre", "iter", "post", "pre_after")], t.key()
            shared += count_key(t) != t or t.stages > 3
        assert shared, "no tiling of this space shares a count: the test checks nothing"


def test_tally_without_refuses_a_stretch_it_cannot_remove() -> None:
    """The 2-stage counts taken from the 3-stage build (mma._counts_2_3) remove the last prologue tile;
    a stretch that writes a first token of its own, or holds the prologue's first commit_group (a
    mark), cannot be removed that way and is refused."""
    from kernelgen.counting import tally_without
    from kernelgen.ptxbuild import PtxBuilder

    b = PtxBuilder(True)
    b.i("mov.u32 %r0, 0")
    span = (dict(b.totals["pre"]), dict(b.counts))
    b.i("add.u32 %r0, %r0, 1")
    with pytest.raises(ValueError, match="first token"):
        tally_without(b, (0, 0), span + (dict(b.totals["pre"]), dict(b.counts)))
    b = PtxBuilder(True)
    b.i("mov.u32 %r0, 0")
    span = (dict(b.totals["pre"]), dict(b.counts))
    b.i("mov.u32 %r0, 1")
    b.i("cp.async.commit_group")
    with pytest.raises(ValueError, match="first token"):
        tally_without(b, (0, 0), span + (dict(b.totals["pre"]), dict(b.counts)))
    b = PtxBuilder(True)
    b.i("mov.u32 %r0, 0")
    b.i("cp.async.commit_group")
    span = (dict(b.totals["pre"]), dict(b.counts))
    b.i("mov.u32 %r0, 1")
    b.reg("u32")
    end = (dict(b.totals["pre"]), dict(b.counts))
    b.i("mov.u32 %r0, 2")
    got = tally_without(b, (0, 0), span + end)
    assert got.ptx_regs == 0 and sum(got.pre.values()) == 3


def test_two_stage_counts_come_from_the_three_stage_build() -> None:
    """mma builds a 3-stage kernel once for both depths: the 2-stage counts equal the 2-stage build's."""
    spec = shorthand("1000x520x264", "bf16")
    t = next(t for t in mma.VARIANT.tilings(spec) if t.stages == 2)
    a, b = operand_tiles(spec, t)
    own = tally(mma._build(spec, t, "k", False, True)[0], (a.chunks // t.threads, b.chunks // t.threads))
    mma._counts.cache_clear()
    mma._counts_2_3.cache_clear()
    got = mma._counts(spec, t)
    assert mma._counts_2_3.cache_info().misses == 1
    assert got == own


@pytest.mark.parametrize("variant", ["simt", "mma", "wgmma", "wgmma_tma", "wgmma_fp8"])
def test_counting_build_equals_the_written_kernel_for_every_variant(variant: str) -> None:
    """A counting build replays its parts (PtxBuilder.part: the copies' per-copy part, the epilogue's
    per-element part, mma's setup, accumulators and store) where the written kernel writes every
    instruction: the same Counts, dict keys in the same order, on a sample of tilings of specs with
    blocked / striped / col layouts, beta, bias and gelu, s8 and f32."""
    import importlib

    from kernelgen.spec import parse_spec
    from kernelgen.variants import get
    from sim.hw import load_hw

    mod = importlib.import_module(type(get(variant)).__module__)
    specs = [shorthand("1000x520x264", "bf16"), shorthand("256x256x512", "s8"), shorthand("512x256x128", "e4m3"),
             parse_spec({"name": "lay", "M": 512, "N": 384, "K": 256, "beta": 1.0, "epilogue": ["bias", "gelu"],
                         "dtype": {"a": "f16", "b": "f16", "acc": "f32", "out": "f16"},
                         "layout": {"a": "blocked-32x32", "b": "striped-8", "c": "col"}})]
    hws = (load_hw("h200"), load_hw("npu7nm"))
    checked = 0
    for spec in specs:
        if all(get(variant).unavailable(spec, hw) for hw in hws):
            continue
        ts = get(variant).tilings(spec)
        for t in ts[::max(1, len(ts) // 3)]:
            fp8 = variant in ("wgmma_tma", "wgmma_fp8")  # their _build takes no profile flag, copies by TMA
            built = [(mod._build(spec, t, "k", c) if fp8 else mod._build(spec, t, "k", False, c))[0]
                     for c in (True, False)]
            a, b = operand_tiles(spec, t)
            copies = (0, 0) if fp8 else (a.chunks // t.threads, b.chunks // t.threads)
            got, own = tally(built[0], copies), tally(built[1], copies)
            assert got == own, t.key()
            assert [list(getattr(got, r)) for r in ("pre", "iter", "post", "pre_after")] == \
                [list(getattr(own, r)) for r in ("pre", "iter", "post", "pre_after")], t.key()
            checked += 1
    assert checked, "no tiling of these specs for this variant"
