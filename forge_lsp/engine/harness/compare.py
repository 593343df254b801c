"""Compare candidate outputs with reference outputs: every output, exact metadata, dtype tolerances."""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from typing import Any

import torch

from ..task import Tolerance
from ..verdict import Mismatch


def _flatten(obj: Any, path: str, out: list[tuple[str, Any]]) -> None:
    if isinstance(obj, (list, tuple)):
        out.append((path, ("__seq__", len(obj))))  # list and tuple are interchangeable
        for i, item in enumerate(obj):
            _flatten(item, f"{path}[{i}]", out)
    elif isinstance(obj, dict):
        out.append((path, ("__dict__", tuple(sorted(map(str, obj))))))
        for key in sorted(obj, key=str):
            _flatten(obj[key], f"{path}[{key!r}]", out)
    else:
        out.append((path, obj))


def flatten_outputs(obj: Any) -> list[tuple[str, Any]]:
    """(path, leaf) pairs, with structure markers so that shapes of containers are compared too."""
    items: list[tuple[str, Any]] = []
    _flatten(obj, "out", items)
    return items


def tensors_of(obj: Any) -> list[torch.Tensor]:
    return [leaf for _, leaf in flatten_outputs(obj) if isinstance(leaf, torch.Tensor)]


def _index(flat_idx: int, shape: torch.Size) -> list[int]:
    idx = []
    for size in reversed(shape):
        idx.append(flat_idx % size if size else 0)
        flat_idx //= max(size, 1)
    return list(reversed(idx))


#: Elements compared at a time: a chunk's float64 temporaries take a few hundred MiB at most, whatever the output's
#: size (comparing a 4 GiB output whole in float64 would take tens of GiB of the device's memory).
CHUNK = 1 << 22


