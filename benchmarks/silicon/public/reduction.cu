// Kernel copied from NVIDIA/cuda-samples (https://github.com/NVIDIA/cuda-samples, commit c94ff366),
// BSD-3-Clause license, Copyright (c) 2022, NVIDIA CORPORATION. All rights reserved.
// Path: Samples/2_Concepts_and_Techniques/reduction/reduction_kernel.cu (SharedMemory, reduce2, reduce4,
// reduce6; instantiated for float, 256 threads).
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

template <class T> struct SharedMemory
{
    __device__ inline operator T *()
    {
        extern __shared__ int __smem[];
        return (T *)__smem;
    }
    __device__ inline operator const T *() const
    {
        extern __shared__ int __smem[];
        return (T *)__smem;
    }
};

template <class T> __global__ void reduce2(T *g_idata, T *g_odata, unsigned int n)
{
    cg::thread_block cta   = cg::this_thread_block();
    T               *sdata = SharedMemory<T>();
    unsigned int tid = threadIdx.x;
    unsigned int i   = blockIdx.x * blockDim.x + threadIdx.x;
    sdata[tid] = (i < n) ? g_idata[i] : 0;
    cg::sync(cta);
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) {
            sdata[tid] += sdata[tid + s];
        }
        cg::sync(cta);
    }
    if (tid == 0)
        g_odata[blockIdx.x] = sdata[0];
}

template <class T, unsigned int blockSize> __global__ void reduce4(T *g_idata, T *g_odata, unsigned int n)
{
    cg::thread_block cta   = cg::this_thread_block();
    T               *sdata = SharedMemory<T>();
    unsigned int tid = threadIdx.x;
    unsigned int i   = blockIdx.x * (blockDim.x * 2) + threadIdx.x;
    T mySum = (i < n) ? g_idata[i] : 0;
    if (i + blockSize < n)
        mySum += g_idata[i + blockSize];
    sdata[tid] = mySum;
    cg::sync(cta);
    for (unsigned int s = blockDim.x / 2; s > 32; s >>= 1) {
        if (tid < s) {
            sdata[tid] = mySum = mySum + sdata[tid + s];
        }
        cg::sync(cta);
    }
    cg::thread_block_tile<32> tile32 = cg::tiled_partition<32>(cta);
    if (cta.thread_rank() < 32) {
        if (blockSize >= 64)
            mySum += sdata[tid + 32];
        for (int offset = tile32.size() / 2; offset > 0; offset /= 2) {
            mySum += tile32.shfl_down(mySum, offset);
        }
    }
    if (cta.thread_rank() == 0)
        g_odata[blockIdx.x] = mySum;
}

template <class T, unsigned int blockSize, bool nIsPow2> __global__ void reduce6(T *g_idata, T *g_odata, unsigned int n)
{
    cg::thread_block cta   = cg::this_thread_block();
    T               *sdata = SharedMemory<T>();
    unsigned int tid      = threadIdx.x;
    unsigned int gridSize = blockSize * gridDim.x;
    T mySum = 0;
    if (nIsPow2) {
        unsigned int i = blockIdx.x * blockSize * 2 + threadIdx.x;
        gridSize       = gridSize << 1;
        while (i < n) {
            mySum += g_idata[i];
            if ((i + blockSize) < n) {
                mySum += g_idata[i + blockSize];
            }
            i += gridSize;
        }
    }
    else {
        unsigned int i = blockIdx.x * blockSize + threadIdx.x;
        while (i < n) {
            mySum += g_idata[i];
            i += gridSize;
        }
    }
    sdata[tid] = mySum;
    cg::sync(cta);
    if ((blockSize >= 512) && (tid < 256)) {
        sdata[tid] = mySum = mySum + sdata[tid + 256];
    }
    cg::sync(cta);
    if ((blockSize >= 256) && (tid < 128)) {
        sdata[tid] = mySum = mySum + sdata[tid + 128];
    }
    cg::sync(cta);
    if ((blockSize >= 128) && (tid < 64)) {
        sdata[tid] = mySum = mySum + sdata[tid + 64];
    }
    cg::sync(cta);
    cg::thread_block_tile<32> tile32 = cg::tiled_partition<32>(cta);
    if (cta.thread_rank() < 32) {
        if (blockSize >= 64)
            mySum += sdata[tid + 32];
        for (int offset = tile32.size() / 2; offset > 0; offset /= 2) {
            mySum += tile32.shfl_down(mySum, offset);
        }
    }
    if (cta.thread_rank() == 0)
        g_odata[blockIdx.x] = mySum;
}

template __global__ void reduce2<float>(float *, float *, unsigned int);
template __global__ void reduce4<float, 256>(float *, float *, unsigned int);
template __global__ void reduce6<float, 256, true>(float *, float *, unsigned int);
