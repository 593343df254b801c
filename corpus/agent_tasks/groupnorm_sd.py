import torch
import torch.nn as nn

# A Stable Diffusion UNet block's GroupNorm: 32 groups over 320 channels, 64x64 latents, batch 2.
batch_size = 2
channels = 320
groups = 32
height = 64
width = 64

FORGE = {"vary": {"batch_size": [1], "height": [32]}}


class Model(nn.Module):
    """GroupNorm(32, 320) with affine weights, NCHW fp32."""

    def __init__(self, groups: int, channels: int):
        super().__init__()
        self.norm = nn.GroupNorm(groups, channels, eps=1e-5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [groups, channels]
