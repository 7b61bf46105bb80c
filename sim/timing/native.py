"""The timing core compiled with mypyc (issue 17 item 1): sim/timing/pipe.py, static.py, warp.py, core.py
and the memory system they call (memory.py, units.py, crossbar.py, constant.py, dram.py) built into extension
modules and imported in place of the Python files, when a build of exactly these sources (and this
Python) exists. Otherwise the same Python runs as it is: the compiled modules
are these sources, typed as mypy checks them, so both give the same results (tests/test_native.py).

    python -m sim native build    # once, ~40 s: needs mypy (it ships mypyc) and a C compiler
    python -m sim native status   # which core a run would use, and where the build is
    WORKBENCH_NATIVE=0 python -m sim ... # the Python core even with a build present

Builds live in ~/.cache/gemm-workbench/native/<key> (or $WORKBENCH_NATIVE_DIR/<key>), the key a hash
of the compiled sources, of the `sim` modules they import and of the interpreter's ABI: editing any of them
makes the build stale, and the Python files run again until the next `build`. Nothing is compiled
implicitly.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import pathlib
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from types import ModuleType

from sim.usercache import RACY_S as RACY_S  # (tests read native.RACY_S)
from sim.usercache import racy, replace_json, stat_key

# the modules compiled together (one mypyc group: calls and attribute reads between them are native)
MODULES = ("sim.timing.pipe", "sim.timing.units", "sim.timing.crossbar", "sim.timing.constant", "sim.timing.dram",
           "sim.timing.memory", "sim.timing.static", "sim.timing.warp", "sim.timing.core")
GROUP = "sim_timing_native"  # the group's shared library is the module GROUP + "__mypyc"
MANIFEST = "modules.json"


def _root() -> pathlib.Path:
    """The directory that holds the `sim` package."""
    return pathlib.Path(__file__).resolve().parents[2]


def _source(module: str) -> pathlib.Path:
    return _root().joinpath(*module.split(".")).with_suffix(".py")


def _imported(text: str) -> set[str]:
    """The `sim` modules a source imports (`from sim.x import ...`, `from sim import x`)."""
    out = set()
    for mod, names in re.findall(r"^\s*from (sim(?:\.\w+)*) import \(?([\w, ]+)", text, re.M):
        out.add(mod)
        if mod == "sim":
            out.update(f"sim.{n.strip()}" for n in names.split(",") if n.strip())
    return out


def _file(module: str) -> pathlib.Path | None:
    f = _source(module)
    if f.exists():
        return f
    init = f.with_suffix("") / "__init__.py"
    return init if init.exists() else None


def _hash_sources() -> tuple[str, list[list]]:
    """key()'s hash from the files' contents, and [path, stat] of every file it read or looked for (each
    stat taken before the file is read: an edit while hashing shows as a changed stat next time)."""
    h = hashlib.sha256(importlib.machinery.EXTENSION_SUFFIXES[0].encode() + sys.version.encode())
    deps: set[str] = set()
    seen: list[list] = []
    for m in MODULES:
        seen.append([str(_source(m)), _stat(str(_source(m)))])
        text = _source(m).read_bytes()
        h.update(m.encode() + b"\0" + text)
        deps |= _imported(text.decode())
    for d in sorted(deps - set(MODULES)):
        for c in (_source(d), _source(d).with_suffix("") / "__init__.py"):  # where _file looks
            seen.append([str(c), _stat(str(c))])
        f = _file(d)
        h.update(d.encode() + b"\0" + (f.read_bytes() if f is not None else b""))
    return h.hexdigest()[:20], seen


def _stat(path: str) -> list[int] | None:
    try:
        return stat_key(os.stat(path))
    except OSError:
        return None


def _racy(files: list[list]) -> bool:
    """Whether a file was written in the last RACY_S seconds: file times advance by the kernel's clock tick
    (a few ms), so a file written again within the tick it was hashed in could keep its stat; such a key is not
    kept (hashed again next time), as git treats "racily clean" index entries."""
    return any(st is not None and racy(st) for _, st in files)


KEYS = "keys.json"  # under the cache's top: per source tree, the files key() read, their stats and the key


def key() -> str:
    """Hash of the compiled sources, of the `sim` modules they import (the compiled code checks the types
    it reads from them: an edit there makes the build stale too) and of the interpreter's ABI.

    Hashing ~25 sources took 2-4 ms of every start: the key is kept in KEYS with the stat (device, inode,
    size, mtime and ctime in ns) of every file it read, and hashed again when any of them differs (an edit,
    a checkout, a file added or gone: a file that did not exist is recorded as such), for another
    interpreter, or where KEYS is missing or unreadable; not kept while a file is younger than RACY_S."""
    top = _top()
    tree = str(_root())
    abi = importlib.machinery.EXTENSION_SUFFIXES[0] + " " + sys.version
    known: object = None
    try:
        known = json.loads((top / KEYS).read_text())
        e = known[tree]  # type: ignore[index]
        if e["abi"] == abi and all(_stat(f) == st for f, st in e["files"]):
            return str(e["key"])
    except (OSError, ValueError, LookupError, TypeError):
        pass
    k, files = _hash_sources()
    if top.is_dir() and not _racy(files):  # keep it (never creates the cache: nothing is written before a build)
        try:
            keep = {t: v for t, v in known.items() if os.path.isdir(t)} if isinstance(known, dict) else {}
            keep[tree] = {"abi": abi, "key": k, "files": files}  # (trees gone, e.g. test folders, dropped)
            replace_json(top / KEYS, keep)
        except (OSError, ValueError):
            pass  # read-only or damaged: the next start hashes again
    return k


def _top() -> pathlib.Path:
    base = os.environ.get("WORKBENCH_NATIVE_DIR")
    return pathlib.Path(base) if base else pathlib.Path.home() / ".cache" / "gemm-workbench" / "native"


def cache_dir() -> pathlib.Path:
    return _top() / key()


def enabled() -> bool:
    return os.environ.get("WORKBENCH_NATIVE", "1") != "0"


class _Finder(importlib.abc.MetaPathFinder):
    """Finds the compiled MODULES (and their group library) at the build's paths."""

    def __init__(self, paths: dict[str, str]):
        self.paths = paths

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        p = self.paths.get(fullname)
        if p is None:
            return None
        return importlib.util.spec_from_file_location(fullname, p,
                                                      loader=importlib.machinery.ExtensionFileLoader(fullname, p))


