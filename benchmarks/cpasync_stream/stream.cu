// cp.async (LDGSTS) streaming on the H200: how fast one SM draws tiles from DRAM or the L2 as a function of
// the bytes it keeps in flight (the planner's cp.async pipelines: a K tile of `tile` bytes, `depth` tiles
// issued ahead, one CTA per SM). benchmarks/cpasync_stream/run.py drives it.
//   nvcc -arch=sm_90a -ptx stream.cu -o stream.ptx
//
// Each CTA (128 threads) walks `tiles` tiles. Tile kt is `tile / row_bytes` rows of `row_bytes` bytes, row r at
// src + cta * cta_off + kt * rows * pitch + r * pitch (pitch = row_bytes: one contiguous run per tile; row_bytes
// 128 and pitch 14336 with cta_off 128: the B operand of a 64 x 7168 GEMM walked by 112 CTAs of 64 columns).
// With window > 0 tile kt reads tile (kt % window)'s addresses (an L2-resident set after the first pass).
// Pipeline as kernelgen's mma variant: tiles 0..depth-1 issued, then per tile kt: wait until tile kt has landed
// (cp.async.wait_group depth-1), barrier, issue tile kt + depth into the stage tile kt - 1 used, spin `work`
// cycles (the compute), sum one word. times[cta * 4 + ...] = clock64 at the start, after the prologue issue,
// at the loop end; %globaltimer at the start and end (ns).
#include <cstdint>

__device__ __forceinline__ void cp16(uint32_t dst, const void* src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(dst), "l"(src));
}

__device__ __forceinline__ long long gtimer() {
    long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

template <int D>
__device__ void stream_body(const char* __restrict__ src, long long cta_off, int row_bytes, long long pitch,
                            int tile, int tiles, int window, int work, long long* __restrict__ times,
                            float* __restrict__ sink) {
    extern __shared__ __align__(16) char smem[];
    const int tid = threadIdx.x;
    const int chunks = tile / 16;
    const int shift = __ffs(row_bytes / 16) - 1;  // row_bytes / 16 is a power of two
    const int mask = row_bytes / 16 - 1;
    const int rows = tile / row_bytes;
    const char* base = src + (long long)blockIdx.x * cta_off;
    const uint32_t s0 = (uint32_t)__cvta_generic_to_shared(smem);
    float acc = 0.f;
    long long g0 = gtimer();
    long long c0 = clock64();
    auto issue = [&](int kt) {
        if (kt < tiles) {
            const int src_kt = window > 0 ? kt % window : kt;
            const char* tb = base + (long long)src_kt * rows * pitch;
            const uint32_t sb = s0 + (uint32_t)((kt % (D + 1)) * tile);
#pragma unroll 4
            for (int e = tid; e < chunks; e += blockDim.x) {
                const int r = e >> shift, c = e & mask;
                cp16(sb + (uint32_t)(e * 16), tb + (long long)r * pitch + c * 16);
            }
        }
        asm volatile("cp.async.commit_group;\n" ::);
    };
    for (int i = 0; i < D; ++i) issue(i);
    long long c1 = clock64();
    for (int kt = 0; kt < tiles; ++kt) {
        asm volatile("cp.async.wait_group %0;\n" :: "n"(D - 1) : "memory");
        __syncthreads();
        issue(kt + D);
        if (work > 0) {
            long long w0 = clock64();
            while (clock64() - w0 < work) {
            }
        }
        acc += reinterpret_cast<const float*>(smem + (kt % (D + 1)) * tile)[tid];
    }
    asm volatile("cp.async.wait_group 0;\n" ::: "memory");
    __syncthreads();
    long long c2 = clock64();
    long long g1 = gtimer();
    if (tid == 0) {
        long long* t = times + (long long)blockIdx.x * 5;
        t[0] = c0; t[1] = c1; t[2] = c2; t[3] = g0; t[4] = g1;
    }
    sink[blockIdx.x * blockDim.x + tid] = acc;
}

#define STREAM(D)                                                                                              \
    extern "C" __global__ void __launch_bounds__(128, 1) stream_d##D(                                          \
        const char* __restrict__ src, long long cta_off, int row_bytes, long long pitch, int tile, int tiles,   \
        int window, int work, long long* __restrict__ times, float* __restrict__ sink) {                        \
        stream_body<D>(src, cta_off, row_bytes, pitch, tile, tiles, window, work, times, sink);               \
    }

STREAM(1)
STREAM(2)
STREAM(3)
STREAM(4)
STREAM(6)
STREAM(8)
