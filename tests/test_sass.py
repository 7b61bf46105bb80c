"""sim.sass: control-code decoding, the nvdisasm listing parser, ptxas resources; with the tools present,
real sm_90a SASS of examples/sgemm_tiled.ptx and a kernelgen mma kernel."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from sim.errors import PtxError
from sim.hw import load_hw
from sim.ptx.parser import parse_ptx
from sim.sass import control, tools
from sim.sass.control import Control, decode, first_waiter
from sim.sass.listing import SassKernel, disassemble, parse_listing, parse_operand
from sim.sass.tools import SassError, parse_resources
from sim.timing.static import regs_per_thread

ROOT = Path(__file__).resolve().parent.parent
needs_tools = pytest.mark.skipif(not tools.tools_available(),
                                 reason='ptxas/nvdisasm not found: pip install -e ".[sass]"')


# ------------------------------------------------------------------ control codes (no tools needed)
@pytest.mark.parametrize("hi, code, stall, yield_flag, wb", [
    (0x000E240000000800, 0x712, 2, True, 0),  # LDS R11, [R5]: stall 2, write barrier 0
    (0x000FE80000000800, 0x7F4, 4, True, None),  # LDS R12, [R5]: stall 4, no barrier
    (0x000FC60000000000, 0x7E3, 3, False, None),  # VIADD R6, R6, -16: stall 3, no barrier
])
def test_decode_sass_control_examples(hi, code, stall, yield_flag, wb):
    c = decode(hi)
    assert control.control_code(hi) == code
    assert (c.stall, c.yield_flag, c.write_barrier, c.read_barrier, c.wait_mask, c.reuse) == \
        (stall, yield_flag, wb, None, 0, 0)
    assert c.encode() == code


def test_decode_fields_at_their_bits():
    c = Control(stall=13, yield_flag=False, write_barrier=5, read_barrier=2, wait_mask=0b100101, reuse=0b1010)
    hi = c.encode() << 41 | 0x0000_0123_4567
    assert decode(hi) == c
    assert c.waits == (0, 2, 5)
    # real encodings from sgemm_tiled: ISETP R9 waits on slot 0 (set by LDC R9); LEA R9, R16.reuse, ...
    isetp, lea = decode(0x001FC40003F06270), decode(0x040FE4000F8E30FF)
    assert (isetp.waits, isetp.stall, isetp.write_barrier) == ((0,), 2, None)
    assert (lea.reuse, lea.wait_mask, lea.stall) == (0b0001, 0, 2)


# ------------------------------------------------------------------ listing parser (no tools needed)
def test_parse_operands():
    assert parse_operand("R12.reuse").regs == ("R12",) and parse_operand("R12.reuse").reuse
    assert parse_operand("-R9").prefix == "-" and parse_operand("-R9").kind == "reg"
    assert parse_operand("!PT").kind == "pred" and parse_operand("!PT").prefix == "!"
    assert parse_operand("UR4").kind == "ureg" and parse_operand("UPT").kind == "upred"
    assert parse_operand("SR_TID.X").kind == "special"
    assert parse_operand("0x1f").value == 31 and parse_operand("-0x10").value == -16
    assert parse_operand("2").kind == "float" and parse_operand("-QNAN").kind == "float"
    k = parse_operand("c[0x0][0x230]")
    assert (k.kind, k.bank, k.value) == ("const", 0, 0x230)
    m = parse_operand("desc[UR8][R4.64+0x40]")
    assert (m.kind, m.desc, m.regs, m.value, m.suffixes) == ("mem", "UR8", ("R4",), 0x40, ("64",))
    assert parse_operand("[R0+UR6]").regs == ("R0", "UR6")
    assert parse_operand("|R3|").absolute
    assert parse_operand("`(.L_x_0)").label == ".L_x_0"


LISTING = """\
//--------------------- .text.k         --------------------------
\t.section\t.text.k,"ax",@progbits
k:
.text.k:
\t//## File ".nv_debug_ptx_txt", line 9
        /*0000*/                   LDC R1, c[0x0][0x28] ;           /* 0x00000a00ff017b82 */
                                                                    /* 0x000fe40000000800 */
