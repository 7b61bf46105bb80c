"""``python -m sim run KERNEL.ptx --hw HW ...``: simulate a kernel and report cycles, utilization, stalls.

Contract (ARCHITECTURE.md): ``--arg`` binds parameters in order or as ``NAME=SPEC`` (PTX name or
``pN``); every buffer is written back as ``OUT/arg<index>.npy``; ``--json`` prints one object;
bad input exits 2 with one line ``file:line: message``, no traceback unless ``--debug``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from sim.errors import UsageError, WorkbenchError
from sim.result import jsonable


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m sim", description="Cycle-level PTX simulator")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    r = sub.add_parser("run", help="simulate a kernel (functional values + timing)")
    r.add_argument("ptx", help="PTX file (real nvcc output or a kernelgen kernel)")
    r.add_argument("--hw", required=True, help="hardware YAML: a path or a bundled name (npu7nm.yaml, h200)")
    r.add_argument("--kernel", help="entry name (needed when the file has several)")
    r.add_argument("--grid", help="X,Y,Z (default: from the kernel's @workbench header)")
    r.add_argument("--block", help="X,Y,Z (default: from the kernel's @workbench header)")
    r.add_argument("--arg", action="append", default=[], metavar="SPEC",
                   help="bind a parameter: literal, @file.npy, zeros:DTYPE:COUNT, or NAME=SPEC")
    r.add_argument("--shared", type=int, default=None, help="dynamic shared memory bytes")
    r.add_argument("--out", help="directory for arg<index>.npy of every buffer")
    r.add_argument("--json", action="store_true", help="print one JSON object")
    r.add_argument("--trace", help="write a Chrome trace-event JSON (opens in Perfetto)")
    r.add_argument("--functional", action="store_true", help="values only, no timing model")
    r.add_argument("--warm-l2", action="store_true",
                   help="start with the buffer arguments in the L2, as after their host-to-device copies "
                        "(default: an empty L2)")
    r.add_argument("--seed", type=int, default=None, help="seed of the random inputs (default: fresh)")
    r.add_argument("--max-instructions", type=int, default=20_000_000,
                   help="stop after this many warp instructions (endless-loop guard)")
    r.add_argument("--debug", action="store_true", help="show tracebacks")
    return p


def _build_launch(prog: Any, args: argparse.Namespace, meta: dict | None, rng: np.random.Generator) -> Any:
    from sim.launch import Launch, launch_from_metadata, parse_arg_spec, parse_dim3, split_named

    kname = args.kernel or (meta or {}).get("kernel")
    k = prog.kernel(kname)
    if meta and not args.arg:
        launch = launch_from_metadata(meta, rng)
    else:
        if not args.arg and k.params:
            raise UsageError(f"kernel {k.name} has {len(k.params)} parameters and no @workbench header: "
                             "bind them with --arg (literal, @file.npy or zeros:DTYPE:COUNT)", prog.file)
        bound: list[Any] = [None] * len(k.params)
        pos = 0
        for spec in args.arg:
            name, body = split_named(spec)
            if name is None:
                idx = pos
                pos += 1
            else:
                idx = next((i for i, p in enumerate(k.params) if p.name == name), -1)
                if idx < 0 and name.startswith("p") and name[1:].isdigit():
                    idx = int(name[1:])
                if idx < 0:
                    known = ", ".join(p.name for p in k.params)
                    raise UsageError(f"--arg {spec}: no parameter named {name!r} (have {known}, or p0..)")
            if idx >= len(k.params):
                raise UsageError(f"--arg {spec}: kernel {k.name} has only {len(k.params)} parameters")
            a = parse_arg_spec(body, k.params[idx].type, idx)
            a.name = k.params[idx].name
            bound[idx] = a
        missing = [k.params[i].name for i, a in enumerate(bound) if a is None]
        if missing:
            raise UsageError(f"no --arg for parameter(s) {', '.join(missing)} of {k.name}: "
                             "pass one --arg per parameter", prog.file)
        grid = args.grid or (",".join(map(str, meta["grid"])) if meta else None)
        block = args.block or (",".join(map(str, meta["block"])) if meta else None)
        if grid is None or block is None:
            raise UsageError("--grid X,Y,Z and --block X,Y,Z are required for a kernel without a "
                             "@workbench header", prog.file)
        launch = Launch(k.name, parse_dim3(grid, "grid"), parse_dim3(block, "block"), bound)
    if args.grid and meta and not args.arg:
        launch.grid = parse_dim3(args.grid, "grid")
    if args.block and meta and not args.arg:
        launch.block = parse_dim3(args.block, "block")
    if args.shared is not None:
        launch.dynamic_shared = args.shared
    launch.kernel = k.name
    return launch


def _write_outputs(out_dir: str, outputs: dict[int, np.ndarray]) -> None:
    """All files are written to a temporary folder first, then moved: nothing half-written."""
    dest = Path(out_dir)
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest) as tmp:
        names = []
        for i, arr in sorted(outputs.items()):
            np.save(Path(tmp) / f"arg{i}.npy", arr)
            names.append(f"arg{i}.npy")
        for n in names:
            os.replace(Path(tmp) / n, dest / n)


def cmd_run(args: argparse.Namespace) -> int:
    from sim.hw import load_hw
    from sim.launch import read_metadata
    from sim.ptx.parser import parse_file
    from sim.reference import check_from_metadata

    prog = parse_file(args.ptx)
    hw = load_hw(args.hw)
    meta = read_metadata(prog.text, args.ptx)
    rng = np.random.default_rng(args.seed)
    launch = _build_launch(prog, args, meta, rng)
    before = launch.copy()
    result: dict[str, Any]
    sim_obj = None
    if not args.functional:
        from sim.timing import simulate

        sim_obj = simulate(prog, launch, hw, trace=bool(args.trace), max_instructions=args.max_instructions,
                           warm_l2=args.warm_l2)
    if sim_obj is None:
        from sim.functional.runner import run_functional

        fr = run_functional(prog, launch, args.max_instructions)
        outputs = fr.outputs
        result = {"timing": "functional-only", "kernel": launch.kernel, "hw": hw.name,
                  "warp_instructions": fr.warp_instructions, "ctas": fr.ctas}
    else:
        outputs = sim_obj.outputs
        result = {"kernel": launch.kernel, "hw": hw.name, **sim_obj.to_json()}
        if args.trace:
            from sim.timing import write_trace

            write_trace(sim_obj, args.trace)
    result["grid"] = list(launch.grid)
    result["block"] = list(launch.block)
    if meta and meta.get("prediction"):
        result["predicted"] = meta["prediction"]
    chk = check_from_metadata(meta, before, outputs) if (meta and not args.arg) else None
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




def render_text(r: dict[str, Any]) -> str:
    lines = [f"kernel {r['kernel']} on {r['hw']}: grid {tuple(r['grid'])} block {tuple(r['block'])}"]
    if r.get("timing") == "functional-only":
        lines.append(f"functional only: {r['warp_instructions']} warp instructions in {r['ctas']} CTAs")
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
    chk = r.get("check")
    if chk:
        lines.append(f"check       {'PASSED' if chk['passed'] else 'FAILED'}  "
                     f"rel err {chk['max_rel_err']:.2e} (tolerance {chk.get('rtol', 0):.0e})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return cmd_run(args)
    except WorkbenchError as e:
        if args.debug:
            raise
        print(e.one_line(), file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 - contract: one line unless --debug
        if args.debug:
            raise
        print(f"{args.ptx}: internal error: {type(e).__name__}: {e} (rerun with --debug)",
              file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
