"""A learned positional table, returned for the positions of the input: the output is a view of the module's own
state (a buffer in its state_dict), as a positional-encoding module's may be. No FORGE settings."""

import torch
import torch.nn as nn

batch_size = 8
max_len = 64
dim = 32


class Model(nn.Module):
    def __init__(self, max_len, dim):
        super().__init__()
        self.register_buffer("table", torch.randn(max_len, dim))

    def forward(self, x):
        return self.table[: x.shape[0]]


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [max_len, dim]
