"""Replay mutated PTX / hardware YAML / --arg inputs through the real command lines, each in a cold
subprocess, and count what the hostile-input contract forbids (tests/fuzzing.py says what it is).

    PYTHONPATH=$PWD timeout 3600 python benchmarks/fuzz_replay.py --count 2000 --workers 2

Writes benchmarks/data/fuzz_<date>.json: counts per command of exit statuses, tracebacks, hangs
(past --timeout), 'internal error' lines and exit-2 messages that are not exactly one line, with
the first inputs of each failure kind kept for replaying.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fuzzing import (  # noqa: E402
    PTX_SEEDS,
    SEED_LOOP,
    mutate_ptx,
    mutate_yaml,
    random_arg_spec,
)

SIM = [sys.executable, "-m", "sim", "run"]
BUDGET = ["--max-instructions", "20000"]


def make_cases(n: int, rnd: random.Random, work: Path) -> list[tuple[str, list[str], str]]:
    """(kind, argv, input file) for n inputs: 65% PTX, 15% YAML, 15% --arg/--grid/--block, 5% verify."""
    hw = (ROOT / "hwconfigs" / "npu7nm.yaml").read_text()
    loop = work / "seed_loop.ptx"
    loop.write_text(SEED_LOOP)
    seeds = sorted(PTX_SEEDS)
    cases = []
    for i in range(n):
        r = rnd.random()
        if r < 0.70:
            seed = rnd.choice(seeds)
            text = mutate_ptx(PTX_SEEDS[seed], rnd)
            f = work / f"m{i}.ptx"
            raw = text.encode()
            if rnd.random() < 0.03:  # not UTF-8
                j = rnd.randrange(len(raw))
                raw = raw[:j] + bytes([0xFF, 0xFE]) + raw[j:]
            f.write_bytes(raw)
            if r >= 0.65:
                cases.append(("validation verify", [sys.executable, "-m", "validation", "verify", str(f)], str(f)))
            elif seed != "loop":
                cases.append(("sim run --check-all", SIM + [str(f), "--check-all"], str(f)))
            else:
                mode = ["--functional"] if rnd.random() < 0.6 else []
                cases.append(("sim run (ptx)", SIM + [str(f), "--hw", "npu7nm.yaml", *BUDGET, *mode], str(f)))
        elif r < 0.85:
            f = work / f"m{i}.yaml"
            f.write_text(mutate_yaml(hw, rnd))
            cases.append(("sim run --hw (yaml)", SIM + [str(loop), "--hw", str(f), *BUDGET], str(f)))
        else:
            spec = random_arg_spec(rnd) if rnd.random() < 0.6 else rnd.choice(
                ["zeros:u32:128", "k_out=zeros:u32:128", "zeros:u32:1", "zeros:f32:128", "p0=zeros:u8:512"])
            argv = ["--arg", spec, "--arg", rnd.choice(["5", "-1", "k_n=7", "1e3", "0x7fffffff"])]
            if rnd.random() < 0.3:
                argv += [rnd.choice(["--grid", "--block", "--shared", "--seed"]),
                         rnd.choice(["0", "-1", "1,1,65", "2147483648", "1025", "64,64", "x", "1,,1", "99999999999"])]
            cases.append(("sim run --arg", SIM + [str(loop), "--hw", "npu7nm.yaml", "--functional", *BUDGET, *argv],
                          " ".join(argv)))
    return cases


def run_case(case: tuple[str, list[str], str], timeout: float) -> dict:
    kind, argv, what = case
    t0 = time.monotonic()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    try:
        p = subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=timeout, env=env,
                           cwd=tempfile.gettempdir())
    except subprocess.TimeoutExpired:
        return {"kind": kind, "rc": "hang", "what": what, "seconds": timeout, "stderr": ""}
    err = p.stderr
    return {"kind": kind, "rc": p.returncode, "what": what, "seconds": round(time.monotonic() - t0, 2),
            "traceback": "Traceback" in err, "internal": "internal error" in err,
            "multiline": p.returncode == 2 and err.count("\n") != 1, "stderr": err[-300:]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds before a run counts as a hang")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="fuzz_") as d:
        cases = make_cases(a.count, random.Random(a.seed), Path(d))
        with ThreadPoolExecutor(a.workers) as ex:
            results = list(ex.map(lambda c: run_case(c, a.timeout), cases))
    by_kind: dict[str, collections.Counter] = {}
    bad: dict[str, list] = collections.defaultdict(list)
    for r in results:
        c = by_kind.setdefault(r["kind"], collections.Counter())
        c["inputs"] += 1
        c[f"exit {r['rc']}"] += 1
        for flag in ("traceback", "internal", "multiline"):
            if r.get(flag):
                c[flag] += 1
                bad[flag].append(r)
        if r["rc"] == "hang":
            c["hangs"] += 1
            bad["hang"].append(r)
    total = collections.Counter()
    for c in by_kind.values():
        total.update(c)
    report = {"date": datetime.date.today().isoformat(), "inputs": len(results), "seed": a.seed,
              "seconds": round(time.monotonic() - t0, 1), "workers": a.workers, "timeout_s": a.timeout,
              "total": {k: total[k] for k in sorted(total)},
              "tracebacks": total["traceback"], "hangs": total["hangs"], "internal_errors": total["internal"],
              "multiline_errors": total["multiline"],
              "by_command": {k: dict(sorted(v.items())) for k, v in sorted(by_kind.items())},
              "examples": {k: v[:10] for k, v in bad.items()}}
    out = Path(a.out or ROOT / "benchmarks" / "data" / f"fuzz_{report['date']}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps({k: report[k] for k in ("inputs", "seconds", "tracebacks", "hangs", "internal_errors",
                                             "multiline_errors")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
