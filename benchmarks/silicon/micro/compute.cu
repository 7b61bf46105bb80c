// Arithmetic throughput / latency and divergence microbenchmarks (benchmarks/silicon/suite.py).
// Launch: block (256,1,1), grid (G,1,1); out has G*256 entries (hmma: G*256*32); iters = loop trips.

// 8 independent FFMA chains per thread: a_j = a_j * x + y.
extern "C" __global__ void ffma_indep(const float* in, float* out, int iters)
{
    int g = blockIdx.x * blockDim.x + threadIdx.x;
    float x = 0.9f + 1e-3f * in[threadIdx.x & 31], y = 0.01f;
    float a0 = in[0], a1 = in[1], a2 = in[2], a3 = in[3], a4 = in[4], a5 = in[5], a6 = in[6], a7 = in[7];
    for (int k = 0; k < iters; ++k) {
        a0 = fmaf(a0, x, y); a1 = fmaf(a1, x, y); a2 = fmaf(a2, x, y); a3 = fmaf(a3, x, y);
        a4 = fmaf(a4, x, y); a5 = fmaf(a5, x, y); a6 = fmaf(a6, x, y); a7 = fmaf(a7, x, y);
    }
    out[g] = ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7));
}

// One dependent FFMA chain, 8 per trip (the same FFMA count as ffma_indep).
extern "C" __global__ void ffma_dep(const float* in, float* out, int iters)
{
    int g = blockIdx.x * blockDim.x + threadIdx.x;
    float x = 0.9f + 1e-3f * in[threadIdx.x & 31], y = 0.01f;
    float a = in[0];
    for (int k = 0; k < iters; ++k) {
        a = fmaf(a, x, y); a = fmaf(a, x, y); a = fmaf(a, x, y); a = fmaf(a, x, y);
        a = fmaf(a, x, y); a = fmaf(a, x, y); a = fmaf(a, x, y); a = fmaf(a, x, y);
    }
    out[g] = a;
}

// 8 independent IMAD chains per thread (u32, wrapping): a_j = a_j * m + c.
extern "C" __global__ void imad_indep(const unsigned* in, unsigned* out, int iters)
{
    int g = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned m = in[threadIdx.x & 31] | 1u, c = threadIdx.x;
    unsigned a0 = in[0], a1 = in[1], a2 = in[2], a3 = in[3], a4 = in[4], a5 = in[5], a6 = in[6], a7 = in[7];
    for (int k = 0; k < iters; ++k) {
        a0 = a0 * m + c; a1 = a1 * m + c; a2 = a2 * m + c; a3 = a3 * m + c;
        a4 = a4 * m + c; a5 = a5 * m + c; a6 = a6 * m + c; a7 = a7 * m + c;
    }
    out[g] = ((a0 ^ a1) + (a2 ^ a3)) + ((a4 ^ a5) + (a6 ^ a7));
}

// Lanes 0-15 and 16-31 run different loops (4 FFMA chains each): the warp runs both, one after the other.
extern "C" __global__ void diverge_halves(const float* in, float* out, int iters)
{
    int g = blockIdx.x * blockDim.x + threadIdx.x;
    float a0 = in[0], a1 = in[1], a2 = in[2], a3 = in[3];
    if (threadIdx.x & 16) {
        for (int k = 0; k < iters; ++k) {
            a0 = fmaf(a0, 0.75f, 0.5f); a1 = fmaf(a1, 0.75f, 0.5f);
            a2 = fmaf(a2, 0.75f, 0.5f); a3 = fmaf(a3, 0.75f, 0.5f);
        }
    } else {
        for (int k = 0; k < iters; ++k) {
            a0 = fmaf(a0, 0.5f, 0.25f); a1 = fmaf(a1, 0.5f, 0.25f);
            a2 = fmaf(a2, 0.5f, 0.25f); a3 = fmaf(a3, 0.5f, 0.25f);
        }
    }
    out[g] = (a0 + a1) + (a2 + a3);
}

// 8 independent mma.sync m16n8k16 f16 -> f32 accumulators per warp, the same A and B fragments
// (lane l: a = in32[4 l .. 4 l + 4), b = in32[128 + 2 l .. 128 + 2 l + 2)); D_j = iters * (A @ B).
// out[(warp * 32 + lane) * 32 + 4 j + r] = accumulator j, register r.
extern "C" __global__ void hmma_indep(const unsigned* in, float* out, int iters)
{
    unsigned lane = threadIdx.x & 31u;
    unsigned a0 = in[4 * lane], a1 = in[4 * lane + 1], a2 = in[4 * lane + 2], a3 = in[4 * lane + 3];
    unsigned b0 = in[128 + 2 * lane], b1 = in[128 + 2 * lane + 1];
    float c[8][4];
#pragma unroll
    for (int j = 0; j < 8; ++j) c[j][0] = c[j][1] = c[j][2] = c[j][3] = 0.f;
    for (int k = 0; k < iters; ++k) {
#pragma unroll
        for (int j = 0; j < 8; ++j)
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                         "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                         : "+f"(c[j][0]), "+f"(c[j][1]), "+f"(c[j][2]), "+f"(c[j][3])
                         : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    }
    float* o = out + (size_t)(blockIdx.x * blockDim.x + threadIdx.x) * 32;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
        o[4 * j] = c[j][0]; o[4 * j + 1] = c[j][1]; o[4 * j + 2] = c[j][2]; o[4 * j + 3] = c[j][3];
    }
}
