"""Inputs: target probability rows p (softmax of randn: non-negative, each row sums to 1) and logits q."""

import torch
import torch.nn as nn

BATCH = 128
CLASSES = 1000


class Model(nn.Module):
    """Cross-entropy of each row's logits against its soft targets."""

    def __init__(self):
        super().__init__()

    def forward(self, p, q):
        return -(p * torch.log_softmax(q, dim=-1)).sum(dim=-1)


def get_inputs():
    p = torch.softmax(torch.randn(BATCH, CLASSES), dim=-1)
    q = torch.randn(BATCH, CLASSES)
    return [p, q]


def get_init_inputs():
    return []
