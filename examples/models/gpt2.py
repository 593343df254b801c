"""GPT-2 (Hugging Face transformers, random weights): a decoder-only language model for whole-model profiling.

Entry: `build(size="tiny", dtype="float32", batch=None, device="cpu") -> (model, args)`.
  full: GPT-2 small (12 layers, width 768, 12 heads, vocab 50257, 1024 positions), batch 8 x 512 tokens.
  tiny: 2 layers, width 64, 4 heads, vocab 1000, 128 positions, batch 2 x 32 tokens.
The model is `GPT2LMHeadModel` built from a `GPT2Config` (no download); args = (input_ids,), int64 of
shape (batch, seq). The forward returns a `CausalLMOutputWithCrossAttentions` whose only field is
`logits` (batch, seq, vocab): `use_cache=False`, so no key/value cache comes back.
Script: `python examples/models/gpt2.py` (env FORGE_EXAMPLE_SIZE, FORGE_EXAMPLE_DTYPE, FORGE_EXAMPLE_DEVICE).
Needs transformers (`pip install -e ".[models]"`).
"""

import os
import sys

import torch

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
CONFIGS = {
    "tiny": dict(n_layer=2, n_embd=64, n_head=4, vocab_size=1000, n_positions=128),
    "full": dict(n_layer=12, n_embd=768, n_head=12, vocab_size=50257, n_positions=1024),
}
SHAPES = {
    # size: (default batch, sequence length)
    "tiny": (2, 32),
    "full": (8, 512),
}


def _import_torchvision():
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
    """Return (model, args): the model in eval mode on `device`, floating params in `dtype`; args = (input_ids,)."""
    if size not in CONFIGS:
        raise ValueError(f"size must be one of {sorted(CONFIGS)}, got {size!r}")
    torch_dtype = _dtype(dtype)
    default_batch, seq = SHAPES[size]
    batch = default_batch if batch is None else int(batch)
    try:
        _import_torchvision()  # before transformers, which imports torchvision where it is installed
    except ImportError:
        pass
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = dict(CONFIGS[size])
    # GPT-2's end-of-text id (50256) must lie inside the tiny vocabulary too.
    cfg["bos_token_id"] = cfg["eos_token_id"] = cfg["vocab_size"] - 1
    config = GPT2Config(
        **cfg,
        use_cache=False,
        # "sdpa": torch's scaled_dot_product_attention, which runs on CPU and CUDA in every dtype here (on CUDA
        # it dispatches to the flash / memory-efficient kernels, as deployed GPT-2s do); "eager" would profile
        # transformers' hand-written matmul + softmax attention instead.
        attn_implementation="sdpa",
    )
    torch.manual_seed(0)
    model = GPT2LMHeadModel(config)
    # Module.to(dtype) casts floating parameters and buffers only.
    model = model.eval().to(device=device, dtype=torch_dtype)
    input_ids = torch.randint(0, config.vocab_size, (batch, seq), generator=torch.Generator().manual_seed(1))
    return model, (input_ids.to(device),)


def main():
    size = os.environ.get("FORGE_EXAMPLE_SIZE", "tiny")
    dtype = os.environ.get("FORGE_EXAMPLE_DTYPE", "float32")
    device = os.environ.get("FORGE_EXAMPLE_DEVICE", "cuda" if torch.cuda.is_available() else "cpu")
    model, args = build(size=size, dtype=dtype, device=device)
    with torch.inference_mode():
        for _ in range(3):
            out = model(*args)
    logits = out.logits
    if logits.is_cuda:
        torch.cuda.synchronize()
    print(f"gpt2 size={size} dtype={dtype} device={device}: output {tuple(logits.shape)}")


if __name__ == "__main__":
    main()
