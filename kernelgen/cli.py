"""python -m kernelgen compile --hw HW (--op spec.yaml | --gemm MxNxK [--dtype f16]) [--variant NAME]
-o OUT [--verbose]  ->  OUT/kernel.ptx, OUT/plan.json, OUT/analysis.md, OUT/candidates.csv

Also installed as ``deepgemm compile --hardware HW --op gemm.yaml --output OUT``. The seeds' languages:
``--op gemm.dgemm --shape MxNxK`` and ``compile matmul.dgml -o matmul.ko`` (hw from the .dgml's
``target``); the ".ko" is, for now, a directory holding kernel.ptx, plan.json, analysis.md,
candidates.csv and the source spec (the module format belongs to issue 16).
Errors: one line on stderr, exit status 2, nothing written (files go to a temp dir, then renamed).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from kernelgen.variants import names
from sim.errors import ArgParser, UsageError, WorkbenchError, run_cli


def compile_kernel(hw_name: str | None, op: str | None, gemm: str | None, dtype: str, out_dtype: str,
                   variant: str | None, verbose: bool = False, profile: bool = False,
                   shape: str | None = None) -> dict[str, str]:
    """Plan and emit; returns {filename: text}. ``op`` may be a YAML spec, a .dgemm (sizes from
    ``shape``) or a .dgml (hw from its ``target`` unless ``hw_name`` is given)."""
    from kernelgen.planner import plan, prediction_dict
    from kernelgen.report import analysis_md, candidates_csv, plan_json
    from kernelgen.spec import load_spec, shorthand
    from kernelgen.variants import get
    from sim.hw import load_hw

    if op and Path(op).suffix in (".dgemm", ".dgml"):  # lark only for the seeds' languages
        from kernelgen.seedlang import load_seed_spec

        spec, target, seed_variant = load_seed_spec(op, shape)
        hw_name, variant = hw_name or target, variant or seed_variant
    else:
        spec = load_spec(op) if op else shorthand(gemm or "", dtype, out_dtype)
    if not hw_name:
        raise UsageError("--hw required (or a .dgml with a target)", file=op)
    hw = load_hw(hw_name)
    p = plan(spec, hw, variant, verbose)
    if verbose:
        for line in p.log:
            print(f"kernelgen: {line}", file=sys.stderr)
    pred = prediction_dict(p)
    ptx = get(p.best.tiling.variant).emit(spec, p.best.tiling, pred, profile=profile)
    files = {"kernel.ptx": ptx, "plan.json": json.dumps(plan_json(p), indent=2) + "\n",
            "analysis.md": analysis_md(p), "candidates.csv": candidates_csv(p)}
    if op and Path(op).suffix in (".dgemm", ".dgml"):
        files[Path(op).name] = Path(op).read_text()
    return files


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


def build_parser() -> argparse.ArgumentParser:
    ap = ArgParser(prog="kernelgen", description="GEMM kernel generator")
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compile", help="plan and emit a GEMM kernel")
    c.add_argument("--hw", "--hardware", dest="hw", help="hwconfig path or bundled name")
    c.add_argument("spec", nargs="?", help="a .dgml (or .dgemm, YAML) spec, same as --op")
    g = c.add_mutually_exclusive_group()
    g.add_argument("--op", help="GEMM spec: YAML, .dgemm (give --shape) or .dgml")
    g.add_argument("--gemm", help="MxNxK shorthand")
    c.add_argument("--shape", help="MxNxK sizes for a .dgemm (overrides a .dgml's shape)")
    c.add_argument("--dtype", default="f16", choices=["f32", "f16", "bf16", "s8", "int8", "fp16", "fp32"],
                   help="A and B dtype (--gemm; int8 = s8, fp16 = f16, fp32 = f32)")
    c.add_argument("--out-dtype", default="f32", choices=["f32", "f16", "bf16", "s32", "int32"],
                   help="D dtype (--gemm; s32 = the exact sums of an s8 GEMM)")
    c.add_argument("--variant", choices=names(), help="restrict to one emitter")
    c.add_argument("-o", "--output", "--out", dest="out", required=True, help="output directory")
    c.add_argument("--verbose", action="store_true", help="log each planner layer's pruning")
    c.add_argument("--profile", action="store_true",
                   help="add a u64 profile buffer: clock64 per CTA at start, around the K loop, at end")
    c.add_argument("--debug", action="store_true", help="tracebacks on error")
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
    if args.spec and (args.op or args.gemm):
        raise UsageError(f"give the spec once: {args.spec} or --op/--gemm")
    op = args.spec or args.op
    if not (op or args.gemm):
        raise UsageError("give a spec (F.dgml, --op F.dgemm|F.yaml) or --gemm MxNxK")
    files = compile_kernel(args.hw, op, args.gemm, args.dtype, args.out_dtype, args.variant,
                           args.verbose, args.profile, args.shape)
    write_atomically(Path(args.out), files)
    print(f"kernelgen: wrote {args.out}/{', '.join(files)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
