"""The device-wide DRAM (sim/timing/dram.py, dram.channels on the H200): every core's misses share the HBM's
pseudo-channels and their banks; a run simulating k of n cores keeps k / n of them. Timelines of single requests."""

from __future__ import annotations

import pytest

from sim.hw import load_hw
from sim.sass.tools import tools_available
from sim.timing.dram import DeviceDram, DramPort
from sim.timing.memory import CoreMemory, DeviceMemory

needs_tools = pytest.mark.skipif(not tools_available(), reason="SASS mode needs ptxas and nvdisasm")
BASE = 0x7F0000000000
H200 = load_hw("h200")
LINE = H200.l2.line


def _pair(d: DeviceDram, same_bank: bool) -> tuple[int, int]:
    """Two line addresses on one channel: on the same bank or on two different banks."""
    def where(a: int) -> tuple[int, int]:
        x = a // d.interleave
        h, y = 0, x
        while y:
            h ^= y
            y >>= 7
        return h % d.channels, (x * 2654435761 >> 7) % d.banks

    c0, b0 = where(BASE)
    for k in range(1, 1 << 16):
        c, b = where(BASE + k * LINE)
        if c == c0 and (b == b0) == same_bank:
            return BASE, BASE + k * LINE
    raise AssertionError("no such pair")


def test_lone_request_sees_the_unloaded_latency():
    d = DeviceDram(H200, 1, 1)  # a one-CTA launch: the whole device
    assert d.channels == H200.dram.channels == 192
    assert d.request(100, BASE, LINE)[:2] == (100 + H200.dram.latency, 0)


def test_a_sampled_run_keeps_its_cores_share_of_the_channels():
    d = DeviceDram(H200, 132, 4)  # 4 of the 132 cores a full wave keeps busy
    assert d.channels == 6  # round(192 * 4 / 132)
    # each channel at the device's own rate per channel: 4650 GB/s over 192 channels at 1980 MHz
    per_channel = H200.dram.stream_bandwidth_gbps * 1e3 / H200.clock_mhz * (4 / 132) / 6
    assert abs(1 / d.cycles_per_byte - per_channel) < 1e-9
    assert abs(per_channel - 11.86) < 0.01  # bytes per cycle (6 channels for 5.8 channels' share): a line ~10.8


def test_same_bank_waits_a_row_cycle_same_channel_waits_the_bus():
    d = DeviceDram(H200, 1, 1)
    a, b = _pair(d, same_bank=True)
    lat, rc = H200.dram.latency, H200.dram.row_cycle
    assert d.request(0, a, LINE)[:2] == (lat, 0)
    assert d.request(0, b, LINE)[:2] == (rc + lat, rc)  # the row the first opened must close first
    d = DeviceDram(H200, 1, 1)
    a, b = _pair(d, same_bank=False)
    bus = LINE * d.cycles_per_byte  # 10.47 cycles: a channel moves 4650 GB/s / 192 even for a lone core
    assert abs(bus - 10.47) < 0.01
    assert d.request(0, a, LINE)[:2] == (lat, 0)
    assert d.request(0, b, LINE)[:2] == (11 + lat, 11)  # behind the first line's transfer, rounded up


def test_cores_share_one_device_dram():
    dev = DeviceMemory(H200, 132, 4)
    mems = [CoreMemory(H200, dev) for _ in range(4)]
    assert all(isinstance(m.dram, DramPort) and m.dram.dram is dev.dram for m in mems)
    a, b = _pair(dev.dram, same_bank=True)
    mems[0].dram.request(0, a, LINE)
    assert mems[1].dram.request(0, b, LINE)[1] == H200.dram.row_cycle  # another core's row blocks this one
    assert (mems[0].dram.bytes, mems[1].dram.bytes, mems[2].dram.bytes) == (LINE, LINE, 0)


def test_power_of_two_strides_spread_over_channels():
    d = DeviceDram(H200, 1, 1)
    seen = set()
    for r in range(256):
        x = (BASE + r * 2048) // d.interleave
        h = 0
        while x:
            h ^= x
            x >>= 7
        seen.add(h % d.channels)
    assert len(seen) >= 96


def test_npu7nm_keeps_private_banks():
    from sim.timing.units import Dram

    hw = load_hw("npu7nm")
    assert hw.dram.channels is None
    assert isinstance(CoreMemory(hw, DeviceMemory(hw, 4, 4)).dram, Dram)


# The H200 probe (benchmarks/silicon/dram, benchmarks/data/dram_probe_2026-12-01.json): per-CTA cycles of the
# float4 stream at 4 CTAs per SM with one load in flight per thread (latency-bound: the suite's stream_read_264m is
# of this kind) and with four (bandwidth-bound), medians of 3 launches after an L2 flush.
MEASURED = {"stream_u1": 138_905, "stream_u4": 119_503}


@pytest.mark.slow
@needs_tools
@pytest.mark.parametrize("kernel", sorted(MEASURED))
def test_latency_and_bandwidth_bound_streams_match_the_h200(kernel):
    from benchmarks.silicon.dram.probe import summarize
    from benchmarks.silicon.dram.sim import ptx, simulate_case

    row = simulate_case(ptx(), kernel, 528, 528, H200, "sass", 16)
    got = summarize([row])[0]["per_cta_median"]
    assert abs(got - MEASURED[kernel]) / MEASURED[kernel] < 0.10, got
