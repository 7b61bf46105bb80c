// How many bytes of global stores an H200 SM accepts before a warp's store issue waits for the drain
// (the store buffer the planner's epilogue model needs, kernelgen/models/schedule.py _drain).
// Every thread writes `n` float4 (16 B, coalesced: a warp store is 512 B = 4 lines) into its CTA's own
// slab of d. Recorded per CTA: each warp's clock64 right after its last store (no barrier: the warp's
// stores are accepted), the latest of them minus a common start after a barrier, and, when fence != 0,
// thread 0's clock after a barrier that follows a membar.gl in every thread (the stores performed).
//   nvcc -arch=sm_90a -ptx buffer.cu -o buffer.ptx
extern "C" __global__ void store_buffer(float4* __restrict__ d, int n, int fence, long long* __restrict__ times) {
    __shared__ long long ends[32];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
    float4* slab = d + (long long)blockIdx.x * n * blockDim.x;
    __syncthreads();
    long long t0 = clock64();
    for (int i = 0; i < n; ++i)
        slab[i * blockDim.x + threadIdx.x] = make_float4(i, threadIdx.x, blockIdx.x, 1.0f);
    long long t1 = clock64();
    if (lane == 0) ends[warp] = t1 - t0;
    if (fence) __threadfence();
    __syncthreads();
    long long t2 = clock64();
    if (threadIdx.x == 0) {
        long long m = 0;
        for (int w = 0; w < warps; ++w) m = ends[w] > m ? ends[w] : m;
        times[2 * blockIdx.x] = m;
        times[2 * blockIdx.x + 1] = t2 - t0;
    }
}
