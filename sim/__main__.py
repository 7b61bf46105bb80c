import gc
import os
import sys

# `python -m sim` is one short-lived command: the garbage collector's youngest generation is collected every
# 10,000 net allocations instead of 700 (as sim.timing.engine does while a simulation runs), and the objects
# the imports made are frozen out of later collections. A cold `sim run` of reduce6 spent 41 ms of 1.2 s in
# 77 collections, most of them while importing; 14 ms in 10 with this (benchmarks/sim_speed.md, "Session 11").
# Collection timing changes no result. No collection runs during the imports at all (3 of them took 5-8 ms:
# what the imports make stays alive, and is frozen next).
gc.set_threshold(10_000, *gc.get_threshold()[1:])
gc.disable()

# numpy's OpenBLAS starts a worker thread per core that spins for 2^28 cycles (its default
# OPENBLAS_THREAD_TIMEOUT=28) waiting for work before it sleeps: ~0.1 s of the other core at every start on
# the 2-core machine, counted in the process time (a cold reduce6 run's imports 0.305 -> 0.148 s at load 1.7;
# less on a loaded machine), for a simulator whose BLAS calls are tiles too small to be threaded. OpenBLAS
# reads the variable once, as numpy loads it: with 4 (the least it takes) the workers sleep at once. The same
# threads do the same work (results unchanged: the check's norms depend on the number of threads, not on
# this); a value the user set is kept, and the environment is restored for anything this process starts.
_BLAS_TIMEOUT = "OPENBLAS_THREAD_TIMEOUT"
_set_timeout = _BLAS_TIMEOUT not in os.environ and "numpy" not in sys.modules
if _set_timeout:
    os.environ[_BLAS_TIMEOUT] = "4"

from sim.cli import main  # noqa: E402

if _set_timeout:
    del os.environ[_BLAS_TIMEOUT]
gc.freeze()
gc.enable()
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
