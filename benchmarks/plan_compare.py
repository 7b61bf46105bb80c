"""Dump every plan's full result (survivors with cycles and terms, pruning counts, the chosen tiling,
candidates.csv) for 16 spec x hw cases and the seed spec (examples/seeds: gemm.dgemm at 4096^3 on the seed's
hardware.yaml), each searched exhaustively and bounded (kernelgen compile's default: the untimed
candidates with their bound and dominator too), to compare a change against a baseline bit for bit:

    PYTHONPATH=/work/main python3 benchmarks/plan_compare.py /tmp/before.txt   # baseline tree
    PYTHONPATH=$PWD python3 benchmarks/plan_compare.py /tmp/after.txt
    cmp /tmp/before.txt /tmp/after.txt

Floats are written with repr (exact); the search time is left out.
"""

from __future__ import annotations

import sys
from pathlib import Path

SHAPES = [("4096x4096x4096", "f16"), ("8192x8192x8192", "f16"), ("1024x1024x1024", "bf16"), ("1000x520x264", "f16"),
          ("128x64x32", "f16"), ("512x2048x128", "bf16"), ("2048x512x4096", "f32"), ("96x4096x1000", "f16")]
HWS = ("h200", "npu7nm")


def main(out: str) -> int:
    from kernelgen.cli import load_any_spec
    from kernelgen.planner import plan
    from kernelgen.report import candidates_csv
    from kernelgen.spec import shorthand
    from sim.hw import load_hw

    cases = [(f"{hwname} {shape} {dtype}", shorthand(shape, dtype), load_hw(hwname))
             for hwname in HWS for shape, dtype in SHAPES]
    root = Path(__file__).resolve().parent.parent / "examples/seeds"
    spec, hw, _ = load_any_spec(str(root / "hardware.yaml"), str(root / "gemm.dgemm"), None, "f16", "f16", None,
                                "4096x4096x4096")
    cases.append(("seed gemm.dgemm 4096x4096x4096", spec, hw))
    lines, total = [], 0
    for name, spec, hw in cases:
        for exhaustive in (True, False):
            p = plan(spec, hw, exhaustive=exhaustive)
            total += p.candidates
            lines.append(f"## {name} {'exhaustive' if exhaustive else 'bounded'}: {p.candidates} candidates, "
                         f"best {p.best.tiling.key()}")
            lines.append(repr(p.pruned))
            lines += [repr(ev) for ev in p.survivors]
            lines += [f"untimed {b.tiling.key()} >= {b.bound} by {b.by.tiling.key()}" for b in p.bounded]
            lines.append(candidates_csv(p))
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"{len(cases)} cases x 2 searches, {total:,} candidates -> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1]))
