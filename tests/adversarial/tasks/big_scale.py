"""An affine map of a 4 MiB input: each call's output is 4 MiB, so a harness that keeps every earlier output to
see whether later calls change it runs out of room after some. No FORGE settings."""

import torch
import torch.nn as nn

rows = 1024
cols = 1024


class Model(nn.Module):
    def forward(self, x):
        return x * 2.0 + 1.0


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return []
