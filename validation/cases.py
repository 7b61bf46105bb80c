"""The GEMM case table: every generated-kernel case is written here once (STYLE habit 6).

A case is a hardware model, a GEMM shape ``(M, N, K)``, an emitter variant and an A/B dtype (the
output is f32). The same table is checked at three levels, each with its own tolerance: the
planner's prediction against the simulator (benchmarks/accuracy.py, tests/test_accuracy.py), the
simulator's values against numpy (tests/test_kernelgen_sim.py), the verifier (validation.formal.suite,
tests/test_formal_suite.py) and the GPU (benchmarks/gpu_sanitize.py, tests/test_gpu_fixtures.py).
The H200 timing shapes (three-way and speed) and the planner-candidate shapes live here too.

Plain data: importable by tests and benchmarks without the simulator, the verifier or pycuda.
"""

from __future__ import annotations

from dataclasses import dataclass

Shape = tuple[int, int, int]

#: The hardware models every case is planned for.
HWS: tuple[str, ...] = ("npu7nm.yaml", "h200")

#: Small shapes: odd sizes (not multiples of any tile) and a K loop that runs once.
SMOKE_SHAPES: tuple[Shape, ...] = ((16, 16, 16), (33, 17, 40), (128, 64, 96))

#: The full matrix adds one shape with many CTAs (slow to simulate in Python).
SHAPES: tuple[Shape, ...] = SMOKE_SHAPES + ((256, 256, 256),)

#: Emitter variant x A/B dtype: every pair the emitters support.
VARIANTS: tuple[tuple[str, str], ...] = (("simt", "f32"), ("simt", "f16"), ("simt", "bf16"),
                                         ("mma", "f16"), ("mma", "bf16"), ("wgmma", "f16"), ("wgmma", "bf16"))

#: Variants that only some hardware models have (wgmma needs sm_90a: a hwconfig 'wgmma' section).
VARIANT_HWS: dict[str, tuple[str, ...]] = {"wgmma": ("h200",)}


def supported(hw: str, variant: str) -> bool:
    """Does hardware model ``hw`` (a HWS entry) have ``variant``?"""
    return hw in VARIANT_HWS.get(variant, (hw,))


@dataclass(frozen=True)
class GemmCase:
    hw: str
    shape: Shape
    variant: str
    dtype: str

    @property
    def gemm(self) -> str:
        """``MxNxK``, the ``--gemm`` spelling."""
        return "x".join(map(str, self.shape))

    @property
    def id(self) -> str:
        """A test id, e.g. ``npu7nm-33x17x40-mma-f16``."""
        return f"{self.hw.split('.')[0]}-{self.gemm}-{self.variant}-{self.dtype}"


def cases(hws: tuple[str, ...] = HWS, shapes: tuple[Shape, ...] = SHAPES,
          variants: tuple[tuple[str, str], ...] = VARIANTS) -> list[GemmCase]:
    """The matrix hw x shape x (variant, dtype), in that nesting order, without the variants a
    hardware model lacks."""
    return [GemmCase(hw, s, v, d) for hw in hws for s in shapes for v, d in variants if supported(hw, v)]


#: The verifier's quick subset (tests/test_formal_suite.py; the suite runs all of :func:`cases`):
#: both variants, three shapes, both hardware models. The value is the least number of pipeline
#: stages the planner's pick must keep (the h200 mma case exercises stage counters that wrap).
FORMAL_QUICK: dict[GemmCase, int] = {
    GemmCase("npu7nm.yaml", (33, 17, 40), "simt", "f32"): 0,
    GemmCase("npu7nm.yaml", (33, 17, 40), "mma", "f16"): 0,
    GemmCase("npu7nm.yaml", (128, 64, 96), "simt", "f16"): 0,
    GemmCase("npu7nm.yaml", (128, 64, 96), "mma", "bf16"): 0,
    GemmCase("npu7nm.yaml", (16, 16, 16), "simt", "f32"): 0,  # a K loop that runs once
    GemmCase("h200", (128, 64, 96), "mma", "f16"): 3,
    GemmCase("h200", (33, 17, 40), "wgmma", "bf16"): 0,
}

