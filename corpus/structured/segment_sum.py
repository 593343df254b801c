"""Inputs: rows of values and, for each row, its segment id; the ids are sorted (segments are contiguous runs)."""

import torch
import torch.nn as nn

N = 4096
D = 32
SEGMENTS = 64


class Model(nn.Module):
    """The sum of the rows of each segment (index_add_ over the segment ids)."""

    def __init__(self, num_segments):
        super().__init__()
        self.num_segments = num_segments

    def forward(self, values, segment_ids):
        out = values.new_zeros(self.num_segments, values.shape[-1])
        return out.index_add_(0, segment_ids, values)


def get_inputs():
    values = torch.randn(N, D)
    segment_ids = torch.sort(torch.randint(0, SEGMENTS, (N,))).values
    return [values, segment_ids]


def get_init_inputs():
    return [SEGMENTS]
