// Tile arrival time on the H200: how long a CTA waits for a batch of cp.async copies, as a function of
// the batch's bytes, from the L2 (warm, re-read window) or from DRAM (fresh lines), with one CTA on the
// GPU (unloaded) or one CTA on every SM (loaded). benchmarks/micro_fill/run.py drives it.
//   nvcc -arch=sm_90a -ptx fill.cu -o fill.ptx
#include <cstdint>

__device__ __forceinline__ void cp16(uint32_t dst, const void* src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(dst), "l"(src));
}

// Each CTA copies `batch` bytes (128 threads x `per_thread` 16-byte chunks) `iters` times into shared
// memory, waiting for each batch; times[cta * iters + i] = clock64 cycles from the first issue to the
// end of the wait (thread 0's view, after a barrier so that every thread's copies have landed).
// window: bytes each CTA cycles through (a window <= its L2 share keeps it L2-resident after the first
// pass; a window of iters x batch reads fresh lines every time).
extern "C" __global__ void fill(const char* __restrict__ src, long long window, int per_thread, int iters,
                                long long* __restrict__ times, float* __restrict__ sink) {
    extern __shared__ __align__(16) char smem[];
    const int tid = threadIdx.x;
    const long long batch = (long long)per_thread * blockDim.x * 16;
    const char* base = src + (long long)blockIdx.x * window;
    const uint32_t s0 = (uint32_t)__cvta_generic_to_shared(smem);
    long long off = 0;
    float acc = 0.f;
    for (int i = 0; i < iters; ++i) {
        __syncthreads();
        long long t0 = clock64();
        for (int j = 0; j < per_thread; ++j) {
            long long o = (long long)(j * blockDim.x + tid) * 16;
            cp16(s0 + (uint32_t)o, base + off + o);
        }
        asm volatile("cp.async.commit_group;\n" ::);
        asm volatile("cp.async.wait_group 0;\n" ::: "memory");
        __syncthreads();
        long long t1 = clock64();
        if (tid == 0) times[(long long)blockIdx.x * iters + i] = t1 - t0;
        acc += reinterpret_cast<const float*>(smem)[tid];
        off += batch;
        if (off + batch > window) off = 0;
    }
    sink[blockIdx.x * blockDim.x + tid] = acc;
}
