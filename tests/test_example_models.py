"""The whole-model examples in examples/models: the entry protocol and the script form, at the tiny size on CPU."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration  # real processes end to end: left out of the fast loop (./dev test --fast)

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "examples" / "models"

# example -> (the package it needs beyond torch, the tiny forward's output shape)
EXAMPLES = {
    "resnet": ("torchvision", (2, 1000)),
    "vit": ("torchvision", (2, 1000)),
    "gpt2": ("transformers", (2, 32, 1000)),
    "unet_block": (None, (2, 32, 8, 8)),
}


def _require(name: str) -> None:
    package = EXAMPLES[name][0]
    # find_spec, not importorskip: PyPI's torchvision (a CUDA build) fails at import beside the CPU-only torch,
    # with a RuntimeError importorskip does not catch; the examples import it through their own workaround.
    if package is not None and importlib.util.find_spec(package) is None:
        pytest.skip(f"{package} is not installed (pip install -e '.[models]')")


# The checks run in a child interpreter: torchvision and transformers (and transformers' own Triton kernels)
# must never be imported into the test process, where later tests run Triton's interpreter in-process.
CHECKS = r"""
import importlib.util, sys
import torch

name, shape = sys.argv[1], tuple(int(x) for x in sys.argv[2].split(","))
spec = importlib.util.spec_from_file_location("forge_example_" + name, sys.argv[3])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)


def output(out):
    return out.logits if hasattr(out, "logits") else out


# the tiny size: an eval-mode fp32 model on the CPU, finite output of the expected shape
model, args = module.build(size="tiny")
assert isinstance(model, torch.nn.Module) and not model.training
assert all(not m.training for m in model.modules())
assert isinstance(args, tuple) and args
assert all(p.device.type == "cpu" and p.dtype == torch.float32 for p in model.parameters())
with torch.inference_mode():
    out = output(model(*args))
assert tuple(out.shape) == shape and out.dtype == torch.float32 and torch.isfinite(out).all(), out.shape

# bfloat16: floating parameters and floating inputs in bf16, integer inputs kept
model, args = module.build(size="tiny", dtype="bfloat16")
floating = [p for p in model.parameters() if p.is_floating_point()]
assert floating and all(p.dtype == torch.bfloat16 for p in floating)
if name == "gpt2":
    assert args[0].dtype == torch.long
elif name == "unet_block":
    assert args[0].dtype == torch.bfloat16 and args[1].dtype == torch.long
else:
    assert args[0].dtype == torch.bfloat16
with torch.inference_mode():
    out = output(model(*args))
assert out.dtype == torch.bfloat16 and tuple(out.shape) == shape and torch.isfinite(out.float()).all()

# batch overrides the default; the same weights and inputs on every build
model_a, args_a = module.build(size="tiny", batch=3)
model_b, args_b = module.build(size="tiny", batch=3)
assert all(a.shape[0] == 3 for a in args_a)
assert all(torch.equal(a, b) for a, b in zip(args_a, args_b, strict=True))
state_a, state_b = model_a.state_dict(), model_b.state_dict()
assert state_a.keys() == state_b.keys() and all(torch.equal(state_a[k], state_b[k]) for k in state_a)
with torch.inference_mode():
    assert output(model_a(*args_a)).shape[0] == 3

# an unknown size or dtype is refused with a clear error
for kwargs, word in (({"size": "huge"}, "size"), ({"dtype": "float64x"}, "dtype")):
    try:
        module.build(**kwargs)
    except ValueError as exc:
        assert word in str(exc), exc
    else:
        raise AssertionError(f"build({kwargs}) was accepted")
print("checked")
"""


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_tiny_builds_bf16_batch_determinism_and_bad_arguments(name):
    """build(size="tiny"): eval mode, fp32 on the CPU, a finite output of the expected shape; bf16 parameters
    (integer inputs kept); `batch` overrides; the same weights and inputs every time; bad size/dtype refused."""
    _require(name)
    shape = ",".join(map(str, EXAMPLES[name][1]))
    proc = subprocess.run(
        [sys.executable, "-c", CHECKS, name, shape, str(MODELS / f"{name}.py")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0 and "checked" in proc.stdout, proc.stderr[-4000:]


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_script_form(name):
    _require(name)
    env = {**os.environ, "FORGE_EXAMPLE_SIZE": "tiny", "FORGE_EXAMPLE_DEVICE": "cpu"}
    env.pop("FORGE_EXAMPLE_DTYPE", None)
    proc = subprocess.run(
        [sys.executable, str(MODELS / f"{name}.py")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert f"output {EXAMPLES[name][1]}" in proc.stdout
