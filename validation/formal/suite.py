"""``python -m validation.formal.suite``: compile the kernelgen suite and verify every kernel.

For each hardware model, GEMM shape, variant and dtype, ``python -m kernelgen compile`` writes a
kernel whose ``@workbench`` header carries grid, block, ranges and extents; the verifier runs with
exactly those (no other flag) and every property must be ``proved``. Prints (or writes with
``--markdown FILE``) a table of wall and process time per kernel.
"""

from __future__ import annotations

import argparse
import itertools
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

from sim import atomic
from validation.cases import HWS, SHAPES, VARIANTS, supported

ROOT = Path(__file__).resolve().parents[2]


def compile_kernel(hw: str, shape: tuple[int, int, int], variant: str, dtype: str,
                   out: Path) -> tuple[Path | None, str]:
    """Run kernelgen; returns (kernel.ptx or None, error text)."""
    gemm = "x".join(map(str, shape))
    r = subprocess.run([sys.executable, "-m", "kernelgen", "compile", "--hw", hw, "--gemm", gemm,
                        "--dtype", dtype, "--variant", variant, "-o", str(out)],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    ptx = out / "kernel.ptx"
    if r.returncode != 0 or not ptx.exists():
        return None, (r.stderr.strip().splitlines() or ["no kernel.ptx"])[-1]
    return ptx, ""


def verify_file(ptx: Path, timeout: float = 120.0) -> dict:
    """Verify with the header's metadata only; adds wall and process seconds."""
    from validation.formal.cli import verify_text

    args = SimpleNamespace(kernel=None, grid=None, block=None, param=[], extent=[], dynamic_shared=None,
                           timeout=timeout)
    w0, c0 = time.perf_counter(), time.process_time()
    rep = verify_text(ptx.read_text(), str(ptx), args)
    rep["wall_s"] = time.perf_counter() - w0
    rep["cpu_s"] = time.process_time() - c0
    return rep


def run_case(hw, shape, variant, dtype, workdir: Path) -> dict:
    out = workdir / f"{Path(hw).stem}_{'x'.join(map(str, shape))}_{variant}_{dtype}"
    ptx, err = compile_kernel(hw, shape, variant, dtype, out)
    row = {"hw": Path(hw).stem, "gemm": "x".join(map(str, shape)), "variant": variant, "dtype": dtype}
    if ptx is None:
        row.update(status="not compiled", detail=err)
        return row
    rep = verify_file(ptx)
    st = {p["name"]: p["status"] for p in rep["properties"]}
    bad = {n: s for n, s in st.items() if s != "proved"}
    row.update(status="proved" if not bad else "FAIL " + ", ".join(f"{n}={s}" for n, s in bad.items()),
               wall_s=rep["wall_s"], cpu_s=rep["cpu_s"],
               slowest=max(rep["properties"], key=lambda p: p["seconds"])["name"],
               detail="; ".join(p["detail"] for p in rep["properties"] if p["status"] != "proved"))
    return row


def markdown(rows: list[dict]) -> str:
    lines = ["| hw | gemm | variant | dtype | result | wall s | process s |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        if "wall_s" in r:
            lines.append(f"| {r['hw']} | {r['gemm']} | {r['variant']} | {r['dtype']} | {r['status']} | "
                         f"{r['wall_s']:.1f} | {r['cpu_s']:.1f} |")
        else:
            lines.append(f"| {r['hw']} | {r['gemm']} | {r['variant']} | {r['dtype']} | {r['status']}: "
                         f"{r.get('detail', '')} | - | - |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m validation.formal.suite", description=__doc__.split("\n\n")[0])
    ap.add_argument("--hw", action="append", help="hardware model(s) (default: npu7nm.yaml and h200)")
    ap.add_argument("--gemm", action="append", help="MxNxK shape(s) (default: the four suite shapes)")
    ap.add_argument("--variant", action="append", help="variant:dtype, e.g. mma:f16 (default: validation/cases.py)")
    ap.add_argument("--markdown", metavar="FILE", help="also write the table to FILE")
    ap.add_argument("--keep", metavar="DIR", help="keep the compiled kernels under DIR")
    a = ap.parse_args(argv)
    hws = a.hw or list(HWS)
    shapes = [tuple(int(x) for x in g.lower().split("x")) for g in a.gemm] if a.gemm else list(SHAPES)
    variants = [tuple(v.split(":")) for v in a.variant] if a.variant else list(VARIANTS)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(a.keep) if a.keep else Path(tmp)
        for hw, shape, (variant, dtype) in itertools.product(hws, shapes, variants):
            if not supported(hw, variant):
                continue
            row = run_case(hw, shape, variant, dtype, work)
            rows.append(row)
            t = f"{row['wall_s']:6.2f} s wall {row['cpu_s']:6.2f} s cpu ({row['slowest']})" if "wall_s" in row else ""
            print(f"{row['hw']:<7} {row['gemm']:<12} {variant:<4} {dtype:<4} {row['status']:<10} {t} "
                  f"{row.get('detail', '')[:150]}", flush=True)
    table = markdown(rows)
    print(table)
    if a.markdown:
        atomic.write_text(a.markdown, table + "\n")
    ok = all(r["status"] == "proved" for r in rows if r["status"] != "not compiled")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
