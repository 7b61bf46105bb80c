// Test kernels for tests/test_gpu.py (validation.gpu on a real GPU).
// Regenerate the PTX with:  nvcc -ptx -arch=sm_90 -o saxpy.ptx saxpy.cu
//
// saxpy:      y[i] = a * x[i] + y[i] for i < n            (block (128,1,1), grid ceil(n/128))
// gemm_naive: D = alpha * A @ B + beta * C, all row-major  (one thread per element of D,
//             block (16,16,1), grid (ceil(N/16), ceil(M/16), 1)); thread (0,0) of each CTA
//             writes clock64() at entry and at exit into prof[2*cta], prof[2*cta+1].

extern "C" __global__ void saxpy(unsigned int n, float a, const float* x, float* y)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = a * x[i] + y[i];
}

extern "C" __global__ void gemm_naive(int M, int N, int K, float alpha, const float* A, const float* B,
                                      float beta, const float* C, float* D, unsigned long long* prof)
{
    unsigned int cta = blockIdx.y * gridDim.x + blockIdx.x;
    bool leader = threadIdx.x == 0 && threadIdx.y == 0;
    if (leader)
        prof[2 * cta] = clock64();
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < N) {
        float acc = 0.0f;
        for (int k = 0; k < K; ++k)
            acc += A[row * K + k] * B[k * N + col];
        D[row * N + col] = alpha * acc + beta * C[row * N + col];
    }
    __syncthreads();
    if (leader)
        prof[2 * cta + 1] = clock64();
}
