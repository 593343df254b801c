import torch
import torch.nn as nn

batch_size = 4096
dim = 8192

# forge-lsp verification settings: also verify at these sizes (one constant at a time)
FORGE = {"vary": {"batch_size": [7], "dim": [1000, 999]}}


class Model(nn.Module):
    """Row softmax over dim=1 of a (batch_size, dim) fp32 tensor."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return []
