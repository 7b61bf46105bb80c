// Device side of benchmarks/sass_probe/micro.py (issue 11, session 9: the four microbenchmarks of the silicon
// suite SASS mode leaves outside 10%; built with nvcc -cubin -arch=sm_90a -O2, loaded by micro_host.cu):
//   bar_only   W warps, 256 x bar.sync 0 and nothing else: barrier cost vs warps per CTA
//   bar_skew   W warps, 32 rounds of clock, bar.sync, clock: when each warp leaves a barrier after the last arrives
//   bar_loop   the suite's bar_loop (benchmarks/silicon/micro/sync.cu) with a clock at entry and exit per warp,
//              at W warps and two trip counts: the loop's cost per trip by difference
//   lds_rate   W warps, 16 independent volatile ld.shared.u32 with immediate offsets per trip, FADD-accumulated;
//              stride 1 word (conflict-free) and 2 words (2-way): shared loads per cycle per SM vs warps
//   pipe_add_* 8 chains alternating add.u32 (ptxas: VIADD or IADD3) with lop3 (ALU) or fma.f32: is VIADD on the ALU?
//   stream     float4 streaming read, 4 CTAs of 256 per SM, U loads in flight per thread: DRAM bytes per cycle
#include <cstdint>

__device__ __forceinline__ long long clk() {
    long long t;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(t) :: "memory");
    return t;
}

