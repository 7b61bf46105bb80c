"""wgmma issue timing (benchmarks/tma_mech2.py): when does each wgmma.mma_async of a group return to its warp?

One CTA of `warpgroups` x 128 threads; each warpgroup, twice (the second pass is recorded): wgmma.fence, `group`
back-to-back m64nNk16 wgmmas (bf16, A and B from zeroed shared memory, no swizzle) alternating over `chains`
accumulator sets (a 128-row consumer tile runs two), a clock64 read after each, commit_group, wait_group 0, a
clock64. Thread 0 of each warpgroup writes its group + 2 values relative to the pass's start: out[wg * 64 + i].
If a wgmma's issue waits for the tensor unit (a queue of wgmmas per SM), the later reads step by the MACs."""

from __future__ import annotations

from dataclasses import dataclass

SMEM = 32768
B_OFFSET = 16384


@dataclass(frozen=True)
class Case:
    n: int
    group: int
    warpgroups: int
    chains: int = 1

    @property
    def name(self) -> str:
        return f"n{self.n}_g{self.group}_wg{self.warpgroups}_c{self.chains}"


def _desc(offset: int) -> str:
    return f"{(128 >> 4) << 16 | (256 >> 4) << 32 | (offset >> 4):#x}"


def ptx(c: Case) -> str:
    nacc = c.n // 2
    accs = [("{" + ", ".join(f"%acc{k}_{i}" for i in range(nacc)) + "}") for k in range(c.chains)]
    init = "\n".join(f"    mov.f32 %acc{k}_{i}, 0f00000000;" for k in range(c.chains) for i in range(nacc))
    body = []
    for j in range(c.group):
        body.append(f"    wgmma.mma_async.sync.aligned.m64n{c.n}k16.f32.bf16.bf16 {accs[j % c.chains]}, %rd3, %rd4, "
                    "%p1, 1, 1, 0, 0;")
        body.append(f"    mov.u64 %t{j}, %clock64;")
    stores = "\n".join(f"    sub.s64 %rd10, %t{j}, %rd5;\n    st.global.u64 [%rd9+{8 * j}], %rd10;"
                       for j in range(c.group))
    regs = "\n".join(f"    .reg .f32 %acc{k}_<{nacc}>;" for k in range(c.chains))
    one = "\n".join(body)
    return f""".version 8.4
.target sm_90a
.address_size 64

.visible .entry wgmma_issue_{c.name}(.param .u64 out)
{{
    .reg .pred %p<4>;
    .reg .b32 %r<16>;
    .reg .b64 %rd<16>;
    .reg .b64 %t<{c.group + 2}>;
{regs}
    .shared .align 1024 .b8 smem[{SMEM}];
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r0, %tid.x;
    mov.u32 %r2, smem;
    shr.u32 %r3, %r2, 4;
    cvt.u64.u32 %rd2, %r3;
    or.b64 %rd3, %rd2, {_desc(0)};
    add.s64 %rd4, %rd2, {_desc(B_OFFSET)};
{init}
    setp.ne.u32 %p1, %r0, 4096;
    mov.u32 %r4, 0;
PASS:
    bar.sync 0;
    mov.u64 %rd5, %clock64;
    wgmma.fence.sync.aligned;
{one}
    wgmma.commit_group.sync.aligned;
    wgmma.wait_group.sync.aligned 0;
    mov.u64 %rd6, %clock64;
    add.u32 %r4, %r4, 1;
    setp.lt.u32 %p2, %r4, 2;
    @%p2 bra PASS;
    and.b32 %r5, %r0, 127;
    setp.ne.u32 %p3, %r5, 0;
    @%p3 bra DONE;
    shr.u32 %r6, %r0, 7;
    mul.wide.u32 %rd8, %r6, 512;
    add.s64 %rd9, %rd1, %rd8;
{stores}
    sub.s64 %rd10, %rd6, %rd5;
    st.global.u64 [%rd9+{8 * c.group}], %rd10;
    mov.b32 %r7, %acc0_0;
    cvt.u64.u32 %rd11, %r7;
    st.global.u64 [%rd9+{8 * c.group + 8}], %rd11;
DONE:
    ret;
}}
"""
