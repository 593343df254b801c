"""The whole-model examples in examples/models: the entry protocol and the script form, at the tiny size on CPU."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

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


def _load(name: str):
    _require(name)
    spec = importlib.util.spec_from_file_location(f"forge_example_models_{name}", MODELS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _output(out) -> torch.Tensor:
    return out.logits if hasattr(out, "logits") else out


@pytest.fixture(params=sorted(EXAMPLES), scope="module")
def example(request):
    return request.param, _load(request.param)


def test_tiny_build_and_forward(example):
    name, module = example
    model, args = module.build(size="tiny")
    assert isinstance(model, torch.nn.Module)
    assert not model.training
    assert all(not m.training for m in model.modules())
    assert isinstance(args, tuple) and args
    assert all(p.device.type == "cpu" and p.dtype == torch.float32 for p in model.parameters())
    with torch.inference_mode():
        out = _output(model(*args))
    assert tuple(out.shape) == EXAMPLES[name][1]
    assert out.dtype == torch.float32
    assert torch.isfinite(out).all()


def test_tiny_bfloat16(example):
    name, module = example
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
        out = _output(model(*args))
    assert out.dtype == torch.bfloat16
    assert tuple(out.shape) == EXAMPLES[name][1]
    assert torch.isfinite(out.float()).all()


def test_batch_override_and_determinism(example):
    name, module = example
    model_a, args_a = module.build(size="tiny", batch=3)
    model_b, args_b = module.build(size="tiny", batch=3)
    assert all(a.shape[0] == 3 for a in args_a)
    for a, b in zip(args_a, args_b, strict=True):
        assert torch.equal(a, b)
    state_a, state_b = model_a.state_dict(), model_b.state_dict()
    assert state_a.keys() == state_b.keys()
    assert all(torch.equal(state_a[k], state_b[k]) for k in state_a)
    with torch.inference_mode():
        out = _output(model_a(*args_a))
    assert out.shape[0] == 3


def test_rejects_unknown_size_and_dtype(example):
    _, module = example
    with pytest.raises(ValueError, match="size"):
        module.build(size="huge")
    with pytest.raises(ValueError, match="dtype"):
        module.build(dtype="float64x")


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
