# ---- forge offline library: shared helpers --------------------------------------------------
import os

import torch
import triton
import triton.language as tl

_FORGE_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
_FORGE_SM_COUNT = {}


def _forge_ok(*tensors, strided=()):
    """Preconditions every library kernel shares, checked before each launch.

    All tensors on one device that Triton can run on (CUDA, or the CPU under TRITON_INTERPRET=1),
    one supported float dtype (fp32/fp16/bf16), non-empty, contiguous (except those passed as
    `strided`, which only go to torch ops), and no autograd needed (the kernels have no
    backward: with grad enabled and a tensor requiring grad, the caller uses torch).
    """
    every = tuple(tensors) + tuple(strided)
    first = every[0]
    dev = first.device
    if dev.type != "cuda" and not (dev.type == "cpu" and os.environ.get("TRITON_INTERPRET") == "1"):
        return False
    if first.dtype not in _FORGE_DTYPES:
        return False
    grad = torch.is_grad_enabled()
    for t in every:
        if t.device != dev or t.dtype != first.dtype or t.numel() == 0 or (grad and t.requires_grad):
            return False
    return all(t.is_contiguous() for t in tensors)


def _forge_fallback(op, *args, **kwargs):
    """The torch op a kernel replaces, run for inputs outside the kernel's preconditions."""
    return op(*args, **kwargs)


def _forge_warps(elements):
    """num_warps for a program that holds `elements` values: ~8-16 values per thread."""
    if elements <= 1024:
        return 4
    if elements <= 4096:
        return 8
    return 16


def _forge_sm_count(device):
    if device.type != "cuda":
        return 4
    idx = device.index if device.index is not None else torch.cuda.current_device()
    if idx not in _FORGE_SM_COUNT:
        _FORGE_SM_COUNT[idx] = torch.cuda.get_device_properties(idx).multi_processor_count
    return _FORGE_SM_COUNT[idx]


@triton.jit
def _forge_welford(ptr, n, BLOCK: tl.constexpr):
    """(mean, M2) of the n contiguous values at ptr, in fp32, reading them once.

    Each lane keeps its own Welford state; full chunks share one count (a scalar reciprocal
    per chunk, no per-element division); the lanes are merged with Chan's formula at the end.
    """
    offs = tl.arange(0, BLOCK)
    mean = tl.zeros([BLOCK], dtype=tl.float32)
    m2 = tl.zeros([BLOCK], dtype=tl.float32)
    n_full = n // BLOCK
    for k in range(0, n_full):
        x = tl.load(ptr + k * BLOCK + offs).to(tl.float32)
        delta = x - mean
        mean = mean + delta * (1.0 / (k + 1))
        m2 = m2 + delta * (x - mean)
    tail = n_full * BLOCK + offs
    tmask = tail < n
    x = tl.load(ptr + tail, mask=tmask, other=0.0).to(tl.float32)
    cnt = tmask.to(tl.float32) + n_full
    delta = x - mean
    mean = tl.where(tmask, mean + delta / tl.maximum(cnt, 1.0), mean)
    m2 = tl.where(tmask, m2 + delta * (x - mean), m2)
    total_mean = tl.sum(mean * cnt, axis=0) / n
    d = mean - total_mean
    total_m2 = tl.sum(m2 + cnt * d * d, axis=0)
    return total_mean, total_m2
