import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.addcmul(torch.ones_like(x), x, torch.full_like(x[:1, :1], 2.0))
