"""A C++ (CPU) candidate for softmax_task.py, in KernelBench's load_inline format."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <cmath>
#include <algorithm>

torch::Tensor softmax_rows(torch::Tensor x) {
    TORCH_CHECK(x.dim() == 2 && x.scalar_type() == torch::kFloat32, "expected a 2-D float32 tensor");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t rows = xc.size(0), cols = xc.size(1);
    const float* in = xc.data_ptr<float>();
    float* out = y.data_ptr<float>();
    at::parallel_for(0, rows, 1, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
            const float* xr = in + r * cols;
            float* yr = out + r * cols;
            float m = -INFINITY;
            for (int64_t c = 0; c < cols; ++c) m = std::max(m, xr[c]);
            float s = 0.f;
            for (int64_t c = 0; c < cols; ++c) { yr[c] = std::exp(xr[c] - m); s += yr[c]; }
            const float inv = 1.f / s;
            for (int64_t c = 0; c < cols; ++c) yr[c] *= inv;
        }
    });
    return y;
}
"""

ext = load_inline(name="forge_softmax_cpp", cpp_sources=cpp_source, functions=["softmax_rows"], extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.softmax_rows(x)
