"""Kernels that take TMA tensor maps ("tensormap" params of the @workbench header, notes: tensormap contract)
on the GPU: the launch is built from the header without the maps (hidden buffers stay: they are allocated,
filled and checked like any buffer), and cuLaunchKernel's argument list is assembled here from the PTX
entry's parameters, the device pointers of the buffers and an encoder of maps
(validation.tensormap.encode_tiled, and encode_im2col for im2col maps, on the GPU; any callable of the same
signature in tests).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sim.errors import UsageError
from sim.launch import Arg, normalize_dtype

#: (dtype, address, dims, strides, box, element_strides, swizzle) -> the map's 128 bytes
Encoder = Callable[[str, int, tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...], int], bytes]

LAUNCH_KINDS = ("u64", "s64", "u32", "s32", "f32", "f64")


def tensormap_params(meta: dict | None) -> list[dict[str, Any]]:
    """The header's "tensormap" params, in order (empty without a header)."""
    return [p for p in (meta or {}).get("params", []) if isinstance(p, dict) and p.get("kind") == "tensormap"]


def without_tensormaps(meta: dict) -> dict:
    """A copy of the header whose params are the buffers (hidden ones included) and scalars: what
    sim.launch.launch_from_metadata builds the host data from."""
    return {**meta, "params": [p for p in meta.get("params", []) if not (isinstance(p, dict)
                                                                       and p.get("kind") == "tensormap")]}


def launch_params(meta: dict) -> list[tuple[str, str]]:
    """(name, PTX type) of the header's passed buffer and scalar params, in header order: the parameter
    list sim.launch.bind_launch binds --arg values against for such a kernel (it appends the hidden
    buffers itself)."""
    return [(str(p.get("name", "")), "u64" if p.get("kind") == "buffer" else str(p.get("dtype", "")))
            for p in without_tensormaps(meta)["params"] if not p.get("hidden")]


def _buffer_of(m: dict[str, Any], args: Sequence[Arg]) -> int:
    of = m.get("of")
    for i, a in enumerate(args):
        if a.kind == "buffer" and of in (a.role, a.name):
            return i
    raise UsageError(f"tensor map {m.get('name')!r} maps {of!r}, which is no buffer param of the header; "
                     "set 'of' to a buffer's role or name")


#: (dtype, address, dims, strides, lower, upper, channels, pixels, element_strides, swizzle) -> the map's 128 bytes
Im2colEncoder = Callable[[str, int, tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...], int, int,
                          tuple[int, ...], int], bytes]


def _default_im2col() -> Im2colEncoder:
    from validation.tensormap import encode_im2col  # noqa: PLC0415 - cuda-python, on the GPU only

    return encode_im2col


def assemble_args(entry: Sequence[tuple[str, str]], maps: Sequence[dict[str, Any]], args: Sequence[Arg],
                  pointers: dict[int, int], encode: Encoder,
                  encode_im2col: Im2colEncoder | None = None) -> list[tuple[str, object]]:
    """cuLaunchKernel arguments, one per PTX parameter of ``entry`` ((PTX type, name) in order, as
    validation.gpu.ptx_entries lists them): a tensor map -> ("tmap", its 128 bytes encoded from the device
    pointer of the buffer it maps), a buffer -> ("u64", its pointer), a scalar -> (its type, value).
    ``pointers``: launch argument index -> device address, for every buffer."""
    by_map = {str(m.get("name")): m for m in maps}
    by_name = {a.name: i for i, a in enumerate(args)}
    out: list[tuple[str, object]] = []
    for ptype, pname in entry:
        if pname in by_map:
            m = by_map[pname]
            if ptype != "array":
                raise UsageError(f"tensor map {pname} must be a '.param .align 64 .b8 {pname}[128]' parameter")
            dims = tuple(int(d) for d in m["dims"])
            es = tuple(int(e) for e in m.get("element_strides") or [1] * len(dims))
            strides = tuple(int(s) for s in m["strides"])
            if m.get("im2col"):  # cuTensorMapEncodeIm2col (docs/kernel-metadata.md)
                enc_i2c = encode_im2col if encode_im2col is not None else _default_im2col()
                i2c = m["im2col"]
                tmap = enc_i2c(str(m["dtype"]), pointers[_buffer_of(m, args)], dims, strides,
                                     tuple(int(x) for x in i2c["lower"]), tuple(int(x) for x in i2c["upper"]),
                                     int(i2c["channels"]), int(i2c["pixels"]), es, int(m.get("swizzle", 0)))
            else:
                tmap = encode(str(m["dtype"]), pointers[_buffer_of(m, args)], dims, strides,
                              tuple(int(b) for b in m["box"]), es, int(m.get("swizzle", 0)))
            out.append(("tmap", tmap))
        elif pname in by_name:
            i = by_name[pname]
            a = args[i]
            if a.kind == "buffer":
                out.append(("u64", pointers[i]))
                continue
            kind = normalize_dtype(a.dtype)
            kind = {"b32": "u32", "b64": "u64"}.get(kind, kind)
            if kind not in LAUNCH_KINDS:
                raise UsageError(f"parameter {pname}: scalar type .{kind} cannot be passed with tensor maps; "
                                 f"use one of {', '.join(LAUNCH_KINDS)}")
            out.append((kind, a.value))
        else:
            raise UsageError(f"PTX parameter {pname} is neither a header param nor a tensor map; fix the header")
    return out
