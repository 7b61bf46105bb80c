"""Live ranges over PTX (sim/liveness.py): the peak count in 32-bit registers, where it peaks, guarded
writes that do not end a range, and the kernelgen kernels' peak against what ptxas allocates."""

import shutil
import subprocess

import pytest

from sim.liveness import liveness
from sim.ptx.parser import parse_ptx

PTX = """
.version 8.7
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 out, .param .u32 n)
{
    .reg .pred %p<2>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<3>;
    ld.param.u64 %rd0, [out];
    ld.param.u32 %r0, [n];
    mov.u32 %r1, 0;
    mov.u32 %r2, 0;
$L_loop:
    add.u32 %r3, %r1, %r2;
    mul.lo.u32 %r4, %r3, 3;
    add.u32 %r2, %r2, %r4;
    add.u32 %r1, %r1, 1;
    setp.lt.u32 %p0, %r1, %r0;
    @%p0 bra $L_loop;
    mov.u32 %r5, 7;
    @%p0 mov.u32 %r5, 9;
    add.u32 %r6, %r5, %r2;
    cvta.to.global.u64 %rd1, %rd0;
    st.global.u32 [%rd1], %r6;
    ret;
}
"""


def test_peak_inside_the_loop_counts_64_bit_registers_twice():
    k = parse_ptx(PTX, "t.ptx").kernels["k"]
    live = liveness(k)
    # in the loop: %rd0 (2) + %r0, %r1, %r2 (3) + the temporary %r3 or %r4 (1) = 6
    assert live.peak == 6
    assert live.peak_loop == "$L_loop"
    assert k.body[live.peak_index].line == live.peak_line
    # before the guarded mov: %r5 stays live through it (threads whose guard is false keep 7)
    i = next(j for j, ins in enumerate(k.body) if ins.guard and ins.opcode == "mov")
    assert live.live[i] == live.live[i + 1]


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not on the PATH")
@pytest.mark.parametrize(("shape", "variant"), [("256x256x256", "mma"), ("100x60x70", "simt")])
def test_kernelgen_peak_is_near_ptxas(tmp_path, shape, variant):
    from kernelgen.cli import main

    assert main(["compile", "--hw", "h200", "--gemm", shape, "--variant", variant, "-o", str(tmp_path)]) == 0
    text = (tmp_path / "kernel.ptx").read_text()
    live = liveness(next(iter(parse_ptx(text, "k.ptx").kernels.values())))
    r = subprocess.run(["ptxas", "-arch=sm_90a", "-v", str(tmp_path / "kernel.ptx"), "-o", str(tmp_path / "k.cubin")],
                       capture_output=True, text=True, check=True)
    used = int(r.stderr.split("Used ")[1].split()[0])
    # ptxas may rematerialise or keep a few more (addresses, special registers); the peak is a lower bound
    # of what must fit, within 50% of the allocation either way on these kernels
    assert 0.5 * used <= live.peak <= 1.5 * used, (live.peak, used)
    assert f"at most **{live.peak}** 32-bit registers" in (tmp_path / "analysis.md").read_text()


def test_per_instruction_counts_equal_the_live_sets_summed():
    """liveness keeps the live set's widths as registers enter and leave it: each instruction's count and
    the predicates' peak equal the sums over its live set, on the example and two kernelgen kernels (a
    guarded write, 64-bit registers, the K loops of a SIMT and an mma kernel)."""
    from kernelgen.spec import shorthand
    from kernelgen.variants import get
    from sim.functional.cfg import EXIT, build_cfg
    from sim.liveness import _step_back, _width

    kernels = [parse_ptx(PTX, "t.ptx").kernels["k"]]
    spec = shorthand("100x60x70")
    for variant in ("simt", "mma"):
        t = get(variant).tilings(spec)[7]
        kernels.append(next(iter(parse_ptx(get(variant).emit(spec, t, {}), "k.ptx").kernels.values())))
    for k in kernels:
        got = liveness(k)
        cfg = build_cfg(k)
        live_in = [set() for _ in cfg.blocks]

        def out(b, live_in=live_in):
            return set().union(*(live_in[s] for s, _, _ in b.succ if s != EXIT)) if b.succ else set()

        changed = True
        while changed:
            changed = False
            for b in reversed(cfg.blocks):
                live = out(b)
                for i in range(b.end - 1, b.start - 1, -1):
                    _step_back(live, k.body[i])
                if live != live_in[b.index]:
                    live_in[b.index], changed = live, True
        per, preds = [0] * len(k.body), [0] * len(k.body)
        for b in cfg.blocks:
            live = out(b)
            for i in range(b.end - 1, b.start - 1, -1):
                _step_back(live, k.body[i])
                per[i] = sum(_width(k, r) for r in live)
                preds[i] = sum(1 for r in live if k.regs.get(r) == "pred")
        assert got.live == per and got.predicates_peak == max(preds)
