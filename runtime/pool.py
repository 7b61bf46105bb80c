"""Reuse of a backend's buffers between launches: a free list per size. A buffer taken for a launch goes
back when that launch has been waited for, so launches in flight never share one."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable
from typing import Any


class Pool:
    """Buffers made by ``make(key)`` and kept by key; ``take`` reuses a returned one when there is one."""

    def __init__(self, make: Callable[[Any], Any]):
        self.make = make
        self.free: dict[Hashable, list[Any]] = defaultdict(list)
        self.made = 0

    def take(self, key: Hashable) -> Any:
        if self.free[key]:
            return self.free[key].pop()
        self.made += 1
        return self.make(key)

    def give(self, key: Hashable, buf: Any) -> None:
        self.free[key].append(buf)
