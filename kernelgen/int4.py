"""s4 GEMMs (issue 16 item 4): two signed 4-bit values per byte, the lower nibble first (PTX packing). An
s4 GEMM of K is planned and emitted as the s8 GEMM over the packed bytes (K / 2 of them): mma.sync
m16n8k64.s4 takes the same four A and two B 32-bit registers as m16n8k32.s8, with 8 nibbles where s8 has
4 bytes, so every copy, ldmatrix address and fragment of the s8 kernel is the s4 kernel's. Only the mma
form changes, and the kernel halves its K parameter (the caller passes K in elements). Tilings therefore
count TILE_K in packed bytes (2 s4 each); plan.json's spec is the packed one (its log says so).

Where the tensor unit has no s4 form (sm_90: the hwconfig gives ``pipes[tensor].s4_unpack_alu``), ptxas
emulates each mma.m16n8k64.s4: a call of a subroutine that sign-extends the nibbles into bytes (LOP3, SHF,
MOV on the ALU pipe; IMAD.SHL on the FMA pipe) and runs two IMMA.16832.S8.S8 (benchmarks/s4_emulation.py
counts it in the SASS). The planner charges per s4 mma two s8 m16n8k32 on the tensor pipe and
``s4_unpack_alu`` instructions on the ALU pipe (``emulated_counts`` for the cycle model, ``emulated_work``
for the pipe-work bound); the FMA-pipe share (29-49 per mma, under a third of the ALU's) is not charged.
ptxas splits the unpacking between the two pipes per kernel, so the ALU count of one tiling's kernel can
differ from the field by about 10% (docs/kernelgen.md). Where s4 is native, an s4 mma costs one s8
m16n8k32 (same instruction count, MACs at ``int8_lanes``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from kernelgen.counting import Counts
from kernelgen.spec import Dim, GemmSpec
from kernelgen.tiling import Tiling
from sim.hw import HwConfig

EMULATED_IMMA = 2  # s8 m16n8k32 per emulated m16n8k64.s4: 64 nibbles of K are 2 x 32 sign-extended bytes


def packed_spec(spec: GemmSpec) -> GemmSpec:
    """The s8 spec over packed bytes of an s4 spec (K halved), marked packed_s4."""
    k = spec.K
    half = Dim(k.lo // 2, k.hi // 2, max(1, k.multiple_of // 2))
    return dataclasses.replace(spec, K=half, dtype_a="s8", dtype_b="s8", packed_s4=True)


def unpack_alu(spec: GemmSpec, hw: HwConfig) -> int | None:
    """[pipes[tensor].s4_unpack_alu] for a packed s4 spec on hardware that emulates s4; else None."""
    if not spec.packed_s4:
        return None
    try:
        return hw.pipe_for("tensor").s4_unpack_alu
    except KeyError:
        return None


def emulated_region(region: Mapping[str, int], alu: int) -> dict[str, int]:
    """A region's warp instructions by class with each s4 mma (class "tensor") emulated: EMULATED_IMMA
    s8 mmas and ``alu`` ALU-pipe instructions."""
    out = dict(region)
    n = out.get("tensor", 0)
    if n:
        out["tensor"] = EMULATED_IMMA * n
        out["alu"] = out.get("alu", 0) + alu * n
    return out


def emulated_counts(c: Counts, spec: GemmSpec, hw: HwConfig) -> Counts:
    """The variant's counts as the emulating hardware runs them (unchanged where s4 is native)."""
    alu = unpack_alu(spec, hw)
    if alu is None:
        return c
    return dataclasses.replace(c, pre=emulated_region(c.pre, alu), iter=emulated_region(c.iter, alu),
                               post=emulated_region(c.post, alu), pre_after=emulated_region(c.pre_after, alu))


def emulated_work(work: Mapping[str, int], spec: GemmSpec, t: Tiling, hw: HwConfig) -> dict[str, int]:
    """Lane-operations per class of one CTA (models.schedule.work_per_cta) with the s4 mmas emulated:
    tensor MACs x EMULATED_IMMA, plus ``s4_unpack_alu`` x [warp_size] ALU lane-ops per mma."""
    alu = unpack_alu(spec, hw)
    out = dict(work)
    if alu is None or not out.get("tensor"):
        return out
    mmas = out["tensor"] // t.mma_macs
    out["tensor"] *= EMULATED_IMMA
    out["alu"] = out.get("alu", 0) + mmas * alu * hw.warp_size
    return out


def s4_note(spec: GemmSpec, hw: HwConfig) -> str:
    """One line for the plan log and analysis.md: how an s4 mma is planned on ``hw``."""
    head = "s4: planned as the s8 GEMM over packed bytes (K / 2, TILE_K in bytes of two s4)"
    alu = unpack_alu(spec, hw)
    if alu is None:
        return f"{head}; each m16n8k64.s4 charged as one m16n8k32.s8 (kernelgen/int4.py)"
    arch = f"{hw.name} ({hw.arch})" if hw.arch else hw.name
    return (f"{head}; EMULATED: {arch} has no s4 tensor path, ptxas runs each mma.m16n8k64.s4 as "
            f"{EMULATED_IMMA} s8 m16n8k32 (IMMA.16832.S8.S8) on sign-extended nibbles after {alu} ALU-pipe "
            f"unpacking instructions [pipes[tensor].s4_unpack_alu], charged so (kernelgen/int4.py); s8 is "
            f"faster here")
