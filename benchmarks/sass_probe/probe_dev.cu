// Device side of benchmarks/sass_probe (issue 11, SASS-mode fidelity; built with nvcc -cubin -arch=sm_90a -O2
// and loaded afresh with cuModuleLoadData by probe_host.cu, as the silicon suite loads each kernel):
//   pipe_*     one CTA, 8 independent chains per thread, 64 trips of 8 x 8 dependent-chain steps: cycles per
//              warp instruction per sub-partition of IMAD (mad.lo.u32), LOP3 (lop3.b32), FFMA and their 1:1
//              mixes. If IMAD issues to the FMA-heavy half of the FP32 pipe (NVIDIA: "On GH100: FMAheavy pipe
//              handles IMAD, IDP, and FP32") and LOP3 to the ALU, imad_lop runs at one instruction a cycle and
//              imad / lop alone at one per two; if FFMA takes either FP32 half, ffma_imad also runs at one a cycle.
//   idc        the immediate-constant path at entry: clock, an operand c[0x0][0x0] (blockDim.x, the
//              driver's words), the same line again (gridDim.x), a parameter word 48 B past the parameters'
//              start (c[0x0][0x240]), then an LDC of a parameter word by a register index, each consumed
//              before the next clock (data dependences on the clock keep them after it); launch 1 of a freshly
//              loaded module vs launch 2: does the first constant line of a fresh launch cost ~170 cycles
//              (benchmarks/data/const_cold_2026-12-01.json, entry case: LDC c[0x0][RZ] 171 vs 69) on the
//              immediate path too?
//   ldc2       two independent LDCs of different parameter lines (256 B apart) issued back to back after the
//              clock, both consumed before the next clock, vs one: do constant misses overlap?
#include <cstdint>

__device__ __forceinline__ long long clk() {
    long long t;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(t) :: "memory");
    return t;
}

#define MAD(x) asm volatile("mad.lo.u32 %0, %0, %1, %2;" : "+r"(x) : "r"(a), "r"(b))
#define LOP(x) asm volatile("lop3.b32 %0, %0, %1, %2, 0x96;" : "+r"(x) : "r"(a), "r"(b))
#define FMA(x) asm volatile("fma.rn.f32 %0, %0, %1, %2;" : "+f"(x) : "f"(fa), "f"(fb))

// kind 0: 8 IMAD chains; 1: 8 LOP3; 2: 4 IMAD + 4 LOP3; 3: 8 FFMA; 4: 4 FFMA + 4 IMAD; 5: 4 FFMA + 4 LOP3
template <int KIND>
__device__ __forceinline__ void step(unsigned& x0, unsigned& x1, unsigned& x2, unsigned& x3, unsigned& x4,
                                     unsigned& x5, unsigned& x6, unsigned& x7, float& f0, float& f1, float& f2,
                                     float& f3, float& f4, float& f5, float& f6, float& f7, unsigned a, unsigned b,
                                     float fa, float fb) {
    if (KIND == 0) { MAD(x0); MAD(x1); MAD(x2); MAD(x3); MAD(x4); MAD(x5); MAD(x6); MAD(x7); }
    if (KIND == 1) { LOP(x0); LOP(x1); LOP(x2); LOP(x3); LOP(x4); LOP(x5); LOP(x6); LOP(x7); }
    if (KIND == 2) { MAD(x0); LOP(x1); MAD(x2); LOP(x3); MAD(x4); LOP(x5); MAD(x6); LOP(x7); }
    if (KIND == 3) { FMA(f0); FMA(f1); FMA(f2); FMA(f3); FMA(f4); FMA(f5); FMA(f6); FMA(f7); }
    if (KIND == 4) { FMA(f0); MAD(x1); FMA(f2); MAD(x3); FMA(f4); MAD(x5); FMA(f6); MAD(x7); }
    if (KIND == 5) { FMA(f0); LOP(x1); FMA(f2); LOP(x3); FMA(f4); LOP(x5); FMA(f6); LOP(x7); }
}

