"""The recorded set of the simulator speed work (issue 17): kernels whose cycles, warp instructions,
unit busy cycles, stalls and output hashes must not move when the execution or scheduling core changes.

    PYTHONPATH=. python tests/recorded_sim.py [--write] [NAME ...]

Without --write it compares each entry with tests/data/sim_recorded.json and prints the differences
(exit status 1 if any moved). tests/test_sim_recorded.py runs the same comparison under pytest.
"""

from __future__ import annotations

import hashlib
import json
import pathlib
import sys
from typing import Any

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

DATA = ROOT / "tests" / "data" / "sim_recorded.json"

# name -> (source, hw): fixture cases by name, kernelgen kernels as "kernelgen:VARIANT:MxNxK:DTYPE"
ENTRIES: dict[str, tuple[str, str]] = {
    "sgemm_tiled.h200": ("fixture:sgemm_tiled", "h200"),
    "sgemm_tiled.npu7nm": ("fixture:sgemm_tiled", "npu7nm"),
    "block_reduce.h200": ("fixture:block_reduce", "h200"),
    "divergent_loop.npu7nm": ("fixture:divergent_loop", "npu7nm"),
    "saxpy64.h200": ("fixture:saxpy64", "h200"),
    "mma_f16.h200": ("fixture:mma_f16_m16n8k16", "h200"),
    "cp_async_v4.h200": ("fixture:cp_async_v4", "h200"),
    "cp_async_f32.npu7nm": ("fixture:cp_async_f32", "npu7nm"),
    "clock64.h200": ("fixture:clock64_bracket", "h200"),
    "kg_simt_64.npu7nm": ("kernelgen:simt:64x64x64:f32", "npu7nm"),
    "kg_simt_64.h200": ("kernelgen:simt:64x64x64:f32", "h200"),
    "kg_mma_64.h200": ("kernelgen:mma:64x64x64:f16", "h200"),
    "kg_mma_128.npu7nm": ("kernelgen:mma:128x128x64:f16", "npu7nm"),
    "kg_wgmma_128.h200": ("kernelgen:wgmma:128x128x64:f16", "h200"),
}


def _digest(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()[:16]


def build(source: str, hw_gen: str) -> tuple[Any, Any]:
    """(program, launch) of one entry's source (kernelgen plans it for `hw_gen`), inputs from a fixed seed."""
    from sim.ptx.parser import parse_ptx

    rng = np.random.default_rng(0)
    kind, _, rest = source.partition(":")
    if kind == "fixture":
        from tests.fixtures.cases import by_name
        from tests.simhelp import case_launch

        c = by_name(rest)
        args = c.make_args(rng, c.sizes)
        prog = parse_ptx(c.ptx_path.read_text(), str(c.ptx_path))
        return prog, case_launch(c, args, c.sizes)
    from kernelgen.cli import compile_kernel
    from sim.launch import launch_from_metadata, read_metadata

    variant, shape, dtype = rest.split(":")
    ptx = compile_kernel(hw_gen, None, shape, dtype, dtype if dtype != "f16" else "f32",
                         variant)["kernel.ptx"]
    prog = parse_ptx(ptx, f"{variant}_{shape}.ptx")
    return prog, launch_from_metadata(read_metadata(ptx, prog.file), rng)


def measure(name: str) -> dict[str, Any]:
    """What the entry records: timing figures, and functional-only outputs (both hashed)."""
    from sim.functional.runner import run_functional
    from sim.hw import load_hw
    from sim.timing import simulate

    source, hw = ENTRIES[name]
    prog, launch = build(source, hw)
    r = simulate(prog, launch, load_hw(hw))
    prog2, launch2 = build(source, hw)
    f = run_functional(prog2, launch2)
    return {
        "cycles": r.cycles,
        "warp_instructions": r.warp_instructions,
        "cycles_per_cta": _digest(np.array(r.cycles_per_cta, dtype=np.int64)),
        "busy": r.busy,
        "stalls": {k: v for k, v in sorted(r.stalls.items()) if v},
        "stalls_by_line": _digest(np.frombuffer(json.dumps(r.stalls_by_line, sort_keys=True).encode(), np.uint8)),
        "bank_conflicts": sum(r.bank_conflicts_by_line.values()),
        "dram_bytes": r.dram_bytes,
        "outputs": {str(i): _digest(a) for i, a in sorted(r.outputs.items())},
        "series": _digest(np.frombuffer(json.dumps(r.series, sort_keys=True).encode(), np.uint8)),
        "result_json": _digest(np.frombuffer(json.dumps(r.to_json(), sort_keys=True, default=str).encode(),
                                             np.uint8)),
        "functional_instructions": f.warp_instructions,
        "functional_outputs": {str(i): _digest(a) for i, a in sorted(f.outputs.items())},
    }


def main(argv: list[str]) -> int:
    write = "--write" in argv
    names = [a for a in argv if not a.startswith("--")] or list(ENTRIES)
    old = json.loads(DATA.read_text()) if DATA.exists() else {}
    new = dict(old)
    moved = 0
    for n in names:
        got = measure(n)
        new[n] = got
        if n in old and old[n] != got:
            moved += 1
            print(f"{n}: MOVED\n  was {old[n]}\n  now {got}")
        else:
            print(f"{n}: {'same' if n in old else 'new'} cycles={got['cycles']} instr={got['warp_instructions']}")
    if write:
        DATA.write_text(json.dumps(new, indent=1, sort_keys=True) + "\n")
    return 1 if moved else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
