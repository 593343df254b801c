"""Inputs: q, k, v (B, L, D) and a causal mask (L, L): torch.tril of ones (1.0 on and below the diagonal)."""

import math

import torch
import torch.nn as nn

B = 8
L = 64
D = 32


class Model(nn.Module):
    """Scaled dot-product attention where each query sees the keys its mask marks with a nonzero."""

    def __init__(self):
        super().__init__()

    def forward(self, q, k, v, mask):
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        scores = scores.masked_fill(mask == 0, float("-inf"))
        return torch.softmax(scores, dim=-1) @ v


def get_inputs():
    q = torch.randn(B, L, D)
    k = torch.randn(B, L, D)
    v = torch.randn(B, L, D)
    mask = torch.tril(torch.ones(L, L))
    return [q, k, v, mask]


def get_init_inputs():
    return []
