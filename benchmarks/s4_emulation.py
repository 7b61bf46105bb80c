"""What ptxas makes of mma.m16n8k64.s4 on an arch without an s4 tensor path (sm_90a): the source of the
hwconfig field ``pipes[tensor].s4_unpack_alu`` (hwconfigs/h200.yaml) that the planner charges per s4 mma.

For each case it emits the generated s4 kernel and the s8 kernel of the same tiling (the mma variant's best
tiling for the shape), assembles both with ptxas -arch=ARCH and disassembles them with nvdisasm
(sim.sass.tools: the pip wheels' tools first, else the PATH), and counts per s4 mma, by the pipe each SASS
instruction issues to on sm_90 (PIPE below):
- the subroutine ptxas calls for each mma (``__cuda_sm_9x_mma_sub_byte_internal_m16n8k64_s4_s4``): its
  IMMAs and its ALU-pipe instructions (nibble unpacking: LOP3, SHF, MOV; the IADD3 that accumulate), and
  its FMA-pipe ones (IMAD.SHL / IMAD.U32: integer multiply-adds go to the FMA-heavy pipe, not the ALU);
- the caller's extra instructions against the s8 kernel (argument moves around each CALL: MOV on the
  ALU, IMAD.MOV on the FMA pipe), per CALL;
- what issues without holding either (CALL, RET, NOP, BRA).

    python benchmarks/s4_emulation.py [--arch sm_90a] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# (shape, tiling): None is the mma variant's best tiling for the shape; the two 4096^3 tilings are the ones
# measured on the H200 (benchmarks/s4_gpu.py: 128x256 at 3.312 ms, 64x128 at 2.934 ms)
TILE_128x256 = dict(variant="mma", bm=128, bn=256, bk=128, tm=64, tn=64, stages=2, pad_a=16, pad_b=16, vec_a=16,
                    vec_b=16, unroll_k=0, mma_k=32)
TILE_64x128 = dict(variant="mma", bm=64, bn=128, bk=128, tm=32, tn=16, stages=2, pad_a=0, pad_b=0, vec_a=16,
                   vec_b=16, unroll_k=0, mma_k=32)
CASES: tuple[tuple[tuple[int, int, int], dict[str, Any] | None], ...] = (
    ((4096, 4096, 4096), TILE_128x256), ((4096, 4096, 4096), TILE_64x128), ((512, 384, 1024), None),
    ((200, 136, 264), None))
SUBROUTINE = "mma_sub_byte_internal_m16n8k64_s4_s4"


def kernel_ptx(dtype: str, shape: tuple[int, int, int], tiling: Any = None) -> tuple[str, Any]:
    from kernelgen.planner import plan
    from kernelgen.spec import parse_spec
    from kernelgen.variants import get
    from sim.hw import load_hw

    M, N, K = shape
    spec = parse_spec({"M": M, "N": N, "K": K, "dtype": {"a": dtype, "out": "s32"}})
    t = tiling or plan(spec, load_hw("h200"), "mma").best.tiling
    return get("mma").emit(spec, t, {}), t


# The pipe an sm_90 SASS opcode issues to, for the opcodes of the emulation. source: NVIDIA (Greg Smith) on the
# developer forum, https://forums.developer.nvidia.com/t/separate-cuda-core-pipeline-for-fp16-and-fp32/302018/7
# ("On GH100: FMAheavy pipe handles IMAD, IDP, and FP32") and .../108729/4 ("ALU pipe - executes INT32 (not
# IMAD), logical operations, binary operations, and data movement operations"); the Nsight Compute Kernel
# Profiling Guide's pipeline list says the same. The H200 agrees: s4 4096^3 on a tiling with 8 warps per
# scheduler ran at 355 cycles per s4 mma and scheduler (benchmarks/s4_gpu.py, 2026-12-01), under the 384
# that counting the IMADs on the 16-lane ALU would require. (sim/sass/timing.py puts IMAD on the ALU.)
PIPE = {"LOP3": "alu", "SHF": "alu", "IADD3": "alu", "MOV": "alu", "SEL": "alu", "ISETP": "alu", "LEA": "alu",
        "IMAD": "fma", "IMMA": "tensor", "CALL": "issue_only", "RET": "issue_only", "NOP": "issue_only",
        "BRA": "issue_only"}


def pipe_of(ins: Any) -> str:
    return PIPE.get(ins.opcode, "other")


def census(ptx: str, arch: str) -> dict[str, Any]:
    """Instructions by (function kind, pipe) and by opcode, and the calls of the s4 subroutine."""
    from sim.sass.listing import disassemble

    (kern,) = disassemble(ptx, arch).values()
    by_pipe: Counter = Counter()
    ops: Counter = Counter()
    calls = 0
    returned = False  # the subroutine's code ends at its RET (padding and a self-branch follow)
    for ins in kern.instructions:
        where = "sub" if SUBROUTINE in ins.function else "main"
        if where == "sub" and returned:
            continue
        by_pipe[(where, pipe_of(ins))] += 1
        if where == "sub":
            ops[ins.name] += 1
            returned = ins.opcode == "RET"
        if ins.opcode == "CALL" and any(SUBROUTINE in (op.label or "") for op in ins.operands):
            calls += 1
    return {"by_pipe": by_pipe, "sub_ops": ops, "calls": calls}


def per_mma(s4: dict[str, Any], s8: dict[str, Any]) -> dict[str, Any]:
    calls = s4["calls"]
    sub = {p: n for (w, p), n in s4["by_pipe"].items() if w == "sub"}
    pipes = {p for (w, p) in list(s4["by_pipe"]) + list(s8["by_pipe"]) if w == "main"}
    extra = {p: (s4["by_pipe"].get(("main", p), 0) - s8["by_pipe"].get(("main", p), 0)) / calls for p in pipes}
    return {"calls": calls, "subroutine": sub, "subroutine_ops": dict(s4["sub_ops"]),
            "caller_extra_per_call": {p: round(v, 2) for p, v in extra.items() if abs(v) > 1e-9},
            "alu_per_mma": round(sub.get("alu", 0) + max(0.0, extra.get("alu", 0.0)), 1),
            "fma_per_mma": round(sub.get("fma", 0) + max(0.0, extra.get("fma", 0.0)), 1),
            "imma_per_mma": sub.get("tensor", 0),
            "issue_only_per_mma": round(sub.get("issue_only", 0) + max(0.0, extra.get("issue_only", 0.0)), 1)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--ptxas", help="this ptxas instead of the one sim.sass.tools finds (the wheels' first)")
    args = ap.parse_args()
    from sim.sass import tools
    from sim.sass.tools import tool, tool_version

    if args.ptxas:
        found = tools.find_tool
        tools.find_tool = lambda name: Path(args.ptxas) if name == "ptxas" else found(name)  # type: ignore

    out: dict[str, Any] = {"arch": args.arch, "ptxas": tool_version(tool("ptxas")), "ptxas_path": str(tool("ptxas")),
                           "nvdisasm": tool_version(tool("nvdisasm")), "cases": {}}
    from kernelgen.tiling import Tiling

    for shape, tile in CASES:
        ptx4, t = kernel_ptx("s4", shape, Tiling(**tile) if tile else None)
        ptx8, _ = kernel_ptx("s8", shape, t)
        r = per_mma(census(ptx4, args.arch), census(ptx8, args.arch))
        r["tiling"] = t.key()
        out["cases"][f"{'x'.join(map(str, shape))} {t.key()}"] = r
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        print(f"{args.arch}: ptxas {out['ptxas']} ({out['ptxas_path']}), nvdisasm {out['nvdisasm']}")
        for name, r in out["cases"].items():
            print(f"  s4 {name}: {r['calls']} calls; per mma {r['imma_per_mma']} IMMA, "
                  f"{r['alu_per_mma']} ALU-pipe, {r['fma_per_mma']} FMA-pipe, {r['issue_only_per_mma']} issue-only; "
                  f"subroutine {r['subroutine']}, caller extra per call {r['caller_extra_per_call']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
