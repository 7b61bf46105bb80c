"""validation.formal: the planted-bug suite, no false alarms on correct kernels, the CLI contract."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("z3")

from validation.formal.cli import exit_status, verify_text  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BUGS = ROOT / "tests" / "fixtures" / "bugs"
CUDA = ROOT / "tests" / "fixtures" / "cuda"

N1 = ["--block", "256", "--grid", "8", "--param", "p2=0..4096", "--extent", "p0=p2*4", "--extent", "p1=p2*4"]
ROWS = ["--block", "256", "--grid", "8", "--param", "p2=1..64", "--param", "p3=1..64",
        "--extent", "p0=p2*p3*4", "--extent", "p1=p2*4"]
BAR = ["--block", "128", "--grid", "8", "--param", "p2=1..4096", "--extent", "p0=p2*4", "--extent", "p1=4096"]
RACE = ["--block", "128", "--grid", "8", "--param", "p2=0..4096", "--extent", "p0=p2*4", "--extent", "p1=4096"]
TILES = ["--block", "128", "--grid", "8", "--param", "p2=0..4096", "--param", "p3=0..32",
         "--extent", "p0=p2*4", "--extent", "p1=4096"]
ASYNC = ["--block", "64", "--grid", "4", "--param", "p2=1..4096", "--extent", "p0=p2*4", "--extent", "p1=p2*4"]

# (file, kernel, flags, {property: expected status}); properties not named must be "proved"
CASES = [
    ("bounds_bugs", "oob_offbyone", N1, {"bounds": "violated"}),
    ("bounds_bugs", "oob_shared", N1, {"bounds": "violated"}),
    ("bounds_bugs", "oob_loop_stride", ROWS, {"bounds": "violated"}),
    ("bounds_bugs", "ok_guarded", N1, {}),
    ("bounds_bugs", "ok_loop_stride", ROWS, {}),
    ("barrier_bugs", "bar_in_tid_branch", BAR, {"barrier_divergence": "violated"}),
    ("barrier_bugs", "bar_after_early_return", BAR, {"barrier_divergence": "violated"}),
    ("barrier_bugs", "bar_in_thread_loop", BAR, {"barrier_divergence": "violated", "shared_race": "violated"}),
    ("barrier_bugs", "ok_uniform_branch", BAR, {}),
    ("race_bugs", "race_missing_barrier", RACE, {"shared_race": "violated"}),
    ("race_bugs", "race_tree_reduce", RACE, {"shared_race": "violated"}),
    ("race_bugs", "race_loop_one_barrier", TILES, {"shared_race": "violated"}),
    ("race_bugs", "ok_tree_reduce", RACE, {}),
    ("race_bugs", "ok_loop_two_barriers", TILES, {}),
    ("async_bugs", "async_no_wait", ASYNC, {"async_copy": "violated"}),
    ("async_bugs", "async_no_barrier", ASYNC, {"async_copy": "violated", "shared_race": "violated"}),
    ("async_bugs", "async_wait_too_few", ASYNC, {"async_copy": "violated"}),
    ("async_bugs", "ok_async", ASYNC, {}),
    ("async_bugs", "async_own_stale", ASYNC, {"async_copy": "violated"}),  # its own copy, an earlier iteration
    ("async_bugs", "ok_async_own", ASYNC, {}),
    ("loop_bugs", "spin_on_flag", ["--block", "64", "--grid", "4", "--extent", "p0=4", "--extent", "p1=1024"],
     {"termination": "unknown"}),
    ("loop_bugs", "stuck_condition", ["--block", "64", "--grid", "4", "--param", "p2=1..1024",
                                      "--extent", "p0=p2*4", "--extent", "p1=p2*4"],
     {"termination": "violated", "bounds": "violated"}),
    ("loop_bugs", "step_from_data", ["--block", "64", "--grid", "4", "--param", "p2=1..1024",
                                     "--extent", "p0=4", "--extent", "p1=p2*4"], {"termination": "unknown"}),
    ("loop_bugs", "ok_grid_stride", ["--block", "64", "--grid", "4", "--param", "p2=0..100000",
                                     "--extent", "p0=p2*4", "--extent", "p1=p2*4"], {}),
    # nvcc fixtures (correct kernels): no false alarm
    ("cuda:sgemm_tiled", "sgemm_tiled", ["--block", "16,16,1", "--grid", "4,3,1", "--param", "p3=48",
                                         "--param", "p4=64", "--param", "p5=40", "--extent", "p0=p3*p5*4",
                                         "--extent", "p1=p5*p4*4", "--extent", "p2=p3*p4*4"], {}),
    ("cuda:cp_async", "cp_async_f32", ASYNC, {}),
    ("cuda:cp_async", "cp_async_v4", ASYNC, {}),
    ("cuda:block_reduce", "block_reduce", ["--block", "128", "--grid", "8", "--param", "p2=0..100000",
                                           "--extent", "p0=p2*4", "--extent", "p1=32"], {}),
]


def parse_flags(flags: list[str], kernel: str) -> SimpleNamespace:
    ns = SimpleNamespace(kernel=kernel, grid=None, block=None, param=[], extent=[], dynamic_shared=None,
                         timeout=60.0)
    it = iter(flags)
    for f in it:
        v = next(it)
        key = f[2:].replace("-", "_")
        if key in ("param", "extent"):
            getattr(ns, key).append(v)
        else:
            setattr(ns, key, v)
    return ns


def path_of(file: str) -> Path:
    if file.startswith("cuda:"):
        return CUDA / (file[5:] + ".ptx")
    return BUGS / (file + ".ptx")


SLOW_CASES = ("ok_loop_stride", "oob_loop_stride")  # 10-16 s each: in the slow set


@pytest.mark.parametrize("file,kernel,flags,expect",
                         [pytest.param(*c, marks=pytest.mark.slow) if c[1] in SLOW_CASES else c for c in CASES],
                         ids=[c[1] for c in CASES])
def test_verify_case(file, kernel, flags, expect):
    p = path_of(file)
    rep = verify_text(p.read_text(), str(p), parse_flags(flags, kernel))
    got = {x["name"]: x["status"] for x in rep["properties"]}
    want = {n: expect.get(n, "proved") for n in got}
    assert got == want, json.dumps(rep["properties"], indent=1)[:3000]
    for x in rep["properties"]:
        if x["status"] == "violated":
            w = x["witness"]
            assert x["line"] and w and "thread" in w and "block" in w and "params" in w
    assert rep["seconds"] >= 0  # recorded; speed is benchmarked (docs/verify.md), not asserted


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "validation", "verify", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_cli_json_and_exit_status():
    r = run_cli(str(BUGS / "race_bugs.ptx"), "--kernel", "race_missing_barrier", *RACE, "--json")
    assert r.returncode == 1, r.stderr
    rep = json.loads(r.stdout)
    assert rep["kernel"] == "race_missing_barrier" and "seconds" in rep
    assert [p["name"] for p in rep["properties"]] == ["bounds", "barrier_divergence", "shared_race",
                                                      "async_copy", "termination", "wgmma", "async_proxy",
                                                      "mbarrier"]
    assert {"name", "status", "witness", "line"} <= set(rep["properties"][0])
    r = run_cli(str(BUGS / "race_bugs.ptx"), "--kernel", "ok_tree_reduce", *RACE)
    assert r.returncode == 0, r.stdout + r.stderr
    r = run_cli(str(BUGS / "loop_bugs.ptx"), "--kernel", "spin_on_flag", "--block", "64", "--grid", "4",
                "--extent", "p0=4", "--extent", "p1=1024")
    assert r.returncode == 3, r.stdout + r.stderr


def test_cli_bad_input_one_line():
    r = run_cli(str(BUGS / "race_bugs.ptx"), "--kernel", "nope")
    assert r.returncode == 2 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
    r = run_cli(str(BUGS / "race_bugs.ptx"), "--kernel", "ok_tree_reduce", "--param", "p9=1..2")
    assert r.returncode == 2 and "p9" in r.stderr and "Traceback" not in r.stderr
    r = run_cli(str(BUGS / "race_bugs.ptx"), "--kernel", "ok_tree_reduce", "--extent", "p0=p2**")
    assert r.returncode == 2 and "extent" in r.stderr


def test_missing_extent_is_unknown_not_proved():
    p = BUGS / "bounds_bugs.ptx"
    rep = verify_text(p.read_text(), str(p), parse_flags(["--block", "256", "--grid", "8"], "ok_guarded"))
    st = {x["name"]: x for x in rep["properties"]}
    assert st["bounds"]["status"] == "unknown" and "extent" in st["bounds"]["detail"]
    assert exit_status(rep) == 3


def test_kernelgen_kernel_proved(tmp_path):
    r = subprocess.run([sys.executable, "-m", "kernelgen", "compile", "--hw", "npu7nm.yaml", "--gemm", "33x17x40",
                        "-o", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    if r.returncode != 0 or not (tmp_path / "kernel.ptx").exists():
        pytest.skip(f"kernelgen compile failed: {r.stderr.strip()[:200]}")
    ptx = tmp_path / "kernel.ptx"
    args = SimpleNamespace(kernel=None, grid=None, block=None, param=[], extent=[], dynamic_shared=None,
                           timeout=120.0)
    rep = verify_text(ptx.read_text(), str(ptx), args)
    assert all(p["status"] == "proved" for p in rep["properties"]), rep["properties"]


@pytest.mark.parametrize("flags,says", [
    (["--param", "p2=-5..5"], "holds 0..4294967295"),
    (["--param", "p2=0..4096", "--extent", "p0=-4"], "negative"),
    (["--param", "p2=0..4096", "--extent", "p0=p2//0"], "divide by zero"),
    (["--param", "p2=0..4096", "--extent", "p0=18446744073709551620"], "64 bits"),
    (["--param", "p2=0..4096", "--extent", "p0=p2*4-8"], "negative"),
])
def test_contradictory_or_wrapping_assumptions_are_errors_not_proofs(flags, says):
    """The planted off-by-one kernel under assumptions no launch satisfies (or that wrap) used to be
    'proved' (exit 0): a proof from an empty assumption set. Now one line, exit 2."""
    r = run_cli(str(BUGS / "bounds_bugs.ptx"), "--kernel", "oob_offbyone", "--block", "256", "--grid", "8",
                "--extent", "p1=p2*4", *flags)
    assert r.returncode == 2, r.stdout + r.stderr
    assert says in r.stderr and "bounds_bugs.ptx" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_unsatisfiable_assumptions_name_their_origin():
    import z3

    from sim.errors import UsageError
    from sim.ptx.parser import parse_ptx
    from validation.formal.context import Context

    p = BUGS / "bounds_bugs.ptx"
    prog = parse_ptx(p.read_text(), str(p))
    k = prog.kernel("oob_offbyone")
    ext = {k.params[0].name: z3.BitVecVal(2**50, 64)}  # beyond the 2^48 address space the buffers assume
    with pytest.raises(UsageError, match="contradictory .*extent of p0"):
        Context(prog, k, grid=(8, 1, 1), block=(256, 1, 1), ranges={}, extents=ext)
