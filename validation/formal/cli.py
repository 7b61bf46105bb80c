"""``python -m validation verify KERNEL.ptx`` -- the command line of the formal checks."""

from __future__ import annotations

import ast
import json
import math
import re
import sys
import time
from pathlib import Path

import z3
from z3.z3util import get_vars

from sim.errors import UsageError
from sim.launch import parse_dim3, read_metadata
from sim.ptx.parser import parse_ptx
from sim.ptx.types import TYPES
from sim.tensormap import ints
from validation.formal.context import Context
from validation.formal.guard import process_age, run_bounded
from validation.formal.properties import NAMES, PropResult, Verifier
from validation.formal.state import TYPE_INFO


def add_arguments(p) -> None:
    p.add_argument("ptx", help="PTX file (a kernelgen kernel carries its ranges and extents in its header)")
    p.add_argument("--kernel", help="entry name (needed when the file has several)")
    p.add_argument("--grid", help="X,Y,Z blocks (default: metadata, else any grid)")
    p.add_argument("--block", help="X,Y,Z threads (default: metadata / .reqntid, else any block <= 1024)")
    p.add_argument("--param", action="append", default=[], metavar="pN=LO..HI",
                   help="range of a scalar parameter (index pN or PTX name); a single value N means N..N")
    p.add_argument("--extent", action="append", default=[], metavar="pN=EXPR",
                   help="size in bytes of the buffer behind pointer parameter pN, an expression of scalar "
                        "parameters (+ - * // %% min max, integers), e.g. p0=p3*p5*4")
    p.add_argument("--dynamic-shared", type=int, default=None, metavar="BYTES",
                   help="bytes of dynamic shared memory (extern .shared arrays)")
    p.add_argument("--cluster", default=None, metavar="X,Y,Z",
                   help="thread block cluster shape (default: the header's \"cluster\" / .reqnctapercluster)")
    p.add_argument("--tensormap", action="append", default=[], metavar="NAME=dtype=T,box=AxB",
                   help="a tensor-map parameter's element type and box (or im2col channels=C,pixels=P): the bytes "
                        "one TMA load through it brings (the header's tensormap params give the same); the "
                        "simulator's --tensormap form is accepted (its other fields are not needed)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--timeout", type=float, default=120.0, metavar="S", help="overall time limit in seconds")


def _param_name(k, name: str, where: str) -> str:
    m = re.fullmatch(r"p(\d+)", name)
    if m:
        i = int(m.group(1))
        if i >= len(k.params):
            raise UsageError(f"{where}: {name}: the kernel has {len(k.params)} parameters (p0..p{len(k.params) - 1})")
        return k.params[i].name
    for p in k.params:
        if p.name == name:
            return name
    names = ", ".join(f"p{i}={p.name}" for i, p in enumerate(k.params))
    raise UsageError(f"{where}: no parameter named {name!r} (have {names})")


def parse_range(text: str, where: str) -> tuple[int, int]:
    try:
        if ".." in text:
            lo, hi = text.split("..", 1)
            a, b = int(lo, 0), int(hi, 0)
        else:
            a = b = int(text, 0)
    except ValueError:
        raise UsageError(f"{where}: bad range {text!r}: give LO..HI with integers, e.g. p3=1..512") from None
    if a > b:
        raise UsageError(f"{where}: empty range {text!r}: LO must be <= HI")
    return a, b


def extent_expr(text: str, k, ctx_syms: dict, where: str) -> z3.BitVecRef:
    """An extent expression of scalar parameters -> a 64-bit Z3 term."""
    return extent_terms(text, k, ctx_syms, where)[0]


