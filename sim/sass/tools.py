"""Find ``ptxas`` and ``nvdisasm``, compile PTX to a cubin, disassemble it, read ptxas' resource report.

The tools come first from the pip wheels (``nvidia-cuda-nvcc``, ``nvidia-cuda-nvdisasm``: binaries
under ``site-packages/nvidia/<cuXX>/bin/``, found through the ``nvidia`` namespace package), then from
the PATH. One compile (``ptxas -arch=ARCH -lineinfo -v``) serves both the listing and the resource
report; its outputs are cached under ``$XDG_CACHE_HOME/gemm-workbench/sass`` keyed by the sha256 of
the PTX text, the arch and both tools' versions.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import re
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sim.errors import PtxError, WorkbenchError
from sim.usercache import racy, replace_json, stat_key, user_cache

if TYPE_CHECKING:
    import subprocess

# subprocess and tempfile are imported where a tool runs (a cold timing run with its caches warm runs none:
# subprocess, selectors and signal were ~4 ms of its start); `tools.subprocess` still names the module.
def __getattr__(name: str) -> Any:
    if name in ("subprocess", "tempfile"):
        import importlib

        return importlib.import_module(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


INSTALL_HINT = 'pip install -e ".[sass]"'
DEFAULT_ARCH = "sm_90a"


class SassError(WorkbenchError):
    """A SASS tool is missing or failed."""


@dataclass(frozen=True)
class Resources:
    """What ``ptxas -v`` reports for one entry function."""

    regs: int
    barriers: int
    smem_static: int  # bytes of statically declared shared memory
    cmem: int  # bytes of constant bank 0 (0 where ptxas does not print it)
    stack_frame: int
    spill_stores: int  # bytes
    spill_loads: int  # bytes

    @property
    def spill_bytes(self) -> int:
        return self.spill_stores + self.spill_loads


@dataclass(frozen=True)
class Compiled:
    """One ptxas + nvdisasm run: the disassembly text and ptxas' ``-v`` log."""

    arch: str
    disassembly: str
    ptxas_log: str


def _wheel_dirs() -> list[Path]:
    spec = importlib.util.find_spec("nvidia")
    if spec is None or spec.submodule_search_locations is None:
        return []
    out: list[Path] = []
    for root in spec.submodule_search_locations:
        base = Path(root)
        out += sorted(base.glob("cu*/bin"), reverse=True)  # cu13/bin before cu12/bin
        out += sorted(base.glob("cuda_*/bin"))  # the older per-package layout (nvidia/cuda_nvcc/bin)
    return out


def find_tool(name: str) -> Path | None:
    """``name`` from the pip wheels, else from the PATH; None when neither has it."""
    for d in _wheel_dirs():
        p = d / name
        if p.is_file() and os.access(p, os.X_OK):
            return p
    found = shutil.which(name)
    return Path(found) if found else None


def tool(name: str) -> Path:
    """Like find_tool, but a missing tool is a SassError naming the fix."""
    p = find_tool(name)
    if p is None:
        raise SassError(f"{name} not found (neither the nvidia pip wheels nor the PATH have it): {INSTALL_HINT}")
    return p


def tools_available() -> bool:
    return find_tool("ptxas") is not None and find_tool("nvdisasm") is not None


@functools.cache
def tool_version(path: Path) -> str:
    """The last line of ``TOOL --version`` (``Build cuda_13.5.r13.5/compiler.39125733_0``).

    Kept in ``cache_dir()/versions.json`` by the tool's real path and stat (device, inode, size, mtime and
    ctime in ns): every cold run asked ptxas (4-5 ms of CPU in a child process); a binary replaced or written
    over asks again, and a script (``#!``, e.g. a wrapper that execs the real tool) is always asked, since what
    it runs can change while it does not. Only a clean answer (exit 0, a version line) of a binary older than
    2 s is kept (a file written again within the clock tick it was asked in could keep its stat)."""
    real = os.path.realpath(path)
    stamp = _binary_stat(real)
    store = cache_dir() / "versions.json"
    known: object = None
    if stamp is not None:
        try:
            known = json.loads(store.read_text())
            v = known[real]  # type: ignore[index]
            if v["stat"] == stamp and isinstance(v["version"], str):
                return v["version"]
        except (OSError, ValueError, LookupError, TypeError):
            pass
    import subprocess

    out = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=60)
    lines = [s for s in out.stdout.splitlines() if s.strip()]
    version = lines[-1].strip() if lines else "unknown"
    if stamp is not None and not racy(stamp) and out.returncode == 0 and lines and _binary_stat(real) == stamp:
        keep = known if isinstance(known, dict) else {}
        keep[real] = {"stat": stamp, "version": version}
        try:
            store.parent.mkdir(parents=True, exist_ok=True)
            replace_json(store, keep)
        except OSError:
            pass  # a read-only cache: asked again next time
    return version


