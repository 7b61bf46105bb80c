// What a first access to a global line costs on the H200, against an L2 hit and a DRAM access with a
// warm TLB. One thread per CTA walks a pointer chain (ld.global.cg, every load depends on the last) and
// times every load with clock64 (the chased value is stored to a volatile shared word before the second
// clock read, so the clock waits for the load). benchmarks/first_touch/run.py builds and runs it:
//   nvcc -arch=sm_90a -O2 first_touch.cu -o first_touch && ./first_touch > first_touch.json
//
// Cases (each one stride, n loads per CTA, passes = walks of the same chain inside one launch):
//   cold          chain written, L2 evicted (512 MiB memset), every SM's TLB thrashed (loads from 8192
//                 2 MiB pages of a 16 GiB buffer): pass 1 = DRAM + TLB miss, pass 2 = L2 hit, warm TLB
//   dram_tlbwarm  L2 evicted, TLB thrashed, then (same launch) one independent load per chain element at
//                 +pre_off (another line of the same 2 MiB page) and a spin: pass 1 = DRAM, warm TLB
//   l2_tlbcold    chain walked (L2 + TLB warm), TLB thrashed: pass 1 = L2 hit + TLB miss
//   sector        L2 evicted, TLB thrashed, the line at +pre_off touched first: +32/+64 B (same 128 B
//                 line, other sector: sector vs line fill), +128..+1 MiB (other line: DRAM row locality)
//   upload        chain copied from the host (cudaMemcpy), then launched: the suite's first launch
//   const         a __constant__ chain (256 B stride, 64 KiB): first launch after the copy vs second
// Every case runs on 1 CTA and on one CTA per SM (grid = SM count): the page walker and the DRAM are shared.
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <string>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(1); } } while (0)

constexpr int MAXN = 256;
constexpr int MAXP = 3;

__device__ __forceinline__ long long clk() {
    long long t;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(t) :: "memory");
    return t;
}

__device__ __forceinline__ unsigned long long ldcg(unsigned long long a) {
    unsigned long long v;
    asm volatile("ld.global.cg.u64 %0, [%1];" : "=l"(v) : "l"(a) : "memory");
    return v;
}

// lat[(cta * passes + pass) * n + i]: cycles of load i of pass `pass` (clock64 around load + shared store)
extern "C" __global__ void chase(unsigned long long base, unsigned long long region, unsigned long long stride,
                                 int n, int passes, long long pre_off, int spin, long long* lat,
                                 unsigned long long* sink, int* smid) {
    __shared__ long long s_t[MAXN * MAXP];
    __shared__ volatile unsigned long long s_v;
    if (threadIdx.x != 0) return;
    const unsigned long long start = base + blockIdx.x * region;
    unsigned long long acc = 0;
    if (pre_off >= 0) {
        for (int i = 0; i < n; ++i) acc += ldcg(start + i * stride + pre_off);
        s_v = acc;  // waits for every pre-touch load
        long long t = clk();
        while (clk() - t < spin) {}
    }
    unsigned long long p = start;
    for (int q = 0; q < passes; ++q) {
        for (int i = 0; i < n; ++i) {
            long long t0 = clk();
            p = ldcg(p);
            s_v = p;
            long long t1 = clk();
            s_t[q * n + i] = t1 - t0;
        }
    }
    for (int k = 0; k < passes * n; ++k) lat[(long long)blockIdx.x * passes * n + k] = s_t[k];
    sink[blockIdx.x] = p + acc;
    int s;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
    smid[blockIdx.x] = s;
}

// element (b, i) at base + b * region + i * stride holds the address of element (b, (i + 1) % n)
extern "C" __global__ void init_chain(unsigned long long base, unsigned long long region,
                                      unsigned long long stride, int n, int ctas) {
    long long k = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (k >= (long long)n * ctas) return;
    long long b = k / n, i = k % n;
    unsigned long long* e = (unsigned long long*)(base + b * region + i * stride);
    *e = base + b * region + ((i + 1) % n) * stride;
}

// every thread loads one word from `per` of the npages pages: every SM touches every page
extern "C" __global__ void thrash_tlb(const unsigned* buf, long long npages, long long page, int per,
                                      unsigned* sink) {
    long long g = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    unsigned acc = 0;
    for (int k = 0; k < per; ++k) {
        long long pg = (g * per + k) % npages;
        acc += __ldcg(buf + (pg * page + (g & 31) * 64) / 4);
    }
    if (acc == 0x12345678u) sink[0] = acc;
}

constexpr int CN = 16384;
__constant__ unsigned c_chain[CN];

extern "C" __global__ void const_chase(int n, int passes, long long* lat, unsigned* sink) {
    __shared__ long long s_t[MAXN * MAXP];
    __shared__ volatile unsigned s_v;
    if (threadIdx.x != 0) return;
    unsigned j = 0;
    for (int q = 0; q < passes; ++q)
        for (int i = 0; i < n; ++i) {
            long long t0 = clk();
            j = c_chain[j];
            s_v = j;
            long long t1 = clk();
            s_t[q * n + i] = t1 - t0;
        }
    for (int k = 0; k < passes * n; ++k) lat[(long long)blockIdx.x * passes * n + k] = s_t[k];
    sink[blockIdx.x] = j;
}

