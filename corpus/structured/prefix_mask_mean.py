"""Inputs: x (B, L, D) and a float padding mask (B, L): 1.0 on a prefix of each row (its length, >= 1), 0.0 after."""

import torch
import torch.nn as nn

B = 32
L = 128
D = 64


class Model(nn.Module):
    """The mean of x over the unmasked positions of each row."""

    def __init__(self):
        super().__init__()

    def forward(self, x, mask):
        return (x * mask[..., None]).sum(dim=1) / mask.sum(dim=1, keepdim=True)


def get_inputs():
    x = torch.randn(B, L, D)
    lengths = torch.randint(1, L + 1, (B,))
    mask = (torch.arange(L) < lengths[:, None]).float()
    return [x, mask]


def get_init_inputs():
    return []
