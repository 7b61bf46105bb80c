"""Write benchmarks/silicon/kernels/<name>.ptx for every row of suite.py: the source PTX with a
``// @workbench`` launch header (GEMMs: kernelgen's own header; ``--gemm`` recompiles them), then check
each file and its instrumented form (validation/instrument.py) with ``ptxas -arch=sm_90a``.

    PYTHONPATH=. python3 benchmarks/silicon/build.py [--gemm] [--no-ptxas]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from benchmarks.silicon.suite import KERNELS, ROOT, SUITE, Kernel  # noqa: E402
from validation.gpu import ptx_entries  # noqa: E402
from validation.instrument import instrument_ptx  # noqa: E402


def entry_of(k: Kernel, text: str) -> tuple[str, list[tuple[str, str]]]:
    entries = ptx_entries(text)
    hits = [e for e in entries if e == k.entry] or [e for e in entries if k.entry in e]
    if len(hits) != 1:
        raise SystemExit(f"{k.source}: entry {k.entry!r} matches {hits or 'nothing'} of {list(entries)}; "
                         "fix suite.py")
    return hits[0], entries[hits[0]]


def header(k: Kernel, text: str) -> dict:
    entry, params = entry_of(k, text)
    if len(params) != len(k.params):
        raise SystemExit(f"{k.name}: suite.py gives {len(k.params)} params, {entry} has {len(params)}; fix suite.py")
    plist = []
    for (_, pname), p in zip(params, k.params):
        d = {"name": pname, **p}
        if d["kind"] == "scalar":
            d.pop("init", None)
        plist.append(d)
    meta: dict = {"version": 1, "kernel": entry, "grid": list(k.grid), "block": list(k.block),
                  "dynamic_shared": k.dynamic_shared, "params": plist}
    if "check" in k.extra:
        meta["check"] = k.extra["check"]
    return meta


def build_gemm(k: Kernel, recompile: bool) -> str:
    """kernelgen's kernel.ptx (kept as kernels/<name>.ptx) and plan.json (kept in the gemm folder)."""
    d = ROOT / k.source
    if recompile or not k.ptx.exists() or not (d / "plan.json").exists():
        shape, dtype, variant = k.gemm.split()
        subprocess.run([sys.executable, "-m", "kernelgen", "compile", "--hw", "h200", "--gemm", shape,
                        "--dtype", dtype, "--variant", variant, "-o", str(d)], check=True, cwd=ROOT)
        for extra in ("candidates.csv", "analysis.md"):
            (d / extra).unlink(missing_ok=True)
        return (d / "kernel.ptx").read_text()
    return k.ptx.read_text()


def build(k: Kernel, recompile: bool) -> str:
    if k.group == "gemm":
        return build_gemm(k, recompile)
    text = (ROOT / k.source).read_text()
    if k.group == "example":
        return text
    meta = header(k, text)
    lines = [f"// @workbench {json.dumps(meta, separators=(',', ':'))}",
             f"// silicon suite kernel {k.name} ({k.group}): {k.what or k.entry}; source {k.source}; "
             "launch from benchmarks/silicon/suite.py"]
    return "\n".join(lines) + "\n" + text


def ptxas_ok(text: str) -> str:
    if shutil.which("ptxas") is None:
        return "no ptxas"
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp, "k.ptx")
        p.write_text(text)
        r = subprocess.run(["ptxas", "-arch=sm_90a", str(p), "-o", str(Path(tmp, "k.cubin"))],
                           capture_output=True, text=True)
        return "" if r.returncode == 0 else (r.stderr.strip().splitlines() or ["ptxas failed"])[0]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gemm", action="store_true", help="recompile the kernelgen GEMMs")
    ap.add_argument("--no-ptxas", action="store_true")
    a = ap.parse_args()
    KERNELS.mkdir(parents=True, exist_ok=True)
    bad = 0
    for k in SUITE:
        text = build(k, a.gemm)
        k.ptx.write_text(text)
        if k.group == "gemm":
            (ROOT / k.source / "kernel.ptx").unlink(missing_ok=True)
        if not a.no_ptxas:
            for what, t in (("plain", text), ("instrumented", instrument_ptx(text, str(k.ptx)).text)):
                err = ptxas_ok(t)
                if err:
                    bad += 1
                    print(f"{k.name} ({what}): ptxas: {err}")
        print(f"wrote {k.ptx.relative_to(ROOT)}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
