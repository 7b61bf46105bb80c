"""SASS mode: the machine code ptxas writes for a PTX kernel, with each instruction's control code.

``disassemble(ptx_text)`` -> {kernel: SassKernel}; ``resources(ptx_text)`` -> {kernel: Resources}.
Needs ``ptxas`` and ``nvdisasm`` (``pip install -e ".[sass]"``); see docs/sass.md.

The names below are imported from their modules on first use (PEP 562): a PTX run imports only
sim.sass.tools (ptxas's register count, sim/timing/regalloc.py), not the listing parser and control
codes (tests/test_cold_imports.py).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sim.sass.control import Control, decode, first_waiter
    from sim.sass.listing import Operand, SassInstruction, SassKernel, disassemble, parse_listing
    from sim.sass.tools import Resources, SassError, find_tool, resources, tools_available

# name -> the module of this package that defines it
_WHERE = {"Control": "control", "decode": "control", "first_waiter": "control",
          "Operand": "listing", "SassInstruction": "listing", "SassKernel": "listing", "disassemble": "listing",
          "parse_listing": "listing",
          "Resources": "tools", "SassError": "tools", "find_tool": "tools", "resources": "tools",
          "tools_available": "tools"}

__all__ = ["Control", "Operand", "Resources", "SassError", "SassInstruction", "SassKernel", "decode",
           "disassemble", "find_tool", "first_waiter", "parse_listing", "resources", "tools_available"]


def __getattr__(name: str) -> Any:
    mod = _WHERE.get(name)
    if mod is None:  # a submodule not imported yet: the import system imports it after this
        raise AttributeError(f"module 'sim.sass' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"sim.sass.{mod}"), name)
    globals()[name] = value
    return value
