# KernelBench/level1/24_LogSoftmax.py from https://github.com/ScalingIntelligence/KernelBench (commit 423217d9fda9),
# MIT License, Copyright (c) 2023 Anne Ouyang, Simon Guo, Azalia Mirhoseini (full text:
# ../LICENSE-KernelBench). Unchanged but for sizes, shrunk so it evaluates in seconds:
#   batch_size = 4096 -> batch_size = 512
#   dim = 393216 -> dim = 16384
import torch
import torch.nn as nn

class Model(nn.Module):
    """
    Simple model that performs a LogSoftmax activation.
    """
    def __init__(self, dim: int = 1):
        super(Model, self).__init__()
        self.dim = dim
    
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Applies LogSoftmax activation to the input tensor.

        Args:
            x (torch.Tensor): Input tensor of shape (batch_size, dim).

        Returns:
            torch.Tensor: Output tensor with LogSoftmax applied, same shape as input.
        """
        return torch.log_softmax(x, dim=self.dim)

batch_size = 512
dim = 16384

def get_inputs():
    x = torch.rand(batch_size, dim)
    return [x]

def get_init_inputs():
    return []  # No special initialization inputs needed
