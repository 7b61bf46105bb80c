"""Chrome trace-event JSON (opens in the Perfetto UI): a track per warp and per unit."""

from __future__ import annotations

import json
import pathlib

from sim import atomic
from sim.result import SimResult


def trace_events(result: SimResult) -> dict:
    """{"traceEvents": [...], "displayTimeUnit": "ns"}; one trace microsecond = one cycle."""
    events = list(result.trace or [])
    warps = sorted({(e["pid"], e["tid"]) for e in events if e.get("ph") == "X" and e["tid"] < 100000})
    for pid, tid in warps:
        events.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": f"warp {tid}"}})
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "otherData": {"kernel": result.kernel, "hw": result.hw, "cycles": result.cycles}}


def write_trace(result: SimResult, path: str | pathlib.Path) -> None:
    if result.trace is None:
        raise ValueError("the result has no trace: simulate(..., trace=True) first")
    atomic.write_text(path, json.dumps(trace_events(result)))
