// Host side of benchmarks/silicon/dram/probe.py (see dram_dev.cu): every launch follows an L2 flush (a read of
// 256 MiB of clean scratch lines), so the measured kernel's lines come from DRAM and no dirty line is written
// back while it runs; 3 repeats per case. Prints one JSON object: per launch the per-CTA spans (the last warp's
// end minus the first warp's start, clock64) and, for chase_*, the walk's per-step cycles.
//   usage: dram_host dram.cubin
#include <cuda.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { const char* s_ = nullptr; cuGetErrorString(r_, &s_); \
    fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, s_ ? s_ : "?"); exit(1); } } while (0)

static const long long PER = 32768;             // float4 per stream CTA: 512 KiB, 128 trips of 256 threads at U = 1
static const long long PER_BG = 4 * 32768;      // the chase's background CTAs: 2 MiB each
static const long long SCRATCH4 = 16LL << 20;   // 256 MiB of float4 for the flush
static const long long CHAIN_WORDS = 128LL << 20;  // 512 MiB chain region
static const int STEPS = 256;
static CUdeviceptr d_big, d_out, d_T, d_scratch, d_chain, d_C;
static CUfunction f_flush;
static bool first = true;

static void flush_l2() {
    long long n = SCRATCH4; void* a[] = {&d_scratch, &d_out, &n};
    CK(cuLaunchKernel(f_flush, 528, 1, 1, 512, 1, 1, 0, 0, a, nullptr));
    CK(cuCtxSynchronize());
}

static void run(CUmodule m, const char* name, int grid, int ctas, long long per, bool chase, int reps = 3) {
    CUfunction f; CK(cuModuleGetFunction(&f, m, name));
    for (int rep = 0; rep < reps; ++rep) {
        flush_l2();
        int steps = STEPS;
        void* a[] = {&d_big, &d_out, &per, &d_T, &d_chain, &steps, &d_C};
        CUevent e0, e1; CK(cuEventCreate(&e0, 0)); CK(cuEventCreate(&e1, 0));
        CK(cuEventRecord(e0, 0));
        CK(cuLaunchKernel(f, grid, 1, 1, 256, 1, 1, 0, 0, a, nullptr));
        CK(cuEventRecord(e1, 0));
        CK(cuCtxSynchronize());
        float ms = 0; CK(cuEventElapsedTime(&ms, e0, e1));
        std::vector<long long> T((size_t)ctas * 8 * 2);
        if (ctas) CK(cuMemcpyDtoH(T.data(), d_T, T.size() * 8));
        printf(first ? "\n" : ",\n"); first = false;
        printf("{\"kernel\": \"%s\", \"grid\": %d, \"stream_ctas\": %d, \"per_float4\": %lld, \"rep\": %d, \"ms\": %.5f, "
               "\"cta_spans\": [", name, grid, ctas, per, rep, ms);
        for (int c = 0; c < ctas; ++c) {
            long long lo = T[c * 16], hi = T[c * 16 + 1];
            for (int w = 0; w < 8; ++w) { lo = std::min(lo, T[c * 16 + 2 * w]); hi = std::max(hi, T[c * 16 + 2 * w + 1]); }
            printf("%s%lld", c ? "," : "", hi - lo);
        }
        printf("]");
        if (chase) {
            std::vector<long long> C(STEPS + 1);
            CK(cuMemcpyDtoH(C.data(), d_C, C.size() * 8));
            printf(", \"steps\": [");
            for (int s = 0; s < STEPS; ++s) printf("%s%lld", s ? "," : "", C[s + 1] - C[s]);
            printf("]");
        }
        printf("}");
        fflush(stdout);
        CK(cuEventDestroy(e0)); CK(cuEventDestroy(e1));
    }
}

int main(int argc, char** argv) {
    if (argc < 2) { fprintf(stderr, "usage: dram_host dram.cubin\n"); return 2; }
    FILE* fp = fopen(argv[1], "rb");
    if (!fp) { fprintf(stderr, "%s: cannot open\n", argv[1]); return 2; }
    fseek(fp, 0, SEEK_END); long n = ftell(fp); fseek(fp, 0, SEEK_SET);
    std::vector<char> image(n); if (fread(image.data(), 1, n, fp) != (size_t)n) return 2; fclose(fp);
    CK(cuInit(0));
    CUdevice dev; CK(cuDeviceGet(&dev, 0));
    CUcontext ctx; CK(cuDevicePrimaryCtxRetain(&ctx, dev)); CK(cuCtxSetCurrent(ctx));
    char dname[256]; CK(cuDeviceGetName(dname, sizeof dname, dev));
    int sms = 0; CK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
    const int maxg = sms * 8;
    const size_t big = std::max((size_t)maxg * PER, (size_t)sms * 4 * PER_BG) * 16;
    CK(cuMemAlloc(&d_big, big));
    CK(cuMemsetD32(d_big, 0x3f800000u, big / 4));
    CK(cuMemAlloc(&d_out, (size_t)(maxg + 1) * 256 * 4));
    CK(cuMemAlloc(&d_T, (size_t)(maxg + 1) * 16 * 8));
    CK(cuMemAlloc(&d_scratch, SCRATCH4 * 16));
    CK(cuMemsetD32(d_scratch, 0, SCRATCH4 * 4));
    CK(cuMemAlloc(&d_C, (STEPS + 1) * 8));
    CK(cuMemAlloc(&d_chain, CHAIN_WORDS * 4));
    // the walk: word offsets stepping 1 MiB + 4 KiB + 128 B (mod 512 MiB): every step a new line, page and row
    std::vector<unsigned> idx(STEPS + 1);
    const unsigned long long stride = ((1ULL << 20) + 4096 + 128) / 4;
    for (int s = 0; s <= STEPS; ++s) idx[s] = (unsigned)(((unsigned long long)s * stride) % CHAIN_WORDS);
    for (int s = 0; s < STEPS; ++s) CK(cuMemcpyHtoD(d_chain + (size_t)idx[s] * 4, &idx[s + 1], 4));
    CUmodule m; CK(cuModuleLoadData(&m, image.data()));
    CK(cuModuleGetFunction(&f_flush, m, "flush"));
    flush_l2();
    printf("{\"device\": \"%s\", \"sms\": %d, \"cases\": [", dname, sms);
    const int per_sm[] = {1, 2, 4, 8};
    for (const char* k : {"stream_u1", "stream_u2", "stream_u4"}) {
        for (int g : {1, 4, 16, 33, 66}) run(m, k, g, g, PER, false);
        for (int p : per_sm) run(m, k, sms * p, sms * p, PER, false);
    }
    run(m, "chase_u0", 1, 0, PER_BG, true);
    for (const char* k : {"chase_u1", "chase_u4"})
        for (int p : {1, 4}) run(m, k, sms * p + 1, sms * p, PER_BG, true);
    printf("\n]}\n");
    return 0;
}
