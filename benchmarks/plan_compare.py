"""Dump every plan's full result (survivors with cycles and terms, pruning counts, the chosen tiling,
candidates.csv) for 16 spec x hw cases, to compare a change against a baseline bit for bit:

    PYTHONPATH=/work/main python3 benchmarks/plan_compare.py /tmp/before.txt   # baseline tree
    PYTHONPATH=$PWD python3 benchmarks/plan_compare.py /tmp/after.txt
    cmp /tmp/before.txt /tmp/after.txt

Floats are written with repr (exact); the search time is left out.
"""

from __future__ import annotations

import sys

SHAPES = [("4096x4096x4096", "f16"), ("8192x8192x8192", "f16"), ("1024x1024x1024", "bf16"), ("1000x520x264", "f16"),
          ("128x64x32", "f16"), ("512x2048x128", "bf16"), ("2048x512x4096", "f32"), ("96x4096x1000", "f16")]
HWS = ("h200", "npu7nm")


def main(out: str) -> int:
    from kernelgen.planner import plan
    from kernelgen.report import candidates_csv
    from kernelgen.spec import shorthand
    from sim.hw import load_hw

    lines, total = [], 0
    for hwname in HWS:
        hw = load_hw(hwname)
        for shape, dtype in SHAPES:
            p = plan(shorthand(shape, dtype), hw)
            total += p.candidates
            lines.append(f"## {hwname} {shape} {dtype}: {p.candidates} candidates, best {p.best.tiling.key()}")
            lines.append(repr(p.pruned))
            lines += [repr(ev) for ev in p.survivors]
            lines.append(candidates_csv(p))
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"{len(HWS) * len(SHAPES)} cases, {total:,} candidates -> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1]))
