"""What the verifier varies to catch candidates that are right only where they were looked at.

Runs inside workers only. Each probe builds inputs, parameters or output checks that an honest
candidate handles like the reference, and that a candidate tuned to the verifier does not:
- `foreign_outputs`: outputs must be plain `torch.Tensor`s (or the reference's own types), never a
  subclass or wrapper that could defer its work until after the timer stopped;
- `randomized_state_dict`: parameter values drawn at each tensor's own scale, so that terms that
  vanish at initialization (a zero bias, a unit scale, fresh BatchNorm statistics) count;
- `noncontiguous_copy` / `scaled_copy`: the same values in a strided layout, and larger values;
- `InputRefresher`: new input contents before every timed call, in place (pointers stay; contents,
  version counters and any sampled values change), so that timing cannot be served from a cache.
"""

from __future__ import annotations

import random
from typing import Any

import torch

from .compare import flatten_outputs


def foreign_outputs(expected: Any, actual: Any) -> list[str]:
    """Output leaves of `actual` whose type is a tensor subclass or wrapper where the reference has a plain
    tensor (or any type the reference's leaf at that path does not have): "out[0]: Lazy"."""
    exp = dict(flatten_outputs(expected))
    found = []
    for path, leaf in flatten_outputs(actual):
        want = exp.get(path)
        tensor_expected = isinstance(want, torch.Tensor)
        if (tensor_expected or isinstance(leaf, torch.Tensor)) and type(leaf) is not torch.Tensor:
            if type(leaf) is not type(want):
                found.append(f"{path}: {type(leaf).__module__}.{type(leaf).__qualname__}")
    return found


def randomized_state_dict(state: dict[str, Any], seed: int) -> dict[str, Any]:
    """A state_dict of the same tensors with new values at each one's scale: all-positive tensors stay
    positive (variances, scales), constant ones (a zero bias, a unit weight) get spread around their value,
    others keep their mean and spread. Integer and boolean tensors are kept."""
    gen = torch.Generator().manual_seed(seed)
    out: dict[str, Any] = {}
    for name, t in state.items():
        if not isinstance(t, torch.Tensor) or not t.is_floating_point() or t.numel() == 0:
            out[name] = t
            continue
        x = t.detach().double().cpu()
        noise = torch.randn(x.shape, generator=gen, dtype=torch.float64)
        if bool((x > 0).all()):
            new = x * torch.exp(0.3 * noise)
        elif x.numel() > 1 and float(x.std()) > 0:
            new = x.mean() + x.std() * noise
        else:
            new = x + max(0.1, float(x.abs().mean())) * 0.5 * noise
        out[name] = new.to(dtype=t.dtype, device=t.device)
    return out


def noncontiguous_copy(x: Any) -> Any:
    """The same values as `x` in a strided, non-contiguous tensor (every other element of a wider one);
    anything else unchanged."""
    if not isinstance(x, torch.Tensor) or x.dim() == 0 or x.numel() < 2:
        return x
    wide = torch.empty((*x.shape[:-1], 2 * x.shape[-1]), dtype=x.dtype, device=x.device)
    view = wide[..., ::2]
    view.copy_(x)
    return view


def scaled_copy(x: Any, factor: float) -> Any:
    """Floating-point tensors multiplied by `factor`; anything else unchanged."""
    if isinstance(x, torch.Tensor) and x.is_floating_point():
        return x * factor
    return x


def permuted_copies(inputs: list[Any], n: int, seed: int) -> list[list[Any]]:
    """`n` variants of an input set with the same values in another order: each tensor's first dimension
    (or its elements, for a vector) shuffled on its own device. The values' distribution is the task's;
    the contents are new. Made on the device: no new draws from `get_inputs()` on the host."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        variant = []
        for x in inputs:
            if isinstance(x, torch.Tensor) and x.dim() >= 1 and x.shape[0] > 1:
                order = torch.randperm(x.shape[0], generator=gen).to(x.device)
                variant.append(x.index_select(0, order))
            else:
                variant.append(x)
        out.append(variant)
    return out


class InputRefresher:
    """New contents for the timed inputs before every call, in place.

    Contents rotate through a pool (the verified input set and reorderings of it) and — for
    floating-point tensors — are multiplied by a fresh factor in [0.8, 1) each call, so that no two
    calls see the same values even when the pool repeats. Reference and candidate get the same
    contents for the same call, in their own tensors.
    """

    def __init__(self, pool: list[list[Any]], targets: list[list[Any]], seed: int) -> None:
        self.pool = pool
        self.targets = targets
        self.rng = random.Random(seed)

    def refresh(self, call: int) -> None:
        source = self.pool[call % len(self.pool)]
        factor = self.rng.uniform(0.8, 1.0)
        for target in self.targets:
            for dst, src in zip(target, source, strict=True):
                if isinstance(dst, torch.Tensor) and isinstance(src, torch.Tensor):
                    dst.copy_(src)
                    if dst.is_floating_point():
                        dst.mul_(factor)


def tensor_bytes(obj: Any) -> int:
    return sum(t.numel() * t.element_size() for _, t in flatten_outputs(obj) if isinstance(t, torch.Tensor))
