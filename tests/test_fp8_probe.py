"""benchmarks/fp8_step.py's PTX patches and benchmarks/fp8_mix.py's microbenchmark kernels (issue 14's fp8 K-block
probe): each patch changes what it says and nothing else, the patched and the microbenchmark kernels assemble,
and the microbenchmark's wgmma loops survive ptxas (a dead accumulator once let it drop them)."""

from __future__ import annotations

import re
import shutil

import pytest

from benchmarks import fp8_mix, fp8_step

L = (512, 512, 512)
W256 = (128, 256, 64)


@pytest.fixture(scope="module")
def base() -> str:
    return fp8_step.emit(L, W256, 4, "", 0)[0]


def test_patches(base):
    notma = fp8_step.patch(base, "notma")
    assert "cp.async.bulk.tensor" in base and "cp.async.bulk.tensor.2d.shared::cluster.global" not in notma
    assert "expect_tx" not in notma.split("$L_consumer")[0] and notma.count("mbarrier.arrive") == base.count(
        "mbarrier.arrive")
    noscale = fp8_step.patch(base, "noscale")
    assert "ld.shared.f32" in base and "ld.shared.f32" not in noscale and "ld.global" not in base
    assert noscale.count("0f3F800000") == base.count("ld.shared.f32") + base.count("0f3F800000")
    fma = re.compile(r"\s*fma\.rn\.f32 (%f\d+), %f\d+, %f\d+, \1;")
    nprom = fp8_step.patch(base, "nopromote")
    kept = sum(1 for x in nprom.split("\n") if fma.match(x))
    assert sum(1 for x in base.split("\n") if fma.match(x)) == 128 and kept == base.count("// Promotion") == 2
    stag = fp8_step.patch(base, "stagger")
    assert stag.count("$L_sg_loop:") == 1 and stag.index("$L_sg_loop") > stag.index("setmaxnreg.inc")
    with pytest.raises(ValueError, match="changed nothing"):
        fp8_step.patch(noscale, "noscale")


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not on PATH")
def test_patched_kernels_assemble(base):
    from sim.sass.tools import compile_ptx

    for what in ("notma,noscale,nopromote", "stagger"):
        assert "spill" not in compile_ptx(fp8_step.patch(base, what)).ptxas_log.replace("0 bytes spill", "")


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not on PATH")
@pytest.mark.parametrize("roles", [("mma", "ffma"), ("promote", "promote")], ids="+".join)
def test_mix_kernels_keep_their_wgmmas(roles):
    from sim.sass.tools import compile_ptx

    d = compile_ptx(fp8_mix.ptx(roles)).disassembly
    per_iter = fp8_mix.GROUP * sum(r in ("mma", "promote") for r in roles)
    assert "HGMMA.64x8x16" not in d  # ptxas' placeholders for dropped (dead) wgmmas
    assert d.count("QGMMA.64x128x32") >= per_iter  # unrolled loops hold more
    assert d.count("FFMA") >= 64


def test_noscale_a_and_b_split_the_scale_loads_by_array(base):
    """--set 3's noscale_a / noscale_b replace the loads of their own array only, both ld.shared from the stage's
    scale slots: scale_a's 2 per K block at TILE_M 128 (rows g and g + 8: +32 bytes), scale_b's one per N half
    (+16 bytes)."""
    lds = re.compile(r"ld\.shared\.f32 %f\d+, \[(%r\d+)(\+\d+)?\];")
    loads = lds.findall(base)
    assert [o for _, o in loads] == ["", "+16", "", "+32"]
    for w, left in (("noscale_a", loads[:2]), ("noscale_b", loads[2:]), ("noscale", [])):
        assert lds.findall(fp8_step.patch(base, w)) == left
