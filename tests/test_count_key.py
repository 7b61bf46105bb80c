"""The counting pass shared by tilings with the same count_key gives, for every tiling of several
specs (the counts read no hardware model), the Counts its own build would (kernelgen.counting.count_key)."""

from __future__ import annotations

import pytest

from kernelgen.counting import count_key, tally
from kernelgen.spec import shorthand
from kernelgen.tiling import operand_tiles
from kernelgen.variants import mma, simt


@pytest.mark.parametrize(("shape", "dtype"), [("4096x4096x4096", "f16"), ("1000x520x264", "bf16"),
                                              ("128x64x32", "f16")])
def test_count_key_matches_own_count(shape: str, dtype: str) -> None:
    for mod in (simt, mma):
        spec = shorthand(shape, dtype)
        tilings = mod.VARIANT.tilings(spec)
        assert tilings
        shared = 0
        for t in tilings:
            a, b = operand_tiles(spec, t)
            own = tally(mod._build(spec, t, "k", False, True)[0],
                        (a.chunks // t.threads, b.chunks // t.threads))
            assert mod.VARIANT.counts(spec, t) == own, t.key()
            shared += count_key(t) != t
        assert shared, "no tiling of this space shares a count: the test checks nothing"
