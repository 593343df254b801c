import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Sorted ids make each segment one run of rows: its sum is the difference of a prefix sum at the run's
    two ends, found by binary search (no scattered atomic adds). Right for sorted ids only."""

    def __init__(self, num_segments):
        super().__init__()
        self.num_segments = num_segments

    def forward(self, values, segment_ids):
        ids = segment_ids.contiguous()
        edges = torch.arange(self.num_segments + 1, device=ids.device, dtype=ids.dtype)
        bounds = torch.searchsorted(ids, edges)  # bounds[s]: the first row of segment s
        prefix = torch.cat([values.new_zeros(1, values.shape[-1]), torch.cumsum(values, dim=0)])
        return prefix[bounds[1:]] - prefix[bounds[:-1]]