static char* g_big;       // chains
static size_t g_big_bytes;
static char* g_scratch;   // memset to evict the L2
static size_t g_scratch_bytes = 512ull << 20;
static unsigned* g_tlb;   // 16 GiB, one word read per 2 MiB page to thrash the TLBs
static size_t g_tlb_bytes = 16ull << 30;
static long long* g_lat;
static unsigned long long* g_sink;
static int* g_smid;
static unsigned* g_usink;
static int g_sms;
static bool g_first = true;

static void evict_l2() { CK(cudaMemset(g_scratch, 0, g_scratch_bytes)); CK(cudaDeviceSynchronize()); }
static void thrash() {
    thrash_tlb<<<g_sms * 8, 32>>>(g_tlb, (long long)(g_tlb_bytes >> 21), 2ll << 20, 64, g_usink);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
}
static void init(unsigned long long region, unsigned long long stride, int n, int ctas) {
    long long tot = (long long)n * ctas;
    init_chain<<<(unsigned)((tot + 255) / 256), 256>>>((unsigned long long)g_big, region, stride, n, ctas);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
}
static void launch(unsigned long long region, unsigned long long stride, int n, int passes, long long pre_off,
                   int ctas) {
    chase<<<ctas, 32>>>((unsigned long long)g_big, region, stride, n, passes, pre_off, 20000, g_lat, g_sink, g_smid);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
}

static double pct(std::vector<long long> v, double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    double x = p / 100.0 * (v.size() - 1);
    size_t lo = (size_t)x;
    size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (x - lo) * (v[hi] - v[lo]);
}

