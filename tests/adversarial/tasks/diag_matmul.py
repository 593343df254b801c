"""diag(a) @ b, as in KernelBench level 1 (a diagonal matrix times a dense one)."""

import torch
import torch.nn as nn

n = 64
m = 48


class Model(nn.Module):
    def forward(self, a, b):
        return torch.diag(a) @ b


def get_inputs():
    return [torch.randn(n), torch.randn(n, m)]


def get_init_inputs():
    return []