#: Storage layouts (sim/layouts.py) x emitter: (variant, A/B dtype, (M, N, K), (layout a, b, c)), each
#: checked with inputs built from dense matrices (validation/layout_check.py) in the simulator
#: (tests/test_layouts.py) and on the H200 (benchmarks/layouts_gpu.py). Odd extents exercise the
#: predicated edges and the padded edge tiles / stripes; blocked-3x5 a tile that is no power of two.
LAYOUT_CASES: tuple[tuple[str, str, Shape, tuple[str, str, str]], ...] = (
    ("simt", "f32", (33, 17, 40), ("blocked-8x8", "striped-4", "blocked-4x8")),
    ("simt", "f16", (64, 48, 40), ("striped-8", "blocked-32x32", "striped-2")),
    ("mma", "f16", (33, 17, 40), ("blocked-32x32", "blocked-32x32", "row")),  # seed 000 §4.2's gemm.dgemm
    ("mma", "f16", (128, 64, 96), ("blocked-64x64", "blocked-64x64", "blocked-64x64")),
    ("mma", "bf16", (40, 24, 48), ("striped-8", "striped-8", "striped-8")),
    ("mma", "f16", (33, 17, 40), ("col", "striped-16", "blocked-3x5")),
    ("mma", "bf16", (64, 64, 64), ("blocked-16x32", "col", "striped-8")),
    ("mma", "s8", (48, 40, 64), ("blocked-32x32", "striped-16", "blocked-16x16")),
)

#: Non-power-of-two tiles (issue 15 item 2): (variant, dtype, shape, layouts, spec tiling ranges), the planner's
#: pick under those ranges; in the simulator (tests/test_npot_tiles.py) and on the H200 (benchmarks/layouts_gpu.py).
NPOT_CASES: tuple[tuple[str, str, Shape, tuple[str, str, str], tuple[str, ...]], ...] = (
    ("simt", "f16", (20, 96, 48), ("row", "col", "row"),
     ("TILE_K in [24, 24]", "TILE_N in [96, 96]", "TILE_M in [32, 32]")),
    ("mma", "f16", (32, 100, 96), ("row", "col", "row"),
     ("TILE_K in [48, 48]", "TILE_N in [96, 96]", "TILE_M in [32, 32]")),
    ("mma", "bf16", (100, 200, 192), ("blocked-16x16", "striped-8", "blocked-24x40"),
     ("TILE_K in [16, 64], TILE_K % 16 == 0", "TILE_N in [96, 96]")),
)

#: Predicted vs simulated vs measured on the H200 (benchmarks/three_way.py, gpu_bench.py), f16 mma.
THREE_WAY_SHAPES: tuple[Shape, ...] = ((16, 16, 16), (128, 128, 128), (256, 256, 256), (512, 512, 512),
                                       (1024, 1024, 1024), (64, 4096, 4096), (4096, 4096, 4096))

#: The planner's top 4 candidates over the whole space (both variants), each run on the H200
#: (benchmarks/top4.py): is the pick within 5% of the measured fastest, f16.
TOP4_SHAPES: tuple[Shape, ...] = ((128, 128, 128), (256, 256, 256), (512, 512, 512), (1024, 1024, 1024),
                                  (2048, 2048, 2048), (4096, 4096, 4096), (64, 4096, 4096), (128, 4096, 7168),
                                  (4096, 4096, 512), (1024, 8192, 1024))

#: Issue 14's benchmark table (docs/benchmarks.md: the large shapes, M in {64, 128} x N, K in {4096, 7168}); bf16
#: and f16 with D of the input type, the planner's top 4 of each on the H200 (benchmarks/top4.py --table bench).
BENCH_SHAPES: tuple[Shape, ...] = ((4096, 4096, 4096), (6144, 6144, 6144), (8192, 8192, 8192), (4096, 7168, 2048),
                                   *((m, n, k) for m in (64, 128) for n in (4096, 7168) for k in (4096, 7168)))

#: Generated kernels against cuBLAS on the H200 (benchmarks/gpu_bench.py), bf16 and f16.
SPEED_SHAPES: tuple[Shape, ...] = ((4096, 4096, 4096), (8192, 8192, 8192), (64, 4096, 4096), (128, 4096, 7168))

#: The planner's best f16 mma candidates, simulated (benchmarks/candidates.py): the table's shapes
#: plus long-K and (on h200) larger ones.
CANDIDATE_SHAPES: dict[str, tuple[Shape, ...]] = {
    "npu7nm.yaml": SHAPES + ((16, 8, 1024), (64, 64, 1024)),
    "h200": SHAPES + ((128, 128, 128), (512, 512, 512), (64, 64, 2048)),
}
