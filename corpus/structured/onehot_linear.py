"""Inputs: one-hot rows (F.one_hot of random class labels, as float): a single 1.0 in each row, 0.0 elsewhere."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 256
CLASSES = 512
DIM = 128


class Model(nn.Module):
    """A bias-free linear layer applied to one-hot rows."""

    def __init__(self, classes, dim):
        super().__init__()
        self.proj = nn.Linear(classes, dim, bias=False)

    def forward(self, onehot):
        return self.proj(onehot)


def get_inputs():
    labels = torch.randint(0, CLASSES, (BATCH,))
    return [F.one_hot(labels, CLASSES).float()]


def get_init_inputs():
    return [CLASSES, DIM]
