"""SASS mode for thread block clusters (sim/sass/exec_cluster.py, sim/sass/timing_cluster.py): the cluster
fixtures (tests/fixtures/cluster: DSMEM ring, cluster-barrier rounds, multicast TMA, CTA-to-CTA bulk copies,
the latency probe) run from their SASS to numpy's and PTX mode's bytes, functional and timed; planted bugs
show in SASS mode as in PTX mode; the timing places a cluster's CTAs on distinct cores in one cycle, charges
core.cluster_barrier_latency per UCGABAR round and shared.remote_extra per CTA-to-CTA copy."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from sim.errors import ExecutionError
from sim.functional.runner import run_functional
from sim.hw import load_hw
from sim.ptx.parser import parse_ptx
from sim.sass.exec import run_sass_functional
from sim.sass.timing import simulate_sass
from tests.test_sass_exec import needs_tools
from validation.cluster_cases import CASES as CLUSTER_CASES
from validation.tma_cases import CASES as TMA_CASES

CASES = [*CLUSTER_CASES, *(c for c in TMA_CASES if c.cluster != (1, 1, 1))]
BY_NAME = {c.name: c for c in CASES}


def _differs(case, launch, outputs) -> list[int]:
    return [i for i, w in case.expected(launch).items()
            if not np.array_equal(case.compared(i, outputs[i]), case.compared(i, w))]


QUICK = ("bulk_peer_2", "multicast_2", "ring_2", "rounds_2")  # one per kernel in the default suite (< 1 s each)


@needs_tools
@pytest.mark.parametrize("name", [n if n in QUICK else pytest.param(n, marks=pytest.mark.slow)
                                  for n in sorted(BY_NAME)])
def test_sass_cluster_fixture_equals_numpy_and_ptx_mode(name):
    case = BY_NAME[name]
    text = case.ptx.read_text()
    launch = case.launch()
    got = run_sass_functional(text, launch, file=str(case.ptx)).outputs
    assert _differs(case, launch, got) == []
    want = run_functional(parse_ptx(text, str(case.ptx)), case.launch()).outputs
    for i in case.expected(launch):
        assert np.array_equal(case.compared(i, got[i]), case.compared(i, want[i])), i
    timed = simulate_sass(text, case.launch(), load_hw("h200"), str(case.ptx))
    assert _differs(case, launch, timed.outputs) == []
    assert timed.ctas_simulated == case.nblocks


@needs_tools
def test_sass_multicast_to_one_cta_leaves_the_other_waiting():
    """ctaMask 1 instead of (1<<n)-1: rank 1's mbarrier never gets its bytes: a one-line deadlock, functional
    and timed."""
    case = BY_NAME["multicast_2"]
    text = case.ptx.read_text().replace("sub.u32 %r8, %r8, 1;", "mov.u32 %r8, 1;")
    with pytest.raises(ExecutionError, match=r"tma_multicast.ptx:\d+: deadlock in CTA \(1, 0, 0\)"):
        run_sass_functional(text, case.launch(), file=str(case.ptx))
    with pytest.raises(ExecutionError, match=r"deadlock in CTA \(1, 0, 0\).*mbarrier"):
        simulate_sass(text, case.launch(), load_hw("h200"), str(case.ptx))


@needs_tools
def test_sass_planted_cluster_bugs_change_the_outputs():
    """A mapa to the wrong rank reads the wrong CTA's ring; a missing barrier.cluster.wait lets a CTA race ahead
    of its neighbour (as in PTX mode, tests/test_cluster.py)."""
    ring = BY_NAME["ring_4"]
    bad = ring.ptx.read_text().replace("mapa.shared::cluster.u32 %r16, %r10, %r15;",
                                       "mapa.shared::cluster.u32 %r16, %r10, %r12;")
    launch = ring.launch()
    assert _differs(ring, launch, run_sass_functional(bad, launch, file=str(ring.ptx)).outputs) == [1]
    rounds = BY_NAME["rounds_2"]
    text = rounds.ptx.read_text()
    bad = text.replace("\tbarrier.cluster.wait.acquire.aligned;\n\tld.shared.u32", "\tld.shared.u32")
    assert bad != text
    launch = rounds.launch()
    assert _differs(rounds, launch, run_sass_functional(bad, launch, file=str(rounds.ptx)).outputs) != []


@needs_tools
def test_sass_cluster_barrier_round_pays_the_cluster_latency():
    """cluster_latency's barrier rounds (UCGABAR_ARV / UCGABAR_WAIT, chosen by ptxas on c[0x0][0x140] =
    %is_explicit_cluster): 1000 more cycles of core.cluster_barrier_latency make every round exactly 1000
    cycles longer; its DSMEM chase (LD.E through SR_SWINHI) pays shared.remote_extra per link."""
    case = BY_NAME["latency_2"]
    hw = load_hw("h200")
    text = case.ptx.read_text()
    links, rounds = 32, 8  # fewer than the H200 case's 256 / 32: the same per-link and per-round figures
    per = []
    for extra in (0, 1000):
        h = dataclasses.replace(hw, core=dataclasses.replace(hw.core, cluster_barrier_latency=
                                                             hw.core.cluster_barrier_latency + extra),
                                shared=dataclasses.replace(hw.shared, remote_extra=hw.shared.remote_extra + extra))
        launch = case.launch()
        launch.args[1].value, launch.args[2].value = links, rounds
        o = simulate_sass(text, launch, h, str(case.ptx)).outputs[0].astype(np.int64)
        per.append((o[0] / links, o[1] / links, o[4] / rounds))
    assert per[1][2] - per[0][2] == 1000  # cluster barrier cycles per round
    assert per[1][1] - per[0][1] == 1000  # DSMEM cycles per link
    assert per[1][0] == per[0][0]  # own shared memory per link


@needs_tools
def test_sass_cta_to_cta_copy_pays_the_dsmem_trip():
    """UBLKCP.S.S / UBLKRED.S.S land shared.remote_extra cycles after their bytes streamed: the receiving CTA's
    wait (and so the launch) ends that much later, as in PTX mode (tests/test_tma_bulk.py)."""
    case = BY_NAME["bulk_peer_2"]
    hw = load_hw("h200")
    cycles = []
    for extra in (1000, 2000):  # both long enough that the landing decides when the CTAs end
        h = dataclasses.replace(hw, shared=dataclasses.replace(hw.shared, remote_extra=extra))
        cycles.append(simulate_sass(case.ptx.read_text(), case.launch(), h, str(case.ptx)).cycles)
    assert cycles[1] - cycles[0] == 1000, cycles


@needs_tools
def test_sass_cluster_ctas_start_together_on_distinct_cores():
    """4 cores, clusters of 2, one CTA slot per core: clusters (0, 1) and (2, 3) start at cycle 0 on cores 0-1
    and 2-3, rank r on core r of its group; the next clusters start later, on a whole group."""
    case = dataclasses.replace(BY_NAME["rounds_2"], grid=(8, 1, 1))
    hw = load_hw("h200")
    hw = dataclasses.replace(hw, core=dataclasses.replace(hw.core, count=4))
    launch = case.launch()
    launch.dynamic_shared = 200 * 1024
    res = simulate_sass(case.ptx.read_text(), launch, hw, str(case.ptx), trace=True)
    assert _differs(case, launch, res.outputs) == []
    assert res.trace is not None
    first: dict[int, tuple[int, int]] = {}  # CTA -> (first issue cycle, core)
    warps = len(launch.block) and -(-launch.block[0] // 32)
    for e in res.trace:
        if e.get("ph") == "X" and e["tid"] < 100000:
            cta = e["tid"] // warps
            if cta not in first or e["ts"] < first[cta][0]:
                first[cta] = (e["ts"], e["pid"])
    cores = [first[i][1] for i in range(8)]
    assert cores[:4] == [0, 1, 2, 3]
    assert all(cores[i] % 2 == i % 2 for i in range(8))  # rank r on core r of its group
    assert first[0][0] == first[1][0] == first[2][0] == first[3][0]
    assert first[4][0] == first[5][0] > first[0][0] and first[6][0] == first[7][0] > first[0][0]


@needs_tools
def test_sass_sampling_refuses_cluster_launches():
    from sim.errors import UsageError

    case = BY_NAME["ring_2"]
    with pytest.raises(UsageError, match="does not sample cluster launches"):
        simulate_sass(case.ptx.read_text(), case.launch(), load_hw("h200"), str(case.ptx), sample_ctas=2)
