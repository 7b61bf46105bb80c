"""Tensor maps (CUDA's CUtensorMap, tiled and im2col modes) as the simulator builds them: the description a launch
gives (``@workbench`` param kind "tensormap" or ``--tensormap``, docs/kernel-metadata.md), its checks,
the opaque 128-byte handle placed in the kernel's parameter, and the box gather / scatter with the
swizzle rule and out-of-bounds fill of cp.async.bulk.tensor (docs/ptx-subset.md).

Pure numpy: the functional model (sim/functional/ops_tma.py) and the launch binder both use it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

HANDLE_SIZE = 128
_MAGIC = b"WBTMAP01"  # the handle's first bytes; then the u32 index of the map in the launch
SWIZZLES = (0, 32, 64, 128)
MAX_RANK = 5
MAX_BOX = 256  # cuTensorMapEncodeTiled: boxDim[i] <= 256; cuTensorMapEncodeIm2col: channelsPerPixel <= 256
MAX_PIXELS = 1024  # cuTensorMapEncodeIm2col: pixelsPerColumn <= 1024
# cuTensorMapEncodeIm2col: the corners' range by rank (3-D +-2^15, 4-D +-2^7, 5-D +-2^4)
IM2COL_CORNER = {3: 1 << 15, 4: 1 << 7, 5: 1 << 4}


@dataclass(frozen=True)
class TensorMapSpec:
    """A tiled tensor map before its buffer has an address: ``of`` names the buffer param (its PTX
    name or metadata role); dims / box / element_strides in elements, innermost first; strides the
    byte strides of dims[1:]; swizzle in bytes (0, 32, 64, 128)."""

    of: str
    dtype: str
    esize: int
    dims: tuple[int, ...]
    strides: tuple[int, ...]
    box: tuple[int, ...]
    swizzle: int = 0
    element_strides: tuple[int, ...] = ()
    # im2col mode (cuTensorMapEncodeIm2col) when channels > 0: the bounding box corners of the spatial dims
    # (dims[1:-1], innermost first), channels per pixel and pixels per column; box is then unused
    lower: tuple[int, ...] = ()
    upper: tuple[int, ...] = ()
    channels: int = 0
    pixels: int = 0

    @property
    def im2col(self) -> bool:
        return self.channels > 0

    def problem(self) -> str:
        """The first rule the map breaks (as cuTensorMapEncodeTiled / Im2col check it), "" when none."""
        rank = len(self.dims)
        es = self.element_strides or (1,) * rank
        if self.im2col:
            return self._im2col_problem()
        if not 1 <= rank <= MAX_RANK:
            return f"dims has {rank} entries; give 1..{MAX_RANK} (innermost first)"
        if len(self.strides) != rank - 1:
            return f"strides needs {rank - 1} entries (the byte strides of dims[1:]), found {len(self.strides)}"
        if len(self.box) != rank or len(es) != rank:
            return f"box and element_strides need {rank} entries each (one per dim)"
        if any(d < 1 or d >= 1 << 32 for d in self.dims):
            return f"dims {list(self.dims)} must be 1..2^32-1"
        if any(s % 16 or s <= 0 for s in self.strides):
            return f"strides {list(self.strides)} must be positive multiples of 16 bytes"
        if any(not 1 <= b <= MAX_BOX for b in self.box):
            return f"box {list(self.box)} entries must be 1..{MAX_BOX}"
        if any(not 1 <= e <= 8 for e in es):
            return f"element_strides {list(es)} entries must be 1..8"
        if self.box[0] * self.esize % 16:
            return f"box[0] * {self.esize} bytes = {self.box[0] * self.esize} must be a multiple of 16"
        if self.swizzle not in SWIZZLES:
            return f"swizzle {self.swizzle} must be one of {', '.join(map(str, SWIZZLES))} (bytes)"
        if self.swizzle and self.box[0] * self.esize > self.swizzle:
            return (f"with swizzle {self.swizzle} the inner box row ({self.box[0]} x {self.esize} bytes) "
                    f"must span at most {self.swizzle} bytes")
        return ""

    def _im2col_problem(self) -> str:
        rank = len(self.dims)
        if not 3 <= rank <= MAX_RANK:
            return f"an im2col map has 3..{MAX_RANK} dims (C, spatial..., N; innermost first), found {rank}"
        if len(self.strides) != rank - 1:
            return f"strides needs {rank - 1} entries (the byte strides of dims[1:]), found {len(self.strides)}"
        if any(d < 1 or d >= 1 << 32 for d in self.dims):
            return f"dims {list(self.dims)} must be 1..2^32-1"
        if any(s % 16 or s <= 0 for s in self.strides):
            return f"strides {list(self.strides)} must be positive multiples of 16 bytes"
        if self.dims[0] * self.esize % 16:
            return f"dims[0] (channels) x {self.esize} bytes must be a multiple of 16"
        lim = IM2COL_CORNER[rank]
        for what, c in (("lower", self.lower), ("upper", self.upper)):
            if len(c) != rank - 2 or any(not -lim <= x < lim for x in c):
                return f"im2col {what} needs {rank - 2} entries (one per spatial dim) in {-lim}..{lim - 1}"
        if any(d + u - lo < 1 for d, lo, u in zip(self.dims[1:-1], self.lower, self.upper)):
            return "im2col corners leave an empty bounding box (dims + upper - lower must be >= 1)"
        if not 1 <= self.channels <= MAX_BOX or self.channels * self.esize % 16:
            return f"im2col channels {self.channels} must be 1..{MAX_BOX} and span a multiple of 16 bytes"
        if not 1 <= self.pixels <= MAX_PIXELS:
            return f"im2col pixels {self.pixels} must be 1..{MAX_PIXELS}"
        if any(e != 1 for e in self.element_strides):
            return "element_strides other than 1 in im2col mode are not modelled (docs/ptx-subset.md)"
        if self.swizzle not in SWIZZLES:
            return f"swizzle {self.swizzle} must be one of {', '.join(map(str, SWIZZLES))} (bytes)"
        if self.swizzle and self.channels * self.esize > self.swizzle:
            return (f"with swizzle {self.swizzle} a pixel's {self.channels} channels must span at most "
                    f"{self.swizzle} bytes")
        return ""

    @property
    def span_bytes(self) -> int:
        """Bytes from the tensor's first element to one past its last."""
        return self.dims[0] * self.esize + sum((d - 1) * s for d, s in zip(self.dims[1:], self.strides))


