import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

selu_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void selu_kernel(const float* __restrict__ in, float* __restrict__ out, int n) {
    const float alpha = 1.6732632423543772f;
    const float scale = 1.0507009873554805f;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = in[i];
        out[i] = v > 0.0f ? scale * v : scale * alpha * (expf(v) - 1.0f);
    }
}

torch::Tensor selu_cuda(torch::Tensor x) {
    auto out = torch::empty_like(x);
    int n = x.numel();
    const int threads = 256;
    const int blocks = (n + threads - 1) / threads;

    // run on a dedicated non-blocking stream so the kernel does not serialize with other work
    cudaStream_t stream;
    cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    selu_kernel<<<blocks, threads, 0, stream>>>(x.data_ptr<float>(), out.data_ptr<float>(), n);
    cudaStreamSynchronize(stream);
    cudaStreamDestroy(stream);
    return out;
}
"""

selu_cpp_source = "torch::Tensor selu_cuda(torch::Tensor x);"

selu = load_inline(
    name="selu_own_stream",
    cpp_sources=selu_cpp_source,
    cuda_sources=selu_source,
    functions=["selu_cuda"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.selu = selu

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.selu.selu_cuda(x)
