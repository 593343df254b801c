"""Softmax of a learned per-feature scale times x; the scale starts at one."""

import torch
import torch.nn as nn

batch_size = 8
dim = 48


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return torch.softmax(x * self.scale, dim=-1)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [dim]
