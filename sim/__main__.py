import gc
import os
import sys

# `python -m sim` is one short-lived command: the garbage collector's youngest generation is collected every
# 10,000 net allocations instead of 700 (as sim.timing.engine does while a simulation runs), and the objects
# the imports made are frozen out of later collections. A cold `sim run` of reduce6 spent 41 ms of 1.2 s in
# 77 collections, most of them while importing; 14 ms in 10 with this (benchmarks/sim_speed.md, "Session 11").
# Collection timing changes no result.
gc.set_threshold(10_000, *gc.get_threshold()[1:])

from sim.cli import main  # noqa: E402

gc.freeze()
rc = main()
# The interpreter's teardown (freeing every module and array one by one: ~30 ms after a reduce6 run, ~60 ms
# after sgemm 128^3) does nothing a command needs once its output is flushed; skipped unless worker processes
# or threads were used (multiprocessing's, concurrent.futures' and threading's exit handlers join them).
threads = sys.modules.get("threading")
if not any(m in sys.modules for m in ("multiprocessing", "concurrent.futures")) and \
        (threads is None or threads.active_count() == 1):
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        pass  # a closed pipe: the normal exit reports it as always
    else:
        os._exit(rc)
sys.exit(rc)
