"""ResNet-50 (torchvision, random weights): a convolutional image classifier for whole-model profiling.

Entry: `build(size="tiny", dtype="float32", batch=None, device="cpu") -> (model, args)`.
  full: torchvision `resnet50(weights=None)`, batch 32 of 3x224x224 images.
  tiny: the same ResNet class and Bottleneck blocks, one block per stage with narrow bottlenecks,
        batch 2 of 3x32x32 images (a forward takes milliseconds on a 2-core CPU).
Script: `python examples/models/resnet.py` (env FORGE_EXAMPLE_SIZE, FORGE_EXAMPLE_DTYPE, FORGE_EXAMPLE_DEVICE).
Needs torchvision (`pip install -e ".[models]"`); nothing is downloaded.
"""

import os
import sys

import torch
import torch.nn as nn

try:
    from .example_support import dtype_of, import_torchvision, run_script
except ImportError:  # run as a script, or loaded from its path
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from example_support import dtype_of, import_torchvision, run_script

# At import, not only in build(): a task that `forge hotspots --extract` writes from this model imports this
# module first, then the model's classes (torchvision's, or transformers', which imports torchvision).
try:
    import_torchvision()
except ImportError:  # not installed: build() says so
    pass

SIZES = {
    # size: (default batch, image side)
    "tiny": (2, 32),
    "full": (32, 224),
}


def build(size="tiny", dtype="float32", batch=None, device="cpu"):
    """Return (model, args): the model in eval mode on `device` in `dtype`, args = (images,)."""
    if size not in SIZES:
        raise ValueError(f"size must be one of {sorted(SIZES)}, got {size!r}")
    torch_dtype = dtype_of(dtype)
    default_batch, side = SIZES[size]
    batch = default_batch if batch is None else int(batch)
    tv = import_torchvision()
    torch.manual_seed(0)
    if size == "full":
        model: nn.Module = tv.models.resnet50(weights=None)
    else:
        model = tv.models.resnet.ResNet(tv.models.resnet.Bottleneck, [1, 1, 1, 1], width_per_group=16)
    model = model.eval().to(device=device, dtype=torch_dtype)
    images = torch.randn(batch, 3, side, side, generator=torch.Generator().manual_seed(1))
    return model, (images.to(device=device, dtype=torch_dtype),)


if __name__ == "__main__":
    run_script("resnet", build)
