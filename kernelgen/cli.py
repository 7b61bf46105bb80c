"""python -m kernelgen compile --hw HW (--op spec.yaml | --gemm MxNxK [--dtype f16]) [--variant NAME]
-o OUT [--verbose]  ->  OUT/kernel.ptx, OUT/plan.json, OUT/analysis.md, OUT/candidates.csv

Also installed as ``deepgemm compile --hardware HW --op gemm.yaml --output OUT``. The seeds' languages:
``--op gemm.dgemm --shape MxNxK`` and ``compile matmul.dgml -o matmul.ko`` (hw from the .dgml's
``target``). An output named ``X.ko`` is a module (kernelgen.module, docs/module.md): the K range of the
spec (``K: [1, 4096]``, ``K_min``/``K_max``, ``shapes:``, ``--gemm 64x64x1..4096``) partitioned into variants
(kernelgen.krange) with an O(1) dispatch table; ``--threshold`` is the least relative gain that adds one.
Errors: one line on stderr, exit status 2, nothing written (files go to a temp file or dir, then renamed).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from kernelgen.variants import names
from sim.errors import ArgParser, UsageError, WorkbenchError, run_cli
from sim.hw import HwConfig


def load_any_spec(hw_name: str | None, op: str | None, gemm: str | None, dtype: str, out_dtype: str,
                  variant: str | None, shape: str | None) -> tuple[Any, HwConfig, str | None]:
    """(spec, hw, variant) from a YAML spec, a .dgemm (sizes from ``shape``), a .dgml (hw from its
    ``target`` unless ``hw_name`` is given) or the --gemm shorthand."""
    from kernelgen.spec import DTYPE_ALIASES, load_spec, shorthand
    from sim.hw import load_hw

    if op and Path(op).suffix in (".dgemm", ".dgml"):  # lark only for the seeds' languages
        from kernelgen.seedlang import load_seed_spec

        spec, target, seed_variant = load_seed_spec(op, shape)
        hw_name, variant = hw_name or target, variant or seed_variant
    elif op == "gemm" and not Path(op).exists():  # the operation's name, sizes from --shape
        if not shape:
            raise UsageError("--op gemm names the operation: give --shape MxNxK (K may be a range, "
                             "64x64x1..4096), or --op FILE")
        spec = shorthand(shape, DTYPE_ALIASES.get(dtype, dtype), DTYPE_ALIASES.get(out_dtype, out_dtype))
    else:
        spec = load_spec(op) if op else shorthand(gemm or "", DTYPE_ALIASES.get(dtype, dtype),
                                                  DTYPE_ALIASES.get(out_dtype, out_dtype))
    if not hw_name:
        raise UsageError("--hw required (or a .dgml with a target)", file=op)
    return spec, load_hw(hw_name), variant


def compile_kernel(hw_name: str | None, op: str | None, gemm: str | None, dtype: str, out_dtype: str,
                   variant: str | None, verbose: bool = False, profile: bool = False,
                   shape: str | None = None, dump_ir: bool = False, exhaustive: bool = False) -> dict[str, str]:
    """Plan and emit one kernel; returns {filename: text}."""
    spec, hw, variant = load_any_spec(hw_name, op, gemm, dtype, out_dtype, variant, shape)
    files = compile_spec(spec, hw, variant, verbose, profile, dump_ir, exhaustive)
    if op and Path(op).suffix in (".dgemm", ".dgml"):
        files[Path(op).name] = Path(op).read_text()
    return files


def compile_spec(spec: Any, hw: Any, variant: str | None, verbose: bool = False, profile: bool = False,
                 dump_ir: bool = False, exhaustive: bool = False) -> dict[str, str]:
    """kernel.ptx, plan.json, analysis.md, candidates.csv (and kernel.ir with dump_ir) of one spec.
    ``exhaustive``: time every candidate (else the planner's branch and bound: the same kernel, Pareto
    frontier and ranking; candidates.csv marks the untimed ones). --profile times every candidate: its
    fallback is the fastest profilable survivor, which need not be on the frontier."""
    from kernelgen.planner import plan, prediction_dict
    from kernelgen.report import analysis_md, candidates_csv, plan_json
    from kernelgen.variants import get

    p = plan(spec, hw, variant, verbose, exhaustive=exhaustive or profile)
    if profile and variant is None and not getattr(get(p.best.tiling.variant), "profiles", True):
        # the default search's pick cannot be profiled (persistent wgmma_tma): the fastest one that can
        alt = [ev for ev in p.survivors if getattr(get(ev.tiling.variant), "profiles", True)]
        if alt:
            p.log.append(f"--profile: {p.best.tiling.variant} has no --profile; chose {alt[0].tiling.key()}")
            p = dataclasses.replace(p, best=min(alt, key=lambda ev: ev.cycles))
    if verbose:
        for line in p.log:
            print(f"kernelgen: {line}", file=sys.stderr)
    pred = prediction_dict(p)
    ptx = get(p.best.tiling.variant).emit(spec, p.best.tiling, pred, profile=profile)
    files = {"kernel.ptx": ptx, "plan.json": json.dumps(plan_json(p), indent=2) + "\n",
             "analysis.md": analysis_md(p, ptx), "candidates.csv": candidates_csv(p)}
    if dump_ir:
        from sim.irdump import dump_ir as dump
        from sim.ptx.parser import parse_ptx

        files["kernel.ir"] = dump(parse_ptx(ptx, "kernel.ptx"))
    return files


def compile_module(hw_name: str | None, op: str | None, gemm: str | None, dtype: str, out_dtype: str,
                   variant: str | None, threshold: float, cubin: bool, verbose: bool = False,
                   shape: str | None = None) -> tuple[bytes, str]:
    """Partition the spec's K range and pack the variants into a module's bytes (kernelgen.module);
    also a one-line summary of the intervals."""
    from kernelgen.krange import describe, partition
    from kernelgen.module import build

    spec, hw, variant = load_any_spec(hw_name, op, gemm, dtype, out_dtype, variant, shape)
    p = partition(spec, hw, variant, threshold)
    if verbose:
        for line in describe(p):
            print(f"kernelgen: {line}", file=sys.stderr)
    source = (Path(op).name, Path(op).read_text()) if op and Path(op).is_file() else None
    summary = ", ".join(f"K {lo}..{hi}: v{v}" for lo, hi, v in p.intervals()[:6])
    more = len(p.intervals()) - 6
    summary = (f"{len(p.chosen)} variant(s) on {hw.name} ({summary}{f', {more} more' if more > 0 else ''}; "
               f"threshold {threshold:.1%}, --verbose says why)")
    return build(p, hw, Path(hw.path).read_text(encoding="utf-8"), source, cubin), summary


def write_atomically(out: Path, files: dict[str, str]) -> None:
    out = out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        for name, text in files.items():
            (tmp / name).write_text(text)
        if out.exists():
            if not out.is_dir():
                raise WorkbenchError(f"output {out} exists and is not a directory")
            for name in files:
                os.replace(tmp / name, out / name)
            shutil.rmtree(tmp)
        else:
            os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


DTYPE_CHOICES = ["f32", "f16", "bf16", "s8", "int8", "s4", "int4", "fp16", "fp32", "e4m3", "fp8", "e5m2", "e4m3fn",
                 "float8_e4m3fn", "float8_e5m2"]


def build_parser() -> argparse.ArgumentParser:
    ap = ArgParser(prog="kernelgen", description="GEMM kernel generator")
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compile", help="plan and emit a GEMM kernel")
    c.add_argument("--hw", "--hardware", dest="hw", help="hwconfig path or bundled name")
    c.add_argument("spec", nargs="?", help="a .dgml (or .dgemm, YAML) spec, same as --op")
    g = c.add_mutually_exclusive_group()
    g.add_argument("--op", help="GEMM spec: YAML, .dgemm (give --shape) or .dgml; or 'gemm' with --shape")
    g.add_argument("--gemm", help="MxNxK shorthand")
    c.add_argument("--shape", help="MxNxK sizes for a .dgemm or --op gemm (overrides a .dgml's shape); "
                                   "K may be a range LO..HI")
    c.add_argument("--dtype", choices=DTYPE_CHOICES,
                   help="A and B dtype (--gemm or --op gemm, default f16; int8 = s8, fp16 = f16, fp32 = f32; e4m3 = "
                        "fp8 and e5m2, block-scaled: scale block128)")
    c.add_argument("--out-dtype", choices=["f32", "f16", "bf16", "s32", "int32"],
                   help="D dtype (--gemm or --op gemm, default f32; s32 = the exact sums of an s8 GEMM)")
    c.add_argument("--variant", choices=names(), help="restrict to one emitter")
    c.add_argument("-o", "--output", "--out", dest="out", required=True,
                   help="output directory, or X.ko for a module over the spec's K range")
    c.add_argument("--threshold", type=float, default=0.02,
                   help="X.ko: add a variant while it lowers the mean predicted slowdown by at least this")
    c.add_argument("--no-cubin", action="store_true", help="X.ko: PTX only (no ptxas)")
    c.add_argument("--verbose", action="store_true", help="log each planner layer's pruning")
    c.add_argument("--exhaustive", action="store_true",
                   help="time every candidate (default: skip those a lower bound proves off the Pareto "
                        "frontier; the same kernel and frontier)")
    c.add_argument("--profile", action="store_true",
                   help="add a u64 profile buffer: clock64 per CTA at start, around the K loop, at end")
    c.add_argument("--dump-ir", action="store_true",
                   help="also write kernel.ir: each instruction as the simulator decodes it (class, pipe, memory)")
    c.add_argument("--debug", action="store_true", help="tracebacks on error")
    cg = sub.add_parser("codegen", help="emit one kernel at the tile sizes given (seed 003's deepgemm-codegen)")
    cg.add_argument("--hw", "--hardware", dest="hw", required=True, help="hwconfig path or bundled name")
    cg.add_argument("--gemm", "--shape", dest="gemm", required=True, help="MxNxK")
    for name in ("m", "n", "k"):
        cg.add_argument(f"--tile-{name}", type=int, required=True, help=f"TILE_{name.upper()}")
    cg.add_argument("--dtype", default="f16", choices=DTYPE_CHOICES)
    cg.add_argument("--out-dtype", choices=["f32", "f16", "bf16", "s32", "int32"],
                    help="D dtype (default f32; bf16 with an fp8 --dtype)")
    cg.add_argument("--epilogue", help="e.g. 'alpha * acc + beta * C + bias', 'relu(acc + bias)', or the "
                                      "seed's 'alpha * C + beta * D' (docs/kernelgen.md)")
    cg.add_argument("--variant", choices=names(), help="restrict to one emitter")
    cg.add_argument("-o", "--output", "--out", dest="out", required=True,
                   help="X.ptx (the kernel alone) or a directory (kernel.ptx, plan.json, analysis.md, ...)")
    cg.add_argument("--profile", action="store_true", help="as for compile")
    cg.add_argument("--dump-ir", action="store_true", help="as for compile (directory output)")
    cg.add_argument("--debug", action="store_true", help="tracebacks on error")
    return ap


def main(argv: list[str] | None = None) -> int:
    return run_cli(_run, argv)


def _run(argv: list[str]) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:  # argparse already printed one usage line
        return int(e.code or 0) and 2
    if not args.out.strip():
        raise UsageError("-o: the output directory is empty; name a directory (e.g. -o out)")
    if args.cmd == "codegen":
        return _run_codegen(args)
    if args.spec and (args.op or args.gemm):
        raise UsageError(f"give the spec once: {args.spec} or --op/--gemm")
    op = args.spec or args.op
    if not (op or args.gemm):
        raise UsageError("give a spec (F.dgml, --op F.dgemm|F.yaml) or --gemm MxNxK")
    _given_once(args, op)
    if args.out.endswith(".ko"):
        return _run_module(args, op)
    files = compile_kernel(args.hw, op, args.gemm, args.dtype, args.out_dtype, args.variant,
                           args.verbose, args.profile, args.shape, args.dump_ir, args.exhaustive)
    write_atomically(Path(args.out), files)
    print(f"kernelgen: wrote {args.out}/{', '.join(files)}", file=sys.stderr)
    return 0


def _given_once(args: argparse.Namespace, op: str | None) -> None:
    """A spec file sets its own dtypes (and a YAML its own M, N, K): --dtype, --out-dtype (and --shape) beside it
    were silently dropped, so refuse them; then the shorthand's defaults f16 -> f32."""
    named = op is not None and not (op == "gemm" and not Path(op).exists())  # a file, not --op gemm
    for flag, value, ignored in (("--dtype", args.dtype, named), ("--out-dtype", args.out_dtype, named),
                                 ("--shape", args.shape, args.gemm is not None or (
                                     named and Path(op or "").suffix not in (".dgemm", ".dgml")))):
        if value is not None and ignored:
            if args.gemm is not None:
                raise UsageError(f"{flag} {value}: --gemm {args.gemm} gives the shape; drop {flag}")
            raise UsageError(f"{flag} {value} would be ignored: the spec file sets it; edit the file or drop {flag}",
                             file=op)
    args.dtype = args.dtype or "f16"
    args.out_dtype = args.out_dtype or default_out_dtype(args.dtype)


