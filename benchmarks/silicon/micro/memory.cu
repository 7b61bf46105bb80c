// Shared-memory and async-copy throughput / latency microbenchmarks (benchmarks/silicon/suite.py).
// Every loaded value is accumulated and stored: ptxas deletes loads whose results are unused.
// Launch: block (256,1,1), grid (G,1,1); out has G*256 entries; iters = loop trips.
#include <cuda_pipeline_primitives.h>

// 8 independent conflict-free ld.shared.f32 per trip (lane i reads word base+i).
extern "C" __global__ void lds_indep(const float* in, float* out, int iters)
{
    __shared__ float s[1024];
    int t = threadIdx.x;
    for (int i = t; i < 1024; i += blockDim.x) s[i] = in[i];
    __syncthreads();
    float a0 = 0.f, a1 = 0.f, a2 = 0.f, a3 = 0.f, a4 = 0.f, a5 = 0.f, a6 = 0.f, a7 = 0.f;
    for (int k = 0; k < iters; ++k) {
        int b = t + k;
        a0 += s[b & 1023];
        a1 += s[(b + 128) & 1023];
        a2 += s[(b + 256) & 1023];
        a3 += s[(b + 384) & 1023];
        a4 += s[(b + 512) & 1023];
        a5 += s[(b + 640) & 1023];
        a6 += s[(b + 768) & 1023];
        a7 += s[(b + 896) & 1023];
    }
    out[blockIdx.x * blockDim.x + t] = ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7));
}

// One dependent chain of ld.shared.u32: j = s[j], s[i] = (33 i + 1) mod 1024 (a full cycle;
// the lanes of a warp always hit distinct banks).
extern "C" __global__ void lds_dep(const float* in, unsigned* out, int iters)
{
    __shared__ unsigned s[1024];
    int t = threadIdx.x;
    for (int i = t; i < 1024; i += blockDim.x) s[i] = (33u * i + 1u) & 1023u;
    __syncthreads();
    unsigned j = t & 1023u;
    for (int k = 0; k < iters; ++k) j = s[j];
    out[blockIdx.x * blockDim.x + t] = j;
}

// One ldmatrix.x4 per trip (rows of 16 B, 8 consecutive rows per matrix: conflict free); the four
// registers are summed into one u32 accumulator. s holds in[0..2048) as 512 rows of 16 B.
extern "C" __global__ void ldsm_x4(const unsigned* in, unsigned* out, int iters)
{
    __shared__ __align__(16) unsigned s[2048];
    int t = threadIdx.x;
    unsigned lane = t & 31u;
    for (int i = t; i < 2048; i += blockDim.x) s[i] = in[i];
    __syncthreads();
    unsigned base = (unsigned)__cvta_generic_to_shared(s);
    unsigned acc = 0;
    for (int k = 0; k < iters; ++k) {
        unsigned row = (lane + 32u * k) & 511u;
        unsigned r0, r1, r2, r3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                     : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(base + row * 16u));
        acc += (r0 + r1) + (r2 + r3);
    }
    out[blockIdx.x * blockDim.x + t] = acc;
}

// Four 16-byte cp.async per thread per trip into four 4 KiB slots, commit, wait for all, then sum the
// thread's own 16 copied bytes. Source: in[((4k + j) * 1024 + 4 t) mod n] (n = 16384 floats, 64 KiB).
extern "C" __global__ void ldgsts_x4(const float* in, float* out, int iters)
{
    __shared__ __align__(16) float buf[4][1024];
    int t = threadIdx.x;
    float acc = 0.f;
    for (int k = 0; k < iters; ++k) {
#pragma unroll
        for (int j = 0; j < 4; ++j)
            __pipeline_memcpy_async(&buf[j][4 * t], in + (((4 * k + j) * 1024 + 4 * t) & 16383), 16);
        __pipeline_commit();
        __pipeline_wait_prior(0);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            float4 v = *reinterpret_cast<const float4*>(&buf[j][4 * t]);
            acc += (v.x + v.y) + (v.z + v.w);
        }
    }
    out[blockIdx.x * blockDim.x + t] = acc;
}

// Streaming read: CTA b sums its contiguous chunk in[b*per .. (b+1)*per) of float4 (per = n4 / G),
// four loads in flight per thread; each thread writes its partial sum.
extern "C" __global__ void stream_read(const float4* in, float* out, unsigned long long n4)
{
    unsigned long long per = n4 / gridDim.x;
    const float4* p = in + per * blockIdx.x;
    float a0 = 0.f, a1 = 0.f, a2 = 0.f, a3 = 0.f;
#pragma unroll 4
    for (unsigned long long i = threadIdx.x; i < per; i += blockDim.x) {
        float4 v = p[i];
        a0 += v.x; a1 += v.y; a2 += v.z; a3 += v.w;
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = (a0 + a1) + (a2 + a3);
}
