"""Inputs: two upper-triangular square matrices (torch.triu of randn); everything below the diagonal is zero."""

import torch
import torch.nn as nn

N = 256


class Model(nn.Module):
    """The upper triangle of A @ B (KernelBench level1 14_Matmul_for_upper_triangular_matrices)."""

    def __init__(self):
        super().__init__()

    def forward(self, A, B):
        return torch.triu(torch.matmul(A, B))


def get_inputs():
    A = torch.triu(torch.randn(N, N))
    B = torch.triu(torch.randn(N, N))
    return [A, B]


def get_init_inputs():
    return []
