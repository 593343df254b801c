"""x times a ramp over the feature positions. No FORGE settings: the engine varies the sizes itself."""

import torch
import torch.nn as nn

batch_size = 8
dim = 64


class Model(nn.Module):
    def forward(self, x):
        return x * torch.linspace(0.5, 1.5, x.shape[-1], device=x.device, dtype=x.dtype)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
