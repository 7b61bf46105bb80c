"""``python -m validation.formal.corpus [--timeout 10] [--out FILE.jsonl] [--compare OLD.jsonl]``: the verifier over
the real-client corpus (docs/ptx-subset.md "Real-client corpus"): every entry of tests/fixtures/{triton,hopper_cuda,
cluster,cuda}/*.ptx and benchmarks/silicon/public/*.ptx, each in its own ``python -m validation verify FILE --kernel K
--timeout T --json`` process with no launch flags, wall time measured from the spawn to the exit (what ``--timeout``
bounds: it counts from the process start). One JSON line per kernel: file, kernel, exit status, wall seconds,
{property: status}. ``--compare`` lists every property that was proved in OLD and is violated now (a new alarm),
and every kernel over the limit (wall > timeout + 5 s); exit status 1 if there is either."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GLOBS = ["tests/fixtures/triton/*.ptx", "tests/fixtures/hopper_cuda/*.ptx", "tests/fixtures/cluster/*.ptx",
         "tests/fixtures/cuda/*.ptx", "benchmarks/silicon/public/*.ptx"]
ENTRY = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+)?\.entry\s+([A-Za-z0-9_$]+)", re.M)
GRACE_S = 5.0  # issue 12: no run exceeds its --timeout by more than 5 s
SHORT = {"bounds": "bnd", "barrier_divergence": "div", "shared_race": "race", "async_copy": "cp", "termination": "term",
         "wgmma": "wgmma", "async_proxy": "proxy", "mbarrier": "mbar"}  # the progress line's names


def kernels(root: Path = ROOT) -> list[tuple[str, str]]:
    out = []
    for g in GLOBS:
        for f in sorted(root.glob(g)):
            for k in sorted(set(ENTRY.findall(f.read_text()))):
                out.append((str(f.relative_to(root)), k))
    return out


def run_one(file: str, kernel: str, timeout: float, root: Path = ROOT) -> dict:
    env = dict(os.environ, PYTHONPATH=str(root))
    t = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "validation", "verify", file, "--kernel", kernel,
                        "--timeout", str(timeout), "--json"], cwd=root, env=env, capture_output=True, text=True,
                       timeout=timeout + 120)
    wall = time.monotonic() - t
    row: dict = {"file": file, "kernel": kernel, "rc": p.returncode, "wall": round(wall, 2)}
    try:
        rep = json.loads(p.stdout)
        row["properties"] = {q["name"]: q["status"] for q in rep["properties"]}
        row["seconds"] = rep.get("seconds")
    except (ValueError, KeyError):
        row["error"] = (p.stderr.strip().splitlines() or ["no output"])[-1][:300]
    return row


# a property split out of others (session 10: the proxy-fence rules of wgmma and async_copy): in rows written
# before the split, it was proved where all of those were
SPLIT_FROM = {"async_proxy": ("wgmma", "async_copy")}


def compare(rows: list[dict], old: list[dict], timeout: float) -> list[str]:
    before = {(r["file"], r["kernel"]): r.get("properties", {}) for r in old}
    out = []
    for r in rows:
        if r["wall"] > timeout + GRACE_S:
            out.append(f"{r['file']} {r['kernel']}: {r['wall']} s wall > --timeout {timeout:g} + {GRACE_S:g}")
        was = before.get((r["file"], r["kernel"]), {})
        for name, st in r.get("properties", {}).items():
            if name not in was and name in SPLIT_FROM and was:
                proved = all(was.get(n) == "proved" for n in SPLIT_FROM[name])
            else:
                proved = was.get(name) == "proved"
            if st == "violated" and proved:
                out.append(f"{r['file']} {r['kernel']}: {name} proved before, violated now")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m validation.formal.corpus", description=__doc__)
    ap.add_argument("--timeout", type=float, default=10.0)
    ap.add_argument("--out", help="write the rows here (JSON lines)")
    ap.add_argument("--compare", help="rows of an earlier run (JSON lines)")
    ap.add_argument("--root", default=str(ROOT), help="the tree whose verifier and corpus run (default: this one)")
    a = ap.parse_args(argv)
    root = Path(a.root).resolve()
    rows = []
    for f, k in kernels(root):
        r = run_one(f, k, a.timeout, root)
        rows.append(r)
        props = " ".join(f"{SHORT.get(n, n)}={s[0]}" for n, s in r.get("properties", {}).items()) or r.get("error", "")
        print(f"{f} {k} rc={r['rc']} wall={r['wall']:.1f} {props}", flush=True)
    if a.out:
        Path(a.out).write_text("".join(json.dumps(r) + "\n" for r in rows))
    walls = [r["wall"] for r in rows]
    print(f"{len(rows)} kernels, wall max {max(walls):.1f} s (limit {a.timeout:g} + {GRACE_S:g})")
    bad: list[str] = []
    if a.compare:
        old = [json.loads(x) for x in Path(a.compare).read_text().splitlines() if x.strip()]
        bad = compare(rows, old, a.timeout)
    else:
        bad = compare(rows, [], a.timeout)
    for b in bad:
        print(b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
