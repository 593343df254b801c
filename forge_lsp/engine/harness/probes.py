"""What the verifier varies to catch candidates that are right only where they were looked at.

Runs inside workers only. Each probe builds inputs, parameters or output checks that an honest
candidate handles like the reference, and that a candidate tuned to the verifier does not:
- `foreign_outputs`: outputs must be plain `torch.Tensor`s (or the reference's own types), never a
  subclass or wrapper that could defer its work until after the timer stopped;
- `randomized_state_dict`: parameter values drawn at each tensor's own scale, so that terms that
  vanish at initialization (a zero bias, a unit scale, fresh BatchNorm statistics) count;
- `noncontiguous_copy` / `transposed_copy` / `scaled_copy`: the same values in a strided layout and
  in a dense column-major one, and larger values;
- `InputRefresher`: new input contents before every timed call, in place (pointers and version
  counters stay, contents change), drawn from the task's own `get_inputs()`; and now and then, for inputs
  whose elements are drawn independently, the previous contents with a few elements swapped (sum and most
  sampled values kept), so that timing cannot be served from a cache: a cache keyed on the tensor or on a
  cheap fingerprint of its values returns a stale result. No probe of timing transforms an input whose
  structure the task's code ties together (a triangular matrix, probability rows, sorted indices).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import torch

from .compare import flatten_outputs


def output_types(obj: Any) -> dict[str, type]:
    """The type of each output leaf, by path ("out[0]")."""
    return {path: type(leaf) for path, leaf in flatten_outputs(obj)}


def foreign_outputs(expected: dict[str, type] | None, actual: Any) -> list[str]:
    """Output leaves of `actual` that are a tensor subclass or wrapper where the reference (its leaf types
    `expected`, when known) has no such type: "out[0]: Lazy". Reads only the leaves' types — nothing that
    could run a subclass's code or touch a wrapper's missing storage."""
    found = []
    for path, leaf in flatten_outputs(actual):
        kind = type(leaf)
        if isinstance(leaf, torch.Tensor) and kind is not torch.Tensor:
            if expected is None or expected.get(path) is not kind:
                found.append(f"{path}: {kind.__module__}.{kind.__qualname__}")
    return found


def randomized_state_dict(state: dict[str, Any], seed: int, buffers: frozenset[str] = frozenset()) -> dict[str, Any]:
    """A state_dict of the same tensors with new values at each one's scale: all-positive tensors stay
    positive (variances, scales), constant ones (a zero bias, a unit weight) get spread around their value,
    others keep their mean and spread. Integer and boolean tensors are kept, and so are the `buffers` that hold a
    mask (two values, one of them 0: a causal ``tril`` of ones, a ``-inf`` mask): structure the module's code relies
    on, not a learned value (a model's checkpoint holds the same mask)."""
    gens: dict[Any, torch.Generator] = {}  # drawn where each tensor lives: a wide MLP's weights on the host took
    # most of a second per evaluation, on the GPU a few milliseconds
    out: dict[str, Any] = {}
    for name, t in state.items():
        if not isinstance(t, torch.Tensor) or not t.is_floating_point() or t.numel() == 0:
            out[name] = t
            continue
        if name in buffers and is_mask(t):
            out[name] = t
            continue
        gen = gens.get(t.device)
        if gen is None:
            gen = gens[t.device] = torch.Generator(device=t.device).manual_seed(seed)
        x = t.detach().double()
        noise = torch.randn(x.shape, generator=gen, dtype=torch.float64, device=t.device)
        if bool((x > 0).all()):
            new = x * torch.exp(0.3 * noise)
        elif x.numel() > 1 and float(x.std()) > 0:
            new = x.mean() + x.std() * noise
        else:
            new = x + max(0.1, float(x.abs().mean())) * 0.5 * noise
        out[name] = new.to(dtype=t.dtype, device=t.device)
    return out


def is_mask(t: torch.Tensor) -> bool:
    """Two distinct values, one of them 0 (a float mask of 0/1 or 0/-inf)."""
    if t.numel() < 2:
        return False
    values = torch.unique(t.detach())
    return values.numel() == 2 and bool((values == 0).any())


def noncontiguous_copy(x: Any) -> Any:
    """The same values as `x` in a strided, non-contiguous tensor (every other element of a wider one);
    anything else unchanged."""
    if not isinstance(x, torch.Tensor) or x.dim() == 0 or x.numel() < 2:
        return x
    wide = torch.empty((*x.shape[:-1], 2 * x.shape[-1]), dtype=x.dtype, device=x.device)
    view = wide[..., ::2]
    view.copy_(x)
    return view


def transposed_copy(x: Any) -> Any:
    """The same values as `x` in a dense tensor whose last two dimensions are laid out column-major
    (`x.mT.contiguous().mT`): no gaps, so a kernel that reads the storage linearly or copies the input's
    strides onto its output is wrong; anything else (a vector, a non-tensor) unchanged."""
    if not isinstance(x, torch.Tensor) or x.dim() < 2 or x.shape[-1] < 2 or x.shape[-2] < 2:
        return x
    return x.mT.contiguous().mT


LAYOUTS = {"strided": noncontiguous_copy, "column-major": transposed_copy}


def scaled_copy(x: Any, factor: float) -> Any:
    """Floating-point tensors multiplied by `factor`; anything else unchanged."""
    if isinstance(x, torch.Tensor) and x.is_floating_point():
        return x * factor
    return x


class InputRefresher:
    """New contents for the timed inputs before every call, in place, from the task's own distribution.

    A call's contents come from `draw(call)`, a new call of the task's ``get_inputs()`` with a seed of its own
    (made before the call, outside its timed region), or, where drawing every call costs too much, from `pool`: sets
    drawn beforehand (the verified ones among them). A pool repeats; the inputs whose elements ``get_inputs()``
    draws independently (`permutable`: the "normal" and "iid" `InputKind`s) are rotated by a random offset each
    time (a permutation of independent draws keeps their distribution), so that no two calls see the same contents;
    structured inputs (a triangular matrix, probability rows, sorted ids) repeat as drawn, never transformed.

    Every `NUDGE_EVERY`-th call instead repeats the previous call's contents with two elements of each of a few rows
    of every permutable input swapped: the shape, the set of values, the sum bit for bit (swaps are drawn until it is)
    and most sampled elements stay what they were. A cache keyed on such a fingerprint hits and returns the previous
    call's result, which the timed-output check then sees. Reference and candidate get the same contents for the
    same call, in their own tensors. The writes go through `.data`, so the tensors' version counters do not move
    either: a cache keyed on a pointer and a version counter returns a stale result too.
    """

    NUDGE_EVERY = 4
    NUDGED_ROWS = 4

    def __init__(
        self,
        targets: list[list[Any]],
        *,
        draw: Callable[[int], list[Any] | None] | None = None,
        pool: list[list[Any]] | None = None,
        permutable: list[bool] | None = None,
        seed: int | None = 0,
    ) -> None:
        self.targets = targets
        self.draw = draw
        self.pool = list(pool or [])
        self.permutable = list(permutable) if permutable is not None else [False] * len(targets[0])
        # seed None: the OS's randomness (no state a candidate in this process could read and replay)
        self.rng: random.Random = random.SystemRandom() if seed is None else random.Random(seed)
        self.previous: bool = False
        self.drawn = 0  # calls whose contents were a new draw
        self.reused = 0  # calls whose contents came from the pool

    def nudges(self, call: int) -> bool:
        """Whether `call` repeats the previous call's contents with a few elements swapped."""
        return call % self.NUDGE_EVERY == self.NUDGE_EVERY - 1 and self.previous and any(self.permutable)

    def refresh(self, call: int) -> None:
        if self.nudges(call):
            for k, probe in enumerate(self.targets[0]):
                if not self.permutable[k]:
                    continue
                swap = self._sum_keeping_swap(probe)
                if swap is not None:
                    for target in self.targets[1:]:
                        _swap(target[k], swap)
            return
        source = self.draw(call) if self.draw is not None else None
        rotate = source is None
        if source is None:
            if not self.pool:
                return
            source = self.pool[call % len(self.pool)]
            self.reused += 1
        else:
            self.drawn += 1
        shifts = [
            self.rng.randrange(max(1, _numel(x))) if rotate and self.permutable[k] else 0 for k, x in enumerate(source)
        ]
        for target in self.targets:
            for k, (dst, src) in enumerate(zip(target, source, strict=True)):
                if isinstance(dst, torch.Tensor) and isinstance(src, torch.Tensor):
                    _write(dst, src, shifts[k])
        self.previous = True

    SUM_TRIES = 64  # a draw keeps the sum about one time in five (4 rows swapped)

    def _sum_keeping_swap(self, x: Any) -> tuple[torch.Tensor, torch.Tensor] | None:
        """Swap a few elements of `x` in place, drawn until `x.sum()` stays bit for bit what it was (a
        reordering usually rounds the same; when it does not, other elements are drawn): a cache keyed on the
        sum — or the mean — hits too. The swap applied, or None (nothing to swap)."""
        if not (isinstance(x, torch.Tensor) and x.is_contiguous()):
            return None
        want = x.sum()
        swap = self._swaps(x)
        if swap is None:
            return None
        for _ in range(self.SUM_TRIES):
            _swap(x, swap)
            if bool(x.sum() == want):
                return swap
            _swap(x, swap)  # a swap undoes itself
            swap = self._swaps(x) or swap
        _swap(x, swap)  # no sum-keeping draw: the contents change all the same
        return swap

    def _swaps(self, x: Any) -> tuple[torch.Tensor, torch.Tensor] | None:
        """Flat positions to write and where their new values come from: two elements of each of a few
        random rows trade places."""
        if not (isinstance(x, torch.Tensor) and x.is_floating_point() and x.numel() > 1):
            return None
        width = x.shape[-1] if x.dim() > 1 and x.shape[-1] > 1 else x.numel()
        rows = x.numel() // width
        here: list[int] = []
        there: list[int] = []
        for start in sorted(self.rng.sample(range(rows), min(rows, self.NUDGED_ROWS))):
            i, j = self.rng.sample(range(width), 2)
            here += [start * width + i, start * width + j]
            there += [start * width + j, start * width + i]
        return torch.tensor(here), torch.tensor(there)


def _numel(x: Any) -> int:
    return x.numel() if isinstance(x, torch.Tensor) else 0


def _write(dst: torch.Tensor, src: torch.Tensor, shift: int) -> None:
    """`src`'s contents into `dst` through `.data` (no version bump), its flat elements rotated by `shift`."""
    out = dst.data
    if src.shape != dst.shape or src.dtype != dst.dtype:
        out.copy_(src)
        return
    if shift and out.is_contiguous() and src.is_contiguous():
        flat_out, flat_src, n = out.view(-1), src.reshape(-1), out.numel()
        flat_out[: n - shift].copy_(flat_src[shift:])
        flat_out[n - shift :].copy_(flat_src[:shift])
        return
    out.copy_(src)


def same_layout(a: list[Any], b: list[Any]) -> bool:
    """Whether two input sets hold tensors of the same shapes, dtypes and devices at the same places (so that one can
    be written into the other in place) and equal values elsewhere."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if isinstance(x, torch.Tensor) != isinstance(y, torch.Tensor):
            return False
        if isinstance(x, torch.Tensor):
            if x.shape != y.shape or x.dtype != y.dtype or x.device != y.device:
                return False
        elif type(x) is not type(y) or x != y:
            return False
    return True


def _swap(x: Any, swap: tuple[torch.Tensor, torch.Tensor]) -> None:
    """Trade the elements `swap` names (flat positions), in place, through `.data` (no version bump)."""
    if isinstance(x, torch.Tensor) and x.is_contiguous():
        flat = x.data.view(-1)
        here, there = swap[0].to(x.device, non_blocking=True), swap[1].to(x.device, non_blocking=True)
        flat.index_copy_(0, here, flat.index_select(0, there))


def tensor_bytes(obj: Any) -> int:
    return sum(t.numel() * t.element_size() for _, t in flatten_outputs(obj) if isinstance(t, torch.Tensor))
