"""The stall counts ptxas writes between back-to-back instructions over the silicon suite's SASS, per opcode pair:
ptxas's own machine model of which instructions share a pipe (stall 2 between two instructions of a half-rate
pipe, 1 between two pipes). Session 9 used it to place VIADD (sim.sass.timing.HEAVY): VIADD->VIADD and
VIADD<->IMAD 2, VIADD<->LOP3/IADD3 1, as IMAD.

    PYTHONPATH=. python3 benchmarks/sass_probe/stall_pairs.py [OPCODE ...]
"""

from __future__ import annotations

import collections
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))


def pairs() -> dict[tuple[str, str], collections.Counter]:
    from benchmarks.silicon.suite import SUITE
    from sim.sass.listing import disassemble

    st: dict[tuple[str, str], collections.Counter] = collections.defaultdict(collections.Counter)
    for path in sorted({str(k.ptx) for k in SUITE}):
        for kern in disassemble(Path(path).read_text(), "sm_90a", path).values():
            ins = kern.instructions
            for a, b in zip(ins, ins[1:]):
                st[(a.opcode, b.opcode)][a.control.stall] += 1
    return st


def main() -> int:
    st = pairs()
    ops = sys.argv[1:] or ["VIADD", "IMAD", "LOP3", "IADD3", "LEA", "FFMA", "FADD"]
    others = ("VIADD", "IMAD", "LOP3", "IADD3", "LEA", "FFMA", "FADD")
    for a in ops:
        cells = []
        for b in others:
            c = st.get((a, b))
            if c:
                mode, n = c.most_common(1)[0]
                cells.append(f"->{b} {mode} ({n}/{sum(c.values())})")
        print(f"{a:6s} " + "  ".join(cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
