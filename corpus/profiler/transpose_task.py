"""Transpose task (bank-conflict and coalescing cases): y = x.t().contiguous() on 8192x8192 fp32."""

import torch
import torch.nn as nn

size = 8192


class Model(nn.Module):
    def forward(self, x):
        return x.t().contiguous()


def get_inputs():
    return [torch.randn(size, size)]


def get_init_inputs():
    return []
