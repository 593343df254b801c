"""Each row replaced by its mean, at the input's shape (a centring step's first half). No FORGE settings: the engine
varies the size constants itself."""

import torch
import torch.nn as nn

batch_size = 16
dim = 64


class Model(nn.Module):
    def forward(self, x):
        return x.mean(dim=-1, keepdim=True).expand_as(x).contiguous()


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
