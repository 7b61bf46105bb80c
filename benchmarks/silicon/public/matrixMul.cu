// Kernel copied from NVIDIA/cuda-samples (https://github.com/NVIDIA/cuda-samples, commit c94ff366),
// BSD-3-Clause license, Copyright (c) 2022, NVIDIA CORPORATION. All rights reserved.
// Path: Samples/0_Introduction/matrixMul/matrixMul.cu (kernel MatrixMulCUDA<BLOCK_SIZE>, instantiated for 16 and 32).
template <int BLOCK_SIZE> __global__ void MatrixMulCUDA(float *C, float *A, float *B, int wA, int wB)
{
    int bx = blockIdx.x;
    int by = blockIdx.y;
    int tx = threadIdx.x;
    int ty = threadIdx.y;
    int aBegin = wA * BLOCK_SIZE * by;
    int aEnd = aBegin + wA - 1;
    int aStep = BLOCK_SIZE;
    int bBegin = BLOCK_SIZE * bx;
    int bStep = BLOCK_SIZE * wB;
    float Csub = 0;
    for (int a = aBegin, b = bBegin; a <= aEnd; a += aStep, b += bStep) {
        __shared__ float As[BLOCK_SIZE][BLOCK_SIZE];
        __shared__ float Bs[BLOCK_SIZE][BLOCK_SIZE];
        As[ty][tx] = A[a + wA * ty + tx];
        Bs[ty][tx] = B[b + wB * ty + tx];
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BLOCK_SIZE; ++k) {
            Csub += As[ty][k] * Bs[k][tx];
        }
        __syncthreads();
    }
    int c               = wB * BLOCK_SIZE * by + BLOCK_SIZE * bx;
    C[c + wB * ty + tx] = Csub;
}

template __global__ void MatrixMulCUDA<16>(float *C, float *A, float *B, int wA, int wB);
template __global__ void MatrixMulCUDA<32>(float *C, float *A, float *B, int wA, int wB);
