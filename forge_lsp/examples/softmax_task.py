"""Row softmax: the bundled example task (KernelBench format)."""

import torch
import torch.nn as nn

batch_size = 64
dim = 1000

# Verify at another batch size too: candidates must not hard-code the shape.
FORGE = {"vary": {"batch_size": [37]}}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


def get_inputs():
    return [torch.randn(batch_size, dim) * 4]


def get_init_inputs():
    return []
