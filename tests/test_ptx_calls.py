"""`call` to a module's .func (inlined by the parser; results through .param), `call.uni`, and the
`__assertfail` extern that nvcc emits for assert(): it stops the run naming message, thread, line."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from sim.errors import ExecutionError, PtxError
from sim.functional.runner import run_functional
from sim.launch import Arg, Launch
from sim.ptx.parser import parse_ptx
from tests.simhelp import HEADER

# nvcc 12/13 shapes: a .func with a result, called twice (one call inside a divergent branch); a
# .func that calls another; the assert() call sequence.
CALLS = HEADER + """
.global .align 1 .b8 $str[12] = {120, 32, 60, 32, 49, 48, 48, 48, 48, 48, 48, 0};
.global .align 1 .b8 $str$1[7] = {107, 46, 99, 117, 0, 0, 0};
.global .align 1 .b8 __unnamed_1[2] = {107, 0};
.extern .func __assertfail
(
	.param .b64 __assertfail_param_0,
	.param .b64 __assertfail_param_1,
	.param .b32 __assertfail_param_2,
	.param .b64 __assertfail_param_3,
	.param .b64 __assertfail_param_4
)
.noreturn;
.func  (.param .b32 func_retval0) twice(
	.param .b32 twice_param_0
)
{
	.reg .b32 	%r<3>;
	ld.param.b32 	%r1, [twice_param_0];
	shl.b32 	%r2, %r1, 1;
	st.param.b32 	[func_retval0], %r2;
	ret;
}
.func  (.param .b32 func_retval0) twice_plus(
	.param .b32 twice_plus_param_0,
	.param .b32 twice_plus_param_1
)
{
	.reg .pred 	%p<2>;
	.reg .b32 	%r<6>;
	ld.param.b32 	%r1, [twice_plus_param_0];
	ld.param.b32 	%r2, [twice_plus_param_1];
	setp.eq.s32 	%p1, %r2, 0;
	@%p1 bra 	$L__BB0_2;
	{ // callseq 1, 0
	.param .b32 param0;
	st.param.b32 	[param0], %r1;
	.param .b32 retval0;
	call.uni (retval0), twice, (param0);
	ld.param.b32 	%r3, [retval0];
	} // callseq 1
	add.s32 	%r4, %r3, %r2;
	st.param.b32 	[func_retval0], %r4;
	ret;
$L__BB0_2:
	st.param.b32 	[func_retval0], %r1;
	ret;
}
.visible .entry k(
	.param .u64 k_param_0,
	.param .u32 k_param_1
)
{
	.reg .pred 	%p<3>;
	.reg .b32 	%r<10>;
	.reg .b64 	%rd<10>;
	ld.param.u64 	%rd1, [k_param_0];
	ld.param.u32 	%r9, [k_param_1];
	mov.u32 	%r1, %tid.x;
	setp.lt.u32 	%p1, %r1, %r9;
	@%p1 bra 	$L__BB2_2;
	mov.u64 	%rd2, $str;
	cvta.global.u64 	%rd3, %rd2;
	mov.u64 	%rd4, $str$1;
	cvta.global.u64 	%rd5, %rd4;
	mov.u64 	%rd6, __unnamed_1;
	cvta.global.u64 	%rd7, %rd6;
	{ // callseq 0, 0
	.param .b64 param0;
	st.param.b64 	[param0], %rd3;
	.param .b64 param1;
	st.param.b64 	[param1], %rd5;
	.param .b32 param2;
	st.param.b32 	[param2], 7;
	.param .b64 param3;
	st.param.b64 	[param3], %rd7;
	.param .b64 param4;
	st.param.b64 	[param4], 1;
	call.uni
	__assertfail,
	(
	param0,
	param1,
	param2,
	param3,
	param4
	);
	} // callseq 0
	trap;
$L__BB2_2:
	and.b32 	%r2, %r1, 3;
	{ // callseq 2, 0
	.param .b32 param0;
	st.param.b32 	[param0], %r1;
	.param .b32 param1;
	st.param.b32 	[param1], %r2;
	.param .b32 retval0;
	call.uni (retval0), twice_plus, (param0, param1);
	ld.param.b32 	%r3, [retval0];
	} // callseq 2
	mul.wide.u32 	%rd8, %r1, 4;
	add.s64 	%rd9, %rd1, %rd8;
	st.global.u32 	[%rd9], %r3;
	ret;
}
"""


def _run(limit: int, ptx: str = CALLS) -> np.ndarray:
    out = np.full(64, 0xFFFFFFFF, dtype=np.uint32)
    launch = Launch("k", (1, 1, 1), (64, 1, 1), [Arg("buffer", "u32", array=out), Arg("scalar", "u32", value=limit)])
    return run_functional(parse_ptx(ptx, "calls.ptx"), launch).outputs[0]


def test_func_calls_with_results_and_nesting():
    t = np.arange(64, dtype=np.uint32)
    want = np.where(t % 4 == 0, t, 2 * t + t % 4)
    assert np.array_equal(_run(64), want)


def test_call_sequences_param_names_are_scoped():
    k = parse_ptx(CALLS, "calls.ptx").kernel("k")
    params = [v for v in k.variables if v.startswith("param0")]
    assert len(params) >= 3 and all(k.variables[v].space == "local" for v in params)


def test_assertfail_stops_with_message_thread_and_line():
    line = next(i for i, s in enumerate(CALLS.splitlines(), 1) if s.strip() == "call.uni")
    with pytest.raises(ExecutionError) as e:
        _run(40)
    msg = e.value.one_line()
    assert msg.startswith(f"calls.ptx:{line}: assertion failed: 'x < 1000000' (k.cu:7 in k) in thread (40, 0, 0)")


def test_assertfail_cli_one_line_exit_2(tmp_path):
    f = tmp_path / "calls.ptx"
    f.write_text(CALLS)
    r = subprocess.run([sys.executable, "-m", "sim", "run", str(f), "--hw", "h200", "--grid", "1", "--block", "64",
                        "--arg", "zeros:u32:64", "--arg", "63"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "assertion failed: 'x < 1000000'" in r.stderr and "thread (63, 0, 0)" in r.stderr


def test_call_to_unknown_extern_is_error_at_its_line():
    bad = CALLS.replace("call.uni (retval0), twice_plus,", "call.uni (retval0), cosh_impl,")
    line = next(i for i, s in enumerate(bad.splitlines(), 1) if "cosh_impl" in s)
    with pytest.raises(PtxError, match=rf"calls\.ptx:{line}: call to 'cosh_impl', which is not a \.func"):
        parse_ptx(bad, "calls.ptx")


def test_recursion_is_error():
    bad = CALLS.replace("call.uni (retval0), twice, (param0);", "call.uni (retval0), twice_plus, (param0, param0);")
    with pytest.raises(PtxError, match="recursive call to 'twice_plus'"):
        parse_ptx(bad, "calls.ptx")
