// The epilogue store pattern of kernelgen's mma.sync kernels, alone, on the H200: every thread writes its
// m16n8 accumulator fragments (rows g and g+8, columns 2*t4 and 2*t4+1 of each 16x8 tile) of a CTA tile
// of TM x TN (warps of WM x WN) into a row-major f32 D of row stride n. One CTA per output tile; the
// span from a barrier before the first store to a barrier after the last one, thread 0's clock64.
// vec = 1: st.global.f32 per element (what kernelgen emits); vec = 2: st.global.v2.f32 per column pair.
//   nvcc -arch=sm_90a -ptx store.cu -o store.ptx
extern "C" __global__ void frag_store(float* __restrict__ d, int n, int tiles_n, int wm, int wn, int vec,
                                      long long* __restrict__ times) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int g = lane / 4, t4 = lane % 4;
    const int wcols = tiles_n;  // warps along N in the CTA
    const int wr = warp / wcols, wc = warp % wcols;
    const int tm = wm * (blockDim.x / 32 / wcols), tn = wn * wcols;  // CTA tile
    const long long row0 = (long long)blockIdx.y * tm + wr * wm, col0 = (long long)blockIdx.x * tn + wc * wn;
    __syncthreads();
    long long t0 = clock64();
    for (int mi = 0; mi < wm / 16; ++mi)
        for (int ni = 0; ni < wn / 8; ++ni)
            for (int h = 0; h < 2; ++h) {
                long long r = row0 + mi * 16 + g + 8 * h, c = col0 + ni * 8 + 2 * t4;
                float v0 = (float)(r * 3 + c), v1 = (float)(r * 3 + c + 1);
                if (vec == 2) {
                    *reinterpret_cast<float2*>(d + r * n + c) = make_float2(v0, v1);
                } else {
                    d[r * n + c] = v0;
                    d[r * n + c + 1] = v1;
                }
            }
    __syncthreads();
    long long t1 = clock64();
    if (threadIdx.x == 0) times[blockIdx.y * gridDim.x + blockIdx.x] = t1 - t0;
}
