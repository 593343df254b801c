import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

// Each thread computes the softmax of one full row.
__global__ void softmax_row_kernel(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < rows) {
        const float* xr = x + (long)row * cols;
        float* yr = y + (long)row * cols;

        float m = xr[0];
        for (int j = 1; j < cols; ++j) {
            m = fmaxf(m, xr[j]);
        }
        float s = 0.0f;
        for (int j = 0; j < cols; ++j) {
            s += expf(xr[j] - m);
        }
        float inv = 1.0f / s;
        for (int j = 0; j < cols; ++j) {
            yr[j] = expf(xr[j] - m) * inv;
        }
    }
}

torch::Tensor softmax_forward(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int rows = x.size(0);
    int cols = x.size(1);
    const int threads = 256;
    const int blocks = (rows + threads - 1) / threads;
    softmax_row_kernel<<<blocks, threads>>>(x.data_ptr<float>(), y.data_ptr<float>(), rows, cols);
    return y;
}
"""

cpp_source = "torch::Tensor softmax_forward(torch::Tensor x);"

softmax_ext = load_inline(
    name="softmax_thread_row",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["softmax_forward"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return softmax_ext.softmax_forward(x)
