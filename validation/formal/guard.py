"""A hard time limit for one verifier run: the checks run in a forked child that sends each property's
result as it is decided; at ``--timeout`` (plus a short grace) the parent stops the child and answers
``unknown`` for every property not yet decided, naming the phase that ran out of time. Cooperative
deadlines inside the checks (solver timeouts, :mod:`validation.formal.intproof`'s walk) usually end
the run first; this guard bounds the rest (a Z3 call or a Python walk that ignores its budget)."""

from __future__ import annotations

import multiprocessing as mp
import time
from collections.abc import Callable, Iterator
from typing import Any

#: seconds past the limit the parent waits for the child's own (cooperative) unknowns
GRACE_S = 2.0


def process_age() -> float:
    """Seconds since this process started (Linux: /proc/self/stat's start time against /proc/uptime), 0.0 where
    that cannot be read: ``--timeout`` counts the interpreter's start and imports too (on a loaded machine they
    took 2-4 s, which pushed a run's wall time more than 5 s past its limit)."""
    import os

    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            up = float(f.read().split()[0])
        return max(0.0, up - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0


def _child(conn: Any, work: Callable[[], Iterator[tuple[str, Any]]]) -> None:
    try:
        for msg in work():
            conn.send(msg)
        conn.send(("done", None))
    except BaseException as e:  # noqa: BLE001 - forwarded to the parent, which re-raises it
        try:
            conn.send(("error", e))
        except Exception:  # noqa: BLE001 - an exception that does not pickle
            conn.send(("error", RuntimeError(f"{type(e).__name__}: {e}")))
    finally:
        conn.close()


def run_bounded(work: Callable[[], Iterator[tuple[str, Any]]], limit_s: float,
                ) -> tuple[list[tuple[str, Any]], str | None]:
    """Run ``work`` (a generator of ``(kind, payload)`` messages) in a forked child for at most
    ``limit_s + GRACE_S`` seconds. Returns the messages received and, when the child was stopped,
    the kind of the last ``("phase", name)`` message it sent (what was running), else None.
    An exception raised by ``work`` is raised here."""
    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(child, work), daemon=True)
    proc.start()
    child.close()
    got: list[tuple[str, Any]] = []
    phase = "starting"
    end = time.monotonic() + limit_s + GRACE_S
    finished = False
    try:
        while not finished:
            left = end - time.monotonic()
            if left <= 0 or not parent.poll(left):
                break
            try:
                kind, payload = parent.recv()
            except EOFError:
                break
            if kind == "done":
                finished = True
            elif kind == "error":
                raise payload
            elif kind == "phase":
                phase = payload
            else:
                got.append((kind, payload))
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join()
        parent.close()
    return got, None if finished else phase
