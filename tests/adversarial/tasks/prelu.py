"""PReLU with a learned per-channel slope (0.25 at init)."""

import torch
import torch.nn as nn

batch_size = 8
channels = 16
length = 32


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.act = nn.PReLU(channels)

    def forward(self, x):
        return self.act(x)


def get_inputs():
    return [torch.randn(batch_size, channels, length)]


def get_init_inputs():
    return [channels]
