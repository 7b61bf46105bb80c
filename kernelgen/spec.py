"""GEMM spec: D = epilogue(alpha * A @ B + beta * C), from YAML or the ``--gemm MxNxK`` shorthand.

YAML form (every key optional except M, N, K)::

    version: 1
    op: gemm
    M: 4096                      # a value, [lo, hi], "in [lo, hi]", or {range: [lo, hi], multiple_of: 8}
    N: [1, 8192]
    K: {range: [16, 4096], multiple_of: 16}
    # shapes: [[64, 64, 16], [64, 64, 4096]]   # instead of M, N, K: equal M and N, K from min to max
    dtype: {a: f16, b: f16, acc: f32, out: f32}   # or one string for a and b: "dtype: f16"; fp16, fp32 too
    # scale: block128          # with fp8 A and B (e4m3, e5m2, mixed) only, and then required: DeepGEMM block scaling,
    #                          # f32 scales sa[M, ceil(K/128)] (row x 128-K block of A) and
    #                          # sb[ceil(N/128), ceil(K/128)] (128 x 128 block of B); out bf16 (default) or f32
    layout: {a: row, b: col, c: row}   # row | col | blocked-PxQ | striped-N (sim/layouts.py)
    alpha: 1.0
    beta: 0.0                    # nonzero adds a C input buffer
    epilogue: [bias, relu, cast] # scale (per column, first), bias (per column), relu | gelu, cast (to dtype.out)
    constraints:
      - registers_per_thread <= 128        # hard
      - shared_memory_per_block <= 49152
      - alu_utilization >= 0.5
      - occupancy ~ 0.5                    # soft: penalised, not pruned
      - bank_conflict_score <= 64          # data movement: sum over banks of (count - mean)^2 per K tile
    tiling:
      - TILE_K in [16, 128], TILE_K % 16 == 0
      - TILE_M in [32, 128]
      - PAD in [0, 0]                      # shared-row padding in elements (simt 0|4, mma 0|8)
      - UNROLL_K in [1, 1]                 # mma: k16 steps per inner-loop trip (rolled inner loop)

A malformed spec raises ``sim.errors.UsageError`` with one line naming the key.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from kernelgen.constraints import TileExpr
from sim.errors import UsageError
from sim.hw import HwConfigKeyError, strict_yaml
from sim.layouts import canonical, parse_layout

# s4: two per byte, planned as packed bytes (kernelgen/int4.py)
DTYPES_IN = ("f32", "f16", "bf16", "s8", "s4", "e4m3", "e5m2")
DTYPES_OUT = ("f32", "f16", "bf16", "s32")
DTYPE_BYTES = {"f32": 4, "f16": 2, "bf16": 2, "s8": 1, "s32": 4, "e4m3": 1, "e5m2": 1}
FP8 = ("e4m3", "e5m2")  # the OCP fp8 formats wgmma takes (A and B each either: .e4m3.e5m2 etc.)
# the seeds' spellings
DTYPE_ALIASES = {"fp16": "f16", "fp32": "f32", "int8": "s8", "int32": "s32", "int4": "s4", "fp8": "e4m3",
                 "e4m3fn": "e4m3", "fp8_e4m3": "e4m3", "fp8_e5m2": "e5m2",
                 "float8_e4m3fn": "e4m3", "float8_e5m2": "e5m2"}  # torch's names too
SCALES = ("block128",)  # spec key `scale`: block-scaled fp8 (DeepGEMM): per (row, 128 K) of A, per 128 x 128 of B
SCALE_BLOCK = 128  # elements of K (and of N, for B) one block scale covers
LAYOUTS = ("row", "col")  # and blocked-PxQ, striped-N: sim/layouts.py
EPILOGUE_OPS = ("scale", "bias", "relu", "gelu", "cast")
#: constraint observable -> (the planner layer that prunes on it, the direction that is worse: "higher" or
#: "lower"; a soft "~" constraint is penalised by the relative distance in that direction only)
CONSTRAINTS = {"registers_per_thread": ("registers", "higher"), "shared_memory_per_block": ("movement", "higher"),
               "l2_hit_rate": ("movement", "lower"), "bank_conflict_score": ("movement", "higher"),
               "dram_bytes": ("movement", "higher"), "alu_utilization": ("schedule", "lower"),
               "tensor_utilization": ("schedule", "lower"), "occupancy": ("schedule", "lower"),
               "bandwidth_demand_gbps": ("schedule", "higher"), "cycles": ("schedule", "higher")}
CONSTRAINT_KEYS = tuple(CONSTRAINTS)
TILE_KEYS = ("TILE_M", "TILE_N", "TILE_K", "STAGES", "THREADS", "PAD", "UNROLL_K", "CLUSTER")
TOP_KEYS = ("version", "op", "M", "N", "K", "shapes", "dtype", "layout", "alpha", "beta", "epilogue",
            "constraints", "tiling", "name", "scale")


@dataclass(frozen=True)
class Dim:
    """A problem extent: a value (lo == hi) or a range; ``multiple_of`` is a guaranteed divisor."""

    lo: int
    hi: int
    multiple_of: int = 1

    @property
    def fixed(self) -> bool:
        return self.lo == self.hi

    def align(self, cap: int = 8) -> int:
        """Largest power of two <= cap that divides every value of the extent."""
        base = self.lo if self.fixed else self.multiple_of
        a = 1
        while a < cap and base % (a * 2) == 0:
            a *= 2
        return a


@dataclass(frozen=True)
class Constraint:
    key: str
    op: str  # "<=", ">=", "==", "~"
    value: float

    @property
    def hard(self) -> bool:
        return self.op != "~"

    def text(self) -> str:
        return f"{self.key} {self.op} {self.value:g}"


@dataclass(frozen=True)
class TileRange:
    key: str
    lo: int
    hi: int
    multiple_of: int = 1

    def allows(self, v: int) -> bool:
        return self.lo <= v <= self.hi and v % self.multiple_of == 0

    def text(self) -> str:
        s = f"{self.key} in [{self.lo}, {self.hi}]"
        return s + (f", {self.key} % {self.multiple_of} == 0" if self.multiple_of > 1 else "")


@dataclass(frozen=True)
class GemmSpec:
    M: Dim
    N: Dim
    K: Dim
    dtype_a: str = "f16"
    dtype_b: str = "f16"
    dtype_acc: str = "f32"
    dtype_out: str = "f32"
    layout_a: str = "row"
    layout_b: str = "col"
    layout_c: str = "row"
    alpha: float = 1.0
    beta: float = 0.0
    epilogue: tuple[str, ...] = ()
    constraints: tuple[Constraint, ...] = ()
    tiling: tuple[TileRange, ...] = ()
    name: str = "gemm"
    source: str = "<spec>"
    expressions: tuple[TileExpr, ...] = ()  # .dgemm constraints over TILE_* (kernelgen.constraints)
    packed_s4: bool = False  # an s4 GEMM planned and emitted as s8 over packed bytes (kernelgen/int4.py)
    scale: str = ""  # "" or "block128" (SCALES): block-scaled fp8, scale_a / scale_b f32 buffers

    def __hash__(self) -> int:
        # the dataclass's hash (of its fields' tuple), kept: the planner's caches are keyed by the spec
        # thousands of times a plan, and its fields hold nested dataclasses
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash(tuple(getattr(self, f.name) for f in fields(self)))
            object.__setattr__(self, "_hash", h)
        return h

    def __getstate__(self) -> dict[str, Any]:  # a string's hash differs from process to process
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}

    @property
    def has_c(self) -> bool:
        return self.beta != 0.0

    @property
    def has_bias(self) -> bool:
        return "bias" in self.epilogue

    @property
    def has_scale(self) -> bool:
        """A per-column f32 scale (the dequantisation of per-channel int8 weights): D[m, n] =
        act(scale[n] * (alpha * acc + beta * C[m, n]) + bias[n])."""
        return "scale" in self.epilogue

    @property
    def activation(self) -> str | None:
        for a in ("relu", "gelu"):
            if a in self.epilogue:
                return a
        return None

    def tile_range(self, key: str) -> TileRange | None:
        for t in self.tiling:
            if t.key == key:
                return t
        return None

    def nominal(self) -> tuple[int, int, int]:
        """The shape used for the launch metadata and the prediction: the upper end of each range."""
        return self.M.hi, self.N.hi, self.K.hi

    def to_json(self) -> dict[str, Any]:
        def d(x: Dim) -> Any:
            return x.lo if x.fixed else {"range": [x.lo, x.hi], "multiple_of": x.multiple_of}

        return {
            "M": d(self.M), "N": d(self.N), "K": d(self.K),
            "dtype": {"a": self.dtype_a, "b": self.dtype_b, "acc": self.dtype_acc, "out": self.dtype_out},
            "layout": {"a": self.layout_a, "b": self.layout_b, "c": self.layout_c},
            "alpha": self.alpha, "beta": self.beta, "epilogue": list(self.epilogue),
            "constraints": [c.text() for c in self.constraints],
            "tiling": [t.text() for t in self.tiling],
            **({"scale": self.scale} if self.scale else {}),
        }


def _err(src: str, key: str, msg: str) -> UsageError:
    return UsageError(f"spec key {key!r}: {msg}", file=src)


def _int(src: str, key: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise _err(src, key, f"expected an integer, got {v!r}")
    return v


_IN_RE = re.compile(r"^\s*(?:[MNK]\s+)?in\s*\[\s*(\d+)\s*,\s*(\d+)\s*\]\s*$")


def _dim(src: str, key: str, v: Any) -> Dim:
    mult = 1
    if isinstance(v, str):
        m = _IN_RE.match(v)
        if not m:
            raise _err(src, key, f"expected a value, [lo, hi] or 'in [lo, hi]', got {v!r}")
        v = [int(m.group(1)), int(m.group(2))]
    if isinstance(v, dict):
        unknown = set(v) - {"range", "multiple_of", "value"}
        if unknown:
            raise _err(src, f"{key}.{sorted(unknown)[0]}", "unknown key (use range, multiple_of, value)")
        mult = _int(src, f"{key}.multiple_of", v.get("multiple_of", 1))
        v = v.get("range", v.get("value"))
    if isinstance(v, list | tuple):
        if len(v) != 2:
            raise _err(src, key, f"a range is [lo, hi], got {v!r}")
        lo, hi = _int(src, key, v[0]), _int(src, key, v[1])
    else:
        lo = hi = _int(src, key, v)
    if lo < 1 or hi < lo:
        raise _err(src, key, f"need 1 <= lo <= hi, got [{lo}, {hi}]")
    if hi >= 1 << 20:
        raise _err(src, key, f"extent {hi} too large (at most {(1 << 20) - 1}: 32-bit element indices)")
    if mult < 1 or (lo == hi and lo % mult):
        raise _err(src, key, f"multiple_of {mult} does not divide {lo}")
    return Dim(lo, hi, mult)


def _shapes(src: str, v: Any) -> dict[str, Any]:
    """``shapes: [[M, N, K], ...]`` -> M, N (equal in all) and K from the least to the largest."""
    if not isinstance(v, list) or not v or not all(isinstance(s, list) and len(s) == 3 for s in v):
        raise _err(src, "shapes", f"expected a list of [M, N, K], got {v!r}")
    vals = [[_int(src, f"shapes[{i}]", x) for x in s] for i, s in enumerate(v)]
    for d, name in ((0, "M"), (1, "N")):
        if len({s[d] for s in vals}) > 1:
            raise _err(src, "shapes", f"{name} differs between shapes ({sorted({s[d] for s in vals})}): a module "
                                      f"dispatches on K only; write one spec per {name}")
    ks = [s[2] for s in vals]
    return {"M": vals[0][0], "N": vals[0][1], "K": [min(ks), max(ks)]}


def _choice(src: str, key: str, v: Any, allowed: tuple[str, ...]) -> str:
    if v not in allowed:
        raise _err(src, key, f"{v!r} is not one of {', '.join(allowed)}")
    return str(v)


def _layout(src: str, key: str, v: Any) -> str:
    """A layout name (sim/layouts.py: row, col, blocked-PxQ, striped-N; row-major/col-major accepted)."""
    try:
        return canonical(v) if isinstance(v, str) else parse_layout(repr(v)).name
    except ValueError as e:
        raise _err(src, key, str(e)) from None


_CONSTRAINT_RE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(<=|>=|==|~)\s*([0-9.eE+-]+)\s*$")
_TILE_MOD_RE = re.compile(r"^\s*([A-Z_]+)\s*%\s*(\d+)\s*==\s*0\s*$")


def _constraint(src: str, i: int, v: Any) -> Constraint:
    key = f"constraints[{i}]"
    m = _CONSTRAINT_RE.match(str(v)) if isinstance(v, str) else None
    if not m:
        raise _err(src, key, f"expected 'NAME <=|>=|==|~ VALUE', got {v!r}")
    name, op, val = m.groups()
    if name not in CONSTRAINT_KEYS:
        raise _err(src, key, f"unknown constraint {name!r} (one of {', '.join(CONSTRAINT_KEYS)})")
    try:
        value = float(val)
    except ValueError:
        raise _err(src, key, f"value {val!r} is not a number") from None
    return Constraint(name, op, value)


def _tiling(src: str, v: Any) -> tuple[TileRange, ...]:
    items = v if isinstance(v, list) else [v]
    found: dict[str, list[int]] = {}
    for i, item in enumerate(items):
        key = f"tiling[{i}]"
        if not isinstance(item, str):
            raise _err(src, key, f"expected 'TILE_K in [16, 128], TILE_K % 16 == 0', got {item!r}")
        # parse the whole clause: 'X in [a, b]' possibly followed by ', X % m == 0'
        m_in = re.match(r"^\s*([A-Z_]+)\s+in\s+\[\s*(\d+)\s*,\s*(\d+)\s*\]\s*(?:,\s*(.*))?$", item)
        rest = item
        if m_in:
            name, lo, hi, rest = m_in.group(1), int(m_in.group(2)), int(m_in.group(3)), m_in.group(4) or ""
            if name not in TILE_KEYS:
                raise _err(src, key, f"unknown tiling name {name!r} (one of {', '.join(TILE_KEYS)})")
            if lo < (0 if name == "PAD" else 1) or hi < lo:
                raise _err(src, key, f"need {0 if name == 'PAD' else 1} <= lo <= hi in {item!r}")
            ent = found.setdefault(name, [1, 1 << 30, 1])
            ent[0], ent[1] = lo, hi
        if rest.strip():
            m_mod = _TILE_MOD_RE.match(rest)
            if not m_mod:
                raise _err(src, key, f"cannot read {rest.strip()!r} (expected 'NAME % M == 0')")
            name, mult = m_mod.group(1), int(m_mod.group(2))
            if name not in TILE_KEYS:
                raise _err(src, key, f"unknown tiling name {name!r} (one of {', '.join(TILE_KEYS)})")
            if mult < 1:
                raise _err(src, key, "divisor must be >= 1")
            ent = found.setdefault(name, [1, 1 << 30, 1])
            ent[2] = mult
    return tuple(TileRange(k, lo, hi, m) for k, (lo, hi, m) in found.items())


def parse_spec(data: Any, src: str = "<spec>") -> GemmSpec:
    if not isinstance(data, dict):
        raise UsageError("a GEMM spec is a YAML mapping with at least M, N, K", file=src)
    unknown = set(data) - set(TOP_KEYS)
    if unknown:
        raise _err(src, sorted(unknown)[0], f"unknown key (known: {', '.join(TOP_KEYS)})")
    if data.get("version", 1) != 1:
        raise _err(src, "version", f"only version 1 is known, got {data.get('version')!r}")
    if data.get("op", "gemm") != "gemm":
        raise _err(src, "op", f"only 'gemm' is supported, got {data.get('op')!r}")
    if "shapes" in data:
        if any(k in data for k in ("M", "N", "K")):
            raise _err(src, "shapes", "give shapes or M, N, K, not both")
        data = {**data, **_shapes(src, data["shapes"])}
    for k in ("M", "N", "K"):
        if k not in data:
            raise _err(src, k, "missing (a value or [lo, hi])")
    M, N, K = (_dim(src, k, data[k]) for k in ("M", "N", "K"))
    for (a, da_), (b, db_) in ((("M", M), ("K", K)), (("K", K), ("N", N)), (("M", M), ("N", N))):
        if da_.hi * db_.hi >= 1 << 32:  # docs/kernelgen.md: M*K, K*N, M*N must fit in 32 bits
            raise _err(src, a, f"{a} x {b} = {da_.hi} x {db_.hi} = {da_.hi * db_.hi:,} elements do not fit the "
                               f"kernels' 32-bit element indices (at most {(1 << 32) - 1:,}); give smaller extents")

    dt = data.get("dtype", "f16")
    if isinstance(dt, str):
        dt = {"a": dt, "b": dt}
    if not isinstance(dt, dict):
        raise _err(src, "dtype", f"expected a string or {{a, b, acc, out}}, got {dt!r}")
    bad = set(dt) - {"a", "b", "acc", "out"}
    if bad:
        raise _err(src, f"dtype.{sorted(bad)[0]}", "unknown key (a, b, acc, out)")
    dt = {k: DTYPE_ALIASES.get(v, v) if isinstance(v, str) else v for k, v in dt.items()}
    # one of a and b given: both that type (the error names the key given)
    da = _choice(src, "dtype.a" if "a" in dt or "b" not in dt else "dtype.b", dt.get("a", dt.get("b", "f16")),
                 DTYPES_IN)
    db = _choice(src, "dtype.b", dt.get("b", da), DTYPES_IN)
    integer = da in ("s8", "s4")
    dacc = _choice(src, "dtype.acc", dt.get("acc", "s32" if integer else "f32"), ("s32",) if integer else ("f32",))
    dout = _choice(src, "dtype.out", dt.get("out", "bf16" if da in FP8 else "f32"), DTYPES_OUT)
    if da != db and not (da in FP8 and db in FP8):
        raise _err(src, "dtype.b", f"A and B must share a dtype ({da} vs {db})"
                   + ("; fp8 mixes with fp8 only: e4m3 or e5m2" if da in FP8 or db in FP8 else ""))
    if dout == "s32" and not integer:
        raise _err(src, "dtype.out", f"s32 output needs s8 or s4 A and B (got {da}); use f32, f16 or bf16")
    if da == "s4":
        for dim, d in (("K", K),):
            if d.lo % 2 or d.hi % 2 or (not d.fixed and d.multiple_of % 2):
                raise _err(src, dim, "s4 packs two values per byte along K: give an even K (a range with "
                           "multiple_of 2)")

    lay = data.get("layout", {})
    if not isinstance(lay, dict):
        raise _err(src, "layout", f"expected {{a, b, c}}, got {lay!r}")
    bad = set(lay) - {"a", "b", "c"}
    if bad:
        raise _err(src, f"layout.{sorted(bad)[0]}", "unknown key (a, b, c)")
    la = _layout(src, "layout.a", lay.get("a", "row"))
    lb = _layout(src, "layout.b", lay.get("b", "col"))
    lc = _layout(src, "layout.c", lay.get("c", "row"))

    scal = {}
    for k, dflt in (("alpha", 1.0), ("beta", 0.0)):
        v = data.get(k, dflt)
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise _err(src, k, f"expected a number, got {v!r}")
        if not math.isfinite(v):
            raise _err(src, k, f"expected a finite number, got {v!r}")
        scal[k] = float(v)

    ep = data.get("epilogue", [])
    if isinstance(ep, str):
        ep = [ep]
    if not isinstance(ep, list):
        raise _err(src, "epilogue", f"expected a list of {', '.join(EPILOGUE_OPS)}")
    for i, e in enumerate(ep):
        _choice(src, f"epilogue[{i}]", e, EPILOGUE_OPS)
    if "relu" in ep and "gelu" in ep:
        raise _err(src, "epilogue", "relu and gelu are exclusive")
    if "scale" in ep and ep[0] != "scale":
        raise _err(src, "epilogue", "scale must come first (it multiplies alpha * A @ B + beta * C, before bias "
                   "and the activation)")
    if dout == "s32" and (scal["alpha"] != 1.0 or scal["beta"] != 0.0 or set(ep) - {"cast"}):
        raise _err(src, "dtype.out", "s32 output stores the exact integer sums (alpha 1, beta 0, no bias/relu/"
                   "gelu); for a dequantising epilogue use out f32, f16 or bf16")

    cons = data.get("constraints", [])
    if isinstance(cons, dict):  # {key: "<= 128"} form
        cons = [f"{k} {v}" for k, v in cons.items()]
    if not isinstance(cons, list):
        raise _err(src, "constraints", "expected a list of 'NAME <=|>=|~ VALUE'")
    constraints = tuple(_constraint(src, i, c) for i, c in enumerate(cons))
    tiling = _tiling(src, data["tiling"]) if "tiling" in data else ()
    name = str(data.get("name", "gemm"))
    if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", name):
        raise _err(src, "name", f"{name!r} is not a PTX identifier")
    scale = _scale(src, data.get("scale"), da, dout, (la, lb))
    return GemmSpec(M, N, K, da, db, dacc, dout, la, lb, lc, scal["alpha"], scal["beta"], tuple(ep),
                    constraints, tiling, name, src, scale=scale)


def _scale(src: str, v: Any, da: str, dout: str, layouts: tuple[str, str]) -> str:
    """The `scale` key: required with fp8 A and B (block128), refused otherwise."""
    if v is None:
        if da in FP8:
            raise _err(src, "scale", f"{da} A and B need 'scale: block128' (f32 scales per row x 128 K of A and per "
                       "128 x 128 block of B, as DeepGEMM); unscaled fp8 is not supported")
        return ""
    v = _choice(src, "scale", v, SCALES)
    if da not in FP8:
        raise _err(src, "scale", f"{v} scales fp8 inputs only (dtype a is {da}); use dtype: e4m3 or e5m2, or drop "
                   "scale")
    if dout not in ("bf16", "f32"):
        raise _err(src, "dtype.out", f"block-scaled fp8 writes bf16 or f32, not {dout}")
    if layouts != ("row", "col"):
        raise _err(src, "layout", f"fp8 wgmma reads K-major operands only: layout a row, b col (got a={layouts[0]} "
                   f"b={layouts[1]}); transpose the operand in memory")
    return str(v)


def load_spec(path: str | Path) -> GemmSpec:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"cannot read spec: {getattr(e, 'strerror', None) or e}", file=str(p)) from None
    try:
        data = strict_yaml(text, str(p))
    except HwConfigKeyError as e:
        raise UsageError(f"{e.key_path}: {e.message}", file=str(p), line=e.line) from None
    return parse_spec(data, str(p))


def shorthand(gemm: str, dtype: str = "f16", out: str = "f32") -> GemmSpec:
    """``--gemm MxNxK --dtype f16`` (K may be a range LO..HI): row A, col B, row C, alpha 1, beta 0."""
    parts = gemm.lower().split("x")
    ext = [[int(x) for x in p.split("..")] if re.fullmatch(r"\d+(\.\.\d+)?", p) else None for p in parts]
    if len(parts) != 3 or any(e is None for e in ext):
        raise UsageError(f"--gemm expects MxNxK (e.g. 4096x4096x4096, or a K range 64x64x1..4096), got {gemm!r}")
    m, n, k = (e[0] if len(e) == 1 else e for e in ext if e is not None)
    data: dict[str, Any] = {"M": m, "N": n, "K": k, "dtype": {"a": dtype, "b": dtype, "out": out}}
    if DTYPE_ALIASES.get(dtype, dtype) == "s4" and isinstance(k, list):
        data["K"] = {"range": k, "multiple_of": 2}  # s4 packs two values per byte along K: even K only
    if DTYPE_ALIASES.get(dtype, dtype) in FP8:  # fp8 exists here only block-scaled
        data["scale"] = "block128"
        if isinstance(k, list):  # TMA row strides of 1-byte elements: K a multiple of 16 (as s4's even K above)
            if k[0] % 16 or k[1] % 16:
                raise UsageError(f"--gemm {gemm}: an fp8 K range runs K in multiples of 16 (16-byte TMA row "
                                 f"strides); give LO and HI multiples of 16, e.g. {m}x{n}x16..4096")
            data["K"] = {"range": k, "multiple_of": 16}
    return parse_spec(data, "--gemm")


__all__ = ["Dim", "Constraint", "TileRange", "GemmSpec", "parse_spec", "load_spec", "shorthand",
           "DTYPE_BYTES", "FP8"]
