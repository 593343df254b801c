import torch
import torch.nn as nn

batch_size = 8192
dim = 8192
reduce_dim = 1

# forge-lsp verification settings: also verify at these sizes (one constant at a time)
FORGE = {"vary": {"batch_size": [7], "dim": [1000, 999]}}


class Model(nn.Module):
    """Sum reduction over one dimension: (batch_size, dim) -> (batch_size,)."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=self.dim)


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return [reduce_dim]