def extent_terms(text: str, k, ctx_syms: dict, where: str) -> tuple[z3.BitVecRef, z3.ArithRef, list]:
    """(64-bit term, the same expression over unbounded integers, its divisors): the two agree exactly
    when nothing wraps, which check_extents asks the solver to show."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        raise UsageError(f"{where}: cannot parse extent expression {text!r}; e.g. p3*p5*4") from None
    divisors: list = []

    def conv(n):
        if isinstance(n, ast.Expression):
            return conv(n.body)
        if isinstance(n, ast.Constant) and isinstance(n.value, int) and not isinstance(n.value, bool):
            if not 0 <= n.value < 2**64:
                raise UsageError(f"{where}: {n.value} does not fit in 64 bits; give a byte count below 2^48", k.file)
            return z3.BitVecVal(n.value, 64), z3.IntVal(n.value)
        if isinstance(n, ast.Name):
            pname = _param_name(k, n.id, where)
            p = k.params[[q.name for q in k.params].index(pname)]
            sym = ctx_syms.get(pname)
            info = TYPE_INFO.get(p.type)
            if sym is None or info is None or info[1] in ("f", "pred"):
                raise UsageError(f"{where}: {n.id} is not an integer scalar parameter")
            w = sym.size()
            signed = info[1] == "s"
            bv = sym if w == 64 else (z3.SignExt(64 - w, sym) if signed else z3.ZeroExt(64 - w, sym))
            return bv, z3.BV2Int(sym, is_signed=signed)
        if isinstance(n, ast.BinOp):
            (a, ia), (b, ib) = conv(n.left), conv(n.right)
            if isinstance(n.op, (ast.FloorDiv, ast.Div, ast.Mod)):
                divisors.append(ib)
            ops = {ast.Add: lambda: (a + b, ia + ib), ast.Sub: lambda: (a - b, ia - ib),
                   ast.Mult: lambda: (a * b, ia * ib),
                   ast.FloorDiv: lambda: (z3.UDiv(a, b), ia / ib), ast.Div: lambda: (z3.UDiv(a, b), ia / ib),
                   ast.Mod: lambda: (z3.URem(a, b), ia % ib)}
            if type(n.op) in ops:
                return ops[type(n.op)]()
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
            a, ia = conv(n.operand)
            return -a, -ia
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("min", "max") and n.args:
            vals = [conv(a) for a in n.args]
            r, ir = vals[0]
            for v, iv in vals[1:]:
                if n.func.id == "min":
                    r, ir = z3.If(z3.ULT(v, r), v, r), z3.If(iv < ir, iv, ir)
                else:
                    r, ir = z3.If(z3.UGT(v, r), v, r), z3.If(iv > ir, iv, ir)
            return r, ir
        raise UsageError(f"{where}: unsupported element in extent expression {text!r}; use + - * // % min max")

    bv, iv = conv(tree)
    return bv, iv, divisors


def check_extents(ctx: Context, terms: dict[str, tuple], timeout_ms: int = 10_000) -> None:
    """Each extent, under the launch's assumptions, divides by no zero and evaluates to a byte count in
    0..2^48 without wrapping in 64 bits; else one line naming the extent and a parameter choice."""
    for bv, iv, divisors, where in terms.values():
        bad = z3.Or([d == 0 for d in divisors] + [iv < 0, iv >= 2**48, z3.BV2Int(bv) != iv])
        s = z3.Solver()
        s.set("timeout", timeout_ms)
        s.add(ctx.assumptions_without_extents)
        s.add(bad)
        if s.check() != z3.sat:
            continue
        m = s.model()
        used = {x.get_id() for e in (iv, *divisors) for x in get_vars(e)}
        vals = ", ".join(f"{ctx.param_label(q)}={m.eval(v, model_completion=True)}" for q, v in ctx.param_syms.items()
                         if v.get_id() in used)
        raise UsageError(f"{where}: the size can be negative, divide by zero or exceed 2^48 bytes"
                         f"{' (' + vals + ')' if vals else ''}; give a non-negative byte count for every "
                         "--param value", ctx.k.file)


def build_context(text: str, file: str, args) -> Context:
    prog = parse_ptx(text, file)
    meta = read_metadata(text, file) or {}
    kname = args.kernel or meta.get("kernel")
    k = prog.kernel(kname)
    grid = parse_dim3(args.grid, "--grid") if args.grid else (tuple(meta["grid"]) if meta.get("grid") else None)
    block = parse_dim3(args.block, "--block") if args.block else (
        tuple(meta["block"]) if meta.get("block") else None)
    ranges: dict[str, tuple[int, int]] = {}
    for key, val in (meta.get("ranges") or {}).items():
        ranges[_param_name(k, key, "metadata ranges")] = (int(val[0]), int(val[1]))
    for spec in args.param:
        if "=" not in spec:
            raise UsageError(f"--param {spec!r}: give pN=LO..HI, e.g. p3=1..512")
        key, val = spec.split("=", 1)
        ranges[_param_name(k, key.strip(), "--param")] = parse_range(val.strip(), f"--param {spec}")
    dyn = args.dynamic_shared if args.dynamic_shared is not None else meta.get("dynamic_shared")
    cli_maps = cli_tensormaps(getattr(args, "tensormap", []) or [], k)
    tmaps = tensormap_box_bytes(meta) | {n: nbytes for n, (nbytes, _) in cli_maps.items()}
    esize = tensormap_esize(meta) | {n: es for n, (_, es) in cli_maps.items()}
    req = k.directives.get("reqnctapercluster") if isinstance(k.directives, dict) else None
    dims = [int(v) for v in meta["cluster"]] if meta.get("cluster") else [int(v) for v in req] if req else []
    if getattr(args, "cluster", None):
        dims = list(parse_dim3(args.cluster, "--cluster"))
    cluster = (dims + [1, 1, 1])[0], (dims + [1, 1, 1])[1], (dims + [1, 1, 1])[2]
    cluster_shape = cluster if dims else None
    ctx = Context(prog, k, grid=grid, block=block, ranges=ranges, extents=None, dynamic_shared=dyn, tensormaps=tmaps,
                  cluster=cluster_shape, tensormap_esize=esize)
    hidden = {p.get("name") for p in meta.get("params") or [] if p.get("hidden")}
    ext_specs: dict[str, tuple[str, str]] = {}
    for key, val in (meta.get("extents") or {}).items():
        if key in hidden:
            continue  # a buffer reached only through its tensor maps: the TMA unit clips every box to the tensor
        ext_specs[_param_name(k, key, "metadata extents")] = (str(val), "metadata extents")
    for spec in args.extent:
        if "=" not in spec:
            raise UsageError(f"--extent {spec!r}: give pN=EXPR, e.g. p0=p3*p5*4")
        key, val = spec.split("=", 1)
        ext_specs[_param_name(k, key.strip(), "--extent")] = (val, f"--extent {spec}")
    extents = {}
    terms: dict[str, tuple] = {}
    for pname, (expr, where) in ext_specs.items():
        p = k.params[[q.name for q in k.params].index(pname)]
        if p.type not in ("u64", "b64", "s64"):
            raise UsageError(f"{where}: {pname} is .{p.type}, not a 64-bit pointer parameter")
        bv, iv, divisors = extent_terms(expr, k, ctx.param_syms, where)
        extents[pname] = bv
        terms[pname] = (bv, iv, divisors, where)
    check_extents(ctx, terms)
    # rebuild with extents (the buffer facts are part of the assumptions)
    return Context(prog, k, grid=grid, block=block, ranges=ranges, extents=extents, dynamic_shared=dyn,
                   tensormaps=tmaps, cluster=cluster_shape, tensormap_esize=esize)


def tensormap_box_bytes(meta: dict) -> dict[str, int]:
    """Bytes one box load of each tensor-map parameter brings (the full box, zero fill included), from the
    header's ``{"kind": "tensormap", "dtype", "box"}`` params (notes/tensormap-contract.md)."""
    out = {}
    for p in meta.get("params") or []:
        i2c = p.get("im2col") if isinstance(p.get("im2col"), dict) else None
        if p.get("kind") == "tensormap" and i2c and p.get("dtype") in TYPES:  # an im2col column
            out[p["name"]] = TYPES[p["dtype"]].size * int(i2c.get("channels", 0)) * int(i2c.get("pixels", 0))
        elif p.get("kind") == "tensormap" and p.get("box") and p.get("dtype") in TYPES:
            out[p["name"]] = TYPES[p["dtype"]].size * math.prod(int(b) for b in p["box"])
    return out


