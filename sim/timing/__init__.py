"""Cycle-level timing model (SimPy): `simulate(prog, launch, hw) -> SimResult`, `write_trace`.

See docs/timing.md.
"""

from sim.timing.native import install

install()  # the compiled core (sim/timing/native.py) when built for these sources; else the Python one

from sim.timing.engine import simulate  # noqa: E402
from sim.timing.trace import write_trace  # noqa: E402

__all__ = ["simulate", "write_trace"]
