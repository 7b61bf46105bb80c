"""Errors that the command lines print as one line (file:line: message) and exit with status 2."""

from __future__ import annotations

import argparse
import re
import sys
import warnings
from collections.abc import Callable, Sequence
from pathlib import PurePath
from typing import NoReturn, Protocol, TypeVar


class WorkbenchError(Exception):
    """A user-facing error: bad input, unsupported construct, impossible constraint."""

    def __init__(self, message: str, file: str | None = None, line: int | None = None):
        self.message = message
        self.file = file
        self.line = line
        super().__init__(self.one_line())

    def one_line(self) -> str:
        where = ""
        if self.file:
            where = f"{self.file}:{self.line}: " if self.line else f"{self.file}: "
        return readable(where + self.message)


def readable(line: str, word: int = 120, total: int = 1000) -> str:
    """One line of readable length: a run of more than ``word`` non-blank characters (a 1 MB token)
    keeps its first 80 and its length, the whole line at most ``total`` characters."""
    line = re.sub(r"\S{" + str(word + 1) + ",}", lambda m: f"{m[0][:80]}... ({len(m[0]):,} characters)",
                  line.replace("\n", " "))
    return line if len(line) <= total else line[: total - 20] + " ... (cut)"


class PtxError(WorkbenchError):
    """Malformed or unsupported PTX."""


class HwConfigError(WorkbenchError):
    """Malformed hardware YAML."""


class ExecutionError(WorkbenchError):
    """A fault during simulation (out-of-bounds access, deadlock, ...)."""


class UsageError(WorkbenchError):
    """A wrong command-line argument."""


class HeaderError(UsageError):
    """A malformed ``@workbench`` header (sim.launch, sim.reference); the command that read the PTX names
    the file and the header's line (:func:`sim.launch.at_header`)."""


class WorkbenchWarning(UserWarning):
    """A run goes on, but the user should know (``file:line: message``); the command lines print it
    as one line ``warning: ...`` on stderr."""

    def __init__(self, message: str, file: str | None = None, line: int | None = None):
        self.error = WorkbenchError(message, file, line)
        super().__init__(self.error.one_line())


class Located(Protocol):
    """What an error needs of an instruction: its PTX line and its source-program position."""

    line: int
    src: tuple[str, int] | None


E = TypeVar("E", bound=WorkbenchError)


def at_instruction(cls: type[E], message: str, file: str | None, ins: Located) -> E:
    """``cls`` naming the PTX line of ``ins`` and, when the PTX carries ``.loc``, the source line it
    was compiled from (``... (source make.py:42)``)."""
    if ins.src is not None:
        message = f"{message} (source {PurePath(ins.src[0]).name}:{ins.src[1]})"
    return cls(message, file, ins.line)
class ArgParser(argparse.ArgumentParser):
    """argparse with the house contract: a bad command line is one line (``usage:`` only with --help);
    its sub-command parsers are of this class too."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")


def run_cli(main_fn: Callable[[list[str]], int], argv: Sequence[str] | None = None) -> int:
    """Run a command's ``main_fn(argv)`` under the house error contract and return its exit status.

    A :class:`WorkbenchError` prints its one line (``file:line: message``) and an ``OSError`` its
    file and reason, both exit 2; any other exception prints ``internal error: ...`` and exits 2,
    or shows its traceback when ``--debug`` is among the arguments; Ctrl-C prints ``interrupted``
    and exits 130. Every message is one line on stderr.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            return int(main_fn(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # noqa: BLE001 - the contract: one line, no traceback unless --debug
        if debug:
            raise
        print(error_line(e), file=sys.stderr)
        return 2


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: object = None, line: str | None = None) -> None:
    print(f"warning: {message}".replace("\n", " "), file=sys.stderr)


def error_line(e: Exception) -> str:
    """The one line the command lines print for ``e``."""
    if isinstance(e, WorkbenchError):
        return e.one_line()
    if isinstance(e, OSError) and e.strerror:
        where = f"{e.filename}: " if e.filename else ""
        return readable(f"{where}{e.strerror}; check the path and its permissions")
    return readable(f"internal error: {type(e).__name__}: {e} (rerun with --debug for the traceback)")