__device__ __forceinline__ void stamp(long long* T, int k, int n, long long t) {
    if ((threadIdx.x & 31) == 0) T[((long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32) * n + k] = t;
}

extern "C" __global__ void bar_only(int iters, long long* T) {
    __syncthreads();
    const long long t0 = clk();
    for (int i = 0; i < iters; ++i) asm volatile("bar.sync 0;" ::: "memory");
    const long long t1 = clk();
    stamp(T, 0, 2, t0);
    stamp(T, 1, 2, t1);
}

constexpr int SKEW_ROUNDS = 32;

// T[(warp) * 64 + 2 r + {0, 1}]: clock before and after the r-th barrier
extern "C" __global__ void bar_skew(long long* T) {
    __syncthreads();
    for (int r = 0; r < SKEW_ROUNDS; ++r) {
        const long long a = clk();
        asm volatile("bar.sync 0;" ::: "memory");
        const long long b = clk();
        stamp(T, 2 * r, 2 * SKEW_ROUNDS, a);
        stamp(T, 2 * r + 1, 2 * SKEW_ROUNDS, b);
    }
}

// the suite's bar_loop with a clock at entry and exit
extern "C" __global__ void bar_loop(const float* in, float* out, int iters, long long* T) {
    const long long t0 = clk();
    __shared__ float s[1024];
    int t = threadIdx.x;
    unsigned n1 = blockDim.x - 1;
    s[t] = in[t];
    __syncthreads();
    float acc = 0.f;
    for (int k = 0; k < iters; ++k) {
        acc += s[(t + k) & n1];
        __syncthreads();
    }
    out[blockIdx.x * blockDim.x + t] = acc;
    const long long t1 = clk();
    stamp(T, 0, 2, t0);
    stamp(T, 1, 2, t1);
}

#define LDV(r, off) asm volatile("ld.volatile.shared.f32 %0, [%1+" #off "];" : "=f"(r) : "r"(base))

// STRIDE words between lanes (1: conflict-free, 2: 2-way); 16 loads of distinct 128-word blocks per trip
template <int STRIDE>
__device__ void lds_body(float* out, int iters, long long* T) {
    __shared__ float s[4096 * STRIDE];
    for (int i = threadIdx.x; i < 4096 * STRIDE; i += blockDim.x) s[i] = (float)i;
    __syncthreads();
    const unsigned base = (unsigned)__cvta_generic_to_shared(s) + 4u * STRIDE * (threadIdx.x & 31);
    float a[16] = {};
    const long long t0 = clk();
    for (int k = 0; k < iters; ++k) {
        float v0, v1, v2, v3, v4, v5, v6, v7, v8, v9, v10, v11, v12, v13, v14, v15;
        LDV(v0, 0); LDV(v1, 512); LDV(v2, 1024); LDV(v3, 1536); LDV(v4, 2048); LDV(v5, 2560); LDV(v6, 3072);
        LDV(v7, 3584); LDV(v8, 4096); LDV(v9, 4608); LDV(v10, 5120); LDV(v11, 5632); LDV(v12, 6144);
        LDV(v13, 6656); LDV(v14, 7168); LDV(v15, 7680);
        a[0] += v0; a[1] += v1; a[2] += v2; a[3] += v3; a[4] += v4; a[5] += v5; a[6] += v6; a[7] += v7;
        a[8] += v8; a[9] += v9; a[10] += v10; a[11] += v11; a[12] += v12; a[13] += v13; a[14] += v14; a[15] += v15;
    }
    const long long t1 = clk();
    float r = 0.f;
    for (int i = 0; i < 16; ++i) r += a[i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = r;
    stamp(T, 0, 2, t0);
    stamp(T, 1, 2, t1);
}

extern "C" __global__ void lds_rate(float* out, int iters, long long* T) { lds_body<1>(out, iters, T); }
extern "C" __global__ void lds_rate_c2(float* out, int iters, long long* T) { lds_body<2>(out, iters, T); }

#define ADD(x) asm volatile("add.u32 %0, %0, 0x1235;" : "+r"(x))
#define LOP(x) asm volatile("lop3.b32 %0, %0, %1, %2, 0x96;" : "+r"(x) : "r"(a), "r"(b))
#define FMA(x) asm volatile("{ .reg .f32 f; mov.b32 f, %0; fma.rn.f32 f, f, %1, %2; mov.b32 %0, f; }" : "+r"(x) : "f"(fa), "f"(fb))

// kind 0: every chain alternates ADD and LOP3; kind 1: ADD and FFMA; kind 2: LOP3 only (the ALU alone)
template <int KIND>
__device__ __forceinline__ void astep(unsigned& x0, unsigned& x1, unsigned& x2, unsigned& x3, unsigned& x4,
                                      unsigned& x5, unsigned& x6, unsigned& x7, unsigned a, unsigned b,
                                      float fa, float fb) {
    if (KIND == 0) { ADD(x0); LOP(x1); ADD(x2); LOP(x3); ADD(x4); LOP(x5); ADD(x6); LOP(x7);
                     LOP(x0); ADD(x1); LOP(x2); ADD(x3); LOP(x4); ADD(x5); LOP(x6); ADD(x7); }
    if (KIND == 1) { ADD(x0); FMA(x1); ADD(x2); FMA(x3); ADD(x4); FMA(x5); ADD(x6); FMA(x7);
                     FMA(x0); ADD(x1); FMA(x2); ADD(x3); FMA(x4); ADD(x5); FMA(x6); ADD(x7); }
    if (KIND == 2) { LOP(x0); LOP(x1); LOP(x2); LOP(x3); LOP(x4); LOP(x5); LOP(x6); LOP(x7);
                     LOP(x0); LOP(x1); LOP(x2); LOP(x3); LOP(x4); LOP(x5); LOP(x6); LOP(x7); }
}

template <int KIND>
__device__ void add_body(const unsigned* in, unsigned* out, int trips, long long* T) {
    const unsigned a = in[0], b = in[1];
    const float fa = __uint_as_float(in[2]), fb = __uint_as_float(in[3]);
    unsigned x0 = threadIdx.x, x1 = x0 + 1, x2 = x0 + 2, x3 = x0 + 3, x4 = x0 + 4, x5 = x0 + 5, x6 = x0 + 6,
             x7 = x0 + 7;
    __syncthreads();
    const long long t0 = clk();
    for (int i = 0; i < trips; ++i) {
#pragma unroll
        for (int u = 0; u < 4; ++u) astep<KIND>(x0, x1, x2, x3, x4, x5, x6, x7, a, b, fa, fb);
    }
    const long long t1 = clk();
    out[blockIdx.x * blockDim.x + threadIdx.x] = x0 ^ x1 ^ x2 ^ x3 ^ x4 ^ x5 ^ x6 ^ x7;
    stamp(T, 0, 2, t0);
    stamp(T, 1, 2, t1);
}

extern "C" __global__ void pipe_add_lop(const unsigned* in, unsigned* out, int trips, long long* T) { add_body<0>(in, out, trips, T); }
extern "C" __global__ void pipe_add_ffma(const unsigned* in, unsigned* out, int trips, long long* T) { add_body<1>(in, out, trips, T); }
extern "C" __global__ void pipe_lop_only(const unsigned* in, unsigned* out, int trips, long long* T) { add_body<2>(in, out, trips, T); }

// each CTA reads `chunk` float4 per thread-slot; U loads in flight per thread per trip (U = 1, 2, 4, 8)
template <int U>
__device__ void stream_body(const float4* in, float* out, long long n4, long long* T) {
    const long long t0 = clk();
    const long long per = n4 / gridDim.x;  // float4 per CTA
    const float4* p = in + blockIdx.x * per + threadIdx.x;
    float acc = 0.f;
    for (long long i = 0; i + (long long)U * blockDim.x <= per; i += (long long)U * blockDim.x) {
        float4 v[U];
#pragma unroll
        for (int u = 0; u < U; ++u) v[u] = __ldcg(p + i + (long long)u * blockDim.x);
#pragma unroll
        for (int u = 0; u < U; ++u) acc += (v[u].x + v[u].y) + (v[u].z + v[u].w);
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;
    const long long t1 = clk();
    stamp(T, 0, 2, t0);
    stamp(T, 1, 2, t1);
}

extern "C" __global__ void stream_u1(const float4* in, float* out, long long n4, long long* T) { stream_body<1>(in, out, n4, T); }
extern "C" __global__ void stream_u2(const float4* in, float* out, long long n4, long long* T) { stream_body<2>(in, out, n4, T); }
extern "C" __global__ void stream_u4(const float4* in, float* out, long long n4, long long* T) { stream_body<4>(in, out, n4, T); }
extern "C" __global__ void stream_u8(const float4* in, float* out, long long n4, long long* T) { stream_body<8>(in, out, n4, T); }
