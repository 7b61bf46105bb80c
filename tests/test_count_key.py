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
