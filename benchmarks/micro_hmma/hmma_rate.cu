// mma.sync m16n8k16 f16->f32 throughput on one SM: each warp runs `iters` rounds of NACC independent mma
// (NACC accumulators, the same A/B fragments), timed by clock64 around the loop only (no stores inside
// the timed region). Per warp: the loop's cycles. Written for this project (issue 11: hmma_indep's
// per-sub-partition vs per-warp limit).
#include <cstdint>

template <int NACC>
__global__ void hmma_rate(const unsigned* in, float* out, unsigned long long* cycles, int iters) {
    unsigned lane = threadIdx.x & 31u;
    unsigned a0 = in[4 * lane], a1 = in[4 * lane + 1], a2 = in[4 * lane + 2], a3 = in[4 * lane + 3];
    unsigned b0 = in[128 + 2 * lane], b1 = in[128 + 2 * lane + 1];
    float c[NACC][4];
#pragma unroll
    for (int j = 0; j < NACC; ++j) c[j][0] = c[j][1] = c[j][2] = c[j][3] = 0.f;
    __syncthreads();
    unsigned long long t0 = clock64();
    for (int k = 0; k < iters; ++k) {
#pragma unroll
        for (int j = 0; j < NACC; ++j)
            asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                         "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                         : "+f"(c[j][0]), "+f"(c[j][1]), "+f"(c[j][2]), "+f"(c[j][3])
                         : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    }
    unsigned long long t1 = clock64();
    if (lane == 0) cycles[blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32] = t1 - t0;
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < NACC; ++j) s += c[j][0] + c[j][1] + c[j][2] + c[j][3];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

template __global__ void hmma_rate<1>(const unsigned*, float*, unsigned long long*, int);
template __global__ void hmma_rate<2>(const unsigned*, float*, unsigned long long*, int);
template __global__ void hmma_rate<4>(const unsigned*, float*, unsigned long long*, int);
template __global__ void hmma_rate<8>(const unsigned*, float*, unsigned long long*, int);
