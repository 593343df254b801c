import torch
import torch.nn as nn

N = 1 << 22


class Model(nn.Module):
    def forward(self, x):
        return torch.sin(x) * torch.cos(x)


def get_inputs():
    return [torch.randn(N)]


def get_init_inputs():
    return []
