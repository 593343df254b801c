# the same op in pieces under torch's grain size (32768 elements): each piece runs on one thread
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.cat([torch.sin(c) * torch.cos(c) for c in x.split(16384)])
