"""The planner's four models, one module each: movement, registers, schedule, sync."""

from __future__ import annotations

from dataclasses import fields
from typing import Any, TypeVar

T = TypeVar("T")
_FIELDS: dict[type, tuple[str, ...]] = {}


def frozen(cls: type[T], *values: Any) -> T:
    """``cls(*values)`` for a frozen dataclass without __post_init__ or field defaults to fill: the same
    instance, its fields set in one __dict__ update instead of one object.__setattr__ each (the planner makes
    some 20,000 Movement, Schedule and SyncPlan a search; tests/test_plan_memo.py compares both)."""
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = tuple(f.name for f in fields(cls))  # type: ignore[arg-type]
    if len(values) != len(names):
        raise TypeError(f"{cls.__name__} takes {len(names)} fields, got {len(values)}")
    obj = object.__new__(cls)
    obj.__dict__.update(zip(names, values))
    return obj
