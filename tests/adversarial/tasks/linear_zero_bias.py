"""Linear + ReLU whose bias a fresh model zero-initializes: a candidate may 'forget' the bias."""

import torch
import torch.nn as nn

batch_size = 8
d_in = 32
d_out = 16


class Model(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.proj = nn.Linear(d_in, d_out)
        nn.init.zeros_(self.proj.bias)  # zero at init; a trained model's bias is not

    def forward(self, x):
        return torch.relu(self.proj(x))


def get_inputs():
    return [torch.randn(batch_size, d_in)]


def get_init_inputs():
    return [d_in, d_out]
