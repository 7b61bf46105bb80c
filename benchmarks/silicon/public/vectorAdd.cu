// Kernel copied from NVIDIA/cuda-samples (https://github.com/NVIDIA/cuda-samples, commit c94ff366),
// BSD-3-Clause license, Copyright (c) 2022, NVIDIA CORPORATION. All rights reserved.
// Path: Samples/0_Introduction/vectorAdd/vectorAdd.cu (kernel vectorAdd; extern "C" added for a plain name).
extern "C" __global__ void vectorAdd(const float *A, const float *B, float *C, int numElements)
{
    int i = blockDim.x * blockIdx.x + threadIdx.x;

    if (i < numElements) {
        C[i] = A[i] + B[i] + 0.0f;
    }
}
