"""Hard constraints written as expressions over tiling variables (``TILE_M * TILE_K * 2 + ... <= 131072``),
from the seeds' .dgemm ``constraint { }`` block. An expression is a small tree of tuples (no eval):
("num", x) | ("var", NAME) | ("neg", e) | ("bin", OP, a, b) with OP one of + - * / %."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

TILE_VARS = ("TILE_M", "TILE_N", "TILE_K", "STAGES", "THREADS", "PAD", "UNROLL_K")


def evaluate(e: tuple[Any, ...], vals: dict[str, int]) -> float:
    kind = e[0]
    if kind == "num":
        return float(e[1])
    if kind == "var":
        return float(vals[e[1]])
    if kind == "neg":
        return -evaluate(e[1], vals)
    x, y = evaluate(e[2], vals), evaluate(e[3], vals)
    op = e[1]
    if op in "/%" and y == 0:
        return float("inf")
    # one operation (not a table of all five: the planner evaluates every tiling's expressions)
    if op == "+":
        return x + y
    if op == "-":
        return x - y
    if op == "*":
        return x * y
    if op == "/":
        return x / y if y else 0.0
    if op == "%":
        return x % y if y else 0.0
    raise KeyError(op)


@dataclass(frozen=True)
class TileExpr:
    text: str  # as written, for the plan's pruning log
    op: str  # "<=", ">=", "=="
    lhs: tuple[Any, ...]
    rhs: tuple[Any, ...]

    def holds(self, vals: dict[str, int]) -> bool:
        a, b = evaluate(self.lhs, vals), evaluate(self.rhs, vals)
        return a <= b if self.op == "<=" else a >= b if self.op == ">=" else a == b


def first_violated(exprs: tuple[TileExpr, ...], vals: dict[str, int]) -> TileExpr | None:
    return next((x for x in exprs if not x.holds(vals)), None)
