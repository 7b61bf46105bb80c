"""``deepgemm analyze --profile DIR`` (``python -m validation analyze DIR``): run a kernel compiled with
``kernelgen compile --profile -o DIR`` on the simulator (default, timed) or the GPU (``--gpu``) and print
its stage hotspots and register pressure next to the planner's prediction:

- per stage (prologue, K loop, epilogue: thread 0's clock64 at the profile slots, docs/kernelgen.md)
  the predicted cycles (plan.json ``prediction.phases``) and the measured mean, min and max over the CTAs;
- registers per thread: the model's breakdown (accumulators, fragments, addressing, parameters) and,
  when ptxas is on the PATH, what ptxas allocates and whether it spills.

Seed 000 §5.1 uses it to find "the B tile's loads hold 192 registers"; seed 003 §3 to read per-stage
cycles. Nothing is written unless ``--json FILE``."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import numpy as np

from sim.errors import UsageError

PHASES = ("prologue", "k_loop", "epilogue")


def add_arguments(p: Any) -> None:
    p.add_argument("dir", help="a kernelgen output directory compiled with --profile (kernel.ptx, plan.json)")
    p.add_argument("--profile", action="store_true", help="accepted for the seeds' spelling (the default)")
    p.add_argument("--gpu", action="store_true", help="measure on the GPU (pycuda) instead of the simulator")
    p.add_argument("--hw", help="hardware for the simulator (default: the plan's)")
    p.add_argument("--seed", type=int, default=0, help="random inputs' seed")
    p.add_argument("--json", help="also write the figures as JSON to this file")


def load_dir(d: str) -> tuple[str, dict, dict]:
    """(ptx text, its metadata, plan.json) of a kernelgen output directory, or a one-line UsageError."""
    from sim.launch import read_metadata

    root = Path(d)
    ptx, plan = root / "kernel.ptx", root / "plan.json"
    for f in (ptx, plan):
        if not f.is_file():
            raise UsageError(f"{f}: not found; compile first: python -m kernelgen compile ... --profile -o {d}")
    text = ptx.read_text()
    meta = read_metadata(text, str(ptx))
    if not meta or "profile" not in meta:
        raise UsageError(f"{ptx}: no profile buffer; recompile with --profile", file=str(ptx))
    try:
        pj = json.loads(plan.read_text())
    except json.JSONDecodeError as e:
        raise UsageError(f"{plan}:{e.lineno}: not JSON ({e.msg}); recompile", file=str(plan)) from None
    return text, meta, pj


def phases(profile: np.ndarray, slots: int) -> dict[str, dict[str, float]]:
    """Per stage: mean, min and max over the CTAs of slot[k+1] - slot[k]."""
    v = np.asarray(profile).view(np.uint64).astype(np.int64).reshape(-1, slots)
    d = np.diff(v, axis=1)
    return {name: {"mean": float(d[:, i].mean()), "min": float(d[:, i].min()), "max": float(d[:, i].max())}
            for i, name in enumerate(PHASES[:slots - 1])}


def ptxas_registers(text: str) -> dict[str, int] | None:
    """{registers, spill_stores, spill_loads} from ptxas -v, or None without ptxas."""
    from sim.sass.tools import find_tool

    exe = find_tool("ptxas")
    if not exe:
        return None
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "k.ptx"
        src.write_text(text)
        r = subprocess.run([exe, "-arch=sm_90a", "-v", str(src), "-o", str(Path(tmp) / "k.cubin")],
                           capture_output=True, text=True, timeout=120)
    if r.returncode:
        raise UsageError(f"ptxas rejected the kernel: {r.stderr.strip().splitlines()[-1] if r.stderr else ''}")
    regs = re.search(r"Used (\d+) registers", r.stderr)
    spill = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", r.stderr)
    return {"registers": int(regs.group(1)) if regs else -1,
            "spill_stores": int(spill.group(1)) if spill else 0, "spill_loads": int(spill.group(2)) if spill else 0}


def measure(text: str, meta: dict, pj: dict, gpu: bool, hw_name: str | None, seed: int) -> tuple[np.ndarray, str]:
    """The profile buffer after one run, and where it ran."""
    from sim.launch import launch_from_metadata

    launch = launch_from_metadata(meta, np.random.default_rng(seed))
    idx = int(meta["profile"]["param"])
    if gpu:
        from validation.gpu import run_on_gpu

        m = run_on_gpu(text, launch, warmup=1, repeats=1, roles=launch.roles, profile_slots=meta["profile"]["slots"])
        return m.outputs[idx], m.device
    from sim.hw import load_hw
    from sim.ptx.parser import parse_ptx
    from sim.timing import simulate

    hw = load_hw(hw_name or pj["hw"].get("path") or pj["hw"]["name"])
    r = simulate(parse_ptx(text, "kernel.ptx"), launch, hw)
    return r.outputs[idx], f"simulator ({hw.name})"


def report(pj: dict, measured: dict[str, dict[str, float]], where: str, regs: dict[str, int] | None) -> list[str]:
    pred = pj["prediction"].get("phases", {})
    total = sum(v["mean"] for v in measured.values()) or 1.0
    L = [f"{pj['tiling']['key']} on {where}: stage cycles per CTA (thread 0's clock64), predicted vs measured"]
    heads = ("predicted", "mean", "min", "max")
    L.append(f"  {'stage':10s} " + " ".join(f"{h:>10s}" for h in heads) + f" {'share':>6s} {'pred/meas':>9s}")
    for name, v in measured.items():
        p = pred.get(name)
        ratio = f"{p / v['mean']:.2f}" if p is not None and v["mean"] > 0 else "-"
        L.append(f"  {name:10s} {p if p is not None else '-':>10} {v['mean']:10.0f} {v['min']:10.0f} {v['max']:10.0f} "
                 f"{v['mean'] / total:6.0%} {ratio:>9s}")
    hot = max(measured, key=lambda k: measured[k]["mean"])
    L.append(f"  hotspot: {hot} ({measured[hot]['mean'] / total:.0%} of a CTA)")
    r = pj["layers"]["registers"]
    parts = {k: r[k] for k in ("accumulators", "fragments", "addressing", "params")}
    top = max(parts, key=lambda k: parts[k])
    line = (f"registers per thread: predicted {r['per_thread']} of {r['limit']} ("
            + ", ".join(f"{k} {v}" for k, v in parts.items())
            + f"; largest: {top} {parts[top] / max(1, r['analytic']):.0%})")
    if regs:
        spill = (f", spills {regs['spill_stores']} B stored / {regs['spill_loads']} B loaded"
                 if regs["spill_stores"] or regs["spill_loads"] else ", no spills")
        line += f"; ptxas -arch=sm_90a: {regs['registers']}{spill}"
    L.append(line)
    return L


def cli_main(args: Any) -> int:
    text, meta, pj = load_dir(args.dir)
    prof, where = measure(text, meta, pj, args.gpu, args.hw, args.seed)
    measured = phases(prof, int(meta["profile"]["slots"]))
    regs = ptxas_registers(text)
    print("\n".join(report(pj, measured, where, regs)))
    if args.json:
        from sim import atomic

        atomic.write_text(args.json, json.dumps({"where": where, "phases": measured, "predicted":
                                                 pj["prediction"].get("phases"), "ptxas": regs}, indent=2) + "\n")
    return 0