def install() -> bool:
    """Import the compiled core from now on, if a current build exists and WORKBENCH_NATIVE is not 0.
    Called by sim/timing/__init__.py before anything imports the core; True when installed."""
    if not enabled() or any(isinstance(f, _Finder) for f in sys.meta_path):
        return False
    try:
        d = cache_dir()
        paths = json.loads((d / MANIFEST).read_text())
    except (OSError, ValueError):
        return False
    if any(m in sys.modules for m in MODULES) or not all(m in paths for m in MODULES):
        return False  # already imported as Python (keep one of each class), or an incomplete build
    sys.meta_path.insert(0, _Finder({m: str(d / p) for m, p in paths.items()}))
    return True


def active() -> bool:
    """Whether the imported core is the compiled one."""
    import sim.timing.warp as w

    return not (w.__file__ or "").endswith(".py")


def build(quiet: bool = False) -> pathlib.Path:
    """Compile MODULES with mypyc into cache_dir() (built in a temporary directory, then moved there)."""
    root = _root()
    out = cache_dir()
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="workbench-native-"))
    try:
        _compile(root, tmp, quiet)
        lib = tmp / "lib"
        paths = {}
        for m in (*MODULES, GROUP + "__mypyc"):
            found = [f for f in lib.glob(m.replace(".", "/") + ".*")
                     if f.name.endswith(importlib.machinery.EXTENSION_SUFFIXES[0])]
            if len(found) != 1:
                raise RuntimeError(f"expected one extension for {m} under {lib}, found {found}")
            paths[m] = str(found[0].relative_to(lib))
        (lib / MANIFEST).write_text(json.dumps(paths, indent=1) + "\n")
        out.parent.mkdir(parents=True, exist_ok=True)
        if out.exists():
            shutil.rmtree(out)
        shutil.move(str(lib), str(out))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def _compile(root: pathlib.Path, tmp: pathlib.Path, quiet: bool) -> None:
    """mypyc's C for MODULES under tmp/c, compiled into tmp/lib."""
    from mypyc.build import mypycify  # mypy ships mypyc
    from setuptools import Distribution  # type: ignore[import-untyped, unused-ignore]

    here = os.getcwd()
    os.chdir(root)  # mypy finds the `sim` package (and pyproject's [tool.mypy]) from here
    try:
        srcs = [str(_source(m).relative_to(root)) for m in MODULES]
        flags = ["--ignore-missing-imports", "--cache-dir", str(tmp / "mypy")]  # nothing written under root
        exts = mypycify([*flags, *srcs], opt_level="3", group_name=GROUP, target_dir=str(tmp / "c"),
                        verbose=not quiet)
        dist = Distribution({"name": GROUP, "ext_modules": exts})
        dist.script_args = ["build_ext", "--build-lib", str(tmp / "lib"), "--build-temp", str(tmp / "obj")]
        if quiet:
            dist.script_args.insert(0, "--quiet")
        dist.parse_command_line()
        dist.run_commands()
    finally:
        os.chdir(here)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    cmd = args[0] if args else "status"
    if cmd == "build":
        for mod, fix in (("mypyc", "pip install mypy (it ships mypyc)"), ("setuptools", "pip install setuptools")):
            try:
                importlib.import_module(mod)
            except ImportError:
                print(f"python -m sim native build: {mod} is not installed; fix: {fix}", file=sys.stderr)
                return 2
        t = time.perf_counter()
        try:
            out = build(quiet="--quiet" in args)
        except (Exception, SystemExit) as e:  # a compiler missing or failing: the Python core still runs
            print(f"python -m sim native build: the build failed ({type(e).__name__}: {str(e).strip()[:300]}); "
                  "the Python core runs as before; fix: a C compiler (cc) and the Python headers", file=sys.stderr)
            return 2
        print(f"compiled timing core: {out} ({time.perf_counter() - t:.1f} s)")
        return 0
    if cmd == "status":
        d = cache_dir()
        have = (d / MANIFEST).exists()
        print(f"compiled timing core: {'built' if have else 'not built'} ({d}); "
              f"{'disabled by WORKBENCH_NATIVE=0' if not enabled() else 'enabled'}")
        return 0
    print(f"python -m sim native: unknown command {cmd!r}; fix: use 'build' or 'status'", file=sys.stderr)
    return 2
