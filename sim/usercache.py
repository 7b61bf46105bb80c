"""What the caches in the user's cache folder share: the folder, a file's stat as a cache key, the rule for
stats too young to trust, and the write-then-rename that keeps a cache file whole (sim/hw.py's validated
configs, sim/sass/tools.py's tool versions and listings, sim/timing/native.py's build key)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

RACY_S = 2  # a file written again within the clock tick it was read in could keep its stat (git's "racily clean")


def user_cache(leaf: str) -> Path:
    """$XDG_CACHE_HOME (or ~/.cache) / gemm-workbench / `leaf`."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gemm-workbench" / leaf


def stat_key(st: os.stat_result) -> list[int]:
    """[device, inode, size, mtime_ns, ctime_ns]: any write, replacement or move changes one of them."""
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def racy(key: list[int]) -> bool:
    """Whether the file of a stat_key was written in the last RACY_S seconds (then the key is not kept)."""
    return key[3] > time.time_ns() - RACY_S * 1_000_000_000


def replace_json(path: Path, obj: object) -> None:
    """`obj` as JSON at `path`, written beside it and renamed over it (a reader never sees half a file);
    OSError / ValueError reach the caller, whose cache then stays as it was."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(obj))
    os.replace(tmp, path)
