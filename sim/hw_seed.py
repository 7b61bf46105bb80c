"""The seed's hardware.yaml schema (seed 000 §4.1: compute / memory / register_file / scheduling) mapped
onto the project schema (docs/seed-hardware.md). Numbers the seed does not give come from a base config
(npu7nm); ``convert_text`` writes the project form with ``# source:`` on every field, and ``load_hw``
calls it for any file whose top-level keys are the seed's.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sim.errors import HwConfigError

SEED_TOP = ("name", "compute", "memory", "register_file", "scheduling")
BASE = "npu7nm"
KB = 1024


def _pipe(name: str, key: str) -> tuple[str, ...]:
    return ("pipes", name, key)


# seed key path -> [(project key path, transform)]; a pipe is addressed by its name.
MAPPING: dict[str, list[tuple[tuple[str, ...], Callable[[Any], Any]]]] = {
    "name": [(("name",), str)],
    "compute.alu_units": [(_pipe("mac", "lanes"), int)],
    "compute.alu_latency": [(_pipe("mac", "latency"), int), (_pipe("alu", "latency"), int)],
    "compute.vector_width": [(_pipe("alu", "lanes"), int)],
    "memory.global.bandwidth": [(("dram", "bandwidth_gbps"), float)],
    "memory.global.bank_count": [(("dram", "banks"), int)],
    "memory.global.burst_length": [(("dram", "burst"), int)],
    "memory.shared.size": [(("shared", "size"), lambda kb: int(kb) * KB),
                           (("limits", "smem_per_block"), lambda kb: int(kb) * KB)],
    "memory.shared.port_count": [(("shared", "ports"), int)],
    "memory.shared.latency": [(("shared", "latency"), int)],
    "memory.l2.size": [(("l2", "size"), lambda kb: int(kb) * KB)],
    "memory.l2.associativity": [(("l2", "assoc"), int)],
    "memory.l2.replacement": [(("l2", "policy"), lambda s: str(s).lower())],
    "register_file.size": [(("registers", "per_thread"), int), (("limits", "regs_per_thread"), int)],
    "register_file.latency": [(("registers", "latency"), int)],
    "scheduling.warp_size": [(("warp_size",), int)],
    "scheduling.max_threads_per_block": [(("limits", "threads_per_block"), int)],
}
UNITS = {"memory.shared.size": "KB -> bytes", "memory.l2.size": "KB -> bytes"}


def is_seed_schema(data: Any) -> bool:
    """A seed hardware.yaml has no ``version`` and at least one of compute/memory/register_file/scheduling."""
    return (isinstance(data, dict) and "version" not in data
            and any(k in data for k in ("compute", "memory", "register_file", "scheduling")))


def is_seed_text(text: str) -> bool:
    import yaml  # imported here, as sim.hw does: a config from load_hw's cache needs no YAML

    from sim.hw import safe_load

    try:
        return is_seed_schema(safe_load(text))
    except yaml.YAMLError:
        return False  # the project loader reports the syntax error with its line


def _leaves(data: Any, prefix: str = "") -> list[tuple[str, Any]]:
    if isinstance(data, dict):
        out: list[tuple[str, Any]] = []
        for k, v in data.items():
            out.extend(_leaves(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return [(prefix, data)]


def _line_of(text: str, key: str) -> int | None:
    for i, line in enumerate(text.splitlines(), 1):
        if re.match(rf"^\s*{re.escape(key.split('.')[-1])}\s*:", line):
            return i
    return None


def _set(cfg: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    if path[0] == "pipes":
        pipe = next(p for p in cfg["pipes"] if p["name"] == path[1])
        pipe[path[2]] = value
        return
    node = cfg
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value


def convert(data: dict[str, Any], src: str, text: str = "",
            base: str = BASE) -> tuple[dict[str, Any], dict[tuple[str, ...], str]]:
    """(project config mapping, {project key path: 'seed KEY'}) for a seed mapping."""
    from sim.hw import resolve_hw_path, safe_load

    cfg = safe_load(resolve_hw_path(base).read_text())
    given: dict[tuple[str, ...], str] = {}
    for key, value in _leaves(data):
        if key not in MAPPING:
            known = ", ".join(sorted({k.split(".")[0] for k in MAPPING}))
            hint = [k for k in MAPPING if k.rsplit(".", 1)[0] == key.rsplit(".", 1)[0]]
            raise HwConfigError(f"{key}: unknown seed hardware key (known under it: "
                                f"{', '.join(hint) or known}; mapping: docs/seed-hardware.md)",
                                file=src, line=_line_of(text, key))
        for path, fn in MAPPING[key]:
            try:
                _set(cfg, path, fn(value))
            except (TypeError, ValueError):
                raise HwConfigError(f"{key}: {value!r} is not a number", file=src,
                                    line=_line_of(text, key)) from None
            unit = f", {UNITS[key]}" if key in UNITS else ""
            given[path] = f"seed {key}{unit}"
    cfg["name"] = str(data.get("name", cfg["name"]))
    return cfg, given


def _scalar(v: Any) -> str:
    import yaml

    return "null" if v is None else yaml.safe_dump(v, default_flow_style=True).strip().removesuffix("\n...")


def _emit(node: Any, given: dict[tuple[str, ...], str], base: str, path: tuple[str, ...],
          indent: int, lines: list[str]) -> None:
    pad = " " * indent
    for k, v in node.items():
        here = (*path, str(k))
        if isinstance(v, dict):
            lines.append(f"{pad}{k}:")
            _emit(v, given, base, here, indent + 2, lines)
        elif isinstance(v, list) and v and isinstance(v[0], dict):
            lines.append(f"{pad}{k}:")
            for item in v:
                sub: list[str] = []
                _emit(item, given, base, ("pipes", str(item.get("name"))), indent + 4, sub)
                lines.append(f"{pad}  - " + sub[0].lstrip())
                lines.extend(sub[1:])
        else:
            src = given.get(here, f"base {base}")
            lines.append(f"{pad}{k}: {_scalar(v)}  # source: {src}")


def convert_text(text: str, src: str, base: str = BASE) -> str:
    """The project-schema YAML for a seed hardware.yaml, ``# source:`` on each field."""
    import yaml

    from sim.hw import safe_load

    try:
        data = safe_load(text)
    except yaml.YAMLError as e:
        raise HwConfigError(f"YAML syntax error: {getattr(e, 'problem', e)}", file=src) from None
    if not is_seed_schema(data):
        raise HwConfigError("not a seed hardware.yaml (no compute/memory/register_file/scheduling)", file=src)
    cfg, given = convert(data, src, text, base)
    lines = [f"# Converted from the seed hardware.yaml {Path(src).name} (mapping: docs/seed-hardware.md).",
             f"# '# source: seed KEY' is the seed's number; '# source: base {base}' is the base config's."]
    _emit(cfg, given, base, (), 0, lines)
    return "\n".join(lines) + "\n"
