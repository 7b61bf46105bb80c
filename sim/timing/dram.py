"""The device's DRAM as one set of channels that every core's misses share (GlobalMemory.channels; the H200's
HBM3e pseudo-channels, docs/fidelity.md "device-wide DRAM").

A request of n bytes goes to the channel its address hashes to and holds it n / (the channel's bytes per cycle)
cycles; requests to a busy channel queue behind it. Load-to-use = queueing + GlobalMemory.latency. Every core's
lines spread over all channels, so one core alone (a small grid) finds them idle and sees the unloaded latency,
while many cores loading together queue on the same channels: the device bandwidth is the shared limit.

A run that simulates k of the n cores the launch keeps busy (sampled CTAs, a wave's groups) stands for the
other n - k cores running the same kernel: their misses are background load on every channel, as many per
channel as the simulated cores' by symmetry. The run therefore keeps k / n of the channels, each at the device's
own rate per channel, and the simulated cores' misses spread over them: per channel the same traffic, service
time and queueing as on the whole device (the n cores over all channels); with k = n it is the whole device.
(sim/timing/units.py Dram instead gives every core private banks at 1/n of the bandwidth each, which makes a
burst hold its bank n times longer than on the device: the queueing of a latency-bound stream grew with it.)
"""

from __future__ import annotations

import math

from sim.hw import HwConfig


class DeviceDram:
    """`channels` = round(GlobalMemory.channels x k / n) channels of the simulated cores' slice of the device
    (k simulated of n sharing cores), each with GlobalMemory.channel_banks banks. A request goes to the channel
    its address hashes to (an XOR fold of the address in units of `interleave` bytes, as memory controllers hash
    addresses so that power-of-two strides do not pile onto a few channels) and to a bank of it (a second hash):
    it starts when both are free, holds the bank GlobalMemory.row_cycle cycles (the row is opened for it: the
    streams of many SMs interleave on every bank, so a bank rarely finds its open row asked for again) and the
    channel's data bus its bytes / the channel's rate (GlobalMemory.stream_bandwidth_gbps, the rate the device
    sustains, over the channels)."""

    def __init__(self, hw: HwConfig, sharing_cores: int | None, simulated_cores: int | None):
        g = hw.dram
        assert g.channels, "DeviceDram needs dram.channels"
        n = max(1, min(hw.core.count, sharing_cores or hw.core.count))
        k = max(1, min(n, simulated_cores or n))
        share = k / n  # the slice of the device whose traffic the simulated cores are
        self.channels = max(1, round(g.channels * share))
        gbps = g.stream_bandwidth_gbps or g.bandwidth_gbps
        rate = gbps * 1e3 / hw.clock_mhz * share  # bytes per cycle of the slice, all its channels together
        self.cycles_per_byte = self.channels / rate  # one channel's data bus
        self.latency = g.latency
        self.interleave = hw.l2.line
        self.per_core_channels = self.channels / k  # a core's part of the slice (utilization's denominator)
        self.free = [0.0] * self.channels
        self.banks = g.channel_banks or 0
        self.row_cycle = float(g.row_cycle or 0)
        self.bank_free = [0.0] * (self.channels * max(1, self.banks))

    def request(self, t: int, addr: int, nbytes: int) -> tuple[int, int, float]:
        """(done cycle, queueing cycles, channel cycles taken) for nbytes at addr arriving at t."""
        x = addr // self.interleave
        h, y = 0, x
        while y:
            h ^= y
            y >>= 7
        c = h % self.channels
        free = self.free
        start = free[c] if free[c] > t else float(t)
        if self.banks:
            b = c * self.banks + (x * 2654435761 >> 7) % self.banks  # Knuth's multiplicative hash of the line
            bf = self.bank_free
            opened = bf[b] if bf[b] > t else float(t)
            bf[b] = opened + self.row_cycle
            if opened > start:
                start = opened
        service = nbytes * self.cycles_per_byte
        free[c] = start + service
        wait = int(math.ceil(start - t))
        return t + wait + self.latency, wait, service


class DramPort:
    """One core's door to the DeviceDram: Dram's interface (request, bytes, busy), counting this core's part."""

    def __init__(self, dram: DeviceDram):
        self.dram = dram
        self.bytes = 0
        self.busy = 0.0
        self.capacity = dram.per_core_channels  # channels' worth of this core's part of the slice

    def request(self, t: int, addr: int, nbytes: int) -> tuple[int, int]:
        done, wait, service = self.dram.request(t, addr, nbytes)
        self.bytes += nbytes
        self.busy += service
        return done, wait
