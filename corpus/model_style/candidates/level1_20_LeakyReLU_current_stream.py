import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = """
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>

__global__ void leaky_relu_kernel(const float* __restrict__ input,
                                  float* __restrict__ output,
                                  float negative_slope,
                                  int64_t numel) {
    int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < numel) {
        float v = input[idx];
        output[idx] = v > 0.0f ? v : v * negative_slope;
    }
}

torch::Tensor leaky_relu_cuda(torch::Tensor input, double negative_slope) {
    TORCH_CHECK(input.is_cuda(), "input must be a CUDA tensor");
    TORCH_CHECK(input.scalar_type() == torch::kFloat32, "input must be float32");

    auto x = input.contiguous();
    auto output = torch::empty_like(x);
    const int64_t numel = x.numel();
    if (numel == 0) return output;

    const int threads = 256;
    const int64_t blocks = (numel + threads - 1) / threads;
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();

    leaky_relu_kernel<<<blocks, threads, 0, stream>>>(
        x.data_ptr<float>(), output.data_ptr<float>(), (float)negative_slope, numel);

    cudaError_t err = cudaGetLastError();
    TORCH_CHECK(err == cudaSuccess, "leaky_relu_kernel launch failed: ", cudaGetErrorString(err));
    return output;
}
"""

cpp_source = "torch::Tensor leaky_relu_cuda(torch::Tensor input, double negative_slope);"

leaky_relu_ext = load_inline(
    name="leaky_relu_stream",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["leaky_relu_cuda"],
    verbose=False,
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, negative_slope: float = 0.01):
        super(ModelNew, self).__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return leaky_relu_ext.leaky_relu_cuda(x, self.negative_slope)
