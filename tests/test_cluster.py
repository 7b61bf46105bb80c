"""Thread block clusters of 2 and 4 CTAs (sim/cluster.py, sim/timing/cluster.py): the fixtures of
tests/fixtures/cluster against numpy, functional and timed (validation/cluster_cases.py; the same cases
run on the H200 with validation/gpu_cluster.py), planted bugs that the cluster semantics must expose,
the launch checks, and the co-scheduling of the timing model."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sim.errors import ExecutionError, UsageError
from sim.functional.runner import run_functional
from sim.hw import load_hw
from sim.ptx.parser import parse_ptx
from sim.timing import simulate
from tests.simhelp import ptxas_ok
from validation.cluster_cases import CASES, Case

ROOT = Path(__file__).resolve().parents[1]
BY_NAME = {c.name: c for c in CASES}


def _outputs_equal(case: Case, launch, outputs) -> list[str]:
    """The output arguments that differ from numpy (empty: all equal)."""
    want = case.expected(launch)
    return [f"arg {i}: {int(np.sum(case.compared(i, outputs[i]) != case.compared(i, w)))} elements differ"
            for i, w in want.items() if not np.array_equal(case.compared(i, outputs[i]), case.compared(i, w))]


def _run(case: Case, text: str | None = None, timed: bool = False, hw=None, **launch_kw):
    launch = case.launch()
    for k, v in launch_kw.items():
        setattr(launch, k, v)
    prog = parse_ptx(text if text is not None else case.ptx.read_text(), str(case.ptx))
    res = simulate(prog, launch, hw or load_hw("h200")) if timed else run_functional(prog, launch)
    return launch, res


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_fixture_equals_numpy_functional(case):
    launch, res = _run(case)
    assert _outputs_equal(case, launch, res.outputs) == []


@pytest.mark.parametrize("name", ["ring_2x2", "rounds_4", "multicast_2", "multicast_4"])
def test_fixture_equals_numpy_timed(name):
    case = BY_NAME[name]
    launch, res = _run(case, timed=True)
    assert _outputs_equal(case, launch, res.outputs) == []
    assert res.ctas_simulated == case.nblocks


@pytest.mark.parametrize("ptx", sorted({c.ptx for c in CASES}), ids=lambda p: p.stem)
def test_ptxas_accepts_the_fixture(ptx, tmp_path):
    ptxas_ok(ptx.read_text(), tmp_path)


def test_a_missing_cluster_wait_reads_the_wrong_round():
    """The rounds kernel without its in-loop barrier.cluster.wait: a CTA races ahead of its neighbour."""
    case = BY_NAME["rounds_2"]
    text = case.ptx.read_text()
    bad = text.replace("\tbarrier.cluster.wait.acquire.aligned;\n\tld.shared.u32", "\tld.shared.u32")
    assert bad != text
    launch, res = _run(case, bad)
    assert _outputs_equal(case, launch, res.outputs) != []


def test_a_wrong_mapa_rank_reads_the_wrong_cta():
    case = BY_NAME["ring_4"]
    text = case.ptx.read_text()
    bad = text.replace("mapa.shared::cluster.u32 %r16, %r10, %r15;", "mapa.shared::cluster.u32 %r16, %r10, %r12;")
    assert bad != text
    launch, res = _run(case, bad)
    assert _outputs_equal(case, launch, res.outputs) == ["arg 1: 1024 elements differ"]


def test_multicast_to_one_cta_leaves_the_other_waiting():
    """ctaMask 1 instead of (1<<n)-1: rank 1's mbarrier never gets its bytes -> a deadlock naming the wait."""
    case = BY_NAME["multicast_2"]
    text = case.ptx.read_text().replace("sub.u32 %r8, %r8, 1;", "mov.u32 %r8, 1;")
    with pytest.raises(ExecutionError, match=r"tma_multicast.ptx:\d+: deadlock: block \(1, 0, 0\) waits at "
                                             r"'mbarrier.try_wait"):
        _run(case, text)


def test_rank_outside_the_cluster_stops():
    case = BY_NAME["ring_2"]
    text = case.ptx.read_text().replace("mapa.shared::cluster.u32 %r18, %r11, 0;",
                                        "mapa.shared::cluster.u32 %r18, %r11, 2;")
    with pytest.raises(ExecutionError, match=r"dsmem_ring.ptx:\d+: mapa to CTA rank 2 of a cluster of 2 CTAs"):
        _run(case, text)
    mask = BY_NAME["multicast_2"].ptx.read_text().replace("sub.u32 %r8, %r8, 1;", "mov.u32 %r8, 4;")
    with pytest.raises(ExecutionError, match=r"multicast ctaMask 0x4 .*cluster of 2 CTAs"):
        _run(BY_NAME["multicast_2"], mask)


def test_reqnctapercluster_fixes_the_shape():
    case = BY_NAME["ring_2"]
    text = case.ptx.read_text().replace(".explicitcluster", ".reqnctapercluster 2, 1, 1")
    launch, res = _run(case, text, cluster=None)
    assert _outputs_equal(case, launch, res.outputs) == []
    with pytest.raises(UsageError, match=r"declares .reqnctapercluster 2, 1, 1: drop --cluster 4,1,1"):
        _run(case, text, cluster=(4, 1, 1))


