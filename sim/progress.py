"""Progress of a long ``python -m sim run`` on stderr: CTAs done / total, simulated cycles, warp
instructions/s, ETA (tqdm).

It appears only after 2 s, only when stderr is a terminal and ``--quiet`` is not given. The functional
runner reports after each CTA, the timing model every 2,000 warp instructions (at its budget check,
sim.timing.engine.PROGRESS_EVERY); the display redraws at most 4 times a second, so its cost is one clock
read per report.
"""

from __future__ import annotations

import os
import sys
import time
from typing import TextIO

SHOW_AFTER_S = 2.0
REDRAW_EVERY_S = 0.25


class Progress:
    """``update(ctas_done, instructions, cycles)`` as the run goes; ``close()`` at the end (also on errors)."""

    def __init__(self, total_ctas: int, instructions: int | None, stream: TextIO) -> None:
        self.start = time.monotonic()
        self.next_draw = self.start + REDRAW_EVERY_S
        self.total_ctas = total_ctas
        self.by_instructions = instructions is not None
        self.drawn = 0
        from tqdm import tqdm  # only when a display is shown: keeps it off the start-up of other runs

        cols, rows = _size(stream)
        self.bar = tqdm(total=instructions or total_ctas, unit=" warp instr" if instructions else " CTA",
                        file=stream, delay=SHOW_AFTER_S, leave=False,
                        mininterval=REDRAW_EVERY_S, dynamic_ncols=cols > 0, ncols=cols or 100, nrows=rows or 24)

    def update(self, ctas_done: int, instructions: int, cycles: int | None) -> None:
        now = time.monotonic()
        if now < self.next_draw:
            return
        self.next_draw = now + REDRAW_EVERY_S
        rate = instructions / max(now - self.start, 1e-9)
        extra = f"{ctas_done}/{self.total_ctas} CTAs"
        if not self.by_instructions:  # else the bar itself counts them, with their rate
            extra += f", {instructions:,} warp instr, {rate:,.0f}/s"
        if cycles is not None:
            extra = f"{cycles:,} cycles, " + extra
        self.bar.set_postfix_str(extra, refresh=False)
        done = instructions if self.by_instructions else ctas_done
        if self.bar.total is not None and done > self.bar.total:
            self.bar.total = done
        self.bar.update(done - self.drawn)
        self.drawn = done

    def close(self) -> None:
        self.bar.close()


def _size(stream: TextIO) -> tuple[int, int]:
    """The terminal's columns and rows, 0 where it reports none (a fresh pseudo-terminal, where tqdm's own
    guess would draw nothing)."""
    try:
        size = os.get_terminal_size(stream.fileno())
    except (OSError, ValueError):
        return 0, 0
    return size.columns, size.lines


def make_progress(total_ctas: int, instructions: int | None, quiet: bool, stream: TextIO | None = None,
                  ) -> Progress | None:
    """A progress display on `stream` (default stderr), or None when quiet or not a terminal. The bar
    counts warp instructions against `instructions` (sim.estimate's figure) where given, else CTAs: in a
    grid of one wave every CTA ends at the end, and a CTA count would sit at 0% until then."""
    out = sys.stderr if stream is None else stream
    if quiet or not out.isatty():
        return None
    return Progress(total_ctas, instructions, out)
