// CTA placement on the GPU: which SM runs each CTA, and when it starts and ends.
// Each CTA spins for a fixed number of SM cycles (clock64), so every CTA takes the same time; the
// dynamic shared memory per block sets how many CTAs one SM can hold. Output: one CSV line per CTA.
// Build and run: nvcc -arch=sm_90a -O2 placement.cu -o placement && ./placement > placement.csv
#include <cstdio>
#include <cstdlib>
#include <vector>

__global__ void spin(unsigned long long spin_cycles, unsigned int *smid, unsigned long long *t0,
                     unsigned long long *t1, long long *c0, long long *c1) {
    unsigned long long g0, g1;
    long long start = clock64();
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g0));
    while ((unsigned long long)(clock64() - start) < spin_cycles) {
    }
    if (threadIdx.x == 0) {
        long long end = clock64();
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g1));
        unsigned int s;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
        unsigned b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
        smid[b] = s; t0[b] = g0; t1[b] = g1; c0[b] = start; c1[b] = end;
    }
}

int main(int argc, char **argv) {
    int grids[] = {1, 2, 8, 16, 32, 66, 131, 132, 133, 200, 256, 264, 265, 396, 528, 1000};
    // dynamic shared bytes per block: 0 (residency limited by threads), 100 KiB (2 per SM), 150 KiB (1 per SM)
    int smems[] = {0, 100 * 1024, 150 * 1024};
    int threads[] = {128, 256};
    unsigned long long spin_cycles = 200000;  // about 100 us at 1.98 GHz
    cudaFuncSetAttribute(spin, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024);
    int nmax = 1000;
    unsigned int *smid; unsigned long long *t0, *t1; long long *c0, *c1;
    cudaMalloc(&smid, nmax * 4); cudaMalloc(&t0, nmax * 8); cudaMalloc(&t1, nmax * 8);
    cudaMalloc(&c0, nmax * 8); cudaMalloc(&c1, nmax * 8);
    std::vector<unsigned int> hs(nmax); std::vector<unsigned long long> h0(nmax), h1(nmax);
    std::vector<long long> hc0(nmax), hc1(nmax);
    printf("threads,smem,grid,rep,cta,smid,t_start_ns,t_end_ns,clk_start,clk_end\n");
    for (int th : threads)
        for (int sm : smems)
            for (int g : grids)
                for (int rep = 0; rep < 3; ++rep) {
                    spin<<<g, th, sm>>>(spin_cycles, smid, t0, t1, c0, c1);
                    cudaError_t e = cudaDeviceSynchronize();
                    if (e != cudaSuccess) { fprintf(stderr, "error %s\n", cudaGetErrorString(e)); return 1; }
                    cudaMemcpy(hs.data(), smid, g * 4, cudaMemcpyDeviceToHost);
                    cudaMemcpy(h0.data(), t0, g * 8, cudaMemcpyDeviceToHost);
                    cudaMemcpy(h1.data(), t1, g * 8, cudaMemcpyDeviceToHost);
                    cudaMemcpy(hc0.data(), c0, g * 8, cudaMemcpyDeviceToHost);
                    cudaMemcpy(hc1.data(), c1, g * 8, cudaMemcpyDeviceToHost);
                    for (int b = 0; b < g; ++b)
                        printf("%d,%d,%d,%d,%d,%u,%llu,%llu,%lld,%lld\n", th, sm, g, rep, b, hs[b], h0[b], h1[b],
                               hc0[b], hc1[b]);
                }
    int dev; cudaGetDevice(&dev); cudaDeviceProp p; cudaGetDeviceProperties(&p, dev);
    fprintf(stderr, "device %s, %d SMs\n", p.name, p.multiProcessorCount);
    return 0;
}
