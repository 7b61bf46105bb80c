"""What Triton 3.x and nvcc 13 write around the instructions: debug sections, .file/.loc source
positions, dynamic shared buffers, entry directives, pointer parameter attributes, scoped names."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from sim.errors import ExecutionError, PtxError, UsageError
from sim.functional.runner import run_functional
from sim.launch import Arg, Launch
from sim.ptx.parser import parse_ptx
from tests.simhelp import HEADER

TRITONISH = HEADER + """
	// .globl	k          // -- Begin function k
.extern .shared .align 16 .b8 global_smem[];
.visible .entry k(
	.param .u32 k_param_0,
	.param .u64 .ptr .global .align 1 k_param_1,
	.param .u64 .ptr .global .align 1 k_param_2
)
.reqntid 64
{
	.reg .pred 	%p<3>;
	.reg .b32 	%r<20>;
	.reg .b64 	%rd<8>;
	.loc	1 39 0                          // make.py:39:0
$L__func_begin0:
	ld.param.b32 	%r1, [k_param_0];
	ld.param.b64 	%rd1, [k_param_1];
	ld.param.b64 	%rd2, [k_param_2];
$L__tmp0:
	.loc	1 40 24
	mov.u32 	%r2, %tid.x;
	mov.u32 	%r3, %reserved_smem_offset_begin;
	mov.b32 	%r4, global_smem;
	shl.b32 	%r5, %r2, 2;
	add.s32 	%r6, %r4, %r5;
	add.s32 	%r6, %r6, %r3;
	st.shared.b32 	[%r6], %r2;
	bar.sync 	0;
	xor.b32 	%r7, %r5, 4;
	add.s32 	%r8, %r4, %r7;
	// begin inline asm
	{
	.reg .pred %p<2>;
	.reg .b32 t;
	setp.ne.u32 %p1, %r1, 0;
	@%p1 ld.shared.b32 t, [ %r8 + 0 ];
	mov.u32 %r9, t;
	}
	// end inline asm
	.loc	1 41 7
	mul.wide.u32 	%rd3, %r2, 4;
	add.s64 	%rd4, %rd1, %rd3;
	st.global.b32 	[%rd4], %r9;
	ret;
$L__func_end0:
}
	.file	1 "/somewhere/make.py"
	.section	.debug_abbrev
	{
.b8 1
.b8 17
	}
	.section	.debug_info
	{
.b32 104
.b64 $L__func_begin0
	}
	.section	.debug_macinfo	{	}
"""


def _line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def _launch(block: int = 64, shared: int = 256) -> Launch:
    out = np.full(block, 0xFFFFFFFF, dtype=np.uint32)
    scratch = np.zeros(4, dtype=np.uint8)
    return Launch("k", (1, 1, 1), (block, 1, 1),
                  [Arg("scalar", "u32", value=1), Arg("buffer", "u32", array=out),
                   Arg("buffer", "u8", array=scratch)], shared)


def test_triton_shaped_module_runs():
    prog = parse_ptx(TRITONISH, "t.ptx")
    k = prog.kernel("k")
    assert k.directives["reqntid"] == [64]
    assert [p.offset for p in k.params] == [0, 8, 16]  # .ptr .align 1 is the pointee's alignment
    assert k.body[3].src == ("/somewhere/make.py", 40)
    out = run_functional(prog, _launch()).outputs[1]
    assert np.array_equal(out, np.arange(64, dtype=np.uint32) ^ 1)  # neighbour's value via shared


def test_scoped_names_do_not_clash():
    k = parse_ptx(TRITONISH, "t.ptx").kernel("k")
    inner = [n for n in k.regs if n.startswith("%p1") or n.startswith("t")]
    assert "%p1" in k.regs and len(inner) == 3  # outer %p1, inner %p1, inner t


def test_error_names_source_line():
    bad = TRITONISH.replace("st.global.b32 	[%rd4], %r9;", "st.global.b32 	[%rd4+1048576000], %r9;")
    with pytest.raises(ExecutionError) as e:
        run_functional(parse_ptx(bad, "t.ptx"), _launch())
    msg = e.value.one_line()
    assert msg.startswith(f"t.ptx:{_line_of(bad, '[%rd4+')}:") and msg.endswith("(source make.py:41)")


def test_unsupported_instruction_names_source_line():
    bad = TRITONISH.replace("	ret;", "	foo.bar 	%r1;")
    line = _line_of(bad, "foo.bar")
    with pytest.raises(PtxError, match=rf"t\.ptx:{line}: .*foo\.bar.*\(source make\.py:41\)"):
        parse_ptx(bad, "t.ptx")


@pytest.mark.parametrize("directive, block, ok", [
    (".reqntid 64", 64, True), (".reqntid 64", 32, False), (".reqntid 32, 2", 64, False),
    (".maxntid 64", 64, True), (".maxntid 64, 1, 1", 96, False), (".maxntid 32", 64, False),
])
def test_block_directives(directive, block, ok):
    prog = parse_ptx(TRITONISH.replace(".reqntid 64", directive), "t.ptx")
    if ok:
        run_functional(prog, _launch(block))
        return
    with pytest.raises(UsageError, match=r"t\.ptx:\d+: kernel k declares \.(reqntid|maxntid)"):
        run_functional(prog, _launch(block))


def test_reqntid_violation_is_one_line_exit_2(tmp_path):
    f = tmp_path / "t.ptx"
    f.write_text(TRITONISH)
    r = subprocess.run([sys.executable, "-m", "sim", "run", str(f), "--hw", "h200", "--functional",
                        "--grid", "1", "--block", "32", "--arg", "1", "--arg", "zeros:u32:64",
                        "--arg", "zeros:u8:4"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "--block 64,1,1" in r.stderr


def test_dynamic_shared_comes_from_the_launch():
    prog = parse_ptx(TRITONISH, "t.ptx")
    with pytest.raises(ExecutionError, match="shared"):
        run_functional(prog, _launch(shared=64))  # 64 threads x 4 bytes do not fit 64 bytes
