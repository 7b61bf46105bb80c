"""sim/isa.py is the one instruction-classification layer: nothing else switches on opcode strings,
every opcode-keyed table names ISA opcodes only, every ISA entry has semantics and a pipe, and an
instruction outside the table (or a packed type an opcode does not implement) is a PtxError with
file:line at parse time."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from sim import isa
from sim.errors import PtxError
from sim.functional.ops_alu import PACKED
from sim.functional.runner import SEMANTICS
from sim.hw import PIPE_CLASSES
from sim.ptx.parser import parse_ptx
from sim.ptx.types import TYPES
from tests.simhelp import HEADER

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("sim", "kernelgen", "validation")


def _sources() -> list[Path]:
    return [p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))]


def _is_opcode(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "opcode"


def _is_literal(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return True
    return isinstance(node, (ast.Tuple, ast.Set, ast.List)) and any(
        isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts)


def test_no_opcode_string_switches_outside_isa():
    bad = []
    for p in _sources():
        if p == ROOT / "sim" / "isa.py":
            continue
        for node in ast.walk(ast.parse(p.read_text(), str(p))):
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                if any(_is_opcode(s) for s in sides) and any(_is_literal(s) for s in sides):
                    bad.append(f"{p.relative_to(ROOT)}:{node.lineno}")
    assert not bad, "compare .opcode with a string: use the sim/isa.py queries instead: " + ", ".join(bad)


def _opcode_tables() -> list[tuple[str, int, str]]:
    """(file, line, key) of every string key of a module-level dict named SEMANTICS*."""
    out = []
    for p in _sources():
        for node in ast.parse(p.read_text(), str(p)).body:
            target = node.target if isinstance(node, ast.AnnAssign) else \
                node.targets[0] if isinstance(node, ast.Assign) else None
            if not (isinstance(target, ast.Name) and target.id.startswith("SEMANTICS")):
                continue
            if isinstance(node.value, ast.Dict):
                for k in node.value.keys:
                    if isinstance(k, ast.Constant) and isinstance(k.value, str):
                        out.append((str(p.relative_to(ROOT)), k.lineno, k.value))
    return out


def test_opcode_keyed_tables_name_isa_opcodes():
    keys = _opcode_tables()
    assert len(keys) > len(isa.ISA)  # the scan sees the functional and the formal tables
    bad = [f"{f}:{line} {k!r}" for f, line, k in keys if k not in isa.ISA]
    assert not bad, "opcodes missing from sim/isa.py: " + ", ".join(bad)
    bad_packed = [k for k in PACKED if k not in isa.ISA or not isa.ISA[k].packed]
    assert not bad_packed, f"packed semantics for opcodes the ISA table does not mark packed: {bad_packed}"
    unimpl = [k for k, op in isa.ISA.items() if op.packed and k not in PACKED]
    assert not unimpl, f"opcodes marked packed without packed semantics: {unimpl}"


def test_every_entry_has_semantics_and_a_pipe():
    assert set(SEMANTICS) == set(isa.ISA)
    pipes = set(PIPE_CLASSES) | {isa.PIPE_ARITH, isa.PIPE_CVT}
    for name, op in isa.ISA.items():
        assert op.pipe in pipes, name
        assert op.cls in ("arith", "alu", "compare", "sfu", "lsu", "tensor", "warp", "branch", "sync", "async")
        assert op.mem in ("none", "read", "write", "rmw", "copy"), name
        assert op.flow in ("", "branch", "exit", "call") and op.order in ("", "fence", "barrier"), name
        assert op.latency in ("pipe", "shared"), name


def test_type_table():
    assert TYPES["b128"].bits == 128 and TYPES["tf32"].bits == 32 and TYPES["tf32"].kind == "float"
    assert TYPES["f16x2"].kind == "packed" and TYPES["f16x2"].lanes == 2 and TYPES["bf16x2"].elem == "bf16"
    assert TYPES["pred"].size == 1 and TYPES["s64"].size == 8


def _kernel(body: str) -> str:
    return HEADER + f""".visible .entry k(.param .u64 k_out)
{{
    .reg .b32 %r<8>;
    .reg .pred %p<4>;
{body}
    ret;
}}
"""


def _decode(body: str):
    return parse_ptx(_kernel(body), "t.ptx").kernel("k")


@pytest.mark.parametrize("stmt", [
    "frobnicate.b32 %r1, %r2;",  # not in the table
    "add.e4m3x2 %r1, %r2, %r3;",  # a packed type without a numpy form
    "mad.f16x2 %r1, %r2, %r3, %r4;",  # packed, but mad has no packed semantics
    "setp.eq.f16x2 %p1|%p2, %r2, %r3;",
    "div.rn.bf16x2 %r1, %r2, %r3;",
])
def test_unsupported_is_ptx_error_with_line(stmt):
    with pytest.raises(PtxError) as e:
        _decode(f"    mov.u32 %r2, 1;\n    {stmt}")
    assert "t.ptx:" in str(e.value) and ":9" in str(e.value)


def test_decode_caches_roles():
    k = _decode("""
    @%p1 bra $L1;
    bar.sync 0;
    bar.warp.sync -1;
    cp.async.commit_group;
    cp.async.wait_group 1;
    ld.param.u32 %r1, [k_out];
$L1:
    exit;""")
    b = k.body
    assert isa.is_branch(b[0]) and not isa.is_terminator(b[0]) and b[0].info["target"] == 6
    assert isa.is_cta_barrier(b[1]) and isa.barrier_role(b[2]) == "warp" and not isa.is_cta_barrier(b[2])
    assert isa.async_role(b[3]) == "commit" and isa.async_role(b[4]) == "wait" and isa.is_ordered(b[4])
    assert isa.mem_dir(b[5]) == "read" and isa.mem_space(b[5]) == "param" and not isa.is_nonuniform(b[5])
    assert isa.is_terminator(b[6]) and isa.is_terminator(b[7])
