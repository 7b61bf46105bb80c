// Device side of benchmarks/silicon/dram/probe.py (issue 11, session 10: the device-wide DRAM model): DRAM
// streaming and the latency of a lone dependent load against the load every SM puts on the HBM.
// Built with nvcc -cubin -arch=sm_90a -O2 and loaded by dram_host.cu.
//   stream_uU   each CTA reads its own chunk of `per` float4 with ld.global.cg, U loads in flight per thread
//               per trip (U = 1, 2, 4; the silicon suite's stream_read_264m is of the U = 1 kind): per-CTA cycles
//               at grids of 1 .. 8 CTAs per SM, i.e. the loaded DRAM round trip against the bytes in flight
//   chase_uU    CTA 0's thread 0 walks a dependent chain of ld.global.cg through fresh DRAM lines and stamps the
//               clock after every step, while CTAs 1.. stream as stream_uU (none: the unloaded latency)
#include <cstdint>

__device__ __forceinline__ long long clk() {
    long long t;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(t) :: "memory");
    return t;
}

__device__ __forceinline__ void stamp(long long* T, int cta, int k, long long t) {
    if ((threadIdx.x & 31) == 0) T[((long long)cta * (blockDim.x / 32) + threadIdx.x / 32) * 2 + k] = t;
}

template <int U>
__device__ void stream_body(const float4* in, float* out, long long per, long long* T, int cta) {
    const long long t0 = clk();
    const float4* p = in + (long long)cta * per + threadIdx.x;
    float acc = 0.f;
    for (long long i = 0; i + (long long)U * blockDim.x <= per; i += (long long)U * blockDim.x) {
        float4 v[U];
#pragma unroll
        for (int u = 0; u < U; ++u) v[u] = __ldcg(p + i + (long long)u * blockDim.x);
#pragma unroll
        for (int u = 0; u < U; ++u) acc += (v[u].x + v[u].y) + (v[u].z + v[u].w);
    }
    out[(long long)cta * blockDim.x + threadIdx.x] = acc;
    const long long t1 = clk();
    stamp(T, cta, 0, t0);
    stamp(T, cta, 1, t1);
}

extern "C" __global__ void stream_u1(const float4* in, float* out, long long per, long long* T) { stream_body<1>(in, out, per, T, blockIdx.x); }
extern "C" __global__ void stream_u2(const float4* in, float* out, long long per, long long* T) { stream_body<2>(in, out, per, T, blockIdx.x); }
extern "C" __global__ void stream_u4(const float4* in, float* out, long long per, long long* T) { stream_body<4>(in, out, per, T, blockIdx.x); }

// chain: word offsets (chain[j] = the next j); C: steps + 1 clock stamps of the walk
template <int U>
__device__ void chase_body(const float4* in, float* out, long long per, long long* T, const unsigned* chain,
                           int steps, long long* C) {
    if (blockIdx.x > 0) {
        if (U > 0) stream_body<(U > 0 ? U : 1)>(in, out, per, T, blockIdx.x - 1);
        return;
    }
    if (threadIdx.x != 0) return;
    unsigned j = 0;
    C[0] = clk();
    for (int s = 0; s < steps; ++s) {
        j = __ldcg(chain + j);
        C[s + 1] = clk() + (j & 0x80000000u);  // the stamp waits for the load (j's top bit is never set)
    }
    out[0] = (float)j;
}

extern "C" __global__ void chase_u0(const float4* in, float* out, long long per, long long* T, const unsigned* chain, int steps, long long* C) { chase_body<0>(in, out, per, T, chain, steps, C); }
extern "C" __global__ void chase_u1(const float4* in, float* out, long long per, long long* T, const unsigned* chain, int steps, long long* C) { chase_body<1>(in, out, per, T, chain, steps, C); }
extern "C" __global__ void chase_u4(const float4* in, float* out, long long per, long long* T, const unsigned* chain, int steps, long long* C) { chase_body<4>(in, out, per, T, chain, steps, C); }

// L2 flush between launches: read a scratch buffer larger than the L2 (clean lines: no write-back follows)
extern "C" __global__ void flush(const float4* s, float* out, long long n4) {
    float acc = 0.f;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += (long long)gridDim.x * blockDim.x) {
        float4 v = __ldcg(s + i);
        acc += v.x + v.w;
    }
    if (acc == 12345.f) out[0] = acc;
}
