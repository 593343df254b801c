"""Memory-bound task for the profiler's acceptance: y = 2 * x over 256 MiB (fp32)."""

import torch
import torch.nn as nn

n = 64 * 1024 * 1024


class Model(nn.Module):
    def forward(self, x):
        return x * 2.0


def get_inputs():
    return [torch.randn(n)]


def get_init_inputs():
    return []
