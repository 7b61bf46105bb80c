"""The silicon-fidelity suite: one table of kernels that run on the H200 and in the simulator.

Each row names a PTX source (nvcc output of a .cu here or in tests/fixtures/cuda, an example, or a
kernelgen GEMM), the launch (grid, block, dynamic shared memory, parameters) and the numerical check:
``"header"`` (the GEMM check of the @workbench header) or the name of a reference in
``benchmarks/silicon/refs.py``. ``build.py`` writes ``kernels/<name>.ptx`` (the source with its
launch header) from this table; ``simulate.py`` and ``run_gpu.py`` instrument those files
(validation/instrument.py) and run them. ``sample`` = simulate only about that many CTAs (the DRAM-sized
kernels); ``sim_error`` = the one-line error the simulator gives, when it rejects the kernel.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
KERNELS = HERE / "kernels"


@dataclass(frozen=True)
class Kernel:
    name: str
    group: str  # micro | fixture | example | gemm | public
    source: str  # PTX path relative to the repository root (gemm: the kernelgen output folder)
    entry: str = ""  # entry name (or a unique substring of a mangled name); gemm/example: from the header
    grid: tuple[int, int, int] = (1, 1, 1)
    block: tuple[int, int, int] = (1, 1, 1)
    params: tuple[dict[str, Any], ...] = ()
    dynamic_shared: int = 0
    check: str | None = None  # "header", a refs.py function name, or None
    rtol: float = 1e-4
    sample: int | None = None
    gemm: str = ""  # gemm: "MxNxK dtype variant"
    sim_error: str = ""
    what: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ptx(self) -> Path:
        return KERNELS / f"{self.name}.ptx"

    @property
    def plan(self) -> Path | None:
        return ROOT / self.source / "plan.json" if self.group == "gemm" else None


def buf(dtype: str, count: int, init: str = "random", role: str = "") -> dict[str, Any]:
    return {"kind": "buffer", "dtype": dtype, "count": int(count), "init": init, "role": role}


def val(dtype: str, value: int | float, role: str = "") -> dict[str, Any]:
    return {"kind": "scalar", "dtype": dtype, "value": value, "role": role}


def out(dtype: str, count: int, init: str = "poison") -> dict[str, Any]:
    return buf(dtype, count, init, "out")


B256 = (256, 1, 1)
MICRO = "benchmarks/silicon/micro"
PUB = "benchmarks/silicon/public"
FIX = "tests/fixtures/cuda"
G = 4  # CTAs of the microbenchmarks
STREAM_G = 528  # 4 CTAs per SM

# stream_read sizes in float4 (multiples of STREAM_G * 256): about 4 MiB and 25 MiB (L2), 264 MiB (DRAM)
STREAM_SIZES = {"4m": 2, "25m": 12, "264m": 128}


def _micro() -> list[Kernel]:
    m = f"{MICRO}/memory.ptx"
    c = f"{MICRO}/compute.ptx"
    s = f"{MICRO}/sync.ptx"
    n = G * 256
    ks = [
        Kernel("lds_indep", "micro", m, "lds_indep", (G, 1, 1), B256,
               (buf("f32", 1024), out("f32", n), val("s32", 64)), check="lds_indep",
               what="8 independent conflict-free ld.shared per trip"),
        Kernel("lds_dep", "micro", m, "lds_dep", (G, 1, 1), B256,
               (buf("f32", 32), out("u32", n), val("s32", 128)), check="lds_dep",
               what="dependent ld.shared chain"),
        Kernel("ldsm_x4", "micro", m, "ldsm_x4", (G, 1, 1), B256,
               (buf("u32", 2048), out("u32", n), val("s32", 64)), check="ldsm_x4",
               what="independent ldmatrix.x4"),
        Kernel("ldgsts_x4", "micro", m, "ldgsts_x4", (G, 1, 1), B256,
               (buf("f32", 16384), out("f32", n), val("s32", 32)), check="ldgsts_x4",
               what="4 x 16 B cp.async in flight, then wait"),
        Kernel("ffma_indep", "micro", c, "ffma_indep", (G, 1, 1), B256,
               (buf("f32", 32), out("f32", n), val("s32", 128)), check="ffma_indep",
               what="8 independent FFMA chains"),
        Kernel("ffma_dep", "micro", c, "ffma_dep", (G, 1, 1), B256,
               (buf("f32", 32), out("f32", n), val("s32", 128)), check="ffma_dep",
               what="one dependent FFMA chain (same FFMA count)"),
        Kernel("imad_indep", "micro", c, "imad_indep", (G, 1, 1), B256,
               (buf("u32", 32), out("u32", n), val("s32", 128)), check="imad_indep",
               what="8 independent IMAD chains"),
        Kernel("diverge_halves", "micro", c, "diverge_halves", (G, 1, 1), B256,
               (buf("f32", 32), out("f32", n), val("s32", 128)), check="diverge_halves",
               what="if/else halves of each warp, a loop each"),
        Kernel("hmma_indep", "micro", c, "hmma_indep", (G, 1, 1), B256,
               (buf("f16", 384), out("f32", n * 32), val("s32", 64)), check="hmma_indep", rtol=1e-3,
               what="8 independent mma.sync m16n8k16 accumulators"),
        Kernel("bar_4w", "micro", s, "bar_loop", (G, 1, 1), (128, 1, 1),
               (buf("f32", 1024), out("f32", G * 128), val("s32", 256)), check="bar_loop",
               what="bar.sync loop, 4 warps"),
        Kernel("bar_32w", "micro", s, "bar_loop", (G, 1, 1), (1024, 1, 1),
               (buf("f32", 1024), out("f32", G * 1024), val("s32", 64)), check="bar_loop",
               what="bar.sync loop, 32 warps"),
        Kernel("atom_shared", "micro", s, "atom_shared", (G, 1, 1), B256,
               (buf("f32", 32), out("u32", n), val("s32", 64)), check="atom_shared", rtol=0.0,
               what="atom.shared.add, 32 distinct words per warp"),
        Kernel("atom_global", "micro", s, "atom_global", (G, 1, 1), B256,
               (buf("f32", 32), out("u32", 4096, "zeros"), val("s32", 32)), check="atom_global", rtol=0.0,
               what="global atomicAdd u32 over 16 KiB"),
    ]
    for tag, per in STREAM_SIZES.items():
        n4 = STREAM_G * 256 * per
        ks.append(Kernel(f"stream_read_{tag}", "micro", m, "stream_read", (STREAM_G, 1, 1), B256,
                         (buf("f32", 4 * n4), out("f32", STREAM_G * 256), val("u64", n4)),
                         check="stream_read", sample=16,
                         what=f"streaming float4 read of {16 * n4 / 2**20:.0f} MiB, one chunk per CTA"))
    return ks


def _fixtures() -> list[Kernel]:
    return [
        Kernel("block_reduce", "fixture", f"{FIX}/block_reduce.ptx", "block_reduce", (8, 1, 1), (128, 1, 1),
               (buf("f32", 8192), out("f32", 8), val("s32", 8192)), check="block_reduce"),
        Kernel("clock64_bracket", "fixture", f"{FIX}/clock64.ptx", "clock64_bracket", (4, 1, 1), (64, 1, 1),
               (buf("s64", 256, "zeros"), out("f32", 256), buf("f32", 256), val("s32", 8)), check="clock64"),
        Kernel("cp_async_f32", "fixture", f"{FIX}/cp_async.ptx", "cp_async_f32", (4, 1, 1), (64, 1, 1),
               (buf("f32", 1000), out("f32", 1000), val("s32", 1000)), check="cp_async_f32"),
        Kernel("cp_async_v4", "fixture", f"{FIX}/cp_async.ptx", "cp_async_v4", (4, 1, 1), (64, 1, 1),
               (buf("f32", 2000), out("f32", 2000), val("s32", 2000)), check="cp_async_v4"),
        Kernel("divergent_loop", "fixture", f"{FIX}/divergent_loop.ptx", "divergent_loop", (8, 1, 1),
               (64, 1, 1), (buf("i32", 512), buf("u32", 512), buf("i32", 512), out("i32", 512),
                            out("u32", 512), val("s32", 512)), check="divergent_loop", rtol=0.0),
        Kernel("saxpy64", "fixture", f"{FIX}/grid_stride64.ptx", "saxpy64", (4, 1, 1), (128, 1, 1),
               (val("u64", 2000), val("f32", 1.5), buf("f32", 2000), buf("f32", 2000, role="out")),
               check="saxpy64"),
        Kernel("daxpy_mixed64", "fixture", f"{FIX}/grid_stride64.ptx", "daxpy_mixed64", (4, 1, 1), (128, 1, 1),
               (val("s64", 2000), val("f64", -0.75), buf("f32", 2000), buf("f64", 2000, role="out")),
               check="saxpy64"),
        Kernel("mma_f16_m16n8k16", "fixture", f"{FIX}/mma_ldmatrix.ptx", "mma_f16_m16n8k16", (4, 1, 1),
               (32, 1, 1), (buf("f16", 1024), buf("f16", 512), buf("f32", 512), out("f32", 512)),
               check="mma_f16", rtol=1e-3),
        Kernel("mma_bf16_m16n8k16", "fixture", f"{FIX}/mma_ldmatrix.ptx", "mma_bf16_m16n8k16", (4, 1, 1),
               (32, 1, 1), (buf("bf16", 1024), buf("bf16", 512), buf("f32", 512), out("f32", 512)),
               check="mma_bf16", rtol=1e-3),
        Kernel("sgemm_tiled", "example", "examples/sgemm_tiled.ptx", check="header"),
    ]


GEMMS = [("16x16x16", "f16", "mma"), ("128x128x128", "f16", "mma"), ("256x256x256", "f16", "mma"),
         ("512x512x512", "f16", "mma"), ("64x256x1024", "f16", "mma"), ("16x16x16", "f16", "simt"),
         ("128x128x128", "f16", "simt"), ("256x256x256", "f16", "simt"), ("128x128x128", "f32", "simt")]


def _gemms() -> list[Kernel]:
    out_: list[Kernel] = []
    for shape, dtype, variant in GEMMS:
        name = f"gemm_{shape}_{dtype}_{variant}"
        big = shape in ("512x512x512",) or (shape == "256x256x256" and variant == "simt")
        out_.append(Kernel(name, "gemm", f"benchmarks/silicon/gemm/{name}", check="header",
                           gemm=f"{shape} {dtype} {variant}", sample=32 if big else None))
    return out_


def _public() -> list[Kernel]:
    n = 32768
    mm = 64
    red_n = 65536
    tw = 256
    B, T, C, V = 4, 64, 128, 9
    ln_n, ln_c = 256, 256
    sm_n, sm_c = 128, 512
    gemm_check = {"op": "gemm", "M": mm, "N": mm, "K": mm, "layout_a": "row", "layout_b": "row",
                  "layout_c": "row", "alpha": 1.0, "beta": 0.0, "epilogue": [], "rtol": 1e-5}
    mmp = (buf("f32", mm * mm, "poison", "D"), buf("f32", mm * mm, role="A"), buf("f32", mm * mm, role="B"),
           val("s32", mm), val("s32", mm))
    tp = (out("f32", tw * tw), buf("f32", tw * tw), val("s32", tw), val("s32", tw))
    return [
        Kernel("vectorAdd", "public", f"{PUB}/vectorAdd.ptx", "vectorAdd", (-(-n // 256), 1, 1), B256,
               (buf("f32", n), buf("f32", n), out("f32", n), val("s32", n)), check="vector_add"),
        Kernel("matrixMul_16", "public", f"{PUB}/matrixMul.ptx", "MatrixMulCUDAILi16", (mm // 16, mm // 16, 1),
               (16, 16, 1), mmp, check="header", extra={"check": gemm_check}),
        Kernel("matrixMul_32", "public", f"{PUB}/matrixMul.ptx", "MatrixMulCUDAILi32", (mm // 32, mm // 32, 1),
               (32, 32, 1), mmp, check="header", extra={"check": gemm_check}),
        Kernel("reduce2", "public", f"{PUB}/reduction.ptx", "reduce2", (red_n // 256, 1, 1), B256,
               (buf("f32", red_n), out("f32", red_n // 256), val("u32", red_n)), dynamic_shared=1024,
               check="reduce_chunks"),
        Kernel("reduce4", "public", f"{PUB}/reduction.ptx", "reduce4", (red_n // 512, 1, 1), B256,
               (buf("f32", red_n), out("f32", red_n // 512), val("u32", red_n)), dynamic_shared=1024,
               check="reduce_chunks"),
        Kernel("reduce6", "public", f"{PUB}/reduction.ptx", "reduce6", (64, 1, 1), B256,
               (buf("f32", red_n), out("f32", 64), val("u32", red_n)), dynamic_shared=1024, check="reduce6"),
        Kernel("transposeNaive", "public", f"{PUB}/transpose.ptx", "transposeNaive", (tw // 32, tw // 32, 1),
               (32, 16, 1), tp, check="transpose", rtol=0.0),
        Kernel("transposeCoalesced", "public", f"{PUB}/transpose.ptx", "transposeCoalesced",
               (tw // 32, tw // 32, 1), (32, 16, 1), tp, check="transpose", rtol=0.0),
        Kernel("transposeNoBankConflicts", "public", f"{PUB}/transpose.ptx", "transposeNoBankConflicts",
               (tw // 32, tw // 32, 1), (32, 16, 1), tp, check="transpose", rtol=0.0),
        Kernel("shfl_scan_test", "public", f"{PUB}/shfl_scan.ptx", "shfl_scan_test", (16, 1, 1), B256,
               (buf("i32", 4096, role="out"), val("s32", 32), out("i32", 16)), dynamic_shared=32,
               check="shfl_scan", rtol=0.0),
        Kernel("histogram256", "public", f"{PUB}/histogram256.ptx", "histogram256Kernel", (32, 1, 1),
               (192, 1, 1), (out("u32", 32 * 256), buf("u32", 32768), val("u32", 32768)),
               check="histogram256", rtol=0.0),
        Kernel("mergeHistogram256", "public", f"{PUB}/histogram256.ptx", "mergeHistogram256Kernel",
               (256, 1, 1), B256, (out("u32", 256), buf("u32", 256 * 64), val("u32", 64)),
               check="merge_histogram", rtol=0.0),
        Kernel("scalarProd", "public", f"{PUB}/scalarProd.ptx", "scalarProdGPU", (32, 1, 1), B256,
               (out("f32", 32), buf("f32", 32 * 4096), buf("f32", 32 * 4096), val("s32", 32), val("s32", 4096)),
               check="scalar_prod"),
        Kernel("gelu_forward", "public", f"{PUB}/llmc_elementwise.ptx", "gelu_forward_kernel1", (128, 1, 1),
               B256, (out("f32", 32768), buf("f32", 32768), val("s32", 32768)), check="gelu"),
        Kernel("residual_forward", "public", f"{PUB}/llmc_elementwise.ptx", "residual_forward_kernel1",
               (128, 1, 1), B256, (out("f32", 32768), buf("f32", 32768), buf("f32", 32768), val("s32", 32768)),
               check="residual"),
        Kernel("encoder_forward", "public", f"{PUB}/llmc_elementwise.ptx", "encoder_forward_kernel2",
               (B * T * C // 256, 1, 1), B256,
               (out("f32", B * T * C), buf("u32", B * T), buf("f32", V * C), buf("f32", T * C),
                val("s32", B), val("s32", T), val("s32", C)), check="encoder"),
        Kernel("layernorm_forward", "public", f"{PUB}/llmc_norm.ptx", "layernorm_forward_kernel3",
               (ln_n // 8, 1, 1), B256,
               (out("f32", ln_n * ln_c), out("f32", ln_n), out("f32", ln_n), buf("f32", ln_n * ln_c),
                buf("f32", ln_c), buf("f32", ln_c), val("s32", ln_n), val("s32", ln_c)), check="layernorm"),
        Kernel("softmax_forward", "public", f"{PUB}/llmc_norm.ptx", "softmax_forward_kernel4", (sm_n, 1, 1),
               B256, (out("f32", sm_n * sm_c), buf("f32", sm_n * sm_c), val("s32", sm_n), val("s32", sm_c)),
               dynamic_shared=32, check="softmax"),
    ]


SUITE: list[Kernel] = _micro() + _fixtures() + _gemms() + _public()


def by_name(name: str) -> Kernel:
    for k in SUITE:
        if k.name == name:
            return k
    raise KeyError(f"{name!r} is not in benchmarks/silicon/suite.py")
