"""``--dump-ir``: a kernel as the simulator's decoder sees it, one instruction a line: its index, PTX line,
the ISA table's class, pipe and latency class, memory space and direction, destination and source
registers, and the labels that start basic blocks. Plain text meant for reading and diffing."""

from __future__ import annotations

from sim import isa
from sim.ptx.ir import Program


def dump_ir(prog: Program) -> str:
    out: list[str] = []
    for k in prog.kernels.values():
        out.append(f"kernel {k.name} ({k.file}:{k.line}): {len(k.body)} instructions, "
                   f"{len(k.params)} params, {len(k.regs)} registers")
        starts: dict[int, list[str]] = {}
        for name, i in k.labels.items():
            starts.setdefault(i, []).append(name)
        out.append("  idx  line  class    pipe     latency  memory          dst <- src                | instruction")
        for ins in k.body:
            for name in sorted(starts.get(ins.index, [])):
                out.append(f"{name}:")
            space, direction = isa.mem_space(ins), isa.mem_dir(ins)
            mem = f"{space}/{direction}" if direction != "none" else "-"
            regs = f"{','.join(ins.dst_regs) or '-'} <- {','.join(ins.src_regs) or '-'}"
            out.append(f"  {ins.index:4d} {ins.line:5d}  {isa.op_class(ins):8s} {ins.pipe or '-':8s} "
                       f"{isa.latency_class(ins):8s} {mem:15s} {regs:24s} | {ins.text.strip()}")
        out.append("")
    return "\n".join(out)
