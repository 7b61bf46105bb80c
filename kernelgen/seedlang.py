"""The seeds' GEMM languages, ``.dgemm`` (seed 000 §4.2) and ``.dgml`` (seed 004 §3.2), parsed with
the Lark grammars in kernelgen/grammars/ into the YAML spec's mapping, then ``spec.parse_spec``.

Mapping:
- ``.dgemm``: op tensors give dtypes (A -> a, D -> out) and layouts (row-major -> row,
  col-major -> col); ``param alpha/beta``; ``constraint { NAME op EXPR; }`` with NAME an observable
  (register_usage -> registers_per_thread, shared_bytes -> shared_memory_per_block, bandwidth_demand ->
  bandwidth_demand_gbps, and every spec.CONSTRAINTS key: l2_hit_rate, bank_conflict_score, dram_bytes,
  alu_utilization, tensor_utilization, occupancy, cycles) and EXPR a constant expression;
  ``tiling { X ∈ [a, b] ∧ X % m == 0; }``. A ``.dgemm``
  names no sizes: ``shape`` (M, N, K) comes from ``--shape MxNxK``.
- ``.dgml``: precision weight/activation -> dtype a/b, output -> out; shape M, N, K or K_min/K_max
  (a K range: the spec's Dim range); sm_mem_limit (KB) -> shared_memory_per_block; l2_hit_rate_min ->
  l2_hit_rate >= value.
A constraint over TILE_* variables (hard: <=, >=, ==) becomes a kernelgen.constraints.TileExpr that the
planner's tiling layer prunes on (named in its log). Parsed but not yet weighed, each said in a warning:
pad_k, warp_level_sync.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import warnings
from functools import cache
from pathlib import Path
from typing import Any

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from kernelgen.constraints import TILE_VARS, TileExpr
from kernelgen.spec import CONSTRAINT_KEYS, GemmSpec, parse_spec
from sim.errors import UsageError, WorkbenchWarning
from sim.layouts import canonical

GRAMMARS = Path(__file__).parent / "grammars"
DTYPE_ALIASES = {"fp16": "f16", "f16": "f16", "bf16": "bf16", "fp32": "f32", "f32": "f32", "int8": "s8", "s8": "s8",
                 "int32": "s32", "s32": "s32", "int4": "s4", "s4": "s4"}
LATER_DTYPES = {"int4_e2m1": "int4_e2m1 (fp4) has no tensor-core form on sm_90 (the H200); use int4, int8, fp16, "
                             "bf16 or fp32"}
LAYOUT_ALIASES = {"row-major": "row", "row": "row", "col-major": "col", "col": "col"}
OBSERVABLES = {"register_usage": "registers_per_thread", "shared_bytes": "shared_memory_per_block",
               "bandwidth_demand": "bandwidth_demand_gbps", **{k: k for k in CONSTRAINT_KEYS}}
DGML_KEYS = {"precision": ("weight", "activation", "output", "accumulator"),
             "shape": ("M", "N", "K", "M_min", "M_max", "N_min", "N_max", "K_min", "K_max"),
             "constraints": ("use_hmma", "sm_mem_limit", "l2_hit_rate_min", "pad_k", "warp_level_sync")}
TARGETS = {"hopper": "h200", "h200": "h200", "npu7nm": "npu7nm", "npu-7nm": "npu7nm"}
KEYWORDS = {"dgemm": ("op", "input", "output", "param", "tensor", "layout", "constraint", "tiling",
                      "in", "and"),
            "dgml": ("target", "precision", "shape", "constraints", "true", "false")}


@cache
def _parser(lang: str) -> Lark:
    return Lark((GRAMMARS / f"{lang}.lark").read_text(), parser="lalr", propagate_positions=True)


def _nearest(word: str, lang: str, extra: tuple[str, ...] = ()) -> str:
    hit = difflib.get_close_matches(word, KEYWORDS[lang] + extra, n=1)
    return f"; did you mean '{hit[0]}'?" if hit else ""


def _syntax(lang: str, text: str, src: str) -> Tree:
    try:
        return _parser(lang).parse(text)
    except UnexpectedInput as e:
        line, col = e.line, e.column
        if isinstance(e, UnexpectedToken):
            got = str(e.token) if e.token.type != "$END" else "end of file"
            expected = sorted(x.strip('"').lower() for x in e.expected)[:6]
            msg = f"unexpected {got!r} (expected {', '.join(expected)})" + _nearest(got, lang)
        elif isinstance(e, UnexpectedCharacters):
            msg = f"unexpected character {e.char!r}"
        else:
            msg = "syntax error"
        raise UsageError(f"{col}: {msg}", file=src, line=line) from None


def _fail(src: str, node: Tree | Token, msg: str) -> UsageError:
    line = getattr(node, "line", None) or getattr(getattr(node, "meta", None), "line", None)
    col = getattr(node, "column", None) or getattr(getattr(node, "meta", None), "column", None)
    return UsageError(f"{col}: {msg}", file=src, line=line)


def _warn(src: str, node: Tree | Token, msg: str) -> None:
    line = getattr(getattr(node, "meta", None), "line", None) or getattr(node, "line", None)
    warnings.warn(WorkbenchWarning(msg, src, line), stacklevel=3)


def const_value(node: Tree | Token, src: str) -> float:
    """Evaluate a constant expression tree (numbers, + - * / %, parentheses); no eval()."""
    if isinstance(node, Token):
        raise _fail(src, node, f"unexpected {node!s}")
    if node.data == "num":
        return float(str(node.children[0]))
    if node.data == "neg":
        return -const_value(node.children[0], src)
    if node.data == "var":
        raise _fail(src, node.children[0], f"{node.children[0]!s} is not a constant here")
    if node.data == "binop":
        a, op, b = node.children
        x, y = const_value(a, src), const_value(b, src)
        if str(op) in "/%" and y == 0:
            raise _fail(src, op, "division by zero")
        return {"+": x + y, "-": x - y, "*": x * y, "/": x / y if y else 0.0, "%": x % y if y else 0.0}[str(op)]
    raise _fail(src, node, f"cannot evaluate {node.data}")


def _names(node: Tree | Token) -> set[str]:
    if isinstance(node, Token):
        return set()
    if node.data == "var":
        return {str(node.children[0])}
    return set().union(*(_names(c) for c in node.children)) if node.children else set()


def _expr(node: Tree | Token) -> tuple[Any, ...]:
    assert isinstance(node, Tree)
    if node.data == "num":
        return ("num", float(str(node.children[0])))
    if node.data == "var":
        return ("var", str(node.children[0]))
    if node.data == "neg":
        return ("neg", _expr(node.children[0]))
    a, op, b = node.children
    return ("bin", str(op), _expr(a), _expr(b))


def _constraint(rel: Tree, src: str, text: str) -> str | TileExpr:
    lhs, op, rhs = rel.children
    if isinstance(lhs, Tree) and lhs.data == "var" and str(lhs.children[0]) in OBSERVABLES:
        if _names(rhs):
            raise _fail(src, op, "the right side of a constraint must be a constant")
        return f"{OBSERVABLES[str(lhs.children[0])]} {op} {const_value(rhs, src)!r}"
    unknown = _names(lhs) - set(TILE_VARS)
    if unknown:
        name = sorted(unknown)[0]
        raise _fail(src, rel, f"unknown name {name!r}" + _nearest(name, "dgemm", tuple(OBSERVABLES)))
    if str(op) == "~":
        raise _fail(src, op, "a soft '~' constraint needs an observable on the left (register_usage, ...)")
    if _names(rhs) - set(TILE_VARS):
        raise _fail(src, op, "the right side may use only TILE_* variables and numbers")
    seg = " ".join(text[rel.meta.start_pos:rel.meta.end_pos].split())
    return TileExpr(seg, str(op), _expr(lhs), _expr(rhs))


def _tiling(clause: Tree, src: str) -> list[str]:
    out = []
    for term in clause.children:
        if isinstance(term, Token):
            continue
        if term.data == "range":
            name, _, lo, hi = term.children
            out.append(f"{name} in [{int(float(str(lo)))}, {int(float(str(hi)))}]")
        else:
            lhs, op, rhs = term.children
            ok = (str(op) == "==" and isinstance(lhs, Tree) and lhs.data == "binop"
                  and str(lhs.children[1]) == "%" and lhs.children[0].data == "var"
                  and const_value(rhs, src) == 0)
            if not ok:
                raise _fail(src, op, "a tiling clause is 'X in [a, b]' or 'X % m == 0'")
            out.append(f"{lhs.children[0].children[0]} % {int(const_value(lhs.children[2], src))} == 0")
    return out


def dgemm_to_dict(text: str, src: str, shape: tuple[Any, Any, Any]) -> dict[str, Any]:
    tree = _syntax("dgemm", text, src)
    op = tree.children[0]
    data: dict[str, Any] = {"name": str(op.children[0]), "M": shape[0], "N": shape[1], "K": shape[2]}
    dtype: dict[str, str] = {}
    layout: dict[str, str] = {}
    slot = {"A": "a", "B": "b", "C": "c", "D": "out"}
    for item in op.children[1:]:
        if item.data == "param_decl":
            pname, ptype, val = item.children
            if str(pname) not in ("alpha", "beta"):
                raise _fail(src, pname, f"unknown param {pname!s}" + _nearest(str(pname), "dgemm", ("alpha", "beta")))
            data[str(pname)] = float(str(val))
            continue
        role, tname, ttype = item.children[:3]
        if str(tname) not in slot:
            raise _fail(src, tname, f"tensor {tname!s}: GEMM tensors are A, B, C (inputs) and D (output)")
        if str(ttype) in LATER_DTYPES:
            raise _fail(src, ttype, LATER_DTYPES[str(ttype)])
        if str(ttype) not in DTYPE_ALIASES:
            raise _fail(src, ttype, f"dtype {ttype!s}" + _nearest(str(ttype), "dgemm", tuple(DTYPE_ALIASES)))
        key = slot[str(tname)]
        if key != "c":
            dtype[key] = DTYPE_ALIASES[str(ttype)]
        attrs = [c for c in item.children[3:] if isinstance(c, Tree) and c.data == "attrs"]
        for attr in attrs[0].children if attrs else []:
            aname, aval = attr.children
            if str(aname) != "layout":
                raise _fail(src, aname, f"unknown attribute {aname!s}" + _nearest(str(aname), "dgemm"))
            try:
                lay = canonical(LAYOUT_ALIASES.get(str(aval), str(aval)))
            except ValueError as e:
                raise _fail(src, aval, str(e)) from None
            if key != "out":  # D is stored as C (layout.c)
                layout[key] = lay
    data["dtype"] = dtype
    data["layout"] = layout
    cons: list[str] = []
    exprs: list[TileExpr] = []
    tiling: list[str] = []
    for block in tree.children[1:]:
        for child in block.children:
            if block.data == "constraint_block":
                c = _constraint(child, src, text)
                if isinstance(c, TileExpr):
                    exprs.append(c)
                else:
                    cons.append(c)
            else:
                tiling.extend(_tiling(child, src))
    data["constraints"] = cons
    if tiling:
        data["tiling"] = tiling
    data["_expressions"] = tuple(exprs)
    return data


def dgml_to_dict(text: str, src: str) -> tuple[dict[str, Any], str | None]:
    """The spec mapping and the hw config the ``target`` names (None when absent)."""
    tree = _syntax("dgml", text, src)
    data: dict[str, Any] = {"name": Path(src).stem.replace("-", "_").replace(".", "_") or "gemm"}
    target = None
    vals: dict[str, dict[str, Any]] = {}
    for item in tree.children:
        if item.data == "target":
            word = str(item.children[0]).strip('"')
            if word.lower() not in TARGETS:
                raise _fail(src, item.children[0], f"unknown target {word!r} (one of {', '.join(TARGETS)})")
            target = TARGETS[word.lower()]
            continue
        block = str(item.children[0])
        for entry in item.children[1:]:
            key, val = entry.children
            if str(key) not in DGML_KEYS[block]:
                raise _fail(src, key, f"unknown key {key!s} in {block}"
                            + _nearest(str(key), "dgml", DGML_KEYS[block]))
            v: Any = (float(str(val.children[0])) if val.data == "num" else
                      str(val.children[0]) == "true" if val.data == "bool" else str(val.children[0]).strip('"'))
            vals.setdefault(block, {})[str(key)] = (v, entry)
    prec = {k: v for k, (v, _) in vals.get("precision", {}).items()}
    for k, (v, e) in vals.get("precision", {}).items():
        if v in LATER_DTYPES:
            raise _fail(src, e, f"precision {k}: {LATER_DTYPES[v]}")
        if v not in DTYPE_ALIASES:
            raise _fail(src, e, f"precision {k}: {v!r}" + _nearest(str(v), "dgml", tuple(DTYPE_ALIASES)))
    a = DTYPE_ALIASES[prec.get("weight", prec.get("activation", "fp16"))]
    data["dtype"] = {"a": DTYPE_ALIASES[prec.get("activation", a)], "b": a,
                     "out": DTYPE_ALIASES[prec.get("output", "fp32")]}
    shape = {k: v for k, (v, _) in vals.get("shape", {}).items()}
    for dim in ("M", "N", "K"):
        lo, hi = shape.get(f"{dim}_min"), shape.get(f"{dim}_max")
        if dim in shape:
            data[dim] = int(shape[dim])
        elif lo is not None and hi is not None:
            data[dim] = [int(lo), int(hi)]
        else:
            raise UsageError(f"shape: {dim} missing (give {dim} or {dim}_min and {dim}_max)", file=src)
    cons = vals.get("constraints", {})
    out: list[str] = []
    for key, (v, e) in cons.items():
        if key == "sm_mem_limit":
            out.append(f"shared_memory_per_block <= {int(v * 1024)}")
        elif key == "l2_hit_rate_min":
            out.append(f"l2_hit_rate >= {float(v)!r}")
        elif key == "use_hmma":
            data["_variant"] = "mma" if v else "simt"
        else:
            _warn(src, e, f"{key} is parsed but not enforced yet (issue 15)")
    data["constraints"] = out
    return data, target


def parse_shape(text: str) -> tuple[Any, Any, Any]:
    """MxNxK; each extent an integer or a range LO..HI (a list, as the YAML spec writes a range)."""
    parts = text.lower().split("x")
    ext = [[int(v) for v in p.split("..")] if re.fullmatch(r"\d+(\.\.\d+)?", p) else [] for p in parts]
    if len(parts) != 3 or not all(e and min(e) > 0 for e in ext):
        raise UsageError(f"--shape {text!r}: expected MxNxK with positive integers, e.g. 4096x4096x4096 "
                         "(a range LO..HI for a module, e.g. 64x64x1..4096)")
    m, n, k = (e[0] if len(e) == 1 else e for e in ext)
    return m, n, k


def load_seed_spec(path: str | Path, shape: str | None = None) -> tuple[GemmSpec, str | None, str | None]:
    """(spec, hw name from the file's target or None, variant or None) for a .dgemm or .dgml file."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as e:
        raise UsageError(f"cannot read spec: {e.strerror}", file=str(p)) from None
    if p.suffix == ".dgemm":
        if not shape:
            raise UsageError("a .dgemm names no sizes: give --shape MxNxK", file=str(p))
        data = dgemm_to_dict(text, str(p), parse_shape(shape))
        exprs = data.pop("_expressions")
        return dataclasses.replace(parse_spec(data, str(p)), expressions=exprs), None, None
    data, target = dgml_to_dict(text, str(p))
    if shape:
        data["M"], data["N"], data["K"] = parse_shape(shape)
    variant = data.pop("_variant", None)
    return parse_spec(data, str(p)), target, variant


def is_seed_spec(path: str | Path) -> bool:
    return Path(path).suffix in (".dgemm", ".dgml")

