import torch
import torch.nn as nn

batch_size = 4096
features = 8192

# forge-lsp verification settings: also verify at these sizes (one constant at a time)
FORGE = {"vary": {"batch_size": [7], "features": [1000, 999]}}


class Model(nn.Module):
    """nn.LayerNorm over the last dimension (weight/bias params, eps 1e-5)."""

    def __init__(self, features: int):
        super().__init__()
        self.ln = nn.LayerNorm(features, eps=1e-5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(x)


def get_inputs():
    x = torch.randn(batch_size, features)
    return [x]


def get_init_inputs():
    return [features]
