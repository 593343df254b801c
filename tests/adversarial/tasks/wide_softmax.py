"""A softmax over rows of 16384: every output is about 6e-5, far below float32's absolute tolerance (1e-4). No
FORGE settings: the engine varies the size constants itself."""

import torch
import torch.nn as nn

batch_size = 4
dim = 16384


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(batch_size, dim) * 0.5]


def get_init_inputs():
    return []
