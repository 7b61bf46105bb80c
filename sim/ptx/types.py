"""The one PTX type table: type name -> bits, kind, numpy dtype, packed element.

Parser (sizes of variables and parameters), ISA decode (type suffixes, pipes), functional model
(register storage and arithmetic) and verifier (bit-vector widths) all read this table.

kind: "int" (signed), "uint", "bits" (untyped), "float", "pred", "packed" (several narrower
elements in one register; ``elem`` names the element type, element 0 in the lowest bits).
``np`` is the numpy dtype the functional model holds a value of this type in (16-bit brain floats
and packed types as their raw bits); None where the simulator does not compute on the type.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PtxType:
    """A PTX type suffix (.u32, .f16x2, ...): its name, kind, bits and numpy dtype."""

    name: str
    bits: int
    kind: str  # int | uint | bits | float | pred | packed
    np: np.dtype | None
    elem: str = ""  # packed: the element type

    @property
    def size(self) -> int:
        """Bytes in memory (a predicate takes one)."""
        return max(1, self.bits // 8)

    @property
    def lanes(self) -> int:
        return self.bits // TYPES[self.elem].bits if self.elem else 1


def _t(name: str, bits: int, kind: str, dtype: type | None, elem: str = "") -> PtxType:
    return PtxType(name, bits, kind, np.dtype(dtype) if dtype is not None else None, elem)


TYPES: dict[str, PtxType] = {t.name: t for t in (
    _t("b8", 8, "bits", np.uint8), _t("u8", 8, "uint", np.uint8), _t("s8", 8, "int", np.int8),
    _t("b16", 16, "bits", np.uint16), _t("u16", 16, "uint", np.uint16), _t("s16", 16, "int", np.int16),
    _t("b32", 32, "bits", np.uint32), _t("u32", 32, "uint", np.uint32), _t("s32", 32, "int", np.int32),
    _t("b64", 64, "bits", np.uint64), _t("u64", 64, "uint", np.uint64), _t("s64", 64, "int", np.int64),
    _t("b128", 128, "bits", None),
    _t("f16", 16, "float", np.float16), _t("bf16", 16, "float", np.uint16),
    _t("f32", 32, "float", np.float32), _t("f64", 64, "float", np.float64),
    _t("tf32", 32, "float", None), _t("s4", 4, "int", None), _t("u4", 4, "uint", None),
    _t("e4m3", 8, "float", None), _t("e5m2", 8, "float", None),
    _t("f16x2", 32, "packed", np.uint32, "f16"), _t("bf16x2", 32, "packed", np.uint32, "bf16"),
    _t("e4m3x2", 16, "packed", None, "e4m3"), _t("e5m2x2", 16, "packed", None, "e5m2"),
    _t("pred", 1, "pred", np.bool_),
)}


def type_mods(mods: tuple[str, ...]) -> list[str]:
    """The modifiers of an instruction that are type suffixes, in order."""
    return [m for m in mods if m in TYPES]


def is_float(t: str) -> bool:
    """A scalar floating-point type (packed halves are not)."""
    return TYPES[t].kind == "float"


def is_packed(t: str) -> bool:
    return TYPES[t].kind == "packed"


def is_signed(t: str) -> bool:
    return TYPES[t].kind == "int"