// T[warp * 2 + {0, 1}]: lane 0's clock before and after the loop; out: the chains (kept live)
template <int KIND>
__device__ void pipe_body(const unsigned* in, unsigned* out, int trips, long long* T) {
    const unsigned a = in[0], b = in[1];
    const float fa = __uint_as_float(in[2]), fb = __uint_as_float(in[3]);
    unsigned x0 = threadIdx.x, x1 = x0 + 1, x2 = x0 + 2, x3 = x0 + 3, x4 = x0 + 4, x5 = x0 + 5, x6 = x0 + 6,
             x7 = x0 + 7;
    float f0 = x0, f1 = x1, f2 = x2, f3 = x3, f4 = x4, f5 = x5, f6 = x6, f7 = x7;
    __syncthreads();
    const long long t0 = clk();
    for (int i = 0; i < trips; ++i) {
#pragma unroll
        for (int u = 0; u < 8; ++u)
            step<KIND>(x0, x1, x2, x3, x4, x5, x6, x7, f0, f1, f2, f3, f4, f5, f6, f7, a, b, fa, fb);
    }
    const long long t1 = clk();
    out[blockIdx.x * blockDim.x + threadIdx.x] = (x0 ^ x1 ^ x2 ^ x3 ^ x4 ^ x5 ^ x6 ^ x7) +
        __float_as_uint(f0 + f1 + f2 + f3 + f4 + f5 + f6 + f7);
    if ((threadIdx.x & 31) == 0) {
        T[(blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32) * 2] = t0;
        T[(blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32) * 2 + 1] = t1;
    }
}

extern "C" __global__ void pipe_imad(const unsigned* in, unsigned* out, int trips, long long* T) { pipe_body<0>(in, out, trips, T); }
extern "C" __global__ void pipe_lop(const unsigned* in, unsigned* out, int trips, long long* T) { pipe_body<1>(in, out, trips, T); }
extern "C" __global__ void pipe_imad_lop(const unsigned* in, unsigned* out, int trips, long long* T) { pipe_body<2>(in, out, trips, T); }
extern "C" __global__ void pipe_ffma(const unsigned* in, unsigned* out, int trips, long long* T) { pipe_body<3>(in, out, trips, T); }
extern "C" __global__ void pipe_ffma_imad(const unsigned* in, unsigned* out, int trips, long long* T) { pipe_body<4>(in, out, trips, T); }
extern "C" __global__ void pipe_ffma_lop(const unsigned* in, unsigned* out, int trips, long long* T) { pipe_body<5>(in, out, trips, T); }

struct Params { unsigned w[128]; };  // 512 B of parameters after the int(s) that come first (c[0x0][0x210..])

constexpr int IDC_N = 6;  // clocks per warp