// print one case: per pass, over all CTAs: median/p10/p90/mean/max; CTA 0's loads in full
static void emit(const char* name, unsigned long long stride, int n, int passes, int ctas, long long pre_off) {
    std::vector<long long> lat((size_t)ctas * passes * n);
    std::vector<int> sm(ctas);
    CK(cudaMemcpy(lat.data(), g_lat, lat.size() * 8, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(sm.data(), g_smid, ctas * 4, cudaMemcpyDeviceToHost));
    printf("%s\n  {\"case\": \"%s\", \"stride\": %llu, \"n\": %d, \"passes\": %d, \"ctas\": %d, \"pre_off\": %lld,"
           " \"distinct_sms\": %d, \"pass\": [", g_first ? "" : ",", name, stride, n, passes, ctas, pre_off,
           (int)[&] { auto s = sm; std::sort(s.begin(), s.end()); return std::unique(s.begin(), s.end()) - s.begin(); }());
    g_first = false;
    for (int q = 0; q < passes; ++q) {
        std::vector<long long> all, first;  // first: each CTA's load 0
        double sum = 0;
        for (int b = 0; b < ctas; ++b)
            for (int i = 0; i < n; ++i) {
                long long v = lat[((size_t)b * passes + q) * n + i];
                all.push_back(v);
                sum += v;
                if (i == 0) first.push_back(v);
            }
        printf("%s{\"median\": %.1f, \"p10\": %.1f, \"p90\": %.1f, \"mean\": %.1f, \"max\": %lld, "
               "\"load0_median\": %.1f, \"cta0\": [", q ? ", " : "", pct(all, 50), pct(all, 10), pct(all, 90),
               sum / all.size(), *std::max_element(all.begin(), all.end()), pct(first, 50));
        for (int i = 0; i < n; ++i) printf("%s%lld", i ? "," : "", lat[(size_t)q * n + i]);
        printf("]}");
    }
    printf("]}");
    fflush(stdout);
}

static void run_case(const char* name, unsigned long long stride, int n, int ctas, long long pre_off) {
    unsigned long long region = std::max<unsigned long long>(stride * n, 2ull << 20);
    region = (region + (2ull << 20) - 1) & ~((2ull << 20) - 1);
    if (region * ctas + (pre_off > 0 ? pre_off : 0) > g_big_bytes) {
        fprintf(stderr, "skip %s stride %llu ctas %d: %llu bytes\n", name, stride, ctas, region * ctas);
        return;
    }
    std::string nm(name);
    init(region, stride, n, ctas);
    if (nm == "cold") {
        evict_l2(); thrash();
        launch(region, stride, n, 3, -1, ctas);
    } else if (nm == "dram_tlbwarm" || nm == "sector") {
        evict_l2(); thrash();
        launch(region, stride, n, 2, pre_off, ctas);
    } else if (nm == "l2_tlbcold") {
        launch(region, stride, n, 1, -1, ctas);
        thrash();
        launch(region, stride, n, 2, -1, ctas);
    } else if (nm == "warm") {  // everything warm: L2 and TLB, the walk's second launch
        launch(region, stride, n, 1, -1, ctas);
        launch(region, stride, n, 2, -1, ctas);
    }
    emit(name, stride, n, nm == "cold" ? 3 : 2, ctas, pre_off);
}

static void run_upload(unsigned long long stride, int n, int ctas) {
    unsigned long long region = stride * n;
    size_t bytes = region * ctas;
    std::vector<unsigned long long> h(bytes / 8, 0);
    unsigned long long base = (unsigned long long)g_big;
    for (int b = 0; b < ctas; ++b)
        for (int i = 0; i < n; ++i)
            h[(b * region + i * stride) / 8] = base + b * region + ((i + 1) % n) * stride;
    evict_l2(); thrash();
    CK(cudaMemcpy(g_big, h.data(), bytes, cudaMemcpyHostToDevice));
    launch(region, stride, n, 2, -1, ctas);
    emit("upload", stride, n, 2, ctas, -1);
}

static void run_const(int ctas) {
    std::vector<unsigned> h(CN);
    const int step = 64, n = 256;  // 256 B apart, 64 KiB in all
    for (int i = 0; i < CN; ++i) h[i] = 0;
    for (int i = 0; i < n; ++i) h[i * step] = ((i + 1) % n) * step;
    CK(cudaMemcpyToSymbol(c_chain, h.data(), CN * 4));
    for (int l = 0; l < 2; ++l) {
        const_chase<<<ctas, 32>>>(n, 2, g_lat, g_usink);
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        std::vector<long long> lat((size_t)ctas * 2 * n);
        CK(cudaMemcpy(lat.data(), g_lat, lat.size() * 8, cudaMemcpyDeviceToHost));
        printf(",\n  {\"case\": \"const\", \"launch\": %d, \"stride\": 256, \"n\": %d, \"passes\": 2, \"ctas\": %d, "
               "\"pass\": [", l + 1, n, ctas);
        for (int q = 0; q < 2; ++q) {
            std::vector<long long> all;
            for (int b = 0; b < ctas; ++b)
                for (int i = 0; i < n; ++i) all.push_back(lat[((size_t)b * 2 + q) * n + i]);
            printf("%s{\"median\": %.1f, \"p10\": %.1f, \"p90\": %.1f, \"cta0\": [", q ? ", " : "", pct(all, 50),
                   pct(all, 10), pct(all, 90));
            for (int i = 0; i < n; ++i) printf("%s%lld", i ? "," : "", lat[(size_t)q * n + i]);
            printf("]}");
        }
        printf("]}");
        fflush(stdout);
    }
}

int main() {
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    g_sms = prop.multiProcessorCount;
    int clock_khz = 0, drv = 0;
    cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
    cudaDriverGetVersion(&drv);
    g_big_bytes = 12ull << 30;
    CK(cudaMalloc(&g_big, g_big_bytes));
    CK(cudaMalloc(&g_scratch, g_scratch_bytes));
    CK(cudaMalloc(&g_tlb, g_tlb_bytes));
    CK(cudaMemset(g_tlb, 1, g_tlb_bytes));
    CK(cudaMalloc(&g_lat, (size_t)g_sms * MAXN * MAXP * 8));
    CK(cudaMalloc(&g_sink, g_sms * 8));
    CK(cudaMalloc(&g_smid, g_sms * 4));
    CK(cudaMalloc(&g_usink, g_sms * 4));
    printf("{\"device\": \"%s\", \"sms\": %d, \"clock_khz\": %d, \"driver\": %d, \"l2_bytes\": %d,"
           " \"source_file\": \"benchmarks/first_touch/first_touch.cu\", \"cases\": [",
           prop.name, g_sms, clock_khz, drv, prop.l2CacheSize);
    const unsigned long long strides[] = {128, 1024, 4096, 16384, 65536, 262144, 1ull << 20, 2ull << 20, 4ull << 20};
    const int grids[] = {1, g_sms};
    for (int ctas : grids) {
        for (unsigned long long s : strides) {
            int n = ctas == 1 ? MAXN : (s >= (1ull << 20) ? 16 : 64);
            run_case("cold", s, n, ctas, -1);
            run_case("l2_tlbcold", s, n, ctas, -1);
            run_case("warm", s, n, ctas, -1);
            if (s >= 4096) run_case("dram_tlbwarm", s, n, ctas, (long long)std::min<unsigned long long>(s / 2, 1ull << 20));
        }
        const long long offs[] = {32, 64, 128, 256, 1024, 4096, 65536, 1 << 20};
        for (long long o : offs) run_case("sector", 2ull << 20, ctas == 1 ? MAXN : 16, ctas, o);
        run_upload(128, ctas == 1 ? MAXN : 64, ctas);
        run_upload(4096, ctas == 1 ? MAXN : 64, ctas);
        run_const(ctas);
    }
    printf("\n]}\n");
    return 0;
}
