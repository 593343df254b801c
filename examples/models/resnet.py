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

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
SIZES = {
    # size: (default batch, image side)
    "tiny": (2, 32),
    "full": (32, 224),
}


def _import_torchvision():
    """`import torchvision`, also beside a CPU-only torch.

    PyPI's torchvision wheels are CUDA builds. Next to a CPU-only torch (the CPU machines' torch==2.13.0+cpu)
    their C++ ops library cannot load, and torchvision 0.28 then fails at import with "operator
    torchvision::nms does not exist": its fake-kernel registrations for nms and qnms are not guarded by its
    ops check. The models are pure PyTorch and never call those ops, so declare the two schemas (no
    kernels) and import again; the detection ops still raise torchvision's own "Couldn't load custom C++
    ops" if called. Where the ops load (any matching build), the first import just succeeds.
    """
    try:
        import torchvision
    except RuntimeError as exc:
        if "torchvision::" not in str(exc):
            raise
        for name in [n for n in sys.modules if n == "torchvision" or n.startswith("torchvision.")]:
            del sys.modules[name]
        schemas = torch.library.Library("torchvision", "FRAGMENT")
        schemas.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        schemas.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        import torchvision

        torchvision._cpu_torch_op_schemas = schemas  # lives as long as the module: dropping it undefines them
    return torchvision


# At import, not only in build(): a task that `forge hotspots --extract` writes from this model imports this
# module first, then the model's classes (torchvision's, or transformers', which imports torchvision).
try:
    _import_torchvision()
except ImportError:  # not installed: build() says so
    pass


def _dtype(dtype):
    if isinstance(dtype, torch.dtype):
        return dtype
    try:
        return DTYPES[dtype]
    except KeyError:
        raise ValueError(f"dtype must be one of {sorted(DTYPES)}, got {dtype!r}") from None


def build(size="tiny", dtype="float32", batch=None, device="cpu"):
    """Return (model, args): the model in eval mode on `device` in `dtype`, args = (images,)."""
    if size not in SIZES:
        raise ValueError(f"size must be one of {sorted(SIZES)}, got {size!r}")
    torch_dtype = _dtype(dtype)
    default_batch, side = SIZES[size]
    batch = default_batch if batch is None else int(batch)
    tv = _import_torchvision()
    torch.manual_seed(0)
    if size == "full":
        model: nn.Module = tv.models.resnet50(weights=None)
    else:
        model = tv.models.resnet.ResNet(tv.models.resnet.Bottleneck, [1, 1, 1, 1], width_per_group=16)
    model = model.eval().to(device=device, dtype=torch_dtype)
    images = torch.randn(batch, 3, side, side, generator=torch.Generator().manual_seed(1))
    return model, (images.to(device=device, dtype=torch_dtype),)


def main():
    size = os.environ.get("FORGE_EXAMPLE_SIZE", "tiny")
    dtype = os.environ.get("FORGE_EXAMPLE_DTYPE", "float32")
    device = os.environ.get("FORGE_EXAMPLE_DEVICE", "cuda" if torch.cuda.is_available() else "cpu")
    model, args = build(size=size, dtype=dtype, device=device)
    with torch.inference_mode():
        for _ in range(3):
            out = model(*args)
    if out.is_cuda:
        torch.cuda.synchronize()
    print(f"resnet size={size} dtype={dtype} device={device}: output {tuple(out.shape)}")


if __name__ == "__main__":
    main()
