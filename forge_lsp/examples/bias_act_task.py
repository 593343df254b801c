"""Bias, leaky ReLU, scale and clamp: the bundled example task (KernelBench format).

In eager PyTorch each of the four element-wise steps is a kernel of its own that reads and writes the
whole tensor; `bias_act_cpp.py` does them in one pass. At 1024 x 4096 fp32 (16 MiB) a tensor is as large as
a server CPU's last-level cache, so each of eager PyTorch's passes goes to memory: the pass saved is the
speedup. (At 256 rows, the intermediate tensors stay in cache and one pass gains far less.)
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 1024
features = 4096

# Verify at another batch size too: candidates must not hard-code the shape.
FORGE = {"vary": {"batch_size": [37]}}


class Model(nn.Module):
    def __init__(self, features: int = features, scale: float = 0.5):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features) * 0.1)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x + self.bias
        y = F.leaky_relu(y, negative_slope=0.01)
        y = y * self.scale
        return torch.clamp(y, -1.0, 1.0)


def get_inputs():
    return [torch.randn(batch_size, features) * 2]


def get_init_inputs():
    return [features]
