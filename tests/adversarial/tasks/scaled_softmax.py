"""softmax(x / sqrt(dim)), as in attention. No FORGE settings: the engine varies the sizes itself."""

import math

import torch
import torch.nn as nn

batch_size = 16
dim = 64


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x / math.sqrt(x.shape[-1]), dim=-1)


def get_inputs():
    return [torch.randn(batch_size, dim) * 4]


def get_init_inputs():
    return []
