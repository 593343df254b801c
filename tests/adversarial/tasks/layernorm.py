"""LayerNorm with its affine parameters (weight one, bias zero at init)."""

import torch
import torch.nn as nn

batch_size = 8
dim = 64


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.ln = nn.LayerNorm(dim)

    def forward(self, x):
        return self.ln(x)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [dim]