def make_spec(of: str, dtype: str, esize: int, dims: Any, strides: Any, box: Any, swizzle: Any,
              element_strides: Any, im2col: Any = None) -> TensorMapSpec:
    """A checked spec from a header's or command line's fields; ValueError names the first problem.
    ``im2col``: None (tiled) or {"lower": [..], "upper": [..], "channels": C, "pixels": P} (box unused)."""
    if not of:
        raise ValueError("needs 'of', the name or role of the buffer it maps")
    if im2col is not None:
        if not isinstance(im2col, dict) or set(im2col) != {"lower", "upper", "channels", "pixels"}:
            raise ValueError("'im2col' must be {\"lower\": [..], \"upper\": [..], \"channels\": C, \"pixels\": P}")
        box = [] if box is None else box
    if not all(isinstance(x, list) for x in (dims, strides, box, element_strides)):
        raise ValueError("'dims', 'box' (and 'strides', 'element_strides') must be lists of integers")
    i2c = im2col or {}
    if not all(isinstance(i2c.get(k, []), list) for k in ("lower", "upper")):
        raise ValueError("im2col 'lower' and 'upper' must be lists of integers")
    spec = TensorMapSpec(of, dtype, esize, tuple(map(int, dims)), tuple(map(int, strides)), tuple(map(int, box)),
                         int(swizzle), tuple(map(int, element_strides)), tuple(map(int, i2c.get("lower", []))),
                         tuple(map(int, i2c.get("upper", []))), int(i2c.get("channels", 0)),
                         int(i2c.get("pixels", 0)))
    problem = spec.problem()
    if problem:
        raise ValueError(problem)
    return spec


