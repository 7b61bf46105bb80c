// Barrier and atomic microbenchmarks (benchmarks/silicon/suite.py).

// bar.sync in a loop: acc += s[(t + k) mod blockDim] then __syncthreads(). Launch: block (B,1,1) with B a
// power of two (128: 4 warps, 1024: 32 warps), grid (G,1,1); in has >= B entries, out G*B.
extern "C" __global__ void bar_loop(const float* in, float* out, int iters)
{
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
}

// Shared atomics: each thread adds 1 to h[(7 t + k) mod 256] per trip (the lanes of a warp hit 32
// distinct words); the block's histogram goes to out[256 b ..]. Launch: block (256,1,1).
extern "C" __global__ void atom_shared(const float* in, unsigned* out, int iters)
{
    __shared__ unsigned h[256];
    int t = threadIdx.x;
    h[t] = 0;
    __syncthreads();
    for (int k = 0; k < iters; ++k) atomicAdd(&h[(7 * t + k) & 255], 1u);
    __syncthreads();
    out[blockIdx.x * 256 + t] = h[t];
}

// Global atomics: each thread adds 1 to out[(7 g + 32 k) mod 4096] per trip (g: global thread index);
// out (4096 u32) starts zeroed. Launch: block (256,1,1), grid (G,1,1).
extern "C" __global__ void atom_global(const float* in, unsigned* out, int iters)
{
    int g = blockIdx.x * blockDim.x + threadIdx.x;
    for (int k = 0; k < iters; ++k) atomicAdd(&out[(7 * g + 32 * k) & 4095], 1u);
}
