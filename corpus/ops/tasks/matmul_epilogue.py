import torch
import torch.nn as nn

batch_size = 4096
in_features = 4096
out_features = 4096
scale = 0.5

# forge-lsp verification settings: also verify at these sizes (one constant at a time)
FORGE = {"vary": {"batch_size": [7], "out_features": [1000, 999]}}


class Model(nn.Module):
    """y = relu(x @ W.T + b) * scale (Linear followed by a ReLU/scale epilogue)."""

    def __init__(self, in_features: int, out_features: int, scale: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x)) * self.scale


def get_inputs():
    x = torch.randn(batch_size, in_features)
    return [x]


def get_init_inputs():
    return [in_features, out_features, scale]