// T[(cta * warps + warp) * IDC_N + k]: lane 0's clock at stage k
extern "C" __global__ void idc(int one, Params p, long long* T, unsigned* out) {
    __shared__ volatile unsigned s;
    const long long t0 = clk();
    const unsigned z = (unsigned)(t0 >> 62);  // 0 at run time, unknown to ptxas: orders the reads after t0
    unsigned v = z ^ blockDim.x;               // c[0x0][0x0] (line 0 of bank 0: the driver's words)
    s = v;
    const long long t1 = clk();
    v = (unsigned)(t1 >> 62) ^ gridDim.x ^ v;  // c[0x0][0xc]: the same line
    s = v;
    const long long t2 = clk();
    v = (unsigned)(t2 >> 62) ^ p.w[12] ^ v;    // word 12: c[0x0][0x214 + 48] (idc) past the parameters' first 32 B
    s = v;
    const long long t3 = clk();
    const unsigned k = ((unsigned)(t3 >> 62) | (v & 0x80000000u)) + (unsigned)one * 70u;
    v = p.w[k] ^ v;                             // LDC c[0x0][R+0x210], word 70: line 0x300
    s = v;
    const long long t4 = clk();
    const unsigned k2 = ((unsigned)(t4 >> 62) | (v & 0x80000000u)) + (unsigned)one * 71u;
    v = p.w[k2] ^ v;                            // LDC word 71: the same line (hit)
    s = v;
    const long long t5 = clk();
    if ((threadIdx.x & 31) == 0) {
        long long* o = T + ((long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32) * IDC_N;
        o[0] = t0; o[1] = t1; o[2] = t2; o[3] = t3; o[4] = t4; o[5] = t5;
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = v;
}

// T[(cta * warps + warp) * 2 + {0, 1}]: one (two = 0) or two (two = 1) LDCs by register index, 256 B apart
extern "C" __global__ void ldc2(int one, int two, Params p, long long* T, unsigned* out) {
    __shared__ volatile unsigned s;
    const long long t0 = clk();
    const unsigned z = (unsigned)(t0 >> 62);
    const unsigned i = z + (unsigned)one * 16u;  // word 16: c[0x0][0x250], line 0x240
    const unsigned j = z + (unsigned)one * 80u;  // word 80: c[0x0][0x350], line 0x340
    unsigned v = p.w[i];
    if (two) v ^= p.w[j];
    s = v;
    const long long t1 = clk();
    if ((threadIdx.x & 31) == 0) {
        T[((long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32) * 2] = t0;
        T[((long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32) * 2 + 1] = t1;
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = v;
}

// Store drain of fully coalesced global stores (docs/micro-store.md measured only the mma-epilogue pattern,
// 16-32 B per line): T[cta * 2 + {0, 1}] = thread 0's clock at a barrier before the first store and at one after
// the last; each warp stores `iters` times 128 B (f32, one line per warp store) or 512 B (float4, four lines)
extern "C" __global__ void st_f32(float* out, int iters, long long* T) {
    __syncthreads();
    const long long t0 = clk();
    float* p = out + (size_t)blockIdx.x * iters * blockDim.x + threadIdx.x;
    for (int i = 0; i < iters; ++i) p[(size_t)i * blockDim.x] = (float)i;
    __syncthreads();
    const long long t1 = clk();
    if (threadIdx.x == 0) { T[blockIdx.x * 2] = t0; T[blockIdx.x * 2 + 1] = t1; }
}

extern "C" __global__ void st_v4(float4* out, int iters, long long* T) {
    __syncthreads();
    const long long t0 = clk();
    float4* p = out + (size_t)blockIdx.x * iters * blockDim.x + threadIdx.x;
    for (int i = 0; i < iters; ++i) p[(size_t)i * blockDim.x] = make_float4(i, i, i, i);
    __syncthreads();
    const long long t1 = clk();
    if (threadIdx.x == 0) { T[blockIdx.x * 2] = t0; T[blockIdx.x * 2 + 1] = t1; }
}

// S2R latency (the simulator gives S2R the ALU's 4 cycles): T[(cta * warps + warp) * 4 + k], lane 0's clock
// around S2R SR_TID.X -> STS, S2R SR_LANEID -> IMAD -> STS, two S2R (TID.Y, TID.Z) -> IADD3 -> STS; ptxas keeps
// the asm volatile reads between the clock reads (checked with nvdisasm, ptxas 13.0)
extern "C" __global__ void s2r_lat(long long* T, unsigned* out) {
    __shared__ volatile unsigned s;
    const long long t0 = clk();
    unsigned v;
    asm volatile("mov.u32 %0, %%tid.x;" : "=r"(v) :: "memory");
    s = v;
    const long long t1 = clk();
    unsigned w;
    asm volatile("mov.u32 %0, %%laneid;" : "=r"(w) :: "memory");
    s = w + v;
    const long long t2 = clk();
    unsigned x, y;
    asm volatile("mov.u32 %0, %%tid.y;" : "=r"(x) :: "memory");
    asm volatile("mov.u32 %0, %%tid.z;" : "=r"(y) :: "memory");
    s = x + y + w;
    const long long t3 = clk();
    if ((v & 31) == 0) {
        long long* o = T + (blockIdx.x * (blockDim.x / 32) + v / 32) * 4;
        o[0] = t0; o[1] = t1; o[2] = t2; o[3] = t3;
    }
    out[blockIdx.x * blockDim.x + v] = x;
}
