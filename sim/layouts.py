"""Matrix storage layouts: where element (r, c) of a logical R x C matrix lives in its flat buffer.

One table of formulas, read by the numpy reference (sim.reference), the runtime's host copies
(runtime.kernel), the emitters' address arithmetic (kernelgen.emit_common) and the models
(kernelgen.models.movement, l1lines). Every name:

- ``row``: ``r*C + c`` (row-major). Seed spelling ``row-major``.
- ``col``: ``c*R + r`` (column-major). Seed spellings ``col-major``, ``column-major``.
- ``blocked-PxQ``: the matrix is cut into P x Q tiles (P rows, Q columns), tiles in row-major order,
  each tile row-major: ``((r/P)*nbc + c/Q)*P*Q + (r%P)*Q + c%Q`` with ``nbc = ceil(C/Q)``. Edge tiles
  are stored whole: the buffer holds ``ceil(R/P)*P * ceil(C/Q)*Q`` elements; the padding is never read
  (the kernels predicate on R and C). Contiguous runs: Q elements along c.
- ``striped-N``: rows interleaved in groups of N. The rows are cut into stripes of N consecutive rows;
  within a stripe the N rows are interleaved element by element (column by column), stripes one after
  another: ``((r/N)*C + c)*N + r%N``. The buffer holds ``ceil(R/N)*N * C`` elements. This is the packed
  panel of GotoBLAS (N = mr) and NVIDIA's interleaved COL32-style orders read along the other
  axis; the seed (000 §5.1) names it for B tiles "split into 8 parts and loaded interleaved".
  Contiguous runs: N elements along r.

``row`` and ``blocked`` keep columns contiguous ("row-like": a kernel copies rows of the tile);
``col`` and ``striped`` keep rows contiguous ("col-like").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

import numpy as np

ALIASES = {"row-major": "row", "col-major": "col", "column-major": "col"}
_BLOCKED = re.compile(r"^blocked-(\d+)x(\d+)$")
_STRIPED = re.compile(r"^striped-(\d+)$")
NAMES = "row, col, blocked-PxQ (e.g. blocked-32x32), striped-N (e.g. striped-8)"
MAX_BLOCK = 1 << 12


@dataclass(frozen=True)
class Layout:
    """How a matrix is laid out in a buffer (row, col, blocked, striped)."""

    kind: str  # "row" | "col" | "blocked" | "striped"
    p: int = 1  # blocked: tile rows; striped: rows per stripe
    q: int = 1  # blocked: tile columns

    @property
    def name(self) -> str:
        if self.kind == "blocked":
            return f"blocked-{self.p}x{self.q}"
        if self.kind == "striped":
            return f"striped-{self.p}"
        return self.kind

    @property
    def row_like(self) -> bool:
        """Columns contiguous (row, blocked); else rows contiguous (col, striped)."""
        return self.kind in ("row", "blocked")

    @property
    def run(self) -> int | None:
        """Elements contiguous along the contiguous axis before a jump, None when the whole extent is."""
        return {"blocked": self.q, "striped": self.p}.get(self.kind)

    def padded(self, rows: int, cols: int) -> tuple[int, int]:
        """The stored extents (edge tiles or stripes stored whole)."""
        if self.kind == "blocked":
            return -(-rows // self.p) * self.p, -(-cols // self.q) * self.q
        if self.kind == "striped":
            return -(-rows // self.p) * self.p, cols
        return rows, cols

    def size(self, rows: int, cols: int) -> int:
        r, c = self.padded(rows, cols)
        return r * c

    def size_expr(self, rows: str, cols: str) -> str:
        """``size`` as an expression over parameter names (the verifier's extents grammar)."""
        if self.kind == "blocked":
            return f"(({rows}+{self.p - 1})/{self.p})*{self.p}*(({cols}+{self.q - 1})/{self.q})*{self.q}"
        if self.kind == "striped":
            return f"(({rows}+{self.p - 1})/{self.p})*{self.p}*{cols}"
        return f"{rows}*{cols}"

    def index(self, r, c, rows: int, cols: int):
        """Element index of (r, c) (ints or numpy arrays) in an R x C matrix."""
        if self.kind == "row":
            return r * cols + c
        if self.kind == "col":
            return c * rows + r
        if self.kind == "blocked":
            nbc = -(-cols // self.q)
            return ((r // self.p) * nbc + c // self.q) * (self.p * self.q) + (r % self.p) * self.q + c % self.q
        return ((r // self.p) * cols + c) * self.p + r % self.p

    def gather(self, flat: np.ndarray, rows: int, cols: int) -> np.ndarray:
        """The logical R x C matrix held in ``flat``."""
        r, c = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
        return flat[self.index(r, c, rows, cols)]

    def scatter(self, dense: np.ndarray, fill: float = 0.0) -> np.ndarray:
        """``dense`` (R x C) as this layout's flat buffer; padding holds ``fill``."""
        rows, cols = dense.shape
        out = np.full(self.size(rows, cols), fill, dtype=dense.dtype)
        r, c = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
        out[self.index(r, c, rows, cols)] = dense
        return out


@cache
def parse_layout(name: str) -> Layout:
    """A layout from its name; ValueError naming the accepted forms."""
    n = ALIASES.get(name, name) if isinstance(name, str) else name
    if n in ("row", "col"):
        return Layout(n)
    m = _BLOCKED.match(n) if isinstance(n, str) else None
    if m:
        p, q = int(m.group(1)), int(m.group(2))
        if not (1 <= p <= MAX_BLOCK and 1 <= q <= MAX_BLOCK):
            raise ValueError(f"{name!r}: tile sides must be in [1, {MAX_BLOCK}]")
        return Layout("blocked", p, q)
    m = _STRIPED.match(n) if isinstance(n, str) else None
    if m:
        p = int(m.group(1))
        if not 1 <= p <= MAX_BLOCK:
            raise ValueError(f"{name!r}: the stripe height must be in [1, {MAX_BLOCK}]")
        return Layout("striped", p)
    raise ValueError(f"{name!r} is not a layout (one of {NAMES})")


def canonical(name: str) -> str:
    return parse_layout(name).name