def _chunks(e: torch.Tensor, a: torch.Tensor) -> Iterator[tuple[int, torch.Tensor, torch.Tensor]]:
    """(flat offset, e's elements, a's elements) over two tensors of one shape, in the same (row-major) element
    order, a bounded chunk at a time, each chunk flat and contiguous. Contiguous tensors are viewed, never copied;
    others are copied a block of rows at a time."""
    n = e.numel()
    if e.is_contiguous() and a.is_contiguous():
        ef, af = e.reshape(-1), a.reshape(-1)
        for start in range(0, n, CHUNK):
            yield start, ef[start : start + CHUNK], af[start : start + CHUNK]
        return
    row = n // e.shape[0] if e.dim() and e.shape[0] else n
    if n <= CHUNK or e.dim() == 0 or row > CHUNK:
        yield 0, e.contiguous().reshape(-1), a.contiguous().reshape(-1)
        return
    step = max(1, CHUNK // max(row, 1))
    for i in range(0, e.shape[0], step):
        yield i * row, e[i : i + step].contiguous().reshape(-1), a[i : i + step].contiguous().reshape(-1)


def _scale(e: torch.Tensor) -> float:
    """max(1, rms of e's finite elements, the others counted as 0): what `atol` is scaled by."""
    total = torch.zeros((), dtype=torch.float64, device=e.device)
    for _, ec, _ in _chunks(e, e):
        x = ec.double()
        total += torch.where(torch.isfinite(x), x, 0).square().sum()
    return max(1.0, float((total / max(e.numel(), 1)).sqrt()))


def small_output_bound(tol: Tolerance) -> float:
    """The largest relative rms error an output smaller than 1 (rms) may have as a whole. `atol` is absolute below
    that scale, so on its own it would let an output of rms 1e-3 be off by 3% in every element; this bound, which
    follows `atol` (a task that raises its tolerance raises it), does not: 1e-3 for float32, 2e-2 for 16-bit
    floats. An honest kernel's rounding is far below it, accumulation order and cancellation included."""
    return 10 * tol.atol if tol.atol < 1e-2 else 2 * tol.atol


#: How far inside its bound the single-precision check must find every element to decide alone. Rounding |a - e|
#: and the bound in float32 moves each by less than 2^-23 of itself, so an element this far inside in float32 is
#: inside in float64 too; one nearer the edge goes to the float64 examination.
_SURELY_INSIDE = 1 - 1e-5
#: An output's rms this near 1 may be on either side of it in float64 (`atol`'s scale is max(1, rms), and the
#: small-output bound holds below 1): both sides' rules are then applied, each at its strictest.
_RMS_NEAR_ONE = 1e-4
#: Below this rms, float32 squares of the errors may underflow: the small-output bound is left to float64.
_RMS_TOO_SMALL = 1e-15


def _agrees_fast(e: torch.Tensor, a: torch.Tensor, tol: Tolerance) -> tuple[bool, float] | None:
    """`_agrees` for the common case, an honest output of a 16- or 32-bit float type, in float32 and about a third
    of the passes: (True, largest error) when every element is surely within tolerance (`_SURELY_INSIDE`) and a
    small output's error as a whole surely within its bound; None, for the float64 examination to decide, when
    anything is near an edge or past it, or not finite. It never says yes where the float64 check says no: it
    only ever says yes or "look closer"."""
    if e.dtype not in (torch.float32, torch.float16, torch.bfloat16) or tol.atol < 1e-20 or tol.rtol < 0:
        return None
    f32 = torch.float32
    sq_e = torch.zeros((), dtype=torch.float64, device=e.device)
    for _, ec, _ in _chunks(e, e):
        sq_e += torch.linalg.vector_norm(ec, dtype=f32).double().square()
    rms = (sq_e / e.numel()).sqrt()
    # a lower bound of atol's scale, so the bound below is never looser than float64's
    scale = torch.clamp_min(rms * (1 - _RMS_NEAR_ONE), 1.0).to(f32)
    floor = scale * (tol.atol * _SURELY_INSIDE)
    rtol = tol.rtol * _SURELY_INSIDE
    inside = torch.ones((), dtype=torch.bool, device=e.device)
    largest = torch.zeros((), dtype=f32, device=e.device)
    sq_err = torch.zeros((), dtype=torch.float64, device=e.device)
    for _, ec, ac in _chunks(e, a):
        ec, ac = ec.to(f32), ac.to(f32)
        err = torch.sub(ac, ec).abs_()  # NaN or Inf anywhere makes some err NaN or Inf: not inside
        inside &= torch.le(err, torch.abs(ec).mul_(rtol).add_(floor)).all()
        largest = torch.maximum(largest, err.max())
        sq_err += torch.linalg.vector_norm(err, dtype=f32).double().square()
        del err
    ok, worst, rms_v, se, see = torch.stack([inside.double(), largest.double(), rms, sq_e, sq_err]).tolist()
    if not ok or not math.isfinite(rms_v) or not math.isfinite(see):
        return None
    if rms_v <= 1 + _RMS_NEAR_ONE:  # atol may be absolute: the small-output bound may apply, so it must hold
        if rms_v < _RMS_TOO_SMALL or math.sqrt(see / se) > 0.9 * small_output_bound(tol):
            return None
    return True, float(worst)


def _agrees(e: torch.Tensor, a: torch.Tensor, tol: Tolerance) -> tuple[bool, float]:
    """The common case in a few passes and one host sync per pass: whether every element is within tolerance, with
    NaN and ±Inf exactly where the reference has them, and the largest finite error. `_agrees_fast` decides the
    common case; else the same float64 arithmetic as `_float_mismatch`, so both decide every element alike; that
    one runs only when this says no, to say what is wrong. A bounded chunk at a time (`CHUNK`)."""
    fast = _agrees_fast(e, a, tol)
    if fast is not None:
        return fast
    scale = _scale(e)
    ok = torch.ones((), dtype=torch.bool, device=e.device)
    all_nan = torch.ones((), dtype=torch.bool, device=e.device)
    largest = torch.zeros((), dtype=torch.float64, device=e.device)
    sq_err = torch.zeros((), dtype=torch.float64, device=e.device)
    sq_e = torch.zeros((), dtype=torch.float64, device=e.device)
    for _, ec, ac in _chunks(e, a):
        ec, ac = ec.double(), ac.double()
        finite = torch.isfinite(ec)
        err = (ac - ec).abs()
        close = err <= tol.atol * scale + tol.rtol * ec.abs()  # NaN error (a NaN where e is finite): False
        special = (ac == ec) | (torch.isnan(ec) & torch.isnan(ac))  # where e is ±Inf or NaN, a must be the same
        ok &= torch.where(finite, close, special).all()
        all_nan &= torch.isnan(ec).all()
        largest = torch.maximum(largest, torch.where(torch.isfinite(err), err, 0).max())
        sq_err += torch.where(finite & torch.isfinite(err), err, 0).square().sum()
        sq_e += torch.where(finite, ec, 0).square().sum()
        del finite, err, close, special
    flag, worst, se, see = torch.stack([(ok & ~all_nan).to(torch.float64), largest, sq_e, sq_err]).tolist()
    if flag and scale == 1.0 and se > 0 and math.sqrt(see / se) > small_output_bound(tol):
        return False, float(worst)  # a small output off as a whole: `_float_mismatch` says by how much
    return bool(flag), float(worst)


def compare_tensor(
    expected: torch.Tensor, actual: torch.Tensor, tol: Tolerance | None, input_set: str, path: str
) -> Mismatch | None:
    """The first problem with `actual` against `expected` (None when it matches)."""
    return check_tensor(expected, actual, tol, input_set, path)[0]


def check_tensor(
    expected: torch.Tensor, actual: torch.Tensor, tol: Tolerance | None, input_set: str, path: str
) -> tuple[Mismatch | None, float]:
    """`compare_tensor`, and the largest finite absolute error (0 for exact types)."""

    def mm(problem: str, detail: str, **kw) -> Mismatch:
        return Mismatch(input_set=input_set, output=path, problem=problem, detail=detail, **kw)

    if actual.dtype != expected.dtype:
        return mm("dtype", f"dtype {actual.dtype}, expected {expected.dtype}"), 0.0
    if actual.shape != expected.shape:
        return mm("shape", f"shape {tuple(actual.shape)}, expected {tuple(expected.shape)}"), 0.0
    if actual.device != expected.device:
        return mm("device", f"device {actual.device}, expected {expected.device}"), 0.0
    e, a = expected.detach(), actual.detach()
    if e.numel() == 0:
        return None, 0.0
    if e.is_complex():
        e, a = torch.view_as_real(e), torch.view_as_real(a)
    if tol is None:
        tol = Tolerance(atol=1e-4, rtol=1e-4)
    if e.is_floating_point():
        agrees, worst = _agrees(e, a, tol)
        if agrees:
            return None, worst
        mismatch = _float_mismatch(e, a, tol, expected, mm)
        return mismatch, (mismatch.max_abs_error or 0.0) if mismatch else worst
    return _exact_mismatch(e, a, expected, mm), 0.0


def _exact_mismatch(e: torch.Tensor, a: torch.Tensor, expected: torch.Tensor, mm) -> Mismatch | None:
    differ, first = 0, None
    for start, ec, ac in _chunks(e, a):
        neq = ec != ac
        count = int(neq.sum())
        if count and first is None:
            i = int(neq.nonzero()[0])
            first = (start + i, float(ec[i]), float(ac[i]))
        differ += count
    if first is None:
        return None
    n = e.numel()
    return mm(
        "values",
        f"{differ} of {n} elements differ (exact match required for {expected.dtype})",
        index=_index(first[0], expected.shape),
        expected=first[1],
        actual=first[2],
        bad_fraction=differ / n,
    )


def _float_mismatch(e: torch.Tensor, a: torch.Tensor, tol: Tolerance, expected: torch.Tensor, mm) -> Mismatch | None:
    """What is wrong, examined exactly in float64 (only called when the fused check did not pass), a chunk at a
    time: the first NaN or Inf out of place, else the element furthest outside the tolerance."""
    n = e.numel()
    nan_e = nan_a = 0
    nan_first = inf_first = None
    for start, ec, ac in _chunks(e, a):
        e64, a64 = ec.double(), ac.double()
        en, an = torch.isnan(e64), torch.isnan(a64)
        nan_e += int(en.sum())
        nan_a += int(an.sum())
        if nan_first is None and bool((en != an).any()):
            i = int((en != an).nonzero()[0])
            nan_first = (start + i, float(e64[i]), float(a64[i]))
        if inf_first is None:
            ei, ai = torch.isinf(e64), torch.isinf(a64)
            bad = (ei != ai) | (ei & (torch.sign(e64) != torch.sign(a64)))
            if bool(bad.any()):
                i = int(bad.nonzero()[0])
                inf_first = (start + i, float(e64[i]), float(a64[i]))
    if nan_e == n:
        return mm("nan", "the reference output is entirely NaN: nothing can be verified")
    if nan_first is not None:
        return mm(
            "nan",
            f"NaN positions differ: {nan_a} NaN in candidate, {nan_e} in reference",
            index=_index(nan_first[0], expected.shape),
            expected=nan_first[1],
            actual=nan_first[2],
        )
    if inf_first is not None:
        return mm(
            "inf",
            "Inf positions or signs differ",
            index=_index(inf_first[0], expected.shape),
            expected=inf_first[1],
            actual=inf_first[2],
        )

    scale = _scale(e)
    bad_count, max_abs, max_rel, times, sq_err, sq_e = 0, 0.0, 0.0, 0.0, 0.0, 0.0
    worst: tuple[float, int, float, float] | None = None  # (err - allowed, flat index, expected, actual)
    for start, ec, ac in _chunks(e, a):
        e64, a64 = ec.double(), ac.double()
        finite = torch.isfinite(e64)
        ef = torch.where(finite, e64, torch.zeros_like(e64))
        af = torch.where(finite, a64, torch.zeros_like(a64))
        err = (af - ef).abs()
        allowed = tol.atol * scale + tol.rtol * ef.abs()
        over = err - allowed
        i = int(torch.argmax(over))
        if worst is None or float(over[i]) > worst[0]:
            worst = (float(over[i]), start + i, float(e64[i]), float(a64[i]))
        bad_count += int((err > allowed).sum())
        max_abs = max(max_abs, float(err.max()))
        max_rel = max(max_rel, float((err / ef.abs().clamp_min(1e-30)).max()))
        times = max(times, float((err / allowed.clamp_min(1e-300)).max()))
        sq_err += float(err.square().sum())
        sq_e += float(ef.square().sum())
    if not bad_count and scale == 1.0 and sq_e > 0 and worst is not None:
        rel, bound = math.sqrt(sq_err / sq_e), small_output_bound(tol)
        if rel > bound:  # every element within atol, but atol is most of a small output's size
            rms = math.sqrt(sq_e / n)
            detail = (
                f"relative rms error {rel:.3g} over an output of rms {rms:.3g}: each element is within atol="
                f"{tol.atol:g}, but for outputs smaller than 1 the error as a whole may be at most {bound:g} of the "
                "output's size"
            )
            if rel <= NEAR_MISS_TIMES * bound:
                detail += ". A near miss: a systematic difference (an approximation), not wrong elements" + (
                    tolerance_hint(str(expected.dtype).removeprefix("torch."), tol, rel / bound)
                )
            return mm(
                "values",
                detail,
                max_abs_error=max_abs,
                max_rel_error=max_rel,
                index=_index(worst[1], expected.shape),
                expected=worst[2],
                actual=worst[3],
                bad_fraction=0.0,
                near_miss=rel <= NEAR_MISS_TIMES * bound,
            )
    if bad_count and worst is not None:
        fraction = bad_count / n
        near = times <= NEAR_MISS_TIMES and fraction >= NEAR_MISS_FRACTION
        detail = (
            f"{bad_count} of {n} elements outside atol={tol.atol:g}*{scale:.3g} + "
            f"rtol={tol.rtol:g}; max abs error {max_abs:.3g}"
        )
        if near:
            detail += near_miss_note(str(expected.dtype).removeprefix("torch."), tol, times, fraction)
        return mm(
            "values",
            detail,
            max_abs_error=max_abs,
            max_rel_error=max_rel,
            index=_index(worst[1], expected.shape),
            expected=worst[2],
            actual=worst[3],
            bad_fraction=fraction,
            near_miss=near,
        )
    return None


#: A mismatch is a near miss when no error exceeds this many times the tolerance ...
NEAR_MISS_TIMES = 10.0
#: ... and at least this fraction of the elements is off (systematic, not a few wrong elements).
NEAR_MISS_FRACTION = 0.01


def tolerance_hint(dtype: str, tol: Tolerance, times: float) -> str:
    """The task setting that would accept errors `times` the tolerance: it raised by the next power of ten."""
    factor = 10 ** math.ceil(math.log10(max(times, 1.0) * 1.5))
    return (
        ". If that accuracy is acceptable for this module, raise its tolerance in the task: FORGE = "
        f'{{"tolerances": {{"{dtype}": [{tol.atol * factor:g}, {tol.rtol * factor:g}]}}}}'
    )


def near_miss_note(dtype: str, tol: Tolerance, times: float, fraction: float) -> str:
    """What a near miss means, and the tolerance setting that would accept it."""
    return (
        f". A near miss: every error is within {times:.1f}x the tolerance, and {100 * fraction:.0f}% of the "
        "elements are off — a systematic difference (an approximation, such as a tanh GELU for an exact one, or "
        "a different accumulation order), not a few wrong elements" + tolerance_hint(dtype, tol, times)
    )


def compare_outputs(expected: Any, actual: Any, tolerance_for, input_set: str) -> tuple[Mismatch | None, float]:
    """First mismatch between two output structures (or None) and the max abs error seen."""
    exp_items, act_items = flatten_outputs(expected), flatten_outputs(actual)
    max_err = 0.0
    if len(exp_items) != len(act_items):
        return Mismatch(
            input_set=input_set,
            output="out",
            problem="structure",
            detail=f"{len(act_items)} output leaves, expected {len(exp_items)}",
        ), max_err
    for (path, e), (apath, a) in zip(exp_items, act_items, strict=False):
        if isinstance(e, torch.Tensor):
            if not isinstance(a, torch.Tensor):
                return Mismatch(
                    input_set=input_set,
                    output=path,
                    problem="structure",
                    detail=f"expected a tensor, got {type(a).__name__}",
                ), max_err
            m, worst = check_tensor(e, a, tolerance_for(str(e.dtype)), input_set, path)
            max_err = max(max_err, worst)
            if m is not None:
                return m, max_err
        elif isinstance(e, float) and isinstance(a, (int, float)) and not isinstance(a, bool):
            tol = tolerance_for("float64")
            if not (abs(a - e) <= tol.atol * max(1.0, abs(e)) + tol.rtol * abs(e)):
                return Mismatch(
                    input_set=input_set,
                    output=path,
                    problem="values",
                    detail=f"{a!r}, expected {e!r}",
                    expected=e,
                    actual=float(a),
                ), max_err
        elif path != apath or type(e) is not type(a) or e != a:
            return Mismatch(
                input_set=input_set,
                output=path,
                problem="structure",
                detail=f"got {a!r} ({type(a).__name__}), expected {e!r} ({type(e).__name__})",
            ), max_err
    return None, max_err


#: Elements of each output tensor that `sample_disagrees` compares
SAMPLE = 1024


def _positions(n: int, device: torch.device) -> torch.Tensor:
    """`SAMPLE` flat positions in [0, n), drawn from the OS's randomness (no generator state in this process a
    candidate could read or replay); all of them when n is smaller."""
    if n <= SAMPLE:
        return torch.arange(n, device=device)
    drawn = torch.frombuffer(bytearray(os.urandom(8 * SAMPLE)), dtype=torch.int64)
    return drawn.remainder_(n).to(device)


def sample_disagrees(expected: Any, actual: Any, tolerance_for) -> bool:
    """A cheap look at a call the full comparison skips: whether `actual` differs from `expected` at `SAMPLE` random
    positions of each output (`compare_outputs`' own rule, `_agrees`, on the sample: `atol` scaled by its rms), or
    in its structure. True sends the call to `compare_outputs`, which decides (so a sample never rejects on its own);
    False says nothing of the elements it did not draw. An output handed back stale, left unwritten or skipped is
    wrong almost everywhere and is seen here on every call."""
    exp_items, act_items = flatten_outputs(expected), flatten_outputs(actual)
    if len(exp_items) != len(act_items):
        return True
    for (_, e), (_, a) in zip(exp_items, act_items, strict=True):
        if not isinstance(e, torch.Tensor):
            if type(a) is not type(e) or a != e:
                return True
            continue
        if not isinstance(a, torch.Tensor) or (a.dtype, a.shape, a.device) != (e.dtype, e.shape, e.device):
            return True
        if e.numel() == 0:
            continue
        idx = _positions(e.numel(), e.device)
        es, as_ = torch.take(e.detach(), idx), torch.take(a.detach(), idx)
        if es.is_complex():
            es, as_ = torch.view_as_real(es), torch.view_as_real(as_)
        if not es.is_floating_point():
            if bool((es != as_).any()):
                return True
        elif not _agrees(es, as_, tolerance_for(str(e.dtype)) or Tolerance(atol=1e-4, rtol=1e-4))[0]:
            return True
    return False
