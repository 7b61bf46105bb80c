// Kernel copied from NVIDIA/cuda-samples (https://github.com/NVIDIA/cuda-samples, commit c94ff366),
// BSD-3-Clause license, Copyright (c) 2022, NVIDIA CORPORATION. All rights reserved.
// Path: Samples/2_Concepts_and_Techniques/shfl_scan/shfl_scan.cu (kernel shfl_scan_test; extern "C" added).
extern "C" __global__ void shfl_scan_test(int *data, int width, int *partial_sums = NULL)
{
    extern __shared__ int sums[];
    int                   id      = ((blockIdx.x * blockDim.x) + threadIdx.x);
    int                   lane_id = id % warpSize;
    int warp_id = threadIdx.x / warpSize;
    int value = data[id];
#pragma unroll
    for (int i = 1; i <= width; i *= 2) {
        unsigned int mask = 0xffffffff;
        int          n    = __shfl_up_sync(mask, value, i, width);
        if (lane_id >= i)
            value += n;
    }
    if (threadIdx.x % warpSize == warpSize - 1) {
        sums[warp_id] = value;
    }
    __syncthreads();
    if (warp_id == 0 && lane_id < (blockDim.x / warpSize)) {
        int warp_sum = sums[lane_id];
        int mask = (1 << (blockDim.x / warpSize)) - 1;
        for (int i = 1; i <= (blockDim.x / warpSize); i *= 2) {
            int n = __shfl_up_sync(mask, warp_sum, i, (blockDim.x / warpSize));
            if (lane_id >= i)
                warp_sum += n;
        }
        sums[lane_id] = warp_sum;
    }
    __syncthreads();
    int blockSum = 0;
    if (warp_id > 0) {
        blockSum = sums[warp_id - 1];
    }
    value += blockSum;
    data[id] = value;
    if (partial_sums != NULL && threadIdx.x == blockDim.x - 1) {
        partial_sums[blockIdx.x] = value;
    }
}
