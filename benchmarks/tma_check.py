"""GPU correctness pass for the wgmma wait_group-1 pipeline and the wgmma_tma variant (run on the H200):
every (variant, shape, layout) kernel is compiled here (kernelgen compile from a YAML spec: no lark needed),
then checked with ``python -m validation gpu KERNEL.ptx --json`` in its own process under a timeout (a
hung mbarrier wait costs one case, not the run). Writes OUT/tma_check.json and one line per case.

    python3 benchmarks/tma_check.py --out $OUT [--timeout 90]

wgmma is constrained to STAGES >= 3 (the wait_group-1 schedule; 2 stages keep wait_group 0).
"""

from __future__ import annotations

import argparse
import json
import sys
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.gpucommon import compile_spec, gpu_case  # noqa: E402

LAYOUTS = [("row", "col"), ("row", "row"), ("col", "col"), ("col", "row")]
SMALL = [(200, 136, 264), (1000, 520, 264), (64, 7168, 4096)]  # odd edges, several persistent tiles, M = 64
LARGE = [(4096, 4096, 4096)]
VARIANTS = {"wgmma": ["STAGES in [3, 4]"], "wgmma_tma": []}


# epilogue flavours: "" (f32 D, beta 0: wgmma_tma's TMA-store epilogue), "epi" (beta, bias, gelu: C is read, the
# registers -> global epilogue), "bf16" (bf16 D with bias and relu, beta 0: the TMA store of 16-bit slabs)
EPI = {"": {}, "epi": {"beta": 0.5, "epilogue": ["bias", "gelu"]}, "bf16": {"epilogue": ["bias", "relu"]}}


def cases() -> list[tuple[str, tuple[int, int, int], tuple[str, str], str]]:
    out = []
    for v in VARIANTS:
        for shape in SMALL:
            for i, lay in enumerate(LAYOUTS):
                out.append((v, shape, lay, "epi" if i == 2 else ""))  # one layout per shape with beta, bias, gelu
            if v == "wgmma_tma":
                out.append((v, shape, LAYOUTS[0], "bf16"))
        out += [(v, shape, ("row", "col"), "") for shape in LARGE]
    return out


def compile_case(v: str, shape: tuple[int, int, int], lay: tuple[str, str], epi: str, d: Path) -> Path:
    M, N, K = shape
    out = "bf16" if epi == "bf16" else "f32"
    spec: dict = {"M": M, "N": N, "K": K, "dtype": {"a": "bf16", "b": "bf16", "out": out},
                  "layout": {"a": lay[0], "b": lay[1]}, **EPI[epi]}
    if VARIANTS[v]:
        spec["tiling"] = VARIANTS[v]
    return compile_spec(spec, v, d)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--timeout", type=int, default=90, help="seconds per kernel check (default 90)")
    a = ap.parse_args()
    out = Path(a.out)
    rows = []
    for v, shape, lay, epi in cases():
        name = f"{v}_{'x'.join(map(str, shape))}_{''.join(lay)}{'_' + epi if epi else ''}"
        rows.append(gpu_case({"case": name}, partial(compile_case, v, shape, lay, epi, out / name), a.timeout))
    (out / "tma_check.json").write_text(json.dumps(rows, indent=1))
    bad = [r["case"] for r in rows if not r.get("passed")]
    print(f"{len(rows) - len(bad)}/{len(rows)} passed" + (f"; not passed: {', '.join(bad)}" if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
