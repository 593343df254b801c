import torch
import torch.nn as nn

batch_size = 4096
dim = 8192
eps = 1e-6

# forge-lsp verification settings: also verify at these sizes (one constant at a time)
FORGE = {"vary": {"batch_size": [7], "dim": [1000, 999]}}


class Model(nn.Module):
    """RMSNorm over the last dimension: x * rsqrt(mean(x^2) + eps) * weight."""

    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return [dim, eps]
