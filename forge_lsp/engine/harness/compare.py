"""Compare candidate outputs with reference outputs: every output, exact metadata, dtype tolerances."""

from __future__ import annotations

import math
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


def _agrees(e: torch.Tensor, a: torch.Tensor, tol: Tolerance) -> tuple[bool, float]:
    """The common case in a few passes and one host sync: whether every element is within tolerance, with NaN and
    ±Inf exactly where the reference has them, and the largest finite error. The same float64 arithmetic as
    `_float_mismatch`, so both decide every element alike; that one runs only when this says no, to say what is
    wrong."""
    e, a = e.double(), a.double()
    finite = torch.isfinite(e)
    ef = torch.where(finite, e, 0)
    scale = ef.square().mean().sqrt().clamp_min(1.0)
    err = (a - e).abs()
    close = err <= tol.atol * scale + tol.rtol * ef.abs()  # NaN error (a NaN where e is finite): False
    special = (a == e) | (torch.isnan(e) & torch.isnan(a))  # where e is ±Inf or NaN, a must be the same
    ok = torch.where(finite, close, special).all() & ~torch.isnan(e).all()
    largest = torch.where(torch.isfinite(err), err, 0).max().to(torch.float64)
    flag, worst = torch.stack([ok.to(torch.float64), largest]).tolist()
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
    e = expected.detach().contiguous().reshape(-1)
    a = actual.detach().contiguous().reshape(-1)
    if e.numel() == 0:
        return None, 0.0
    if e.is_complex():
        e, a = torch.view_as_real(e).reshape(-1), torch.view_as_real(a).reshape(-1)
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
    neq = e != a
    if not bool(neq.any()):
        return None
    i = int(neq.nonzero()[0])
    return mm(
        "values",
        f"{int(neq.sum())} of {e.numel()} elements differ (exact match required for {expected.dtype})",
        index=_index(i, expected.shape),
        expected=float(e[i]),
        actual=float(a[i]),
        bad_fraction=float(neq.float().mean()),
    )


def _float_mismatch(e: torch.Tensor, a: torch.Tensor, tol: Tolerance, expected: torch.Tensor, mm) -> Mismatch | None:
    """What is wrong, examined exactly in float64 (only called when the fused check did not pass)."""
    e64, a64 = e.double(), a.double()
    e_nan, a_nan = torch.isnan(e64), torch.isnan(a64)
    if bool(e_nan.all()):
        return mm("nan", "the reference output is entirely NaN: nothing can be verified")
    if bool((e_nan != a_nan).any()):
        i = int((e_nan != a_nan).nonzero()[0])
        return mm(
            "nan",
            f"NaN positions differ: {int(a_nan.sum())} NaN in candidate, {int(e_nan.sum())} in reference",
            index=_index(i, expected.shape),
            expected=float(e64[i]),
            actual=float(a64[i]),
        )
    e_inf, a_inf = torch.isinf(e64), torch.isinf(a64)
    inf_bad = (e_inf != a_inf) | (e_inf & (torch.sign(e64) != torch.sign(a64)))
    if bool(inf_bad.any()):
        i = int(inf_bad.nonzero()[0])
        return mm(
            "inf",
            "Inf positions or signs differ",
            index=_index(i, expected.shape),
            expected=float(e64[i]),
            actual=float(a64[i]),
        )

    finite = torch.isfinite(e64)
    ef = torch.where(finite, e64, torch.zeros_like(e64))
    af = torch.where(finite, a64, torch.zeros_like(a64))
    scale = max(1.0, float(ef.square().mean().sqrt()))
    err = (af - ef).abs()
    allowed = tol.atol * scale + tol.rtol * ef.abs()
    bad = err > allowed
    i = int(torch.argmax(err - allowed))
    max_abs = float(err.max())
    max_rel = float((err / ef.abs().clamp_min(1e-30)).max())
    if bool(bad.any()):
        fraction = float(bad.double().mean())
        times = float((err / allowed.clamp_min(1e-300)).max())
        near = times <= NEAR_MISS_TIMES and fraction >= NEAR_MISS_FRACTION
        detail = (
            f"{int(bad.sum())} of {e.numel()} elements outside atol={tol.atol:g}*{scale:.3g} + "
            f"rtol={tol.rtol:g}; max abs error {max_abs:.3g}"
        )
        if near:
            detail += near_miss_note(str(expected.dtype).removeprefix("torch."), tol, times, fraction)
        return mm(
            "values",
            detail,
            max_abs_error=max_abs,
            max_rel_error=max_rel,
            index=_index(i, expected.shape),
            expected=float(e64[i]),
            actual=float(a64[i]),
            bad_fraction=fraction,
            near_miss=near,
        )
    return None


#: A mismatch is a near miss when no error exceeds this many times the tolerance ...
NEAR_MISS_TIMES = 10.0
#: ... and at least this fraction of the elements is off (systematic, not a few wrong elements).
NEAR_MISS_FRACTION = 0.01


def near_miss_note(dtype: str, tol: Tolerance, times: float, fraction: float) -> str:
    """What a near miss means, and the tolerance setting that would accept it."""
    factor = 10 ** math.ceil(math.log10(max(times, 1.0) * 1.5))
    return (
        f". A near miss: every error is within {times:.1f}x the tolerance, and {100 * fraction:.0f}% of the "
        "elements are off — a systematic difference (an approximation, such as a tanh GELU for an exact one, or "
        "a different accumulation order), not a few wrong elements. If that accuracy is acceptable for this "
        f'module, raise its tolerance in the task: FORGE = {{"tolerances": {{"{dtype}": '
        f"[{tol.atol * factor:g}, {tol.rtol * factor:g}]}}}}"
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