@pytest.mark.parametrize("cluster, nonportable, message", [
    (None, False, r"declares .explicitcluster: launch it with --cluster X,Y,Z"),
    ((3, 1, 1), False, r"grid 8,1,1 does not divide into clusters of 3,1,1 \(dimension x\)"),
    ((16, 1, 1), False, r"a cluster of 16 CTAs \(16,1,1\) is larger than 8: .*--cluster-nonportable"),
    ((32, 1, 1), True, r"a cluster of 32 CTAs \(32,1,1\) is larger than 16"),
])
def test_bad_cluster_shapes_name_the_fix(cluster, nonportable, message):
    with pytest.raises(UsageError, match=message):
        _run(BY_NAME["ring_2"], cluster=cluster, cluster_nonportable=nonportable)


def test_a_nonportable_cluster_of_16_runs():
    case = dataclasses.replace(BY_NAME["ring_2"], grid=(16, 1, 1), cluster=(16, 1, 1))
    launch, res = _run(case, cluster_nonportable=True)
    assert _outputs_equal(case, launch, res.outputs) == []


def test_clusters_launch_together_on_distinct_cores(monkeypatch):
    """4 cores, clusters of 2, one CTA slot per core (the smem of a cluster's CTA fills a core): 2 clusters
    at once, each on 2 cores started in one cycle; the third starts when a whole cluster finished."""
    import sim.timing.cluster as tc

    hw = load_hw("h200")
    hw = dataclasses.replace(hw, core=dataclasses.replace(hw.core, count=4))
    starts: list[tuple[int, tuple[int, ...], list[tuple[int, int, int]]]] = []
    real = tc.launch_cluster

    def spy(sim, group, items):
        real(sim, group, items)
        starts.append((int(sim.env.now), tuple(range(group * len(items), group * len(items) + len(items))),
                       [c for _, c in items]))
    monkeypatch.setattr(tc, "launch_cluster", spy)
    case = dataclasses.replace(BY_NAME["rounds_2"], grid=(8, 1, 1))
    launch, res = _run(case, timed=True, hw=hw, dynamic_shared=200 * 1024)
    assert _outputs_equal(case, launch, res.outputs) == []
    assert [s[1] for s in starts] == [(0, 1), (2, 3), (0, 1), (2, 3)]
    assert [s[2] for s in starts] == [[(0, 0, 0), (1, 0, 0)], [(2, 0, 0), (3, 0, 0)], [(4, 0, 0), (5, 0, 0)],
                                      [(6, 0, 0), (7, 0, 0)]]
    assert starts[0][0] == starts[1][0] == 0 and starts[2][0] > 0
    spans = res.cycles_per_cta
    assert starts[2][0] == max(spans[0], spans[1]) or starts[3][0] == max(spans[2], spans[3])


def test_multicast_reads_the_tile_from_dram_once():
    """One L2 read per multicast box: the DRAM bytes of the launch are the tensor's bytes, not n times them."""
    case = BY_NAME["multicast_4"]
    launch, res = _run(case, timed=True)
    tensor_bytes = launch.args[2].array.nbytes
    assert res.dram_bytes == tensor_bytes


def test_cli_cluster_option(tmp_path):
    ptx = BY_NAME["ring_2"].ptx
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    base = [sys.executable, "-m", "sim", "run", str(ptx), "--hw", "h200", "--grid", "8,1,1", "--block", "64,1,1",
            "--arg", "zeros:u32:512", "--arg", "zeros:u32:512", "--arg", "zeros:u32:128", "--functional", "--json"]
    bad = subprocess.run(base + ["--cluster", "3"], capture_output=True, text=True, env=env, timeout=120)
    assert bad.returncode == 2
    lines = bad.stderr.strip().splitlines()
    assert len(lines) == 1 and "does not divide into clusters of 3,1,1" in lines[0]
    ok = subprocess.run(base + ["--cluster", "4", "--out", str(tmp_path)], capture_output=True, text=True, env=env,
                        timeout=120)
    assert ok.returncode == 0, ok.stderr
    info = np.load(tmp_path / "arg2.npy").reshape(8, 16)
    assert list(info[:, 0]) == [0, 1, 2, 3] * 2 and list(info[:, 1]) == [4] * 8
    assert list(info[:, 11]) == [64 * 10, 0, 0, 0] * 2  # rank 0's counter: 64 threads x (1+2+3+4)


@pytest.mark.slow
def test_the_verifier_answers_unknown_on_cluster_kernels():
    """DSMEM accesses through mapa addresses lie in no buffer the verifier knows: unknown, not a crash."""
    pytest.importorskip("z3")
    from types import SimpleNamespace

    from validation.formal.cli import verify_text

    p = BY_NAME["rounds_2"].ptx
    args = SimpleNamespace(kernel=None, grid="4,1,1", block="128,1,1", param=[], extent=[], dynamic_shared=None,
                           timeout=60.0)
    props = {x["name"]: x for x in verify_text(p.read_text(), str(p), args)["properties"]}
    assert props["bounds"]["status"] == "unknown"
    assert all(x["status"] != "violated" for x in props.values())