def _binary_stat(path: str) -> list[int] | None:
    """[device, inode, size, mtime_ns, ctime_ns] of an executable that is not a script; None otherwise."""
    try:
        with open(path, "rb") as f:
            if f.read(2) == b"#!":
                return None
            return stat_key(os.fstat(f.fileno()))
    except OSError:
        return None


@functools.cache
def _nvdisasm_flags(path: Path) -> tuple[str, ...]:
    """-c (code only), -hex (encodings), and the PTX line info: -gp where this nvdisasm has it (it reads
    .nv_debug_line_sass, which points at lines of the PTX text), else -g (the .debug_line section)."""
    import subprocess

    out = subprocess.run([str(path), "--help"], capture_output=True, text=True, timeout=60)
    line_flag = "-gp" if "--print-line-info-ptx" in out.stdout else "-g"
    return ("-c", "-hex", line_flag)


def cache_dir() -> Path:
    return user_cache("sass")


def _ptxas_error(log: str, file: str) -> PtxError:
    """ptxas prints ``ptxas PATH, line N; error   : MESSAGE``; keep the first error, name the user's file."""
    m = re.search(r"line (\d+); error\s*:\s*(.*)", log)
    if m:
        return PtxError(f"ptxas rejected the PTX: {m.group(2).strip()}", file, int(m.group(1)))
    first = next((s for s in log.splitlines() if s.strip()), "no message")
    return PtxError(f"ptxas rejected the PTX: {first.strip()}", file)


RUN_TRIES = 3  # a tool that could not start or died of a signal (a loaded machine: EAGAIN, the OOM killer) runs again


def _run(args: list[str], file: str) -> subprocess.CompletedProcess:
    """The tool's run; one that cannot be started or is killed by a signal is tried RUN_TRIES times, then a
    SassError (never a result that depends on the machine's load). A tool that ran and failed is returned."""
    import subprocess

    why = ""
    for attempt in range(RUN_TRIES):
        if attempt:
            time.sleep(0.5 * attempt)
        try:
            r = subprocess.run(args, capture_output=True, text=True, timeout=600)
        except subprocess.TimeoutExpired as e:
            raise SassError(f"{Path(args[0]).name} ran over 600 s; try a smaller kernel", file) from e
        except OSError as e:
            why = f"could not start: {e}"
            continue
        if r.returncode >= 0:
            return r
        why = f"killed by signal {-r.returncode}"
    raise SassError(f"{Path(args[0]).name} {why} ({RUN_TRIES} tries)", file)


def compile_ptx(ptx_text: str, arch: str = DEFAULT_ARCH, file: str = "<ptx>") -> Compiled:
    """ptxas -arch=ARCH -lineinfo -v, then nvdisasm -c -hex -gp, cached by content and tool versions."""
    ptxas, nvdisasm = tool("ptxas"), tool("nvdisasm")
    key = hashlib.sha256("\0".join([ptx_text, arch, tool_version(ptxas), tool_version(nvdisasm)]).encode())
    cached = cache_dir() / f"{key.hexdigest()}.json"
    if cached.is_file():
        try:
            d = json.loads(cached.read_text())
            return Compiled(arch, d["disassembly"], d["ptxas_log"])
        except (ValueError, KeyError, OSError):
            pass  # a damaged cache entry is recompiled and rewritten
    import tempfile

    with tempfile.TemporaryDirectory(prefix="sass-") as tmp:
        cubin, r = _ptxas_cubin(ptxas, ptx_text, arch, Path(tmp), file)
        d = _run([str(nvdisasm), *_nvdisasm_flags(nvdisasm), str(cubin)], file)
        if d.returncode != 0:
            msg = (d.stderr.strip().splitlines() or ["no message"])[0]
            raise SassError(f"nvdisasm failed on the cubin ptxas wrote: {msg}", file)
    out = Compiled(arch, d.stdout, r.stdout + r.stderr)
    _store(cached, out)
    return out


