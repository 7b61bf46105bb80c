"""Files appear whole or not at all: each is written beside its destination under a temporary name and
renamed over it (``os.replace``), so Ctrl-C, a full disk or an error never leaves a truncated file."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path


def write_with(path: str | os.PathLike[str], writer: Callable[[Path], object]) -> Path:
    """Call ``writer(tmp)`` to write a temporary file beside ``path``, then rename it to ``path``."""
    dest = Path(path)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=dest.suffix, dir=dest.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        writer(tmp)
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return dest


def write_text(path: str | os.PathLike[str], text: str) -> Path:
    return write_with(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
