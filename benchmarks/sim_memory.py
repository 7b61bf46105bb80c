"""Memory and speed of a long timed run (issue 17, item 2): peak memory, what holds it, and the warp
instructions per second of the timing model replaying streamed lock-step records.

    PYTHONPATH=. python benchmarks/sim_memory.py KERNEL.ptx [--hw h200] [--seed 1] [--stop N]
        [--tracemalloc] [--json FILE]

Runs `sim.timing.simulate` on the kernel's launch (its metadata's arguments, random inputs from --seed)
to the end, or with --stop N until N warp instructions have been timed (then the run is stopped from
the progress hook: a fraction of a long run, for a projection). Reports warp instructions, simulated
cycles, process and wall time, the 1-minute load average before and after, peak RSS
(getrusage), the records waiting in the replay stream (at the stop and the most seen at a report), and
with --tracemalloc the 12 source lines holding the most memory at the end or the stop (tracemalloc
slows the run about 2x: its times are not speed figures).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import platform
import resource
import sys
import time
import tracemalloc
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))


class _Stop(Exception):
    pass


class _Watch:
    """A stand-in progress display: records the stream's held records, stops at `stop` instructions."""

    def __init__(self, stop: int | None):
        self.stop = stop
        self.held_max = 0
        self.stream: Any = None
        self.at: dict[str, Any] = {}
        self.reports = 0

    def held(self) -> int:
        s = self.stream
        return sum(len(d) for ws in s.traces.values() for d in ws) if s is not None else 0

    def update(self, ctas: int, count: int, cycles: int | None) -> None:
        self.reports += 1
        if self.reports % 50 == 0:
            self.held_max = max(self.held_max, self.held())
        if self.stop is not None and count >= self.stop:
            self.at = {"warp_instructions": count, "cycles": cycles, "ctas_done": ctas}
            raise _Stop

    def close(self) -> None:
        pass


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ptx")
    ap.add_argument("--hw", default="h200")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--stop", type=int, default=None)
    ap.add_argument("--tracemalloc", action="store_true")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)

    import numpy as np

    import sim.functional.replay as replay
    from sim.cli import build_launch, build_parser
    from sim.hw import load_hw
    from sim.launch import read_metadata
    from sim.ptx.parser import parse_file
    from sim.timing import simulate

    prog = parse_file(a.ptx)
    hw = load_hw(a.hw)
    meta = read_metadata(prog.text, a.ptx)
    args = build_parser().parse_args(["run", a.ptx, "--hw", a.hw, "--seed", str(a.seed)])
    launch = build_launch(prog, args, meta, np.random.default_rng(a.seed))
    watch = _Watch(a.stop)
    stream = getattr(replay, "Stream", None)  # absent before the streamed replay (to measure the old tree)
    if stream is not None:
        orig = stream.__init__

        def init(self: Any, *x: Any, **k: Any) -> None:
            orig(self, *x, **k)
            watch.stream = self

        stream.__init__ = init
    if a.tracemalloc:
        tracemalloc.start(1)
    load0 = os.getloadavg()[0]
    t, p = time.perf_counter(), time.process_time()
    out: dict[str, Any] = {"date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                           "machine": f"{platform.machine()}, {os.cpu_count()} cores, "
                                      f"Python {platform.python_version()}",
                           "kernel": a.ptx, "hw": a.hw, "grid": list(launch.grid), "block": list(launch.block)}
    try:
        r = simulate(prog, launch, hw, max_instructions=10**10, progress=watch)  # type: ignore[arg-type]
        out.update(finished=True, warp_instructions=r.warp_instructions, cycles=r.cycles)
    except _Stop:
        out.update(finished=False, stopped_at=watch.at, **watch.at)
    wall, proc = time.perf_counter() - t, time.process_time() - p
    out.update(process_s=round(proc, 1), wall_s=round(wall, 1),
               per_s_process=round(out["warp_instructions"] / proc), load_1min=[load0, os.getloadavg()[0]],
               peak_rss_mb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
               replay="streamed" if watch.stream is not None else "upfront or none",
               records_held_at_end=watch.held(), records_held_max=watch.held_max)
    if a.tracemalloc:
        snap = tracemalloc.take_snapshot()
        cur, peak = tracemalloc.get_traced_memory()
        out["tracemalloc"] = {"current_mb": round(cur / 2**20, 1), "peak_mb": round(peak / 2**20, 1), "top": [
            f"{s.traceback[0].filename.split('/work/wt/scale/')[-1]}:{s.traceback[0].lineno} "
            f"{s.size / 2**20:.1f} MB ({s.count} blocks)" for s in snap.statistics("lineno")[:12]]}
    text = json.dumps(out, indent=1)
    print(text)
    if a.json:
        pathlib.Path(a.json).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
