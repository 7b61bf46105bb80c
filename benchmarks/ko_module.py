"""Module size and host dispatch cost of K-range modules (issue 16 item 1).

Builds ``-o X.ko`` for each case below (cubins where the hardware names an arch and ptxas is on the
PATH), then prints the module's size by member kind, its variants and intervals, and the host dispatch
cost: ``timeit`` median over 15 repeats of 20,000 calls of ``Module.dispatch(K)`` (the table lookup) and
``Kernel.variant_for(K)`` (the runtime's entry), one call per K of 8 random values of the range per round,
and the cost of an empty Python call for scale (the machine's load average is printed with it). With
``--cuda`` it also times the whole host side of ``launch()`` + ``sync()`` on the GPU for one K.

    python benchmarks/ko_module.py [--out DIR] [--cuda] [--reuse]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import timeit
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CASES = (("npu7nm", "64x64x1..4096"), ("h200", "256x256x1..4096"))


def dispatch_us(fn, ks: list[int]) -> float:
    """Median over 15 repeats of 20,000 rounds of one call per K in ks, per call."""
    n = 20_000
    stmt = "; ".join(f"fn({k})" for k in ks)
    times = timeit.repeat(stmt, globals={"fn": fn}, number=n, repeat=15)
    return statistics.median(times) / (n * len(ks)) * 1e6


def main() -> int:
    import numpy as np

    from kernelgen.cli import main as kg
    from kernelgen.module import read
    from runtime import load

    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="ko_out")
    ap.add_argument("--cuda", action="store_true")
    ap.add_argument("--reuse", action="store_true", help="keep modules already in --out (no rebuild)")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    for hw, gemm in CASES:
        path = Path(args.out) / f"{hw}_{gemm.replace('..', '-')}.ko"
        t0 = time.perf_counter()
        if not (args.reuse and path.exists()) and kg(["compile", "--hardware", hw, "--gemm", gemm, "-o",
                                                      str(path)]) != 0:
            return 1
        build_s = time.perf_counter() - t0
        m = read(path)
        kinds: dict[str, int] = {}
        for name, data in m.members.items():
            kind = name.rsplit(".", 1)[-1]
            kinds[kind] = kinds.get(kind, 0) + len(data)
        lo, hi = m.lo, m.hi
        ks = rng.integers(lo, hi + 1, 8).tolist()
        kern = load(str(path), device=f"sim:{hw}")
        print(f"{hw} --gemm {gemm}: {path.stat().st_size:,} B on disk (unzipped {kinds}), "
              f"{len(m.variants)} variants, {len(m.table)} buckets, built in {build_s:.1f} s")
        for v in m.variants:
            print(f"  v{v['index']} {v['plan']['key']} K {v['intervals']} cubin={bool(v['cubin'])}")
        print(f"  dispatch: Module.dispatch {dispatch_us(m.dispatch, ks):.3f} us, "
              f"Kernel.variant_for {dispatch_us(kern.variant_for, ks):.3f} us, empty call "
              f"{dispatch_us(int, ks):.3f} us (timeit median; load average {os.getloadavg()[0]:.1f})")
        if args.cuda and m.manifest["hw"].get("arch"):
            M, N = (int(x) for x in gemm.split("x")[:2])
            g = load(str(path), device="cuda")
            k = ks[0]
            a = rng.standard_normal((M, k)).astype(np.float16)
            b = rng.standard_normal((k, N)).astype(np.float16)
            d = np.zeros((M, N), np.float32)
            g.bind_input("A", a)
            g.bind_input("B", b)
            g.bind_output("D", d)
            g.launch()
            g.sync()
            launches = []
            for _ in range(50):
                t = time.perf_counter()
                g.launch()
                launches.append(time.perf_counter() - t)
                g.sync()
            print(f"  cuda K={k}: launch() host time median {statistics.median(launches) * 1e6:.1f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
