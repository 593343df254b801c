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

CONFIGS = {
    "tiny": dict(n_layer=2, n_embd=64, n_head=4, vocab_size=1000, n_positions=128),
    "full": dict(n_layer=12, n_embd=768, n_head=12, vocab_size=50257, n_positions=1024),
}
SHAPES = {
    # size: (default batch, sequence length)
    "tiny": (2, 32),
    "full": (8, 512),
}


def build(size="tiny", dtype="float32", batch=None, device="cpu"):
    """Return (model, args): the model in eval mode on `device`, floating params in `dtype`; args = (input_ids,)."""
    if size not in CONFIGS:
        raise ValueError(f"size must be one of {sorted(CONFIGS)}, got {size!r}")
    torch_dtype = dtype_of(dtype)
    default_batch, seq = SHAPES[size]
    batch = default_batch if batch is None else int(batch)
    try:
        import_torchvision()  # before transformers, which imports torchvision where it is installed
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


if __name__ == "__main__":
    run_script("gpt2", build, output=lambda out: out.logits)
