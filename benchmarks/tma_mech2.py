"""On the H200, batch 2 of issue 14's wgmma_tma mechanisms (docs/wgmma-tma.md section 10), one invocation, < 4 min:

    source .devwheels/install.sh >/dev/null 2>&1; export PYTHONPATH="$PWD:$PYTHONPATH"
    python3 benchmarks/tma_mech2.py --out $OUT        # writes $OUT/tma_mech2.json and $OUT/top4.json

1. "issue" (~5 s): benchmarks/wgmma_issue: the clock64 after each wgmma.mma_async of a group, one or two warpgroups,
   the groups of the tilings in question (256x128 t128: two consumers x 8 x m64n128 over two accumulator sets;
   128x256 t64: two x 4 x m64n256; 64x64 / 64x128 / 128x64 t128: one consumer): does a wgmma's issue wait for the
   tensor unit (the consumer step the trace measured: 461 vs 218 cycles for the two large tilings)?
2. "l2bw" (~5 s): TMA loads from the L2 by a probe that is not bound by its own issue loop (tma_l2res.ptx's
   divisions cost ~285 cycles per box): distinct lines, lines every CTA shares, and cold DRAM for comparison.
3. "top4": benchmarks/top4.py run --table bench --last with this branch's model (its picks and top 4 per shape of
   issue 14's table, per-CTA clock64 of the last launch and the SM clock): the new picks measured.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

ISSUE_CASES = ((64, 4, 1, 1), (64, 8, 1, 2), (128, 4, 1, 1), (128, 8, 1, 2), (128, 8, 2, 2), (128, 16, 1, 2),
               (256, 4, 2, 1), (256, 4, 1, 1), (256, 8, 1, 1), (64, 8, 2, 2), (128, 4, 2, 1))


def part_issue() -> list[dict]:
    from wgmma_issue.kernels import Case, ptx

    from sim.launch import Arg, Launch
    from validation.gpu import run_on_gpu

    rows = []
    for n, g, wg, ch in ISSUE_CASES:
        c = Case(n, g, wg, ch)
        row: dict = {"case": c.name, "n": n, "group": g, "warpgroups": wg, "chains": ch}
        try:
            out = np.zeros(wg * 64, dtype=np.uint64)
            launch = Launch(f"wgmma_issue_{c.name}", (1, 1, 1), (128 * wg, 1, 1), [Arg("buffer", "uint64", array=out)])
            m = run_on_gpu(ptx(c), launch, warmup=1, repeats=3)
            o = np.asarray(m.outputs[0]).astype(np.int64)
            row["per_warpgroup"] = [[int(x) for x in o[w * 64:w * 64 + g + 1]] for w in range(wg)]
        except Exception as e:  # noqa: BLE001 - record and go on
            row["error"] = f"{type(e).__name__}: {e}"[:300]
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def part_l2bw(torch) -> list[dict]:
    """TMA from the L2 without the probe's own issue bound (benchmarks/tma_l2res/tma_l2bw.ptx): distinct lines (each
    box read by one CTA; 24 boxes per CTA, 13-26 MB, held between launches), shared lines (every CTA reads the same
    64 boxes: a GEMM's A box at M = 64/128) and, for comparison, cold DRAM (128 boxes per CTA after a 512 MiB read)."""
    from tma_l2res.run import BOX, KTILES, K, _stats

    from benchmarks.gpucommon import event_times
    from validation.tensormap import encode_tiled, prepare_cuda_python

    ptx = (ROOT / "benchmarks/tma_l2res/tma_l2bw.ptx").read_bytes()
    scratch = torch.ones((512 << 20) // 4, device="cuda", dtype=torch.float32)
    nrows = 132 * 64 * 3
    t = torch.zeros(nrows, K, device="cuda", dtype=torch.bfloat16)
    tmap = encode_tiled("bf16", int(t.data_ptr()), (K, nrows), (K * 2,), (64, 64), (1, 1), 128)
    rows = []
    for mode, n, share, cold in (("distinct", 24, 0, False), ("shared", 64, 1, False), ("cold", 128, 0, True)):
        for grid in (132, 64):
            for depth in (2, 4, 8, 12, 16):
                if cold and (grid != 132 or depth in (2, 12)):
                    continue
                out = torch.zeros(3 * grid, device="cuda", dtype=torch.int64)
                call = prepare_cuda_python(ptx, "tma_l2bw", (grid, 1, 1), (32, 1, 1), 16 * BOX,
                                           [("tmap", tmap), ("u64", int(out.data_ptr())), ("u32", n), ("u32", depth),
                                            ("u32", KTILES), ("u32", share)])
                got: list[dict] = []
                def after(r: int, g: list = got, o=out, gr: int = grid, nn: int = n) -> None:
                    g.append(_stats(o.cpu().numpy(), gr, nn))

                times = event_times(call, 5, before=(lambda r: scratch.sum()) if cold else None, after=after)
                st = got[2:]
                c = float(np.median([x["cycles"] for x in st]))
                row = {"mode": mode, "grid": grid, "depth": depth, "n": n, "cycles": c,
                       "round_trip": c * depth / n, "bytes_per_cycle_per_sm": n * BOX / c,
                       "gb_s": float(np.median([x["gb_s"] or 0 for x in st])),
                       "clock_mhz": float(np.median([x["clock_mhz"] or 0 for x in st])),
                       "wall_ms": float(np.median(times[2:]))}
                rows.append(row)
                print(json.dumps(row), flush=True)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--skip", default="")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    skip = set(filter(None, a.skip.split(",")))
    t0 = time.time()
    res: dict = {"date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                 "load_average": os.getloadavg()[0]}

    def save() -> None:
        res["seconds"] = time.time() - t0
        (out / "tma_mech2.json").write_text(json.dumps(res, indent=1, default=float))

    if "issue" not in skip:
        try:
            res["issue"] = part_issue()
        except Exception as e:  # noqa: BLE001
            res["issue_error"] = f"{type(e).__name__}: {e}"[:400]
        save()
    if "l2bw" not in skip:
        try:
            import torch

            torch.zeros(1, device="cuda")
            res["l2bw"] = part_l2bw(torch)
        except Exception as e:  # noqa: BLE001
            res["l2bw_error"] = f"{type(e).__name__}: {e}"[:400]
        save()
    if "top4" not in skip:
        import top4

        t1 = time.time()
        try:
            d = Path(tempfile.mkdtemp(prefix="top4_"))
            top4.cmd_compile(d, "bench", 8)
            res["top4_compile_s"] = time.time() - t1
            save()
            top4.cmd_gpu(d, out, 20, 1e10, max(30.0, 215.0 - (time.time() - t0)), True)
        except Exception as e:  # noqa: BLE001
            res["top4_error"] = f"{type(e).__name__}: {e}"[:400]
        res["top4_s"] = time.time() - t1
    save()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
