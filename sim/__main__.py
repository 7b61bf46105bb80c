import gc
import sys

# `python -m sim` is one short-lived command: the garbage collector's youngest generation is collected every
# 10,000 net allocations instead of 700 (as sim.timing.engine does while a simulation runs), and the objects
# the imports made are frozen out of later collections. A cold `sim run` of reduce6 spent 41 ms of 1.2 s in
# 77 collections, most of them while importing; 14 ms in 10 with this (benchmarks/sim_speed.md, "Session 11").
# Collection timing changes no result.
gc.set_threshold(10_000, *gc.get_threshold()[1:])

from sim.cli import main  # noqa: E402

gc.freeze()
sys.exit(main())
