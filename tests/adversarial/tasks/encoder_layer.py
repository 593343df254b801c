"""One transformer encoder layer in inference (batch first): torch runs it through its fused fast path when that is on.
No FORGE settings."""

import torch
import torch.nn as nn

batch_size = 8
seq = 32
d_model = 64


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(d_model, nhead=4, dim_feedforward=128, dropout=0.0, batch_first=True)
        self.eval()

    def forward(self, x):
        return self.layer(x)


def get_inputs():
    return [torch.randn(batch_size, seq, d_model)]


def get_init_inputs():
    return []
