"""Mean over the last dimension. No FORGE settings: the engine varies the size constants itself."""

import torch
import torch.nn as nn

batch_size = 16
dim = 64


class Model(nn.Module):
    def forward(self, x):
        return x.mean(dim=-1)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