def tensormap_esize(meta: dict) -> dict[str, int]:
    """Element bytes of each tensor-map parameter of the header (its dtype): what the rule on a tile copy's
    innermost coordinate (16-byte aligned) is counted in."""
    return {p["name"]: TYPES[p["dtype"]].size for p in meta.get("params") or []
            if p.get("kind") == "tensormap" and p.get("dtype") in TYPES}


def cli_tensormaps(specs: list[str], k) -> dict[str, tuple[int, int]]:
    """``--tensormap NAME=dtype=T,box=AxB`` (or ``channels=C,pixels=P`` for im2col) -> {PTX parameter name: (box
    bytes, element bytes)}, as tensormap_box_bytes and tensormap_esize read the header."""
    out = {}
    for spec in specs:
        name, _, body = spec.partition("=")
        fix = "write NAME=dtype=T,box=AxB (or NAME=dtype=T,channels=C,pixels=P for an im2col map)"
        try:
            f = {}
            for part in body.split(","):
                key, eq, val = part.partition("=")
                if not eq:
                    raise ValueError(f"'{part}' is not KEY=VALUE")
                f[key.strip()] = val.strip()
            pname = _param_name(k, name.strip(), "--tensormap")
            dtype = f["dtype"]
            if dtype not in TYPES:
                raise ValueError(f"unknown dtype {dtype!r}")
            es = TYPES[dtype].size
            if "channels" in f:
                out[pname] = (es * int(f["channels"], 0) * int(f["pixels"], 0), es)
            else:
                out[pname] = (es * math.prod(ints(f["box"], "box")), es)
        except KeyError as e:
            raise UsageError(f"--tensormap {spec}: '{e.args[0]}=' is missing; {fix}") from None
        except ValueError as e:
            raise UsageError(f"--tensormap {spec}: {e}; {fix}") from None
    return out


