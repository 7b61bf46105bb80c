// Kernel copied from karpathy/llm.c (https://github.com/karpathy/llm.c, commit f1e2ace),
// MIT License, Copyright (c) 2024 Andrej Karpathy. floatX = float (the FP32 build).
// Paths: dev/cuda/gelu_forward.cu (gelu_forward_kernel1), dev/cuda/residual_forward.cu
// (residual_forward_kernel1), dev/cuda/encoder_forward.cu (encoder_forward_kernel2); extern "C" added.
#define GELU_SCALING_FACTOR sqrtf(2.0f / M_PI)
typedef float floatX;

extern "C" __global__ void gelu_forward_kernel1(floatX* out, const floatX* inp, int N) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) {
        float xi = inp[i];
        float cube = 0.044715f * xi * xi * xi;
        out[i] = 0.5f * xi * (1.0f + tanhf(GELU_SCALING_FACTOR * (xi + cube)));
    }
}

extern "C" __global__ void residual_forward_kernel1(floatX* out, const floatX* inp1, const floatX* inp2, int N) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < N) {
        out[idx] = (floatX)((float)inp1[idx] + (float)inp2[idx]);
    }
}

extern "C" __global__ void encoder_forward_kernel2(floatX* out,
                               const int* inp, const floatX* wte, const floatX* wpe,
                               int B, int T, int C) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    int N = B * T * C;

    if (idx < N) {
        int bt = idx / C;
        int b = bt / T;
        int t = bt % T;
        int c = idx % C;

        int ix = inp[b * T + t];

        floatX* out_btc = out + b * T * C + t * C + c;
        const floatX* wte_ix = wte + ix * C + c;
        const floatX* wpe_tc = wpe + t * C + c;
        *out_btc = (floatX)((float)*wte_ix + (float)*wpe_tc);
    }
}
