"""What the example models share: dtype names, importing torchvision beside a CPU-only torch, the script form.

Each example imports this module (as `examples.models.example_support` inside the package, or from its own
folder when it runs as a script or is loaded from its path).
"""

import os
import sys

import torch

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def dtype_of(dtype):
    """A torch dtype from its name (float32, bfloat16, float16), or the dtype itself."""
    if isinstance(dtype, torch.dtype):
        return dtype
    try:
        return DTYPES[dtype]
    except KeyError:
        raise ValueError(f"dtype must be one of {sorted(DTYPES)}, got {dtype!r}") from None


def import_torchvision():
    """`import torchvision`, also beside a CPU-only torch (transformers imports it when it is installed).

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


def run_script(name, build, output=lambda out: out):
    """The examples' script form: build from FORGE_EXAMPLE_SIZE / _DTYPE / _DEVICE, run 3 forwards, print the
    output's shape."""
    size = os.environ.get("FORGE_EXAMPLE_SIZE", "tiny")
    dtype = os.environ.get("FORGE_EXAMPLE_DTYPE", "float32")
    device = os.environ.get("FORGE_EXAMPLE_DEVICE", "cuda" if torch.cuda.is_available() else "cpu")
    model, args = build(size=size, dtype=dtype, device=device)
    with torch.inference_mode():
        for _ in range(3):
            out = output(model(*args))
    if out.is_cuda:
        torch.cuda.synchronize()
    print(f"{name} size={size} dtype={dtype} device={device}: output {tuple(out.shape)}")
