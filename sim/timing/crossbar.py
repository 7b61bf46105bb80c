"""The crossbar between the L2's two partitions, as one core sees it (docs/const-cold.md).

A read of a line homed in the other partition (of which the core's partition holds no copy yet: the reads
that pay l2.far_latency, sim/timing/memory.py) brings its bytes across this crossbar. Its throughput,
l2.far_bandwidth_gbps for all cores together, is shared fairly by the cores the launch keeps busy, as the
L2's and the DRAM's are (sim/timing/units.py L2Port, Dram): n bytes hold this core's share
n / (far_bytes_per_cycle / sharing_cores) cycles and later far reads queue behind them. Without the field
it never waits.
"""

from __future__ import annotations

from sim.hw import HwConfig


class CrossbarPort:
    def __init__(self, hw: HwConfig, sharing_cores: int | None = None):
        bw = hw.l2.far_bandwidth_gbps
        n = max(1, min(hw.core.count, sharing_cores or hw.core.count))
        self.cycles_per_byte = n / (bw * 1e3 / hw.clock_mhz) if bw else 0.0  # GB/s / MHz = bytes per cycle / 1e3
        self.free = 0.0

    def take(self, t: int, nbytes: int) -> int:
        """The cycle a far read of nbytes arriving at t gets the crossbar (t when not limited)."""
        if not self.cycles_per_byte:
            return t
        start = max(float(t), self.free)
        self.free = start + nbytes * self.cycles_per_byte
        return int(start)
