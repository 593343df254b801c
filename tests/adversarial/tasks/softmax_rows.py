"""Row softmax at a power-of-two size. No FORGE settings: the engine varies the sizes itself."""

import torch
import torch.nn as nn

batch_size = 16
dim = 64


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)


def get_inputs():
    return [torch.randn(batch_size, dim) * 2]


def get_init_inputs():
    return []
