import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        n = torch.get_num_threads()
        torch.set_num_threads(1)  # a setting of its own, for its own call only
        try:
            return torch.sin(x) * torch.cos(x)
        finally:
            torch.set_num_threads(n)
