import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 8192
dim = 8192

# forge-lsp verification settings: also verify at these sizes (one constant at a time)
FORGE = {"vary": {"batch_size": [7], "dim": [1000, 999]}}


class Model(nn.Module):
    """y = gelu(x + bias), exact (erf) GELU, bias broadcast over rows."""

    def __init__(self, dim: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x + self.bias)


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return [dim]
