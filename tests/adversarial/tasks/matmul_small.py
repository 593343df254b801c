"""A small matrix product (a split-K reduction in a candidate)."""

import torch
import torch.nn as nn

m = 16
k = 64
n = 32


class Model(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(m, k), torch.randn(k, n)]


def get_init_inputs():
    return []
