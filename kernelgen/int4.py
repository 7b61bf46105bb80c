"""s4 GEMMs (issue 16 item 4): two signed 4-bit values per byte, the lower nibble first (PTX packing). An
s4 GEMM of K is planned and emitted as the s8 GEMM over the packed bytes (K / 2 of them): mma.sync
m16n8k64.s4 takes the same four A and two B 32-bit registers as m16n8k32.s8, with 8 nibbles where s8 has
4 bytes, so every copy, ldmatrix address and fragment of the s8 kernel is the s4 kernel's. Only the mma
form changes, and the kernel halves its K parameter (the caller passes K in elements). Tilings therefore
count TILE_K in packed bytes (2 s4 each); plan.json's spec is the packed one (its log says so)."""

from __future__ import annotations

import dataclasses

from kernelgen.spec import Dim, GemmSpec


def packed_spec(spec: GemmSpec) -> GemmSpec:
    """The s8 spec over packed bytes of an s4 spec (K halved), marked packed_s4."""
    k = spec.K
    half = Dim(k.lo // 2, k.hi // 2, max(1, k.multiple_of // 2))
    return dataclasses.replace(spec, K=half, dtype_a="s8", dtype_b="s8", packed_s4=True)