.L_x_0:
        /*0010*/              @!P0 BRA `(.L_x_1) ;                  /* 0x00000004005c8947 */
                                                                    /* 0x000fea0003800000 */
\t//## File ".nv_debug_ptx_txt", line 12
        /*0020*/                   LDSM.16.M88.4 R12, [R0+UR6] ;    /* 0x000000060000783b */
                                                                    /* 0x000e220008000200 */
.L_x_1:
        /*0030*/                   NOP;                             /* 0x0000000000007918 */
                                                                    /* 0x000fc00000000000 */
//--------------------- SYMBOLS --------------------------
"""


def test_parse_listing():
    ks = parse_listing(LISTING)
    k = ks["k"]
    assert [i.pc for i in k.instructions] == [0, 0x10, 0x20, 0x30]
    ldc, bra, ldsm, nop = k.instructions
    assert (ldc.opcode, ldc.ptx_line, ldc.lo, ldc.hi) == ("LDC", 9, 0x00000A00FF017B82, 0x000FE40000000800)
    assert (bra.guard, bra.guard_negated, bra.ptx_line) == ("P0", True, 9)
    assert k.labels == {"k": 0, ".L_x_0": 0x10, ".L_x_1": 0x30} and k.target(bra) == 0x30
    assert (ldsm.name, ldsm.modifiers, ldsm.ptx_line) == ("LDSM.16.M88.4", ("16", "M88", "4"), 12)
    assert ldsm.control.write_barrier == 0 and nop.opcode == "NOP" and nop.operands == ()


def test_listing_without_high_words_is_an_error():
    broken = "\n".join(s for s in LISTING.splitlines() if not s.strip().startswith("/* 0x"))
    with pytest.raises(SassError, match="-hex"):
        parse_listing(broken, "k.sass")


def test_parse_resources():
    log = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'a' for 'sm_90a'
ptxas info    : Function properties for a
    16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 2048 bytes smem, 400 bytes cmem[0]
ptxas info    : Compiling entry function 'b' for 'sm_90a'
ptxas info    : Function properties for b
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 12 registers, used 0 barriers
"""
    r = parse_resources(log)
    assert (r["a"].regs, r["a"].barriers, r["a"].smem_static, r["a"].cmem) == (255, 1, 2048, 400)
    assert (r["a"].stack_frame, r["a"].spill_bytes) == (16, 12)
    assert (r["b"].regs, r["b"].smem_static, r["b"].spill_bytes) == (12, 0, 0)


def test_missing_tool_names_the_install(monkeypatch):
    monkeypatch.setattr(tools, "_wheel_dirs", lambda: [])
    monkeypatch.setenv("PATH", "")
    assert tools.find_tool("nvdisasm") is None
    with pytest.raises(SassError, match=re.escape('pip install -e ".[sass]"')):
        tools.compile_ptx(".version 8.0\n")


# ------------------------------------------------------------------ real SASS (ptxas + nvdisasm)
@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    d = tmp_path_factory.mktemp("xdg")
    mp.setenv("XDG_CACHE_HOME", str(d))
    yield d
    mp.undo()


@pytest.fixture(scope="module")
def kernels(tmp_path_factory, cache) -> dict[str, str]:
    """name -> PTX text: examples/sgemm_tiled.ptx and a kernelgen f16 mma kernel for the H200."""
    if not tools.tools_available():
        pytest.skip('ptxas/nvdisasm not found: pip install -e ".[sass]"')
    out = tmp_path_factory.mktemp("kg")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-m", "kernelgen", "compile", "--hw", "h200.yaml", "--gemm", "128x64x96",
                        "--dtype", "f16", "--variant", "mma", "-o", str(out)], capture_output=True, text=True,
                       cwd=ROOT, env=env, timeout=600)
    assert r.returncode == 0, r.stderr
    return {"sgemm_tiled": (ROOT / "examples" / "sgemm_tiled.ptx").read_text(),
            "mma": (out / "kernel.ptx").read_text()}


def _dest_regs(ins) -> set[str]:
    """Registers an LDS/LDSM writes: R12 for LDS, R12..R15 for LDS.128 or LDSM .4."""
    base = ins.operands[0].regs[0]
    if base == "RZ":
        return set()
    n = {"64": 2, "128": 4}.get(ins.modifiers[-1] if ins.modifiers else "", 1)
    if ins.opcode == "LDSM":
        n = int(ins.modifiers[-1])
    return {f"R{int(base[1:]) + i}" for i in range(n)}


@needs_tools
@pytest.mark.parametrize("name", ["sgemm_tiled", "mma"])
def test_listing_of_real_kernels(kernels, name):
    ptx = kernels[name]
    printed = tools.compile_ptx(ptx).disassembly
    ks = disassemble(ptx)
    assert len(ks) == 1
    k: SassKernel = next(iter(ks.values()))
    assert len(k.instructions) == len(re.findall(r"^\s*/\*[0-9a-f]+\*/", printed, re.M))
    n_lines = len(ptx.splitlines())
    for ins in k.instructions:
        assert ins.ptx_line is not None and 1 <= ins.ptx_line <= n_lines, ins.text
        assert all(op.kind != "other" for op in ins.operands), ins.text
        c = ins.control
        assert 0 <= c.stall <= 15
        assert c.write_barrier is None or 0 <= c.write_barrier <= 5
        assert c.read_barrier is None or 0 <= c.read_barrier <= 5
        assert c.encode() == control.control_code(ins.hi)
    for ins in k.instructions:
        if any(op.kind == "label" for op in ins.operands) and ins.opcode == "BRA":
            assert k.target(ins) is not None, ins.text


@needs_tools
@pytest.mark.parametrize("name, opcode", [("sgemm_tiled", "LDS"), ("mma", "LDSM")])
def test_shared_load_barrier_is_waited_on_before_use(kernels, name, opcode):
    """A shared load that sets a write barrier: the first later instruction that touches its destination
    registers comes at or after the first instruction waiting on that slot."""
    k = next(iter(disassemble(kernels[name]).values()))
    seq = k.instructions
    checked = 0
    for i, ins in enumerate(seq):
        if ins.opcode != opcode or ins.control.write_barrier is None:
            continue
        dst = _dest_regs(ins)
        use = next((j for j in range(i + 1, len(seq)) if dst & {r for op in seq[j].operands for r in op.regs}), None)
        if use is None:
            continue
        waiter = first_waiter(seq, i)
        assert waiter is not None and waiter <= use, (ins.text, seq[use].text)
        checked += 1
    assert checked >= 2


@needs_tools
@pytest.mark.parametrize("name", ["sgemm_tiled", "mma"])
def test_resources_not_above_declared_registers(kernels, name):
    ptx = kernels[name]
    hw = load_hw("h200")
    prog = parse_ptx(ptx, name)
    res = tools.resources(ptx)
    assert set(res) == set(prog.kernels)
    for kname, r in res.items():
        assert 0 < r.regs <= regs_per_thread(prog.kernels[kname], hw)
        assert r.spill_bytes == 0
        assert r.smem_static > 0


@needs_tools
def test_compile_is_cached(kernels, cache):
    ptx = kernels["sgemm_tiled"]
    tools.compile_ptx(ptx)
    entries = list((cache / "gemm-workbench" / "sass").glob("*.json"))
    assert entries
    before = {p: p.stat().st_mtime_ns for p in entries}
    tools.compile_ptx(ptx)
    assert {p: p.stat().st_mtime_ns for p in entries} == before


@needs_tools
def test_ptxas_error_names_the_ptx_line(cache):
    bad = ".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k()\n{\n  bogus.op %r1;\n}\n"
    with pytest.raises(PtxError) as e:
        tools.compile_ptx(bad, file="bad.ptx")
    assert e.value.file == "bad.ptx" and e.value.line == 6 and "ptxas" in e.value.message
