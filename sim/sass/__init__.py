"""SASS mode: the machine code ptxas writes for a PTX kernel, with each instruction's control code.

``disassemble(ptx_text)`` -> {kernel: SassKernel}; ``resources(ptx_text)`` -> {kernel: Resources}.
Needs ``ptxas`` and ``nvdisasm`` (``pip install -e ".[sass]"``); see docs/sass.md.
"""

from sim.sass.control import Control, decode, first_waiter
from sim.sass.listing import Operand, SassInstruction, SassKernel, disassemble, parse_listing
from sim.sass.tools import Resources, SassError, find_tool, resources, tools_available

__all__ = ["Control", "Operand", "Resources", "SassError", "SassInstruction", "SassKernel", "decode",
           "disassemble", "find_tool", "first_waiter", "parse_listing", "resources", "tools_available"]
