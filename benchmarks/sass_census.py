"""SASS census: which sm_90a opcodes ptxas emits for our kernels, and the registers it allocates.

    python3 benchmarks/sass_census.py    # writes docs/sass-census.md; needs ptxas + nvdisasm (pip install -e ".[sass]")

Kernels: examples/*.ptx, the nvcc PTX of tests/fixtures/cuda/*.ptx, and kernelgen's picks for h200
(f16 mma 128^3 and 512^3, f32 simt 128^3). For each opcode (with modifiers): static count, kernels using
it, how many instances set a write barrier (variable latency) and the stall counts seen. For each kernel:
ptxas registers vs the PTX-declared count the simulator's occupancy uses today, and what each gives.
"""

from __future__ import annotations

import platform
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

KERNELGEN_PICKS = (("128x128x128", "f16", "mma"), ("512x512x512", "f16", "mma"), ("128x128x128", "f32", "simt"))


@dataclass
class OpStats:
    count: int = 0
    kernels: set[str] = field(default_factory=set)
    barrier: int = 0  # instances that set a write barrier
    read_barrier: int = 0  # instances that set a read barrier
    stalls: set[int] = field(default_factory=set)


def sources() -> list[tuple[str, str]]:
    """(label, PTX text) of every kernel file in the census."""
    from kernelgen.cli import compile_kernel

    out = [(str(p.relative_to(ROOT)), p.read_text()) for p in sorted((ROOT / "examples").glob("*.ptx"))]
    out += [(str(p.relative_to(ROOT)), p.read_text()) for p in sorted((ROOT / "tests/fixtures/cuda").glob("*.ptx"))]
    for gemm, dtype, variant in KERNELGEN_PICKS:
        ptx = compile_kernel("h200", None, gemm, dtype, "f32", variant)["kernel.ptx"]
        out.append((f"kernelgen h200 {variant} {dtype} {gemm}", ptx))
    return out


def _ctas(hw, meta: dict | None, regs: int, smem: int) -> str:
    from sim.timing.engine import occupancy

    if not meta:
        return "-"
    threads = meta["block"][0] * meta["block"][1] * meta["block"][2]
    return str(occupancy(hw, threads, regs, smem + int(meta.get("dynamic_shared", 0)))["ctas_per_core"])


def main() -> int:
    from sim.hw import load_hw
    from sim.launch import read_metadata
    from sim.ptx.parser import parse_ptx
    from sim.sass import disassemble, resources, tools_available
    from sim.sass.tools import find_tool, tool_version
    from sim.timing.static import regs_per_thread

    if not tools_available():
        print('sass_census: ptxas/nvdisasm not found: pip install -e ".[sass]"', file=sys.stderr)
        return 2
    hw = load_hw("h200")
    ops: dict[str, OpStats] = defaultdict(OpStats)
    rows = []
    for label, ptx in sources():
        prog = parse_ptx(ptx, label)
        meta = read_metadata(ptx, label)
        res = resources(ptx, file=label)
        for name, k in disassemble(ptx, file=label).items():
            tag = f"{label}:{name}" if len(prog.kernels) > 1 or not label.startswith("kernelgen") else label
            names = Counter(i.name for i in k.instructions)
            for ins in k.instructions:
                s = ops[ins.name]
                s.count += 1
                s.kernels.add(tag)
                s.barrier += ins.control.write_barrier is not None
                s.read_barrier += ins.control.read_barrier is not None
                s.stalls.add(ins.control.stall)
            r = res[name]
            declared = regs_per_thread(prog.kernels[name], hw)
            pred = (meta or {}).get("prediction", {}).get("registers_per_thread", "-")
            rows.append((tag, len(k.instructions) - names["NOP"], len(names), r.regs, declared, r.regs / declared,
                         pred, r.smem_static, r.spill_bytes, _ctas(hw, meta, declared, r.smem_static),
                         _ctas(hw, meta, r.regs, r.smem_static)))
    ptxas = find_tool("ptxas")
    assert ptxas is not None
    ratios = [r[5] for r in rows]
    lines = [
        "# SASS census (benchmarks/sass_census.py)", "",
        f"{time.strftime('%Y-%m-%d')}, {platform.machine()}; ptxas `{tool_version(ptxas)}` at `-arch=sm_90a`. "
        "Static counts over the SASS of every kernel below (regenerate with `python3 benchmarks/sass_census.py`). "
        "This is the to-do list of a SASS functional model: every opcode here needs semantics.", "",
        "## Registers: ptxas vs the PTX declarations", "",
        "`declared` is what the simulator's occupancy uses today (`sim.timing.static.regs_per_thread`: declared "
        "PTX registers, 64-bit ones twice, predicates not at all, capped at `limits.regs_per_thread`); `ptxas` is "
        "what `ptxas -v` allocates; `planner` is kernelgen's register prediction in the kernel's metadata. "
        "CTAs/SM is `sim.timing.engine.occupancy` on h200.yaml with the same shared memory, for kernels whose "
        "launch the metadata gives.", "",
        f"ptxas / declared: min {min(ratios):.2f}, median {sorted(ratios)[len(ratios) // 2]:.2f}, "
        f"max {max(ratios):.2f} over {len(rows)} kernels.", "",
        "| kernel | SASS instrs (no NOP) | distinct opcodes | ptxas regs | declared regs | ptxas/declared "
        "| planner regs | smem (B) | spill (B) | CTAs/SM declared | CTAs/SM ptxas |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [f"| {t} | {n} | {d} | {p} | {dc} | {ra:.2f} | {pr} | {sm} | {sp} | {c1} | {c2} |"
              for t, n, d, p, dc, ra, pr, sm, sp, c1, c2 in rows]
    lines += ["", "## Opcodes", "",
              f"{len(ops)} distinct opcodes with modifiers ({len({n.split('.')[0] for n in ops})} base opcodes). "
              "`write bar.` counts instances that set a write barrier (a variable-latency result that consumers "
              "wait on), `read bar.` those that set a read barrier (sources read late, e.g. store data); "
              "`stalls` are the control-code stall counts seen.", "",
              "| opcode | count | kernels | write bar. | read bar. | stalls | used by |",
              "|---|---|---|---|---|---|---|"]
    for name, s in sorted(ops.items(), key=lambda kv: (-kv[1].count, kv[0])):
        used = ", ".join(sorted(s.kernels)) if len(s.kernels) <= 3 else f"{len(s.kernels)} kernels"
        stalls = ",".join(str(x) for x in sorted(s.stalls))
        lines.append(f"| `{name}` | {s.count} | {len(s.kernels)} | {s.barrier} | {s.read_barrier} | {stalls} "
                     f"| {used} |")
    (ROOT / "docs/sass-census.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[:len(rows) + 14]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
