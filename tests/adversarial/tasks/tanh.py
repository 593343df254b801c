"""Elementwise tanh of pre-activations a little wider than randn."""

import torch
import torch.nn as nn

batch_size = 16
dim = 256


class Model(nn.Module):
    def forward(self, x):
        return torch.tanh(x)


def get_inputs():
    return [torch.randn(batch_size, dim) * 2]


def get_init_inputs():
    return []
