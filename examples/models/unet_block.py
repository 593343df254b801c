"""A diffusion UNet block in plain PyTorch (random weights), shaped like Stable Diffusion's first 64x64 stage.

Classes (module level, so profiles point at this file): `ResBlock` (GroupNorm, SiLU, 3x3 Conv2d, a
time-embedding projection added in between, residual), `AttnBlock` (GroupNorm, qkv projection,
scaled_dot_product_attention over the H*W positions, output projection, residual) and `UNetBlock`
(sinusoidal timestep embedding + MLP, then ResBlock -> AttnBlock twice).

Entry: `build(size="tiny", dtype="float32", batch=None, device="cpu") -> (model, args)`, args = (x, timesteps):
  full: 320 channels at 64x64 (an SD latent), time embedding 1280, 8 heads, 32 groups, batch 8.
  tiny: 32 channels at 8x8, time embedding 64, 2 heads, 8 groups, batch 2.
x is (batch, channels, H, W) in `dtype`; timesteps are int64 diffusion steps in [0, 1000) of shape (batch,).
Script: `python examples/models/unet_block.py` (env FORGE_EXAMPLE_SIZE, FORGE_EXAMPLE_DTYPE, FORGE_EXAMPLE_DEVICE).
Needs only torch.
"""

import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

try:
    from .example_support import dtype_of, run_script
except ImportError:  # run as a script, or loaded from its path
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from example_support import dtype_of, run_script

CONFIGS = {
    "tiny": dict(channels=32, temb_channels=64, heads=2, groups=8),
    "full": dict(channels=320, temb_channels=1280, heads=8, groups=32),
}
SHAPES = {
    # size: (default batch, spatial side)
    "tiny": (2, 8),
    "full": (8, 64),
}


def timestep_embedding(timesteps: torch.Tensor, dim: int, max_period: float = 10000.0) -> torch.Tensor:
    """Sinusoidal embedding of integer timesteps, (batch,) -> (batch, dim), computed in float32."""
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, device=timesteps.device, dtype=torch.float32) / half)
    angles = timesteps.float()[:, None] * freqs[None, :]
    return torch.cat([torch.cos(angles), torch.sin(angles)], dim=-1)


class ResBlock(nn.Module):
    """GroupNorm -> SiLU -> Conv3x3, + projected time embedding, GroupNorm -> SiLU -> Conv3x3, + skip."""

    def __init__(self, in_channels: int, out_channels: int, temb_channels: int, groups: int, eps: float = 1e-5):
        super().__init__()
        self.norm1 = nn.GroupNorm(groups, in_channels, eps=eps)
        self.conv1 = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1)
        self.time_emb_proj = nn.Linear(temb_channels, out_channels)
        self.norm2 = nn.GroupNorm(groups, out_channels, eps=eps)
        self.conv2 = nn.Conv2d(out_channels, out_channels, kernel_size=3, padding=1)
        self.act = nn.SiLU()
        if in_channels == out_channels:
            self.skip: nn.Module = nn.Identity()
        else:
            self.skip = nn.Conv2d(in_channels, out_channels, kernel_size=1)

    def forward(self, x: torch.Tensor, temb: torch.Tensor) -> torch.Tensor:
        h = self.conv1(self.act(self.norm1(x)))
        h = h + self.time_emb_proj(self.act(temb))[:, :, None, None]
        h = self.conv2(self.act(self.norm2(h)))
        return self.skip(x) + h


class AttnBlock(nn.Module):
    """Self-attention over the H*W positions: GroupNorm -> qkv Linear -> SDPA -> out Linear, + residual."""

    def __init__(self, channels: int, heads: int, groups: int, eps: float = 1e-6):
        super().__init__()
        if channels % heads:
            raise ValueError(f"channels ({channels}) must be a multiple of heads ({heads})")
        self.heads = heads
        self.norm = nn.GroupNorm(groups, channels, eps=eps)
        self.qkv = nn.Linear(channels, 3 * channels)
        self.proj_out = nn.Linear(channels, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, h, w = x.shape
        tokens = self.norm(x).flatten(2).transpose(1, 2)  # (b, h*w, c)
        q, k, v = self.qkv(tokens).chunk(3, dim=-1)
        q, k, v = (t.reshape(b, h * w, self.heads, c // self.heads).transpose(1, 2) for t in (q, k, v))
        out = F.scaled_dot_product_attention(q, k, v)  # (b, heads, h*w, c // heads)
        out = self.proj_out(out.transpose(1, 2).reshape(b, h * w, c))
        return x + out.transpose(1, 2).reshape(b, c, h, w)


class UNetBlock(nn.Module):
    """Timestep embedding MLP, then `layers` x (ResBlock -> AttnBlock), like an SD down block without downsampling."""

    def __init__(
        self, in_channels: int, out_channels: int, temb_channels: int, heads: int, groups: int, layers: int = 2
    ):
        super().__init__()
        self.time_channels = in_channels
        self.time_embed = nn.Sequential(
            nn.Linear(in_channels, temb_channels), nn.SiLU(), nn.Linear(temb_channels, temb_channels)
        )
        self.resnets = nn.ModuleList(
            ResBlock(in_channels if i == 0 else out_channels, out_channels, temb_channels, groups)
            for i in range(layers)
        )
        self.attentions = nn.ModuleList(AttnBlock(out_channels, heads, groups) for _ in range(layers))

    def forward(self, x: torch.Tensor, timesteps: torch.Tensor) -> torch.Tensor:
        temb = timestep_embedding(timesteps, self.time_channels).to(x.dtype)
        temb = self.time_embed(temb)
        for resnet, attention in zip(self.resnets, self.attentions, strict=True):
            x = attention(resnet(x, temb))
        return x


def build(size="tiny", dtype="float32", batch=None, device="cpu"):
    """Return (model, args): the block in eval mode on `device` in `dtype`; args = (x, timesteps)."""
    if size not in CONFIGS:
        raise ValueError(f"size must be one of {sorted(CONFIGS)}, got {size!r}")
    torch_dtype = dtype_of(dtype)
    default_batch, side = SHAPES[size]
    batch = default_batch if batch is None else int(batch)
    cfg = CONFIGS[size]
    torch.manual_seed(0)
    model = UNetBlock(cfg["channels"], cfg["channels"], cfg["temb_channels"], heads=cfg["heads"], groups=cfg["groups"])
    model = model.eval().to(device=device, dtype=torch_dtype)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(batch, cfg["channels"], side, side, generator=gen)
    timesteps = torch.randint(0, 1000, (batch,), generator=gen)
    return model, (x.to(device=device, dtype=torch_dtype), timesteps.to(device))


if __name__ == "__main__":
    run_script("unet_block", build)
