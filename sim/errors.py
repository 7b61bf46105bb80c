"""Errors that the command lines print as one line (file:line: message) and exit with status 2."""

from __future__ import annotations


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
        return where + self.message.replace("\n", " ")


class PtxError(WorkbenchError):
    """Malformed or unsupported PTX."""


class HwConfigError(WorkbenchError):
    """Malformed hardware YAML."""


class ExecutionError(WorkbenchError):
    """A fault during simulation (out-of-bounds access, deadlock, ...)."""


class UsageError(WorkbenchError):
    """A wrong command-line argument."""
