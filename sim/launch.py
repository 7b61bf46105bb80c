"""Launch description shared by the simulator, the verifier and the GPU runner.

A :class:`Launch` is a kernel name, a grid, a block, dynamic shared memory and the bound
arguments (:class:`Arg`: scalars and host buffers). It comes either from the ``// @workbench``
metadata header that kernelgen writes (:func:`launch_from_metadata`, see
``docs/kernel-metadata.md``) or from command-line specs (:func:`parse_arg_spec`); :func:`bind_launch`
combines both for every command that takes ``--grid``/``--block``/``--arg`` (``python -m sim run``,
``python -m validation gpu``).

Pure numpy + json: this module imports nothing from kernelgen or validation.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from sim.errors import HeaderError, UsageError
from sim.functional.types import FP8_VALUES, bf16_to_f32, f32_to_bf16
from sim.limits import check_dims
from sim.tensormap import CLI_FORM, TensorMapSpec, ints, make_spec, parse_cli

# --------------------------------------------------------------------------------------------
# dtypes

#: Element type names (the workbench spellings and the PTX ones) -> numpy dtype.
#: ``bf16`` has no numpy dtype: it is stored as ``np.uint16`` bit patterns.
DTYPES: dict[str, np.dtype] = {
    "f16": np.dtype(np.float16),
    "bf16": np.dtype(np.uint16),
    "f32": np.dtype(np.float32),
    "f64": np.dtype(np.float64),
    "i8": np.dtype(np.int8),
    "i16": np.dtype(np.int16),
    "i32": np.dtype(np.int32),
    "i64": np.dtype(np.int64),
    "u8": np.dtype(np.uint8),
    "u16": np.dtype(np.uint16),
    "u32": np.dtype(np.uint32),
    "u64": np.dtype(np.uint64),
    "e4m3": np.dtype(np.uint8),  # fp8 e4m3 (OCP FN) bit patterns, decoded by sim.functional.types.FP8_VALUES
    "e5m2": np.dtype(np.uint8),  # fp8 e5m2 (OCP, IEEE-like: infinities and NaNs) bit patterns, likewise
    # PTX spellings
    "s8": np.dtype(np.int8),
    "s16": np.dtype(np.int16),
    "s32": np.dtype(np.int32),
    "s64": np.dtype(np.int64),
    "b8": np.dtype(np.uint8),
    "b16": np.dtype(np.uint16),
    "b32": np.dtype(np.uint32),
    "b64": np.dtype(np.uint64),
    # two signed 4-bit values per byte, the lower nibble first (an s4 GEMM's A and B: kernelgen/int4.py)
    "s4x2": np.dtype(np.uint8),
}

#: The names a user may give in ``zeros:DTYPE:COUNT`` (the documented ones first).
BUFFER_DTYPE_NAMES = ("f16", "bf16", "f32", "f64", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64")

_FLOAT_NAMES = {"f16", "bf16", "f32", "f64"}

# assumption: the simulator holds every buffer in host memory and touches each byte; 4 GiB is far past
# any launch it can simulate in minutes
MAX_BUFFER_BYTES = 1 << 32

# numpy dtype -> canonical workbench name (used for @file.npy buffers)
_NAME_OF_DTYPE: dict[np.dtype, str] = {
    np.dtype(np.float16): "f16",
    np.dtype(np.float32): "f32",
    np.dtype(np.float64): "f64",
    np.dtype(np.int8): "i8",
    np.dtype(np.int16): "i16",
    np.dtype(np.int32): "i32",
    np.dtype(np.int64): "i64",
    np.dtype(np.uint8): "u8",
    np.dtype(np.uint16): "u16",
    np.dtype(np.uint32): "u32",
    np.dtype(np.uint64): "u64",
}


def normalize_dtype(name: str) -> str:
    """``".u32"`` / ``"U32"`` / ``"u32"`` -> ``"u32"``; raises KeyError when unknown."""
    n = name.strip().lstrip(".").lower()
    if n not in DTYPES:
        raise KeyError(name)
    return n


def numpy_dtype(name: str) -> np.dtype:
    """The numpy storage dtype of a workbench/PTX type name (bf16 -> uint16 bits)."""
    return DTYPES[normalize_dtype(name)]


def is_float_dtype(name: str) -> bool:
    return normalize_dtype(name) in _FLOAT_NAMES


def f32_to_bf16_bits(x: Any) -> np.ndarray:
    """float values -> bf16 bit patterns (np.uint16), rounding to nearest, ties to even; NaN stays a
    quiet NaN of the same sign (the one implementation: sim.functional.types.f32_to_bf16)."""
    return f32_to_bf16(x)


def bf16_bits_to_f32(b: Any) -> np.ndarray:
    """bf16 bit patterns (any unsigned 16-bit container) -> np.float32 values (exact)."""
    return bf16_to_f32(np.asarray(b))


def unpack_s4(arr: np.ndarray) -> np.ndarray:
    """Packed s4 bytes -> int8 values, two per byte, the lower nibble first (PTX's s4 packing)."""
    b = np.asarray(arr).astype(np.uint8)
    lo = (b & 0xF).astype(np.int8)
    hi = (b >> 4).astype(np.int8)
    out = np.empty(b.size * 2, dtype=np.int8)
    out[0::2], out[1::2] = lo, hi
    return np.where(out >= 8, out - 16, out).astype(np.int8)


def buffer_to_float64(arr: np.ndarray, dtype_name: str) -> np.ndarray:
    """A buffer's host array as float64 values (bf16 bit patterns are decoded, s4x2 bytes unpacked)."""
    if normalize_dtype(dtype_name) == "s4x2":
        return unpack_s4(arr).astype(np.float64)
    if normalize_dtype(dtype_name) == "bf16":
        return bf16_to_f32(np.asarray(arr, dtype=np.uint16)).astype(np.float64)
    if normalize_dtype(dtype_name) in FP8_VALUES:
        return FP8_VALUES[normalize_dtype(dtype_name)][np.asarray(arr, dtype=np.uint8)]
    return np.asarray(arr).astype(np.float64)


# --------------------------------------------------------------------------------------------
# dataclasses


@dataclass
class Arg:
    """One bound kernel argument.

    ``kind == "scalar"``: ``value`` is a Python int/float and ``dtype`` the PTX parameter type
    (``"u32"``, ``"s32"``, ``"u64"``, ``"f32"``, ``"f64"``, ...).
    ``kind == "buffer"``: ``array`` is the 1-D host data and ``dtype`` its element type name
    (``"f16"``, ``"bf16"`` (uint16 bits), ``"f32"``, ...); the kernel gets a pointer to a copy.
    ``kind == "tensormap"``: ``tmap`` describes a tiled tensor map over the buffer it names; the
    kernel gets a 128-byte handle (sim/tensormap.py).
    ``role`` is the metadata role (``"A"``, ``"D"``, ``"M"``, ``"profile"``, ...) or ``""``;
    ``init`` how a buffer was filled (``"random"``, ``"poison"``, ``"zeros"``, ``"file"``);
    ``hidden``: a buffer that is allocated and read back but not passed (reached through a tensor map).
    """

    kind: str
    dtype: str
    value: int | float | None = None
    array: np.ndarray | None = None
    name: str = ""
    role: str = ""
    init: str = ""
    hidden: bool = False
    tmap: TensorMapSpec | None = None

    @property
    def is_buffer(self) -> bool:
        return self.kind == "buffer"

    def nbytes(self) -> int:
        return int(self.array.nbytes) if self.array is not None else 0

    def describe(self) -> str:
        if self.kind == "scalar":
            return f"{self.dtype} {self.value!r}"
        if self.tmap is not None:
            t = self.tmap
            return f"tensormap of {t.of}: {t.dtype} dims {list(t.dims)} box {list(t.box)} swizzle {t.swizzle}"
        count = 0 if self.array is None else self.array.size
        return f"{self.dtype}[{count}] ({self.init or 'buffer'})"


@dataclass
class Launch:
    """A kernel launch: entry name, grid, block, bound arguments, dynamic shared bytes, symbols, cluster."""

    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    args: list[Arg] = field(default_factory=list)
    dynamic_shared: int = 0
    symbols: dict[str, bytes] = field(default_factory=dict)  # module .global/.const -> its first bytes
    cluster: tuple[int, int, int] | None = None  # thread block cluster shape (sim/cluster.py); None: none given
    cluster_nonportable: bool = False  # allow clusters of 9..16 CTAs

    @property
    def roles(self) -> list[str]:
        return [a.role for a in self.args]

    @property
    def passed(self) -> list[Arg]:
        """The arguments the kernel receives, in parameter order (hidden buffers left out)."""
        return [a for a in self.args if not a.hidden]

    def copy(self) -> Launch:
        """A deep copy of the host data (so that a run can write into its own buffers)."""
        args = [
            Arg(a.kind, a.dtype, a.value, None if a.array is None else a.array.copy(), a.name, a.role, a.init,
                a.hidden, a.tmap)
            for a in self.args
        ]
        grid, block = cast("tuple[int, int, int]", tuple(self.grid)), cast("tuple[int, int, int]", tuple(self.block))
        return Launch(self.kernel, grid, block, args, self.dynamic_shared, dict(self.symbols), self.cluster,
                      self.cluster_nonportable)


# --------------------------------------------------------------------------------------------
# metadata header

_META_RE = re.compile(r"^\s*//\s*@workbench\b(.*)$")


def read_metadata(ptx_text: str, file: str | None = None) -> dict | None:
    """The JSON object of the first ``// @workbench {...}`` line, or None when there is none.

    Malformed JSON raises :class:`UsageError` naming the line.
    """
    for lineno, line in enumerate(ptx_text.splitlines(), start=1):
        m = _META_RE.match(line)
        if not m:
            continue
        payload = m.group(1).strip()
        try:
            meta = json.loads(payload)
        except json.JSONDecodeError as e:
            raise UsageError(
                f"malformed @workbench metadata JSON ({e.msg} at column {e.colno} of the JSON); "
                "fix the header or regenerate the kernel",
                file=file,
                line=lineno,
            ) from None
        if not isinstance(meta, dict):
            raise UsageError(
                "@workbench metadata must be one JSON object ({...}); fix the header", file=file, line=lineno
            )
        return meta
    return None


def at_header(e: UsageError, ptx_text: str, file: str | None) -> UsageError:
    """``e`` (a :class:`HeaderError` that names no file) naming ``file`` and the line of the ``@workbench``
    header; any other error unchanged."""
    if not isinstance(e, HeaderError) or e.file is not None or not file:
        return e
    line = next((i for i, t in enumerate(ptx_text.splitlines(), start=1) if _META_RE.match(t)), None)
    return HeaderError(e.message, file, line)


# --------------------------------------------------------------------------------------------
# command-line specs


def parse_dim3(text: str, what: str = "dimension") -> tuple[int, int, int]:
    """``"8,4,1"`` -> (8, 4, 1); ``"8"`` -> (8, 1, 1); ``"8,4"`` -> (8, 4, 1)."""
    parts = [p.strip() for p in str(text).split(",")]
    try:
        if not 1 <= len(parts) <= 3:
            raise ValueError
        vals = [int(p, 0) for p in parts]
    except ValueError:
        raise UsageError(
            f"bad {what} '{text}': give X[,Y[,Z]] with positive integers, e.g. 8,4,1"
        ) from None
    if any(v < 1 for v in vals):
        raise UsageError(f"bad {what} '{text}': every component must be >= 1, e.g. 8,4,1")
    while len(vals) < 3:
        vals.append(1)
    return (vals[0], vals[1], vals[2])


_NAMED_RE = re.compile(r"^([A-Za-z_$%][\w$]*)=(.*)$", re.S)


def split_named(spec: str) -> tuple[str | None, str]:
    """``"n=1024"`` -> ("n", "1024"); ``"1024"`` -> (None, "1024")."""
    m = _NAMED_RE.match(spec)
    if m:
        return m.group(1), m.group(2)
    return None, spec


def _int_range(name: str) -> tuple[int, int]:
    dt = DTYPES[name]
    info = np.iinfo(dt)
    return int(info.min), int(info.max)


def _parse_count(text: str, where: str) -> int:
    try:
        count = 1
        for part in text.split("*"):
            count *= int(part.strip(), 0)
    except ValueError:
        raise UsageError(f"{where}: COUNT '{text}' is not an integer; write e.g. zeros:f32:4096") from None
    if count < 1:
        raise UsageError(f"{where}: COUNT must be >= 1; write e.g. zeros:f32:4096")
    return count


def parse_arg_spec(spec: str, param_type: str | None, index: int) -> Arg:
    """One ``--arg`` value (without any ``NAME=`` prefix, see :func:`split_named`).

    * an integer (``1024``, ``-3``, ``0x40``) or float (``2.5``, ``1e-3``) literal: a scalar of the
      PTX parameter type ``param_type`` (``".u32"``, ``"f32"``, ...); a float literal for an integer
      parameter is an error; an integer is range-checked against the type;
    * ``@file.npy``: an input buffer, the file's array flattened to 1-D;
    * ``zeros:DTYPE:COUNT``: an output buffer of COUNT zeros (COUNT may be a product, ``64*64``).

    Errors raise :class:`UsageError` with one line naming the argument and the fix.
    """
    where = f"argument {index} ('{spec}')"
    ptype: str | None = None
    if param_type:
        try:
            ptype = normalize_dtype(param_type)
        except KeyError:
            raise UsageError(
                f"{where}: kernel parameter type '{param_type}' is not supported; "
                "use a kernel whose parameters are 8..64-bit integers, floats or pointers"
            ) from None
    s = spec.strip()
    if not s:
        raise UsageError(f"{where}: empty value; give a literal, @file.npy or zeros:DTYPE:COUNT")

    if s.startswith("@") or s.startswith("zeros:"):
        if ptype is not None and DTYPES[ptype].itemsize != 8:
            raise UsageError(
                f"{where}: parameter is .{ptype}, not a 64-bit pointer; give a number literal instead"
            )
        if s.startswith("@"):
            return _load_npy(s[1:], where)
        parts = s.split(":")
        if len(parts) != 3:
            raise UsageError(f"{where}: write zeros:DTYPE:COUNT, e.g. zeros:f32:4096")
        dname = parts[1].strip().lower()
        if dname not in DTYPES:
            raise UsageError(
                f"{where}: unknown DTYPE '{parts[1]}'; use one of {', '.join(BUFFER_DTYPE_NAMES)}"
            )
        count = _parse_count(parts[2], where)
        if count * DTYPES[dname].itemsize > MAX_BUFFER_BYTES:
            raise UsageError(f"{where}: {count:,} elements of {dname} exceed the {MAX_BUFFER_BYTES:,}-byte buffer "
                             "limit; give a smaller COUNT")
        dname = {"s8": "i8", "s16": "i16", "s32": "i32", "s64": "i64",
                 "b8": "u8", "b16": "u16", "b32": "u32", "b64": "u64"}.get(dname, dname)
        return Arg("buffer", dname, array=np.zeros(count, dtype=DTYPES[dname]), init="zeros")

    # a literal
    is_int = True
    try:
        ivalue = int(s, 0)
    except ValueError:
        is_int = False
    if is_int:
        t = ptype or ("s32" if -(2**31) <= ivalue < 2**31 else "s64")
        if t in _FLOAT_NAMES:
            return Arg("scalar", t, value=float(ivalue))
        lo, hi = _int_range(t)
        if not lo <= ivalue <= hi:
            raise UsageError(f"{where}: {ivalue} does not fit a .{t} parameter (range {lo}..{hi})")
        return Arg("scalar", t, value=ivalue)
    try:
        fvalue = float(s)
    except ValueError:
        raise UsageError(
            f"{where}: not a number, @file.npy or zeros:DTYPE:COUNT; e.g. 1024, 2.5, @x.npy, zeros:f32:4096"
        ) from None
    t = ptype or "f32"
    if t not in _FLOAT_NAMES:
        raise UsageError(f"{where}: float literal for an integer .{t} parameter; give an integer")
    return Arg("scalar", t, value=fvalue)


def _load_npy(path: str, where: str) -> Arg:
    if not path:
        raise UsageError(f"{where}: write @FILE.npy with the path of a numpy .npy file")
    if not os.path.isfile(path):
        raise UsageError(f"{where}: file '{path}' not found; give the path of an existing .npy file")
    try:
        arr = np.load(path, allow_pickle=False)
    except Exception as e:  # noqa: BLE001 - any load failure is a user error here
        raise UsageError(f"{where}: cannot read '{path}' as .npy ({e}); save it with numpy.save") from None
    if not isinstance(arr, np.ndarray):
        raise UsageError(f"{where}: '{path}' is an .npz archive, not one array; save the array with "
                         "numpy.save(path, array)")
    dname = _NAME_OF_DTYPE.get(arr.dtype.newbyteorder("=") if arr.dtype.byteorder == ">" else arr.dtype)
    if dname is None:
        raise UsageError(
            f"{where}: '{path}' has dtype {arr.dtype}; use one of {', '.join(BUFFER_DTYPE_NAMES)}"
        )
    arr = np.ascontiguousarray(arr.reshape(-1)).astype(DTYPES[dname], copy=False)
    if arr.size == 0:
        raise UsageError(f"{where}: '{path}' holds no elements; give a non-empty array")
    return Arg("buffer", dname, array=arr, init="file")


# --------------------------------------------------------------------------------------------
# metadata -> Launch


def poison_array(dtype_name: str, count: int) -> np.ndarray:
    """NaN for float types (bf16: its NaN bit pattern 0x7FC0), all 0xFF bytes for integers."""
    n = normalize_dtype(dtype_name)
    if n == "bf16":
        return np.full(count, 0x7FC0, dtype=np.uint16)
    if n in FP8_VALUES:  # 0x7F: NaN in e4m3 and in e5m2
        return np.full(count, 0x7F, dtype=np.uint8)
    if n in _FLOAT_NAMES:
        return np.full(count, np.nan, dtype=DTYPES[n])
    return np.frombuffer(b"\xff" * (count * DTYPES[n].itemsize), dtype=DTYPES[n]).copy()


def random_array(dtype_name: str, count: int, rng: np.random.Generator) -> np.ndarray:
    """Random host data: normal floats cast to the dtype, small integers; never all zeros."""
    n = normalize_dtype(dtype_name)
    if n in FP8_VALUES:  # normal values rounded to the nearest fp8 value (the decoded value is exact in float64)
        return fp8_bits(rng.standard_normal(count), n)
    if n in _FLOAT_NAMES:
        vals = rng.standard_normal(count)
        if count and not np.any(vals.astype(np.float32)):
            vals[0] = 1.0
        if n == "bf16":
            return f32_to_bf16(vals.astype(np.float32))
        arr = vals.astype(DTYPES[n])
    elif n == "s4x2":  # every nibble in [-8, 7]
        arr = rng.integers(0, 256, size=count).astype(np.uint8)
    else:
        dt = DTYPES[n]
        lo, hi = (-4, 5) if np.issubdtype(dt, np.signedinteger) else (0, 9)
        arr = rng.integers(lo, hi, size=count).astype(dt)
    if count and not np.any(arr):
        arr[0] = 1
    return arr


def fp8_bits(x: Any, kind: str = "e4m3") -> np.ndarray:
    """float values -> the bit patterns of the nearest finite fp8 values of `kind` (e4m3 or e5m2; ties to the
    lower pattern, past the largest finite value clamped to it), np.uint8; never all zeros."""
    table = FP8_VALUES[kind]
    finite = np.flatnonzero(np.isfinite(table))
    order = finite[np.argsort(table[finite], kind="stable")]
    vals = table[order]
    x = np.clip(np.asarray(x, dtype=np.float64).ravel(), vals[0], vals[-1])
    i = np.clip(np.searchsorted(vals, x), 1, len(vals) - 1)
    i -= (x - vals[i - 1]) <= (vals[i] - x)
    out = order[i].astype(np.uint8)
    if out.size and not np.any(table[out]):
        out[0] = int(np.flatnonzero(table == 1.0)[0])  # 1.0
    return out


def make_buffer(dtype_name: str, count: int, init: str, rng: np.random.Generator) -> np.ndarray:
    if init == "random":
        return random_array(dtype_name, count, rng)
    if init == "poison":
        return poison_array(dtype_name, count)
    if init == "zeros":
        return np.zeros(count, dtype=numpy_dtype(dtype_name))
    raise ValueError(init)


def launch_from_metadata(meta: dict, rng: np.random.Generator) -> Launch:
    """Build the launch a kernelgen header describes, with fresh host data from ``rng``."""
    def bad(msg: str) -> UsageError:
        return HeaderError(f"@workbench metadata: {msg}; fix the header or regenerate the kernel")

    kernel = meta.get("kernel")
    if not isinstance(kernel, str) or not kernel:
        raise bad("'kernel' (the entry name) is missing")
    try:
        grid = parse_dim3(",".join(str(v) for v in meta["grid"]), "grid")
        block = parse_dim3(",".join(str(v) for v in meta["block"]), "block")
    except KeyError as e:
        raise bad(f"{e.args[0]!r} is missing") from None
    except (TypeError, UsageError) as e:
        raise bad(f"grid/block must be [x, y, z] lists of positive integers ({e})") from None
    dyn = meta.get("dynamic_shared", 0) or 0
    if not isinstance(dyn, int) or dyn < 0:
        raise bad("'dynamic_shared' must be a non-negative integer")
    params = meta.get("params", [])
    if not isinstance(params, list):
        raise bad("'params' must be a list")
    args: list[Arg] = []
    for i, p in enumerate(params):
        if not isinstance(p, dict):
            raise bad(f"param {i} must be an object")
        name = str(p.get("name", ""))
        role = str(p.get("role", "") or "")
        kind = p.get("kind")
        try:
            dname = normalize_dtype(str(p.get("dtype", "")))
        except KeyError:
            raise bad(f"param {i} ({name}): unknown dtype {p.get('dtype')!r}") from None
        if kind == "scalar":
            if "value" not in p:
                raise bad(f"param {i} ({name}): scalar without 'value'")
            value = p["value"]
            if dname in _FLOAT_NAMES:
                value = float(value)
            elif isinstance(value, float) and not value.is_integer():
                raise bad(f"param {i} ({name}): float value {value} for integer dtype {dname}")
            else:
                value = int(value)
            args.append(Arg("scalar", dname, value=value, name=name, role=role))
        elif kind == "buffer":
            count = p.get("count")
            if not isinstance(count, int) or count < 1:
                raise bad(f"param {i} ({name}): buffer needs a positive integer 'count'")
            if count * DTYPES[dname].itemsize > MAX_BUFFER_BYTES:
                raise bad(f"param {i} ({name}): {count:,} elements exceed the {MAX_BUFFER_BYTES:,}-byte buffer limit")
            init = p.get("init", "random")
            if init not in ("random", "poison", "zeros"):
                raise bad(f"param {i} ({name}): init must be random, poison or zeros, not {init!r}")
            arr = make_buffer(dname, count, init, rng)
            args.append(Arg("buffer", dname, array=arr, name=name, role=role, init=init, hidden=bool(p.get("hidden"))))
        elif kind == "tensormap":
            try:
                spec = make_spec(str(p.get("of", "")), dname, DTYPES[dname].itemsize, p.get("dims"),
                                 p.get("strides", []), p.get("box"), p.get("swizzle", 0), p.get("element_strides", []),
                                 p.get("im2col"))
            except (TypeError, ValueError) as e:
                raise bad(f"param {i} ({name}): tensormap {e}") from None
            args.append(Arg("tensormap", dname, name=name, role=role, tmap=spec))
        else:
            raise bad(f"param {i} ({name}): kind must be 'buffer', 'scalar' or 'tensormap', not {kind!r}")
    for i, a in enumerate(args):
        if a.tmap is not None:
            try:
                tensormap_target(args, a.tmap)
            except ValueError as e:
                raise bad(f"param {i} ({a.name}): {e}") from None
    cluster = None
    if meta.get("cluster") is not None:  # thread block cluster shape (docs/kernel-metadata.md, docs/clusters.md)
        try:
            cluster = parse_dim3(",".join(str(v) for v in meta["cluster"]), "cluster")
        except (TypeError, UsageError) as e:
            raise bad(f"'cluster' must be an [x, y, z] list of positive integers ({e})") from None
    return Launch(kernel, grid, block, args, dyn, cluster=cluster)


def tensormap_target(args: Sequence[Arg], spec: TensorMapSpec) -> int:
    """The index of the buffer argument a tensor map maps (by PTX name, then role); ValueError when
    there is none or it is too small for the tensor."""
    idx = next((i for i, a in enumerate(args) if a.name == spec.of and a.is_buffer), None)
    if idx is None:
        idx = next((i for i, a in enumerate(args) if a.role == spec.of and a.is_buffer), None)
    if idx is None:
        have = ", ".join(a.name or a.role for a in args if a.is_buffer) or "none"
        raise ValueError(f"tensormap 'of' {spec.of!r} names no buffer param (buffers: {have})")
    need = spec.span_bytes
    if need > args[idx].nbytes():
        raise ValueError(f"tensormap over {spec.of!r} spans {need:,} bytes but the buffer holds "
                         f"{args[idx].nbytes():,}; fix dims/strides or the buffer size")
    return idx


# --------------------------------------------------------------------------------------------
# header + command line -> Launch (the one binder of ``--arg``)


def bind_args(kernel: str, params: Sequence[tuple[str, str]], specs: Sequence[str],
              base: Sequence[Arg | None], file: str | None = None) -> list[Arg]:
    """Bind ``--arg`` specs onto ``base`` (the header's arguments, or None per parameter).

    ``params`` are the entry's (PTX name, PTX type) pairs. A spec binds the next parameter in order
    (skipping tensor maps), or the one ``NAME=SPEC`` names (its PTX name or ``pN``); it keeps the header's role. Every
    parameter must end up bound; a scalar is packed as the PTX type declares it.
    """
    names = [n for n, _ in params]
    args: list[Arg | None] = list(base)
    pos = 0
    for spec in specs:
        name, body = split_named(spec)
        if name is None:
            while pos < len(params) and args[pos] is not None and args[pos].tmap is not None:  # type: ignore[union-attr]
                pos += 1  # a tensor map is bound by --tensormap only
            idx = pos
            pos += 1
            if idx >= len(params):
                raise UsageError(f"--arg {spec}: '{kernel}' takes only {len(params)} parameters; "
                                 "remove the extra --arg", file=file)
        elif name in names:
            idx = names.index(name)
        elif re.fullmatch(r"p\d+", name) and int(name[1:]) < len(params):
            idx = int(name[1:])
        else:
            raise UsageError(f"--arg {spec}: '{name}' is not a parameter of '{kernel}' "
                             f"(parameters: {', '.join(names)}, or p0..p{len(params) - 1})", file=file)
        try:
            new = parse_arg_spec(body, params[idx][1], idx)
        except UsageError as e:
            if params[idx][1].lstrip(".") != "b8":
                raise
            raise UsageError(f"{e.message}; if {names[idx]} is a tensor map (.b8 NAME[128]), bind it with "
                             f"--tensormap {names[idx]}=of=...", file=file) from None
        old = args[idx]
        new.name, new.role = names[idx], old.role if old is not None else ""
        args[idx] = new
    bound: list[Arg] = []
    for i, maybe in enumerate(args):
        if maybe is None:
            how = "--tensormap (a tensor map)" if params[i][1].lstrip(".") == "b8" else "--arg"
            raise UsageError(f"parameter {i} ({names[i]}) is not bound; add {how} for it", file=file)
        a = maybe
        ptype = params[i][1].lstrip(".")
        if a.kind == "scalar" and ptype in DTYPES:
            a.dtype = normalize_dtype(ptype)
        elif a.kind == "buffer" and (ptype not in DTYPES or DTYPES[ptype].itemsize != 8):
            raise UsageError(f"parameter {i} ({names[i]}) is .{ptype}, not a 64-bit pointer, "
                             "but is bound to a buffer; fix the header or --arg", file=file)
        bound.append(a)
    return bound


def bind_symbols(specs: Sequence[str], variables: Mapping[str, tuple[str, int]],
                 file: str | None = None) -> dict[str, bytes]:
    """``--symbol NAME=SPEC`` values -> the bytes each named module variable starts with.

    ``variables`` maps the module's ``.global``/``.const`` variables to (element type, size in
    bytes). SPEC is a literal of the element type (the first element) or ``@file.npy`` (its bytes,
    at most the variable's size), parsed as ``--arg`` values are.
    """
    out: dict[str, bytes] = {}
    for i, spec in enumerate(specs):
        name, body = split_named(spec)
        if name is None or name not in variables:
            have = ", ".join(sorted(variables)) or "none"
            raise UsageError(f"--symbol {spec}: write NAME=@file.npy or NAME=LITERAL with NAME a module "
                             f".global/.const variable (this module has: {have})", file=file)
        vtype, size = variables[name]
        if body.strip().startswith("zeros:"):
            raise UsageError(f"--symbol {spec}: a module variable starts as zeros already; give @file.npy "
                             "or a literal", file=file)
        is_file = body.strip().startswith("@")
        a = parse_arg_spec(body, None if is_file or vtype not in DTYPES else vtype, i)
        if a.kind == "scalar":
            data = np.array(a.value).astype(numpy_dtype(a.dtype)).tobytes()
        else:
            data = np.ascontiguousarray(a.array).tobytes()
        if len(data) > size:
            raise UsageError(f"--symbol {spec}: {len(data)} bytes do not fit '{name}' ({size} bytes)", file=file)
        out[name] = data
    return out


def bind_tensormaps(specs: Sequence[str], params: Sequence[tuple[str, str]], base: list[Arg | None],
                    file: str | None = None) -> list[Arg]:
    """``--tensormap NAME=of=...,dtype=...,dims=...,strides=...,box=...[,swizzle=...][,estrides=...]``
    values bound into ``base`` (in place) at the parameter NAME (PTX name or ``pN``). ``of`` names
    the buffer parameter the map covers, or is ``@file.npy``: a buffer passed only through the map
    (returned, hidden, to be appended to the launch's arguments)."""
    names = [n for n, _ in params]
    hidden: list[Arg] = []
    for spec in specs:
        name, body = split_named(spec)

        def bad(msg: str, spec: str = spec) -> UsageError:
            return UsageError(f"--tensormap {spec}: {msg}; write {CLI_FORM}", file=file)
        if name is None:
            raise bad("no NAME= in front (the tensor-map parameter)")
        idx = names.index(name) if name in names else int(name[1:]) if re.fullmatch(r"p\d+", name) and \
            int(name[1:]) < len(params) else -1
        if idx < 0:
            raise bad(f"'{name}' is not a parameter (parameters: {', '.join(names)})")
        try:
            f = parse_cli(body)
            of = f["of"]
            dname = f.get("dtype", "")
            if of.startswith("@"):
                buf = _load_npy(of[1:], f"--tensormap {name}")
                buf.name, buf.hidden = f"{name}.of", True
                if dname and DTYPES[normalize_dtype(dname)].itemsize != buf.array.itemsize:  # type: ignore[union-attr]
                    raise ValueError(f"dtype {dname} does not match the file's {buf.dtype}")
                buf.dtype = normalize_dtype(dname) if dname else buf.dtype
                dname, of = buf.dtype, buf.name
                hidden.append(buf)
            if not dname:
                raise ValueError("'dtype=' is missing")
            dname = normalize_dtype(dname)
            i2c = {"lower": list(ints(f["lower"], "lower")), "upper": list(ints(f["upper"], "upper")),
                   "channels": int(f["channels"], 0), "pixels": int(f["pixels"], 0)} if "channels" in f else None
            spec_ = make_spec(of, dname, DTYPES[dname].itemsize, list(ints(f["dims"], "dims")),
                              list(ints(f.get("strides", ""), "strides")), list(ints(f.get("box", ""), "box")),
                              int(f.get("swizzle", "0"), 0), list(ints(f.get("estrides", ""), "estrides")), i2c)
        except KeyError as e:
            raise bad(f"unknown dtype {e.args[0]!r}") from None
        except ValueError as e:
            raise bad(str(e)) from None
        base[idx] = Arg("tensormap", spec_.dtype, name=names[idx], tmap=spec_)
    return hidden


def bind_launch(kernel: str, params: Sequence[tuple[str, str]], meta: dict | None, specs: Sequence[str],
                grid: str | None, block: str | None, shared: int | None, rng: np.random.Generator,
                file: str | None = None, symbol_specs: Sequence[str] = (),
                variables: Mapping[str, tuple[str, int]] | None = None, tensormap_specs: Sequence[str] = ()) -> Launch:
    """The launch of ``kernel`` from its ``@workbench`` header ``meta`` (None when it has none or
    the header describes another entry) and the command-line ``--grid``/``--block``/``--shared``/
    ``--arg`` values, which override the header's, and ``--symbol`` fills of the module variables
    ``variables`` (see :func:`bind_symbols`) and ``--tensormap`` maps (see :func:`bind_tensormaps`).
    Without a header grid, block and every parameter must be given."""
    if meta is not None:
        launch = launch_from_metadata(meta, rng)
        launch.kernel = kernel
        if len(launch.passed) != len(params):
            raise UsageError(f"header lists {len(launch.passed)} params passed to the kernel, '{kernel}' has "
                             f"{len(params)}; fix the header", file=file)
        base: list[Arg | None] = list(launch.passed)
    else:
        if not (grid and block):
            raise UsageError("no @workbench header: give --grid X,Y,Z --block X,Y,Z and one --arg "
                             "per parameter", file=file)
        launch = Launch(kernel, (1, 1, 1), (1, 1, 1))
        base = [None] * len(params)
    hidden = [a for a in launch.args if a.hidden] + bind_tensormaps(tensormap_specs, params, base, file)
    launch.args = bind_args(kernel, params, specs, base, file) + hidden
    for a in launch.args:
        if a.tmap is not None:
            try:
                tensormap_target(launch.args, a.tmap)
            except ValueError as e:
                raise UsageError(f"parameter {a.name}: {e}", file=file) from None
    if grid:
        launch.grid = parse_dim3(grid, "--grid")
    if block:
        launch.block = parse_dim3(block, "--block")
    if shared is not None:
        if shared < 0:
            raise UsageError(f"--shared {shared}: give a non-negative number of bytes", file=file)
        launch.dynamic_shared = shared
    launch.symbols = bind_symbols(symbol_specs, variables or {}, file)
    check_dims(launch.grid, launch.block, file)
    return launch