@dataclass(frozen=True)
class TensorMap:
    """A tensor map bound to its buffer's global address."""

    spec: TensorMapSpec
    base: int

    @property
    def counts(self) -> tuple[int, ...]:
        """Elements the box holds per dim (the box traversed with the element strides); an im2col
        map's column holds (channels, pixels)."""
        if self.spec.im2col:
            return (self.spec.channels, self.spec.pixels)
        es = self.spec.element_strides or (1,) * len(self.spec.dims)
        return tuple(-(-b // e) for b, e in zip(self.spec.box, es))

    @property
    def box_bytes(self) -> int:
        return int(np.prod(self.counts)) * self.spec.esize

    def misaligned(self, coords: tuple[int, ...]) -> str | None:
        """Why a tiled box at ``coords`` cannot be copied, or None: its innermost coordinate must put the box's
        rows on 16-byte boundaries (coords[0] x element size a multiple of 16; the H200 stops the kernel with
        "an illegal instruction was encountered" otherwise: kernelgen's fp8 scale_b box at K block kb, measured
        2026-12-02, docs/wgmma-fp8.md; Triton and TileLang guard the same rule)."""
        if self.spec.im2col or coords[0] * self.spec.esize % 16 == 0:
            return None
        return (f"the box's innermost coordinate {coords[0]} x {self.spec.esize} bytes is not a multiple of 16 "
                "bytes (a TMA tile copy's rows must start 16-byte aligned; the GPU stops with an illegal "
                "instruction): align that coordinate")

    def element_addresses(self, coords: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        """(global byte address, inside the tensor) of every box element in shared-memory order
        (innermost dim fastest), for the box whose first element is at ``coords`` (signed)."""
        s = self.spec
        es = s.element_strides or (1,) * len(s.dims)
        strides = (s.esize,) + s.strides
        addr = np.zeros((), dtype=np.int64)
        inside = np.ones((), dtype=bool)
        for d in reversed(range(len(s.dims))):
            x = coords[d] + np.arange(self.counts[d], dtype=np.int64) * es[d]
            addr = addr[..., None] + x * strides[d]
            inside = inside[..., None] & (x >= 0) & (x < s.dims[d])
        return (addr.ravel() + self.base, inside.ravel())

    def im2col_addresses(self, coords: tuple[int, ...], offsets: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        """(global byte address, inside the tensor) of every element of the im2col column that starts at
        ``coords`` (c, spatial..., n; innermost first) with the filter ``offsets`` (one per spatial dim), in
        shared-memory order (pixel after pixel, ``channels`` elements each). PTX ISA, "im2col mode": the
        pixels are traversed innermost spatial dim first inside the bounding box (dim d from lower[d] to
        dims[d] - 1 + upper[d]), wrapping into the next dim and then the next image; each pixel's position
        plus the offsets is read, channels coords[0] .. + channels; elements outside the tensor are zeros."""
        s = self.spec
        r = len(s.dims)
        extent = [s.dims[d] + s.upper[d - 1] - s.lower[d - 1] for d in range(1, r - 1)]
        lin = np.int64(coords[r - 1])
        for d in reversed(range(1, r - 1)):
            lin = lin * extent[d - 1] + (coords[d] - s.lower[d - 1])
        pix = lin + np.arange(s.pixels, dtype=np.int64)
        pos = []
        for d in range(1, r - 1):
            pos.append(s.lower[d - 1] + pix % extent[d - 1] + offsets[d - 1])
            pix = pix // extent[d - 1]
        pos.append(pix)  # the image index
        strides = s.strides
        addr = np.zeros(s.pixels, dtype=np.int64)
        for p, st in zip(pos, strides):
            addr = addr + p * st
        inside = np.ones(s.pixels, dtype=bool)
        for p, dim in zip(pos, s.dims[1:]):
            inside &= (p >= 0) & (p < dim)
        ch = coords[0] + np.arange(s.channels, dtype=np.int64)
        addr2 = addr[:, None] + ch[None, :] * s.esize
        inside2 = inside[:, None] & ((ch >= 0) & (ch < s.dims[0]))[None, :]
        return (addr2.ravel() + self.base, inside2.ravel())


_CLI_KEYS = ("of", "dtype", "dims", "strides", "box", "swizzle", "estrides", "lower", "upper", "channels", "pixels")
CLI_FORM = ("NAME=of=PARAM|@file.npy,dtype=bf16,dims=256x32,strides=512,box=64x8[,swizzle=128][,estrides=1x1]"
            " (im2col: lower=-1x-1,upper=-1x-1,channels=C,pixels=P instead of box)")


def parse_cli(text: str) -> dict[str, str]:
    """The KEY=VALUE fields of one ``--tensormap`` value (after ``NAME=``); ValueError names the problem."""
    out: dict[str, str] = {}
    for part in text.split(","):
        key, eq, val = part.partition("=")
        key = key.strip()
        if not eq or key not in _CLI_KEYS:
            raise ValueError(f"'{part}' is not KEY=VALUE with KEY one of {', '.join(_CLI_KEYS)}")
        out[key] = val.strip()
    for need in ("of", "dims") + (("lower", "upper", "channels", "pixels") if "channels" in out else ("box",)):
        if need not in out:
            raise ValueError(f"'{need}=' is missing")
    return out


def ints(text: str, what: str) -> tuple[int, ...]:
    """``"64x8"`` -> (64, 8); ValueError naming ``what``."""
    try:
        return tuple(int(x, 0) for x in text.split("x")) if text else ()
    except ValueError:
        raise ValueError(f"{what} '{text}' is not integers joined by x (e.g. 64x8)") from None


def swizzled(offsets: np.ndarray, swizzle: int) -> np.ndarray:
    """Shared byte offsets after the TMA swizzle: bits [4, 4+log2(S/16)) of an offset XOR its bits
    [7, ...) (CUTLASS Swizzle<log2(S/16), 4, 3>); the identity for swizzle 0."""
    if not swizzle:
        return offsets
    return offsets ^ (((offsets >> 7) & (swizzle // 16 - 1)) << 4)


def encode_handle(index: int) -> bytes:
    return _MAGIC + int(index).to_bytes(4, "little") + bytes(HANDLE_SIZE - len(_MAGIC) - 4)


def decode_handle(raw: bytes) -> int | None:
    """The map index a handle carries, None when the bytes are not a simulator handle."""
    if raw[: len(_MAGIC)] != _MAGIC:
        return None
    return int.from_bytes(raw[len(_MAGIC): len(_MAGIC) + 4], "little")


__all__ = ["CLI_FORM", "HANDLE_SIZE", "TensorMap", "TensorMapSpec", "decode_handle", "encode_handle", "ints",
           "make_spec", "parse_cli", "swizzled"]