def default_out_dtype(dtype: str) -> str:
    """D's dtype when the command line gives none: bf16 for block-scaled fp8, as a YAML spec with dtype e4m3 /
    e5m2 has it (DeepGEMM's D), else f32."""
    from kernelgen.spec import DTYPE_ALIASES, FP8

    return "bf16" if DTYPE_ALIASES.get(dtype, dtype) in FP8 else "f32"


def _run_codegen(args: argparse.Namespace) -> int:
    from kernelgen.codegen import codegen_spec
    from sim.atomic import write_with
    from sim.hw import load_hw

    spec = codegen_spec(args.gemm, args.dtype, args.out_dtype or default_out_dtype(args.dtype),
                        {"TILE_M": args.tile_m, "TILE_N": args.tile_n, "TILE_K": args.tile_k}, args.epilogue)
    files = compile_spec(spec, load_hw(args.hw), args.variant, False, args.profile, args.dump_ir)
    if args.out.endswith(".ptx"):
        if args.dump_ir:
            raise UsageError("--dump-ir writes kernel.ir next to kernel.ptx: give -o a directory")
        write_with(args.out, lambda tmp: tmp.write_text(files["kernel.ptx"]))
        print(f"kernelgen: wrote {args.out}", file=sys.stderr)
    else:
        write_atomically(Path(args.out), files)
        print(f"kernelgen: wrote {args.out}/{', '.join(files)}", file=sys.stderr)
    return 0


def _run_module(args: argparse.Namespace, op: str | None) -> int:
    from sim.atomic import write_with

    if args.profile:
        raise UsageError("--profile is for a single kernel: write it to a directory (-o DIR), not a .ko")
    if not 0 <= args.threshold < 1:
        raise UsageError(f"--threshold {args.threshold}: give a relative gain in [0, 1), e.g. 0.02")
    if Path(args.out).is_dir():
        raise UsageError(f"{args.out} is a directory (the old .ko layout); remove it or name another file")
    data, summary = compile_module(args.hw, op, args.gemm, args.dtype, args.out_dtype, args.variant,
                                   args.threshold, not args.no_cubin, args.verbose, args.shape)
    def write(tmp: Path) -> None:
        tmp.write_bytes(data)
        tmp.chmod(0o644)  # mkstemp makes 0600; a module is meant to be shared

    write_with(args.out, write)
    print(f"kernelgen: wrote {args.out} ({len(data):,} bytes): {summary}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