def _store(path: Path, c: Compiled) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        replace_json(path, {"disassembly": c.disassembly, "ptxas_log": c.ptxas_log})
    except OSError:
        pass  # a read-only cache only costs the recompile


_FUNC = re.compile(r"Function properties for (\S+)")
_ENTRY = re.compile(r"Compiling entry function '([^']+)'")


def _num(pattern: str, text: str) -> int:
    m = re.search(pattern, text)
    return int(m.group(1)) if m else 0


def parse_resources(log: str) -> dict[str, Resources]:
    """Resources per entry function from a ``ptxas -v`` log."""
    out: dict[str, Resources] = {}
    name: str | None = None  # the entry function being compiled
    props: str | None = None  # the function whose properties the next lines give
    frame = ""
    for line in log.splitlines():
        if m := _ENTRY.search(line):
            name, frame = m.group(1), ""
        elif m := _FUNC.search(line):
            props = m.group(1)
        elif "bytes stack frame" in line and props == name:
            frame = line
        elif name is not None and (m := re.search(r"Used (\d+) registers", line)):
            out[name] = Resources(
                regs=int(m.group(1)),
                barriers=_num(r"used (\d+) barriers", line),
                smem_static=_num(r"(\d+) bytes smem", line),
                cmem=_num(r"(\d+) bytes cmem\[0\]", line),
                stack_frame=_num(r"(\d+) bytes stack frame", frame),
                spill_stores=_num(r"(\d+) bytes spill stores", frame),
                spill_loads=_num(r"(\d+) bytes spill loads", frame),
            )
            name = None
    return out


def _ptxas_cubin(ptxas: Path, ptx_text: str, arch: str, tmp: Path,
                 file: str) -> tuple[Path, subprocess.CompletedProcess]:
    """``ptxas -arch=ARCH -lineinfo -v`` on PTX_TEXT written into TMP: the cubin's path and ptxas' completed
    process; a one-line SassError where ptxas rejects the PTX."""
    src, cubin = tmp / "kernel.ptx", tmp / "kernel.cubin"
    src.write_text(ptx_text)
    r = _run([str(ptxas), f"-arch={arch}", "-lineinfo", "-v", str(src), "-o", str(cubin)], file)
    if r.returncode != 0:
        raise _ptxas_error(r.stderr + r.stdout, file)
    return cubin, r


def ptxas_log(ptx_text: str, arch: str = DEFAULT_ARCH, file: str = "<ptx>") -> str:
    """``ptxas -arch=ARCH -v`` alone (no nvdisasm: the resource report needs no listing), cached by content and
    ptxas' version; a listing compile_ptx cached for the same text serves too."""
    ptxas = tool("ptxas")
    key = hashlib.sha256("\0".join([ptx_text, arch, tool_version(ptxas), "-v"]).encode()).hexdigest()
    cached = cache_dir() / f"{key}.log.json"

    def candidates() -> Iterator[Path]:  # the listing caches only where this one is missing or damaged: their
        yield cached                     # key needs nvdisasm's version (a subprocess)
        yield from _listing_caches(ptx_text, arch)

    for path in candidates():
        if path.is_file():
            try:
                log = str(json.loads(path.read_text())["ptxas_log"])
            except (ValueError, KeyError, OSError):
                continue  # a damaged cache entry: ptxas runs again
            if path != cached:  # found in a listing's entry: kept under this key too (the next run asks no nvdisasm)
                _store(cached, Compiled(arch, "", log))
            return log
    import tempfile

    with tempfile.TemporaryDirectory(prefix="sass-") as tmp:
        _, r = _ptxas_cubin(ptxas, ptx_text, arch, Path(tmp), file)
    log = r.stdout + r.stderr
    _store(cached, Compiled(arch, "", log))
    return log


def _listing_caches(ptx_text: str, arch: str) -> list[Path]:
    """compile_ptx's cache entry for this text, where nvdisasm is installed (its key names both tools)."""
    nvdisasm = find_tool("nvdisasm")
    if nvdisasm is None:
        return []
    key = hashlib.sha256("\0".join([ptx_text, arch, tool_version(tool("ptxas")), tool_version(nvdisasm)]).encode())
    return [cache_dir() / f"{key.hexdigest()}.json"]


def resources(ptx_text: str, arch: str = DEFAULT_ARCH, file: str = "<ptx>") -> dict[str, Resources]:
    """Registers, shared memory, spills per kernel, as ptxas allocates them for ``arch``."""
    return parse_resources(ptxas_log(ptx_text, arch, file))
