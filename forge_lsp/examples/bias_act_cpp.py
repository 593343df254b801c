"""A C++ (CPU) candidate for bias_act_task.py, in KernelBench's load_inline format.

Eager PyTorch runs the bias add, the leaky ReLU, the scale and the clamp as four kernels, each a full pass
over the tensor with a new tensor for its result; this does all four in one pass, its rows split over
ATen's own thread pool (`at::parallel_for`, the threads eager PyTorch uses too): memory traffic, not
arithmetic, is what these steps cost.
`-fno-trapping-math` lets the compiler turn the selects into SIMD instructions (it then computes
`v * 0.01f` for every element, not only for the negative ones).
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <algorithm>

torch::Tensor bias_act(torch::Tensor x, torch::Tensor bias, double scale) {
    TORCH_CHECK(x.dim() == 2 && x.scalar_type() == torch::kFloat32, "expected a 2-D float32 tensor");
    TORCH_CHECK(bias.dim() == 1 && bias.size(0) == x.size(1) && bias.scalar_type() == torch::kFloat32,
                "expected a float32 bias of x.size(1) elements");
    auto xc = x.contiguous();
    auto bc = bias.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t rows = xc.size(0), cols = xc.size(1);
    const float* in = xc.data_ptr<float>();
    const float* b = bc.data_ptr<float>();
    float* out = y.data_ptr<float>();
    const float s = static_cast<float>(scale);
    at::parallel_for(0, rows, 16, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
            const float* xr = in + r * cols;
            float* yr = out + r * cols;
            for (int64_t c = 0; c < cols; ++c) {
                float v = xr[c] + b[c];
                v = v > 0.f ? v : v * 0.01f;
                v = v * s;
                yr[c] = std::min(std::max(v, -1.f), 1.f);
            }
        }
    });
    return y;
}
"""

ext = load_inline(
    name="forge_bias_act_cpp",
    cpp_sources=cpp_source,
    functions=["bias_act"],
    extra_cflags=["-O3", "-fno-trapping-math"],
)


class ModelNew(nn.Module):
    def __init__(self, features: int = 4096, scale: float = 0.5):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features) * 0.1)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.bias_act(x, self.bias, self.scale)
