"""Rewrite numbers of a hardware YAML in place, keeping its layout and every other line's comment.

A field is ``(section, pipe, key)``: ``("core", None, "count")``, ``("pipes", "tensor", "latency")``,
or ``("", None, "clock_mhz")`` for a top-level scalar. The new line reads ``key: value  # source: note``.
"""

from __future__ import annotations

Field = tuple[str, str | None, str]


def rewrite_fields(text: str, changes: dict[Field, tuple[object, str]]) -> tuple[str, set[Field]]:
    """(new text, the fields of ``changes`` that were found and rewritten)."""
    lines = text.splitlines()
    section, pipe = "", None
    done: set[Field] = set()
    for i, line in enumerate(lines):
        stripped = line.split("#")[0].rstrip()
        if not stripped:
            continue
        body = stripped.strip()
        if not line.startswith(" "):
            key, _, value = body.partition(":")
            if value.strip():  # a top-level scalar
                field: Field = ("", None, key.strip())
            else:
                section, pipe = key.strip(), None
                continue
        else:
            if body.startswith("- name:"):
                pipe = body.split(":", 1)[1].strip()
                continue
            if ":" not in body:
                continue
            field = (section, pipe if section == "pipes" else None, body.lstrip("- ").split(":")[0].strip())
        if field not in changes:
            continue
        new, note = changes[field]
        indent = line[: len(line) - len(line.lstrip())]
        lead = "- " if body.startswith("- ") else ""
        key = field[2]
        lines[i] = f"{indent}{lead}{key}: {new!s:<{max(1, 26 - len(indent) - len(lead) - len(key))}} # source: {note}"
        done.add(field)
    return "\n".join(lines) + "\n", done
