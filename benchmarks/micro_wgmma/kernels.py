"""wgmma microbenchmark PTX: one CTA, `warpgroups` x 128 threads, clock64-bracketed loop.

Each loop iteration is wgmma.fence, `group` back-to-back wgmma.mma_async into the same
accumulators, commit_group, wait_group 0. With group = 1 the iteration time is one wgmma's
latency (plus the loop's few instructions); with group = 8 it is eight wgmmas queued on the
tensor units, so cycles / (reps x group) is the issue-to-issue throughput. Operands are zeroed
K-major tiles in shared memory (no swizzle, LBO 128, SBO 256) or zero A registers (`rs`).

Output (u64 per thread): [0, threads) the thread's loop cycles (clock64 after - before),
[threads, 2 threads) its first accumulator's bits (keeps the results live).
"""

from __future__ import annotations

from dataclasses import dataclass

BYTES = {"f16": 2, "bf16": 2, "tf32": 4, "e4m3": 1, "e5m2": 1, "s8": 1}
SMEM = 32768
B_OFFSET = 16384


@dataclass(frozen=True)
class Case:
    name: str
    n: int
    atype: str
    group: int  # wgmmas per commit group (1: latency, 8: throughput)
    rs: bool = False  # A from registers
    warpgroups: int = 1

    @property
    def k(self) -> int:
        return 32 // BYTES[self.atype]

    @property
    def dtype(self) -> str:
        return "s32" if self.atype == "s8" else "f32"

    @property
    def threads(self) -> int:
        return 128 * self.warpgroups

    @property
    def macs_per_warp(self) -> int:
        return 16 * self.n * self.k


def cases() -> list[Case]:
    out = []
    for n in (8, 16, 32, 64, 128, 256):
        out.append(Case(f"lat_f16_n{n}", n, "f16", 1))
        out.append(Case(f"thr_f16_n{n}", n, "f16", 8))
    for at in ("bf16", "tf32", "e4m3", "s8"):
        for n in (64, 256):
            out.append(Case(f"lat_{at}_n{n}", n, at, 1))
            out.append(Case(f"thr_{at}_n{n}", n, at, 8))
    out.append(Case("lat_f16_n128_rs", 128, "f16", 1, rs=True))
    out.append(Case("thr_f16_n128_rs", 128, "f16", 8, rs=True))
    out.append(Case("thr_f16_n256_2wg", 256, "f16", 8, warpgroups=2))
    return out


def _desc(offset: int) -> str:
    """The 64-bit constant part of a no-swizzle K-major descriptor: LBO 128, SBO 256 (>> 4)."""
    return f"{(128 >> 4) << 16 | (256 >> 4) << 32 | (offset >> 4):#x}"


def ptx(c: Case) -> str:
    nacc = c.n // 2
    acc_t = "f32" if c.dtype == "f32" else "b32"
    accs = "{" + ", ".join(f"%acc{i}" for i in range(nacc)) + "}"
    zero = "0f00000000" if acc_t == "f32" else "0"
    init = "\n".join(f"    mov.{acc_t} %acc{i}, {zero};" for i in range(nacc))
    a_op = "{%a0, %a1, %a2, %a3}" if c.rs else "%rd3"
    shape = f"m64n{c.n}k{c.k}.{c.dtype}.{c.atype}.{c.atype}"
    if c.dtype == "s32":
        tail = ""
    elif BYTES[c.atype] == 2:
        tail = ", 1, 1, 0" if c.rs else ", 1, 1, 0, 0"
    else:
        tail = ", 1, 1"
    mma = f"    wgmma.mma_async.sync.aligned.{shape} {accs}, {a_op}, %rd4, %p1{tail};"
    body = "\n".join([mma] * c.group)
    return f""".version 8.4
.target sm_90a
.address_size 64

.visible .entry wgmma_{c.name}(.param .u64 out, .param .u32 reps)
{{
    .reg .pred %p<4>;
    .reg .b32 %r<16>;
    .reg .b32 %a<4>;
    .reg .b64 %rd<16>;
    .reg .{acc_t} %acc<{nacc}>;
    .shared .align 1024 .b8 smem[{SMEM}];
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd1, %rd1;
    ld.param.u32 %r1, [reps];
    mov.u32 %r0, %tid.x;
    mov.u32 %r2, smem;
    shr.u32 %r3, %r2, 4;
    cvt.u64.u32 %rd2, %r3;
    or.b64 %rd3, %rd2, {_desc(0)};
    add.s64 %rd4, %rd2, {_desc(B_OFFSET)};
    mov.b32 %a0, 0;
    mov.b32 %a1, 0;
    mov.b32 %a2, 0;
    mov.b32 %a3, 0;
{init}
    setp.ne.u32 %p1, %r1, 0;
    bar.sync 0;
    mov.u64 %rd5, %clock64;
    mov.u32 %r4, 0;
LOOP:
    wgmma.fence.sync.aligned;
{body}
    wgmma.commit_group.sync.aligned;
    wgmma.wait_group.sync.aligned 0;
    add.u32 %r4, %r4, 1;
    setp.lt.u32 %p2, %r4, %r1;
    @%p2 bra LOOP;
    mov.u64 %rd6, %clock64;
    sub.s64 %rd7, %rd6, %rd5;
    mul.wide.u32 %rd8, %r0, 8;
    add.s64 %rd9, %rd1, %rd8;
    st.global.u64 [%rd9], %rd7;
    mov.b32 %r5, %acc0;
    cvt.u64.u32 %rd10, %r5;
    st.global.u64 [%rd9+{8 * c.threads}], %rd10;
    ret;
}}
"""