def verify_text(text: str, file: str, args, started: float | None = None) -> dict:
    """Verify one kernel; the whole run (symbolic execution and every check; from ``started``, a time.monotonic()
    reading: the command line passes the process's start) is bounded by ``args.timeout`` (+ guard.GRACE_S): what is
    not decided by then is ``unknown`` with the reason."""
    t0 = time.monotonic() if started is None else started
    ctx = build_context(text, file, args)
    left = max(0.0, args.timeout - (time.monotonic() - t0))
    v = Verifier(ctx, timeout_s=left, query_timeout_ms=getattr(args, "query_timeout_ms", 4000))
    msgs, stopped = run_bounded(v.steps, left)
    done = {r.name: r.to_json() for kind, r in msgs if kind == "result"}
    props = []
    for name in NAMES:
        if name in done:
            props.append(done[name])
            continue
        over = time.monotonic() - t0 >= args.timeout
        why = (f"verifier time limit reached (--timeout {args.timeout:g} s) during {stopped}" if over
               else f"the verifier process stopped during {stopped}")
        props.append(PropResult(name, status="unknown", detail=why).to_json())
    return {"kernel": ctx.k.name, "file": file, "properties": props, "seconds": round(time.monotonic() - t0, 3)}


def exit_status(report: dict) -> int:
    st = [p["status"] for p in report["properties"]]
    if "violated" in st:
        return 1
    if "unknown" in st:
        return 3
    return 0


def cli_main(args) -> int:
    path = Path(args.ptx)
    try:
        text = path.read_text()
    except OSError as e:
        raise UsageError(f"cannot read PTX file: {e.strerror}", str(path)) from None
    except UnicodeDecodeError as e:
        raise UsageError(f"not a UTF-8 text file (byte {e.object[e.start]:#04x} at offset {e.start}): expected PTX",
                         str(path)) from None
    report = verify_text(text, str(path), args, started=time.monotonic() - process_age())
    assert [p["name"] for p in report["properties"]] == list(NAMES)
    if args.json:
        print(json.dumps(report))
    else:
        print(f"{report['file']}: kernel {report['kernel']} ({report['seconds']:.2f} s)")
        for p in report["properties"]:
            where = f" at {report['file']}:{p['line']}" if p["line"] else ""
            print(f"  {p['name']:<19} {p['status']}{where}" + (f": {p['detail']}" if p["detail"] else ""))
            if p["witness"]:
                print(f"  {'':<19} witness {json.dumps(p['witness'])}")
    sys.stdout.flush()
    return exit_status(report)
