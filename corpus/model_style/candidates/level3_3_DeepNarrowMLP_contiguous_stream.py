import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = """
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>

__global__ void relu_kernel(const float* __restrict__ in, float* __restrict__ out, int64_t n) {
    const int64_t stride = (int64_t)blockDim.x * gridDim.x;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += stride) {
        const float v = in[i];
        out[i] = v > 0.0f ? v : 0.0f;
    }
}

torch::Tensor relu_forward(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == at::kFloat, "expected a float32 CUDA tensor");
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const int64_t n = xc.numel();
    if (n == 0) return out;
    const int threads = 256;
    const int blocks = (int)std::min<int64_t>((n + threads - 1) / threads, 2048);
    relu_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(xc.data_ptr<float>(), out.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

cpp_source = "torch::Tensor relu_forward(torch::Tensor x);"

relu_ext = load_inline(
    name="deep_mlp_relu_stream",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["relu_forward"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, input_size, hidden_layer_sizes, output_size):
        super(ModelNew, self).__init__()
        layers = []
        current_input_size = input_size
        for hidden_size in hidden_layer_sizes:
            layers.append(nn.Linear(current_input_size, hidden_size))
            layers.append(nn.ReLU())
            current_input_size = hidden_size
        layers.append(nn.Linear(current_input_size, output_size))
        self.network = nn.Sequential(*layers)

    def forward(self, x):
        for m in self.network:
            x = relu_ext.relu_forward(x) if isinstance(m, nn.ReLU) else m(x)
        return x
