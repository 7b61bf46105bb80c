"""Cycle-level timing model (SimPy): `simulate(prog, launch, hw) -> SimResult`, `write_trace`.

See docs/timing.md.
"""

from sim.timing.engine import simulate
from sim.timing.trace import write_trace

__all__ = ["simulate", "write_trace"]
