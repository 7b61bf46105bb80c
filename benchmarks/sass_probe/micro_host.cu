// Host side of benchmarks/sass_probe/micro.py (see micro_dev.cu): loads the cubin once per case and repeat,
// launches twice (launch 1: fresh module; launch 2: right after), prints one JSON object with every warp's
// raw clock stamps; micro.py reduces them.   usage: micro_host micro.cubin
#include <cuda.h>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { const char* s_ = nullptr; cuGetErrorString(r_, &s_); \
    fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, s_ ? s_ : "?"); exit(1); } } while (0)

static std::vector<char> image;
static CUdeviceptr d_in, d_out, d_T, d_big;
static bool first = true;

// one case: `reps` fresh modules x 2 launches of kernel `name` (grid, block), args built by the caller;
// prints {"case", "kernel", "grid", "block", "param", "rep", "launch", "ms", "T": [nT stamps]}
static void run(const char* label, const char* name, int grid, int block, void** args, size_t nT, long long param,
                int reps = 3) {
    for (int rep = 0; rep < reps; ++rep) {
        CUmodule m; CK(cuModuleLoadData(&m, image.data()));
        CUfunction f; CK(cuModuleGetFunction(&f, m, name));
        for (int launch = 1; launch <= 2; ++launch) {
            CUevent e0, e1; CK(cuEventCreate(&e0, 0)); CK(cuEventCreate(&e1, 0));
            CK(cuEventRecord(e0, 0));
            CK(cuLaunchKernel(f, grid, 1, 1, block, 1, 1, 0, 0, args, nullptr));
            CK(cuEventRecord(e1, 0));
            CK(cuCtxSynchronize());
            float ms = 0; CK(cuEventElapsedTime(&ms, e0, e1));
            std::vector<long long> T(nT);
            CK(cuMemcpyDtoH(T.data(), d_T, nT * 8));
            printf(first ? "\n" : ",\n"); first = false;
            printf("{\"case\": \"%s\", \"kernel\": \"%s\", \"grid\": %d, \"block\": %d, \"param\": %lld, \"rep\": %d, "
                   "\"launch\": %d, \"ms\": %.5f, \"T\": [", label, name, grid, block, param, rep, launch, ms);
            for (size_t i = 0; i < nT; ++i) printf("%s%lld", i ? "," : "", T[i]);
            printf("]}");
            CK(cuEventDestroy(e0)); CK(cuEventDestroy(e1));
        }
        CK(cuModuleUnload(m));
    }
}

int main(int argc, char** argv) {
    if (argc < 2) { fprintf(stderr, "usage: micro_host micro.cubin\n"); return 2; }
    FILE* fp = fopen(argv[1], "rb");
    if (!fp) { fprintf(stderr, "%s: cannot open\n", argv[1]); return 2; }
    fseek(fp, 0, SEEK_END); long n = ftell(fp); fseek(fp, 0, SEEK_SET);
    image.resize(n); if (fread(image.data(), 1, n, fp) != (size_t)n) return 2; fclose(fp);
    CK(cuInit(0));
    CUdevice dev; CK(cuDeviceGet(&dev, 0));
    CUcontext ctx; CK(cuDevicePrimaryCtxRetain(&ctx, dev)); CK(cuCtxSetCurrent(ctx));
    char dname[256]; CK(cuDeviceGetName(dname, sizeof dname, dev));
    int sms = 0; CK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
    CK(cuMemAlloc(&d_in, 4096 * 4));
    std::vector<float> hin(4096);
    for (int i = 0; i < 4096; ++i) hin[i] = (float)(i % 97) * 0.25f;
    unsigned* u = (unsigned*)hin.data(); u[0] = 3u; u[1] = 7u; u[2] = 0x3f800001u; u[3] = 0x3c000000u;
    CK(cuMemcpyHtoD(d_in, hin.data(), 4096 * 4));
    const int stream_g = sms * 4;
    const long long n4 = (long long)stream_g * 256 * 128;  // 264 MiB of float4 at 132 SMs, as the suite's
    CK(cuMemAlloc(&d_out, (size_t)stream_g * 256 * 4 * 4));
    CK(cuMemAlloc(&d_T, (size_t)stream_g * 8 * 2 * 8 + 32 * 64 * 8));
    CK(cuMemAlloc(&d_big, (size_t)n4 * 16));
    CK(cuMemsetD32(d_big, 0x3f800000u, (size_t)n4 * 4));
    printf("{\"device\": \"%s\", \"sms\": %d, \"cases\": [", dname, sms);
    const int ws[] = {1, 2, 4, 8, 16, 32};
    for (int w : ws) {  // barrier cost vs warps per CTA
        int iters = 512; void* a[] = {&iters, &d_T};
        run("bar_only", "bar_only", 1, 32 * w, a, (size_t)w * 2, iters);
    }
    for (int w : ws) {
        if (w < 2) continue;
        void* a[] = {&d_T};
        run("bar_skew", "bar_skew", 1, 32 * w, a, (size_t)w * 64, 32, 2);
    }
    const int bw[] = {4, 8, 16, 32};
    for (int w : bw)
        for (int iters : {64, 256}) {
            void* a[] = {&d_in, &d_out, &iters, &d_T};
            run("bar_loop", "bar_loop", 1, 32 * w, a, (size_t)w * 2, iters);
        }
    for (const char* k : {"lds_rate", "lds_rate_c2"})
        for (int w : bw) {
            int iters = 64; void* a[] = {&d_out, &iters, &d_T};
            run(k, k, 1, 32 * w, a, (size_t)w * 2, iters);
        }
    for (const char* k : {"pipe_add_lop", "pipe_add_ffma", "pipe_lop_only"})
        for (int w : {4, 8}) {
            int trips = 64; void* a[] = {&d_in, &d_out, &trips, &d_T};
            run(k, k, 1, 32 * w, a, (size_t)w * 2, trips);
        }
    for (const char* k : {"stream_u1", "stream_u2", "stream_u4", "stream_u8"}) {
        long long nn = n4; void* a[] = {&d_big, &d_out, &nn, &d_T};
        run(k, k, stream_g, 256, a, (size_t)stream_g * 8 * 2, nn);
    }
    printf("\n]}\n");
    return 0;
}
