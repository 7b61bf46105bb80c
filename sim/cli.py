"""``python -m sim run KERNEL.ptx --hw HW ...``: simulate a kernel and report cycles, utilization, stalls.

Contract (ARCHITECTURE.md): ``--arg`` binds parameters in order or as ``NAME=SPEC`` (PTX name or
``pN``); ``--tensormap NAME=of=...,dtype=...,dims=...,box=...`` binds a tensor-map parameter
(docs/kernel-metadata.md); ``--symbol NAME=SPEC`` fills a module ``.global``/``.const`` variable; every buffer is
written back as ``OUT/arg<index>.npy``; ``--json`` prints one object; bad input exits 2 with one
line ``file:line: message``, no traceback unless ``--debug``; warnings are one line ``warning: ...``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, cast

import numpy as np

from sim.errors import ArgParser, run_cli
from sim.estimate import refuse_over_budget
from sim.functional.runner import CLI_MAX_INSTRUCTIONS
from sim.progress import make_progress
from sim.result import jsonable


def build_parser() -> argparse.ArgumentParser:
    p = ArgParser(prog="python -m sim", description="Cycle-level PTX simulator")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    h = sub.add_parser("hw", help="hardware configs: convert the seed's hardware.yaml to the project form")
    hs = h.add_subparsers(dest="hw_command", metavar="HWCOMMAND", required=True)
    hc = hs.add_parser("convert", help="write the project schema for a seed hardware.yaml")
    hc.add_argument("seed", help="seed-schema hardware.yaml (docs/seed-hardware.md)")
    hc.add_argument("-o", "--output", required=True, help="project-schema YAML to write")
    hc.add_argument("--base", default="npu7nm", help="config giving the numbers the seed leaves out")
    n = sub.add_parser("native", help="the timing core compiled with mypyc: build it once, or show its status "
                                      "(sim/timing/native.py)")
    n.add_argument("native_command", choices=("build", "status"))
    n.add_argument("--quiet", action="store_true", help="build without the compiler's output")
    r = sub.add_parser("run", help="simulate a kernel (functional values + timing)")
    r.add_argument("ptx", help="PTX file (real nvcc output or a kernelgen kernel)")
    r.add_argument("--hw", help="hardware YAML: a path or a bundled name (npu7nm.yaml, h200); required to run")
    r.add_argument("--check-all", action="store_true",
                   help="check every entry of the file, print 'NAME: ok' or its first error, run nothing "
                        "(exit 2 if any entry fails)")
    r.add_argument("--kernel", help="entry name (needed when the file has several)")
    r.add_argument("--grid", help="X,Y,Z (default: from the kernel's @workbench header)")
    r.add_argument("--block", help="X,Y,Z (default: from the kernel's @workbench header)")
    r.add_argument("--cluster", metavar="X,Y,Z",
                   help="thread block cluster shape (default: the kernel's .reqnctapercluster, else none; "
                        "docs/clusters.md)")
    r.add_argument("--cluster-nonportable", action="store_true",
                   help="allow clusters of 9..16 CTAs (cudaFuncAttributeNonPortableClusterSizeAllowed)")
    r.add_argument("--arg", action="append", default=[], metavar="SPEC",
                   help="bind a parameter: literal, @file.npy, zeros:DTYPE:COUNT, or NAME=SPEC")
    r.add_argument("--tensormap", action="append", default=[], metavar="NAME=of=BUF,dtype=T,dims=AxB,...",
                   help="bind a tensor-map parameter (cp.async.bulk.tensor): of=PARAM or of=@file.npy, dtype, "
                        "dims, strides (bytes, of dims[1:]), box, swizzle (0/32/64/128), estrides; "
                        "see docs/kernel-metadata.md")
    r.add_argument("--symbol", action="append", default=[], metavar="NAME=SPEC",
                   help="fill a module .global/.const variable before the launch: NAME=@file.npy or NAME=LITERAL")
    r.add_argument("--shared", type=int, default=None,
                   help="dynamic shared memory bytes (the size of .extern .shared arrays)")
    r.add_argument("--out", help="directory for arg<index>.npy of every buffer")
    r.add_argument("--json", action="store_true", help="print one JSON object")
    r.add_argument("--trace", help="write a Chrome trace-event JSON (opens in Perfetto)")
    r.add_argument("--functional", action="store_true", help="values only, no timing model")
    r.add_argument("--isa", choices=("auto", "ptx", "sass"), default="auto",
                   help="execute the PTX, or the SASS ptxas writes for the hw's arch (auto = ptx; "
                        "sass times the SASS by its control codes)")
    r.add_argument("--warm-l2", action="store_true",
                   help="start with the buffer arguments in the L2, as after their host-to-device copies "
                        "(default: an empty L2)")
    r.add_argument("--seed", type=int, default=None, help="seed of the random inputs (default: fresh)")
    r.add_argument("--max-instructions", type=int, default=CLI_MAX_INSTRUCTIONS, metavar="N",
                   help="stop after N warp instructions, both modes (endless-loop guard; default "
                        f"{CLI_MAX_INSTRUCTIONS:,}, about 15 s of the timing model)")
    r.add_argument("--sample-ctas", type=int, default=None, metavar="N",
                   help="simulate about N CTAs spread over the grid, the L2 warmed as the others would leave "
                        "it, and estimate the whole launch's cycles with a 95%% bound (docs/sampling.md); "
                        "the numpy check covers the sampled CTAs' outputs only")
    r.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="processes for the waves of --sample-ctas or --by-waves (default 1; each wave replays "
                        "its own lock-step records, merged in wave order: docs/sampling.md)")
    r.add_argument("--by-waves", action="store_true",
                   help="time every CTA, wave by wave: each wave its own simulation, the L2 handed over as the "
                        "earlier waves leave it (the sampling model with every group; --jobs N runs waves side "
                        "by side)")
    r.add_argument("--quiet", action="store_true",
                   help="no progress display on stderr (shown only on a terminal, for runs longer than 2 s)")
    r.add_argument("--debug", action="store_true", help="show tracebacks")
    return p


def build_launch(prog: Any, args: argparse.Namespace, meta: dict | None, rng: np.random.Generator) -> Any:
    """The launch from the kernel's header (when it describes the chosen entry) and the
    ``--grid``/``--block``/``--shared``/``--arg`` overrides (sim.launch.bind_launch)."""
    from sim.launch import bind_launch, parse_dim3

    k = prog.kernel(args.kernel or (meta or {}).get("kernel"))
    used_meta = meta if meta is not None and meta.get("kernel", k.name) == k.name else None
    variables = {v.name: (v.type, v.size) for v in prog.variables.values() if v.space in ("global", "const")}
    launch = bind_launch(k.name, [(p.name, p.type) for p in k.params], used_meta, args.arg, args.grid,
                         args.block, args.shared, rng, prog.file, args.symbol, variables, args.tensormap)
    if getattr(args, "cluster", None):
        launch.cluster = parse_dim3(args.cluster, "--cluster")
    launch.cluster_nonportable = bool(getattr(args, "cluster_nonportable", False))
    if launch.cluster or k.directives.get("reqnctapercluster") or "explicitcluster" in k.directives:
        from sim.cluster import cluster_shape

        cluster_shape(k, launch.cluster, launch.grid, launch.cluster_nonportable, prog.file)  # exit 2 early
    return launch


def check_memory_of(prog: Any, launch: Any, hw: Any) -> None:
    """Shared and local memory the launch needs, against the limits, before any is allocated."""
    from sim.functional.operands import make_layout
    from sim.limits import check_memory

    lay = make_layout(prog.kernel(launch.kernel), prog)
    check_memory(lay.shared_static, launch.dynamic_shared, lay.local_size, hw.limits.smem_per_block, hw.name,
                 prog.file)


class _LazyGenerator:
    """np.random.default_rng(seed), made when the launch first draws from it: a run whose buffers are all given
    (--arg @file.npy, literals, zeros) does not import numpy.random (~10 ms of its start). The same seed gives
    the same stream whenever it is made (nothing else draws from it)."""

    def __init__(self, seed: int | None):
        self._seed = seed
        self._gen: np.random.Generator | None = None

    def __getattr__(self, name: str) -> Any:
        if self._gen is None:
            self._gen = np.random.default_rng(self._seed)
        return getattr(self._gen, name)


def _write_outputs(out_dir: str, outputs: dict[int, np.ndarray]) -> None:
    """All files are written to a temporary folder first, then moved: nothing half-written."""
    import tempfile  # (only with --out: tempfile and its imports are ~5 ms of a start)

    dest = Path(out_dir)
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest) as tmp:
        names = []
        for i, arr in sorted(outputs.items()):
            np.save(Path(tmp) / f"arg{i}.npy", arr)
            names.append(f"arg{i}.npy")
        for n in names:
            os.replace(Path(tmp) / n, dest / n)


def cmd_check_all(path: str) -> int:
    from sim.errors import error_line
    from sim.ptx.parser import parse_file

    prog = parse_file(path, strict=False)
    for name in prog.entries:
        err = prog.errors.get(name)
        print(f"{name}: " + ("ok" if err is None else error_line(err)))
    if prog.errors:
        print(f"{path}: {len(prog.errors)} of {len(prog.entries)} entries fail the checks (listed on stdout)",
              file=sys.stderr)
    return 2 if prog.errors else 0


def cmd_run(args: argparse.Namespace) -> int:
    from sim.errors import UsageError
    from sim.hw import load_hw
    from sim.launch import at_header, read_metadata
    from sim.ptx.parser import parse_file

    if args.check_all:
        return cmd_check_all(args.ptx)
    if not args.hw:
        raise UsageError("--hw is required to run a kernel: give a hardware YAML, e.g. --hw npu7nm.yaml")
    if args.max_instructions < 1:
        raise UsageError(f"--max-instructions {args.max_instructions}: give a positive number of warp instructions")
    if args.seed is not None and args.seed < 0:
        raise UsageError(f"--seed {args.seed}: give a non-negative integer")
    if args.jobs < 1:
        raise UsageError(f"--jobs {args.jobs}: give a positive number of processes, e.g. --jobs 2")
    if args.sample_ctas is not None or args.by_waves:
        _check_sampling_args(args)
    if args.trace and Path(args.trace).is_dir():
        raise UsageError(f"--trace {args.trace} is a directory: give a file path such as trace.json")
    prog = parse_file(args.ptx)
    hw = load_hw(args.hw)
    meta = read_metadata(prog.text, args.ptx)
    rng = cast("np.random.Generator", _LazyGenerator(args.seed))  # (a string: np.random is not touched)
    try:
        launch = build_launch(prog, args, meta, rng)
    except UsageError as e:
        raise at_header(e, prog.text, args.ptx) from None
    check_memory_of(prog, launch, hw)
    estimate = None
    if args.isa != "sass":
        estimate = refuse_over_budget(prog, launch, args.max_instructions, timing=not args.functional,
                                      sample=args.sample_ctas)
    before = launch.copy()
    result: dict[str, Any]
    sim_obj = None
    progress = make_progress(launch.grid[0] * launch.grid[1] * launch.grid[2], estimate, args.quiet)
    try:
        if args.isa == "sass":
            outputs, result = _run_sass(prog, hw, launch, args)
        elif args.sample_ctas is not None:
            from sim.timing.sampling import simulate_sampled

            sr = simulate_sampled(prog, launch, hw, args.sample_ctas, args.max_instructions, progress=progress,
                                  jobs=args.jobs)
            outputs, result = sr.outputs, {"kernel": launch.kernel, "hw": hw.name, "isa": "ptx", **sr.to_json()}
        elif args.by_waves:
            from sim.timing.sampling import simulate_by_waves

            sr = simulate_by_waves(prog, launch, hw, args.max_instructions, progress=progress, jobs=args.jobs)
            outputs, result = sr.outputs, {"kernel": launch.kernel, "hw": hw.name, "isa": "ptx", **sr.to_json()}
        elif not args.functional:
            from sim.timing import simulate

            sim_obj = simulate(prog, launch, hw, trace=bool(args.trace), max_instructions=args.max_instructions,
                               warm_l2=args.warm_l2, progress=progress)
        else:
            from sim.functional.runner import run_functional

            fr = run_functional(prog, launch, args.max_instructions, progress)
    finally:
        if progress is not None:
            progress.close()
    if args.isa == "sass" or args.sample_ctas is not None or args.by_waves:
        pass
    elif sim_obj is None:
        outputs = fr.outputs
        result = {"timing": "functional-only", "kernel": launch.kernel, "hw": hw.name,
                  "warp_instructions": fr.warp_instructions, "ctas": fr.ctas, "isa": "ptx"}
    else:
        outputs = sim_obj.outputs
        result = {"kernel": launch.kernel, "hw": hw.name, "isa": "ptx", **sim_obj.to_json()}
        if args.trace:
            from sim.timing import write_trace

            write_trace(sim_obj, args.trace)
    result["grid"] = list(launch.grid)
    result["block"] = list(launch.block)
    if meta and meta.get("prediction"):
        result["predicted"] = meta["prediction"]
    chk = None
    if meta and not args.arg and meta.get("check"):  # (sim.reference and its layouts imported only for a check)
        from sim.reference import check_from_metadata

        try:
            chk = check_from_metadata(meta, before, outputs, args.sample_ctas is not None)
        except UsageError as e:
            raise at_header(e, prog.text, args.ptx) from None
    if chk is not None:
        result["check"] = chk
    if args.out:
        _write_outputs(args.out, outputs)
    if args.json:
        print(json.dumps(result, default=jsonable))
    else:
        print(render_text(result))
    if chk is not None and not chk.get("passed", False):
        return 1
    return 0


def _check_sampling_args(args: argparse.Namespace) -> None:
    from sim.errors import UsageError

    mode = "--sample-ctas" if args.sample_ctas is not None else "--by-waves"
    if args.sample_ctas is not None and args.sample_ctas < 1:
        raise UsageError(f"--sample-ctas {args.sample_ctas}: give a positive number of CTAs, e.g. --sample-ctas 32")
    for flag, used in (("--functional", args.functional), ("--trace", args.trace), ("--warm-l2", args.warm_l2),
                       ("--isa sass", args.isa == "sass"), ("--by-waves", args.by_waves and mode != "--by-waves")):
        if used:
            raise UsageError(f"{mode} does not combine with {flag}: leave one of them out")


def _run_sass(prog: Any, hw: Any, launch: Any,
              args: argparse.Namespace) -> tuple[dict[int, np.ndarray], dict[str, Any]]:
    """--isa sass: SASS timing (sim.sass.timing), or with --functional the SASS functional model."""
    from sim.errors import UsageError
    from sim.sass import tools_available
    from sim.sass.exec import run_sass_functional

    if not hw.arch:
        raise UsageError(f"--isa sass needs a hardware model with an arch: key; {hw.name} has none", args.hw)
    if not tools_available():
        raise UsageError('--isa sass needs ptxas and nvdisasm: pip install -e ".[sass]"', args.ptx)
    if not args.functional:
        from sim.sass.timing import simulate_sass

        t = simulate_sass(prog.text, launch, hw, args.ptx, args.max_instructions, warm_l2=args.warm_l2,
                          trace=bool(args.trace))
        if args.trace:
            from sim.timing import write_trace

            write_trace(t, args.trace)
        return t.outputs, {"kernel": launch.kernel, "hw": hw.name, "isa": "sass", **t.to_json()}
    r = run_sass_functional(prog.text, launch, hw.arch, args.ptx, args.max_instructions)
    return r.outputs, {"timing": "functional-only", "kernel": launch.kernel, "hw": hw.name, "isa": "sass",
                       "warp_instructions": r.warp_instructions, "ctas": r.ctas}


def render_text(r: dict[str, Any]) -> str:
    lines = [f"kernel {r['kernel']} on {r['hw']}: grid {tuple(r['grid'])} block {tuple(r['block'])}"]
    if r.get("timing") == "functional-only":
        lines.append(f"functional only ({r.get('isa', 'ptx').upper()}): {r['warp_instructions']} warp instructions "
                     f"in {r['ctas']} CTAs")
    else:
        pred = r.get("predicted") or {}
        pc = pred.get("cycles")
        cyc = r.get("cycles", 0)
        if pc:
            err = (cyc - pc) / pc * 100 if pc else 0.0
            lines.append(f"cycles      simulated {cyc:>12,}   predicted {pc:>12,}   ({err:+.1f}%)")
        else:
            lines.append(f"cycles      simulated {cyc:>12,}")
        lines.append(f"warp instr  {r.get('warp_instructions', 0):,}   IPC {r.get('ipc', 0):.3f}")
        util = r.get("utilization", {})
        putil = pred.get("utilization", {}) if isinstance(pred, dict) else {}
        if util:
            lines.append("utilization " + "  ".join(
                f"{u} {v * 100:.1f}%" + (f" (pred {putil[u] * 100:.1f}%)" if u in putil else "")
                for u, v in util.items()))
        stalls = {k: v for k, v in (r.get("stalls") or {}).items() if v}
        if stalls:
            lines.append("stalls      " + "  ".join(f"{k} {v:,}" for k, v in
                                                   sorted(stalls.items(), key=lambda kv: -kv[1])))
        fl = r.get("flushes") or []
        if fl:
            lines.append("flushes     " + "  ".join(f"line {f['line']}: {f['count']}" for f in fl[:5]))
    smp = r.get("sampled")
    if smp:
        bound = f"+- {smp['bound']:,}" if smp["bound"] >= 0 else "unbounded (one wave sampled of several)"
        if smp.get("by_waves"):
            lines.insert(1, f"by waves    {smp['ctas_simulated']} of {smp['ctas_total']} CTAs in {smp['waves']} waves "
                            f"({smp['execution']}): {smp['estimate']:,} cycles, the waves in sequence")
        else:
            lines.insert(1, f"sampled     {smp['ctas_simulated']} of {smp['ctas_total']} CTAs, {smp['waves']} waves: "
                            f"estimate {smp['estimate']:,} cycles {bound} ({smp['confidence']:.0%})")
    chk = r.get("check")
    if chk:
        lines.append(f"check       {'PASSED' if chk['passed'] else 'FAILED'}  "
                     f"rel err {chk['max_rel_err']:.2e} (tolerance {chk.get('rtol', 0):.0e})"
                     + (f"  over the {chk['elements']:,} of {chk['of']:,} elements the sampled CTAs wrote"
                        if "covered" in chk else ""))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return run_cli(lambda a: _dispatch(build_parser().parse_args(a)), argv)


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "native":
        from sim.timing.native import main as native_main

        return native_main([args.native_command] + (["--quiet"] if args.quiet else []))
    return cmd_hw_convert(args) if args.command == "hw" else cmd_run(args)


def cmd_hw_convert(args: argparse.Namespace) -> int:
    from sim.errors import UsageError
    from sim.hw import load_hw
    from sim.hw_seed import convert_text

    try:
        text = Path(args.seed).read_text()
    except OSError as e:
        raise UsageError(f"cannot read: {e.strerror}", file=args.seed) from None
    out = convert_text(text, args.seed, args.base)
    Path(args.output).write_text(out)
    load_hw(args.output)  # the written file loads under the project schema
    print(f"sim: wrote {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
