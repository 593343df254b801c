"""The whole model, end to end, with its hot modules replaced (started by `hotspots.verify.check_model`).

    python -m forge_lsp.hotspots.model_check REQUEST.json

Builds the model from the entry (a script: runs it up to its model's first forward, and takes that model and
call), computes its outputs on the entry's inputs, then installs the patches
(`patching.install`) and compares the outputs again (tolerances per output dtype, ``atol`` scaled by the
reference's RMS as the engine does). When they differ, each patch is tried alone and the ones that make the
outputs differ are reverted (`reverted`, with the worst mismatch), the rest kept and checked together again.
Then the forward is timed with and without the kept patches, alternating, in rounds until the speedup's 99%
interval decides (`decide`): the patches stay only when it lies above 1; slower, each is timed alone and the ones
not faster alone go; undecided at the time budget, none stays and the result says "inconclusive" with the noise.
On the CPU, torch's threads are fitted to the cores the check gets before anything runs (`child.fit_cpu_threads`).
Writes ``result.json`` (or ``error.txt``) in the request's folder.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from ..child import fit_cpu_threads
from .child_entry import build_entry, build_script_entry, sync, user_traceback
from .child_observe import flat_tensors
from .decide import EQUAL, FASTER, INCONCLUSIVE, SLOWER, Decision, decide
from .patching import (
    COMPILE_MODES,
    EAGER_CASTS,
    PatchError,
    compile_model,
    install,
    instances_by_name,
    route,
    uncompile_model,
    uninstall,
)
from .requests import ModelCheckRequest


def _outputs(torch: Any, model: Any, args: tuple, kwargs: dict) -> list[Any]:
    with torch.no_grad():
        return [t.detach().clone() for t in flat_tensors(torch, model(*args, **kwargs))]


#: Output dtypes whose eager results carry their own rounding error, judged against the model run in fp32 too
LOW_PRECISION = ("bfloat16", "float16")
#: A low-precision output outside the tolerance is still right when its error against the model run in fp32 is at
#: most this many times eager's own error there, at worst and on average
FP32_FACTOR = 2.0


def _upcast(torch: Any, x: Any) -> Any:
    """`x` with every bf16/fp16 tensor in it as fp32 (tuples, lists and dicts followed)."""
    if isinstance(x, torch.Tensor):
        return x.float() if x.dtype in (torch.bfloat16, torch.float16) else x
    if isinstance(x, tuple | list):
        return type(x)(_upcast(torch, v) for v in x)
    if isinstance(x, dict):
        return {k: _upcast(torch, v) for k, v in x.items()}
    return x


def fp32_model(torch: Any, model: Any, args: tuple, kwargs: dict, ref: list[Any]) -> tuple[Any, list[Any] | None, str]:
    """A copy of the model with its parameters in fp32, and its outputs on the inputs in fp32, when some of the
    model's outputs are bf16/fp16; (None, None, why) when none is or the fp32 copy cannot run."""
    import copy

    if not any(str(r.dtype).removeprefix("torch.") in LOW_PRECISION for r in ref):
        return None, None, "no low-precision output"
    try:
        hi = copy.deepcopy(model).float()
        out = _outputs(torch, hi, _upcast(torch, args), _upcast(torch, kwargs))
    except Exception as exc:  # noqa: BLE001 - then only the tolerance judges
        return None, None, f"the model does not run in fp32 ({type(exc).__name__}: {str(exc)[:200]})"
    if len(out) != len(ref) or any(o.shape != r.shape for o, r in zip(out, ref, strict=True)):
        return None, None, "the model's fp32 outputs are not shaped like its own"
    return hi, out, ""


def _fp32_call(torch: Any, hi: Any, name: str, args: tuple, kwargs: dict) -> list[Any] | None:
    """Instance `name` of the fp32 copy on a call's inputs in fp32 (None when it cannot run so)."""
    try:
        with torch.no_grad():
            return [
                t.detach()
                for t in flat_tensors(
                    torch, instances_by_name(hi)[name](*_upcast(torch, args), **_upcast(torch, kwargs))
                )
            ]
    except Exception:  # noqa: BLE001 - then only the tolerance judges
        return None


def compare(
    torch: Any,
    ref: list[Any],
    got: list[Any],
    tolerances: dict[str, list[float]],
    truth: list[Any] | None = None,
) -> list[dict[str, Any]]:
    """Per output: shape, dtype, the worst absolute error, and whether it is within the dtype's tolerance. With
    `truth` (the model's outputs in fp32), a bf16/fp16 output outside the tolerance is still right when its error
    against `truth` is at most `FP32_FACTOR` times eager's own, at worst and on average (eager rounds each step to
    the low precision; a fused or fp32-internal computation rounds differently, often closer to the fp32 result)."""
    if len(ref) != len(got):
        return [{"ok": False, "why": f"{len(got)} outputs, the model gives {len(ref)}"}]
    rows = []
    for r, g in zip(ref, got, strict=True):
        dtype = str(r.dtype).removeprefix("torch.")
        if r.shape != g.shape or r.dtype != g.dtype:
            rows.append(
                {"ok": False, "dtype": dtype, "why": f"{tuple(g.shape)} {g.dtype}, expected {tuple(r.shape)} {r.dtype}"}
            )
            continue
        if not (r.is_floating_point() or r.is_complex()):
            ok = bool(torch.equal(r, g))
            rows.append({"ok": ok, "dtype": dtype, "shape": list(r.shape), "max_abs": 0.0 if ok else None})
            continue
        atol, rtol = tolerances.get(dtype, [1e-4, 1e-4])
        rf, gf = r.double(), g.double()
        scale = max(1.0, float(rf.pow(2).mean().sqrt())) if rf.numel() else 1.0
        diff = (rf - gf).abs()
        within = diff <= atol * scale + rtol * rf.abs()
        nan_same = torch.isnan(rf) & torch.isnan(gf)
        ok = bool((within | nan_same).all())
        worst = float(diff[~nan_same].max()) if diff.numel() and bool((~nan_same).any()) else 0.0
        row = {"ok": ok, "dtype": dtype, "shape": list(r.shape), "max_abs": worst, "atol": atol * scale, "rtol": rtol}
        i = len(rows)
        if not ok and truth is not None and dtype in LOW_PRECISION and rf.numel() and not bool(torch.isnan(gf).any()):
            t = truth[i].double()
            eager_err, got_err = (rf - t).abs(), (gf - t).abs()
            slack = 1e-6 * scale
            fp32 = {
                "err_max": float(got_err.max()),
                "err_mean": float(got_err.mean()),
                "eager_err_max": float(eager_err.max()),
                "eager_err_mean": float(eager_err.mean()),
                "factor": FP32_FACTOR,
            }
            fp32["ok"] = bool(
                fp32["err_max"] <= FP32_FACTOR * fp32["eager_err_max"] + slack
                and fp32["err_mean"] <= FP32_FACTOR * fp32["eager_err_mean"] + slack
            )
            row["fp32"] = fp32
            row["ok"] = fp32["ok"]
        rows.append(row)
    return rows


def _time(torch: Any, model: Any, args: tuple, kwargs: dict, device: str) -> float:
    """One forward's time in ms (CUDA events on a GPU, the wall clock on the CPU)."""
    with torch.no_grad():
        if device.startswith("cuda"):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            model(*args, **kwargs)
            end.record()
            end.synchronize()
            return float(start.elapsed_time(end))
        t0 = time.perf_counter()
        model(*args, **kwargs)
        return (time.perf_counter() - t0) * 1000


def _label(patch: dict[str, Any]) -> str:
    return str(patch.get("label") or patch["cls"])


def run(req: ModelCheckRequest) -> dict[str, Any]:
    import copy

    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device = req.device
    if req.entry.kind == "script":
        model, args, kwargs = build_script_entry(torch, req.entry, req.root)
    else:
        model, args, kwargs = build_entry(torch, req.entry, device, req.workspace)
    # before any forward or compile (inductor's CPU kernels keep the thread count they were compiled with)
    share = fit_cpu_threads(torch) if device == "cpu" else None
    modes = [m for m in req.model_modes if m]
    original = copy.deepcopy(model) if modes else None  # "before", while the model itself is compiled
    tolerances = req.tolerances
    for _ in range(2):
        _outputs(torch, model, args, kwargs)
    ref = _outputs(torch, model, args, kwargs)
    hi, truth, truth_note = fp32_model(torch, model, args, kwargs, ref)
    patches = list(req.patches)
    reverted: list[dict[str, Any]] = []

    def check(chosen: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, str]]:
        """The model's outputs with `chosen` in place, and the patches whose own instances computed something
        else than the originals on the same call inside this forward (label -> why)."""
        uninstall(model)
        names = install(model, chosen)
        for _ in range(2):  # compiled candidates compile on their first calls
            _outputs(torch, model, args, kwargs)
        named = instances_by_name(model)
        for name in names:
            named[name].__dict__["_forge_probe"] = []
        try:
            rows = compare(torch, ref, _outputs(torch, model, args, kwargs), tolerances, truth)
            bad: dict[str, str] = {}
            for patch in chosen:
                for name in patch["instances"]:
                    probe = named[name].__dict__.get("_forge_probe") or []
                    if not probe:
                        continue  # not called as captured in this forward: the model's outputs hold it
                    want, got = (flat_tensors(torch, x) for x in probe[0][:2])
                    inst_truth = _fp32_call(torch, hi, name, *probe[0][2:]) if hi is not None else None
                    prows = compare(
                        torch, [t.detach() for t in want], [t.detach() for t in got], tolerances, inst_truth
                    )
                    if not all(r["ok"] for r in prows):
                        worst = max((r.get("max_abs") or 0.0 for r in prows), default=0.0)
                        bad.setdefault(_label(patch), f"{name} computes something else (worst {worst:.3g})")
        finally:
            for name in names:
                named[name].__dict__.pop("_forge_probe", None)
        return rows, bad

    def fine(rows: list[dict[str, Any]], bad: dict[str, str]) -> bool:
        return not bad and all(r["ok"] for r in rows)

    kept: list[dict[str, Any]] = []
    for patch in patches:  # one that cannot even be installed is reverted with its reason
        try:
            uninstall(model)
            install(model, [patch])
            kept.append(patch)
        except PatchError as exc:
            reverted.append({"cls": _label(patch), "why": str(exc)})
    rows, bad = check(kept) if kept else ([], {})
    if bad:  # an instance that computes something else: revert its patch, whatever the outputs say
        reverted += [{"cls": label, "why": why} for label, why in bad.items()]
        kept = [p for p in kept if _label(p) not in bad]
        rows, bad = check(kept) if kept else ([], {})
    if not fine(rows, bad):
        alone_ok = []
        for patch in kept:
            prows, pbad = check([patch])
            if fine(prows, pbad):
                alone_ok.append(patch)
            else:
                why = pbad.get(_label(patch)) or differ("the model's outputs differ with it", prows)
                reverted.append({"cls": _label(patch), "why": why})
        kept = alone_ok
        rows, bad = check(kept) if kept else ([], {})
        if not fine(rows, bad):  # each is fine alone, not together: keep none
            why = differ("the model's outputs differ with all of them together", rows)
            reverted += [{"cls": _label(p), "why": why} for p in kept]
            kept, rows = [], []
    uninstall(model)
    reps = req.reps
    budget_s = req.timing_budget_s

    def pairs(chosen: list[dict[str, Any]]) -> Callable[[int], tuple[list[float], list[float]]]:
        """n forwards without and with `chosen`, alternating (ms each), warmed both ways first. `chosen` is installed
        once, here, and switched off and on around each forward (`route`), as a model patched once runs: installed
        again for every forward, each timed forward was a new candidate's first call."""
        warm = [True]
        uninstall(model)
        install(model, chosen)
        route(model, False)

        def sample(n: int) -> tuple[list[float], list[float]]:
            before: list[float] = []
            after: list[float] = []
            for i in range((3 if warm[0] else 0) + n):  # compiled candidates compile on their first calls
                route(model, False)
                b = _time(torch, model, args, kwargs, device)
                route(model, True)
                a = _time(torch, model, args, kwargs, device)
                if i >= (3 if warm[0] else 0):
                    before.append(b)
                    after.append(a)
            warm[0] = False
            route(model, False)
            sync(torch, device)
            return before, after

        return sample

    def timed(chosen: list[dict[str, Any]], n: int, budget: float) -> Decision:
        return decide(pairs(chosen), n, budget)

    decision = timed(kept, reps, budget_s) if kept else None
    if kept and decision is not None and decision.outcome in (SLOWER, EQUAL) and len(kept) > 1:
        # which of them: each alone, on half the budget; one not faster alone goes, and the rest is decided again
        # (equal together: one may win what another loses)
        gone = []
        for patch in kept:
            alone = timed([patch], max(10, reps // 2), budget_s / 2)
            if not alone.faster:
                gone.append(patch)
                reverted.append({"cls": _label(patch), "why": f"the whole model is not faster with it: {alone.says()}"})
        kept = [p for p in kept if all(p is not g for g in gone)]
        decision = timed(kept, reps, budget_s) if kept and gone else decision
    if kept and decision is not None and not decision.faster:  # slower, or undecided: nothing is kept
        them = "it" if len(kept) == 1 else "them"
        what = {SLOWER: "slower", EQUAL: "no faster"}.get(decision.outcome, "not decidedly faster")
        reverted += [
            {"cls": _label(p), "why": f"the whole model is {what} with {them}: {decision.says()}"} for p in kept
        ]
        kept = []
    uninstall(model)
    outcome = (
        "kept"
        if kept
        else (INCONCLUSIVE if decision is not None and decision.outcome == INCONCLUSIVE else "nothing_kept")
    )
    if decision is None:
        base = pairs([])(max(5, reps // 3))[0]
        before_ms, after_ms, speedup, ci = statistics.median(base), statistics.median(base), None, None
    else:
        before_ms, after_ms = decision.before_ms, decision.after_ms
        speedup, ci = (decision.speedup, decision.ci) if kept else (None, None)
        if not kept:
            after_ms = before_ms
    result: dict[str, Any] = {"kept": [_label(p) for p in kept], "reverted": reverted, "outputs": rows}
    result["before_ms"], result["after_ms"], result["speedup"], result["ci"] = before_ms, after_ms, speedup, ci
    result["modules_speedup"], result["modules_ci"] = speedup, ci
    result["reps"] = decision.pairs if decision is not None else reps
    result["outcome"] = outcome
    result["decision"] = decision.to_json() if decision is not None else None
    if share is not None:
        result["cpu"] = share.model_dump()
    if truth is None and truth_note != "no low-precision output":
        result["fp32_note"] = truth_note
    if modes and original is not None:
        result["model_modes"] = _model_modes(
            torch, req, original, model, kept, args, kwargs, ref, modes, reps, truth, budget_s
        )
        compiling = [m for m in modes if any(part in COMPILE_MODES for part in m.split("+"))]
        if kept and compiling:
            # the same compiles without the replacements: a whole-forward compile may do better alone than on top of
            # them (it compiles what a compiled replacement compiles, and more, with no call routed around it)
            for row in _model_modes(
                torch, req, original, model, [], args, kwargs, ref, compiling, reps, truth, budget_s
            ):
                row["replacements"] = False
                result["model_modes"].append(row)

        def race(a: dict[str, Any], b: dict[str, Any]) -> Decision:
            return _race(torch, req, original, kept, args, kwargs, a, b, reps, budget_s)

        best = pick(result["model_modes"], race, floor=speedup or 1.0)
        if best is not None:
            best["chosen"] = True
            if best.get("replacements") is False:  # the mode alone beat the replacements with it and them alone
                reverted += [
                    {
                        "cls": label,
                        "why": f"the whole model compiled in mode {best['mode']!r} without it is faster: "
                        f"{best['speedup']:.2f}× against {speedup or 1.0:.2f}× with the replacements alone",
                    }
                    for label in result["kept"]
                ]
                result["kept"] = []
                result["model_mode_alone"] = True
            result["model_mode"] = best["mode"]
            result["model_blocks"] = best.get("blocks")
            result["after_ms"], result["speedup"], result["ci"] = best["after_ms"], best["speedup"], best["ci"]
            result["before_ms"] = best["before_ms"]
            result["reps"] = best.get("reps", result["reps"])  # the forwards the chosen configuration was timed on
            result["outputs"] = best["outputs"]
            result["outcome"] = "kept"
        elif outcome != "kept" and any(m.get("decision") == INCONCLUSIVE for m in result["model_modes"]):
            result["outcome"] = INCONCLUSIVE
    return result


def pick(
    rows: list[dict[str, Any]], race: Callable[[dict[str, Any], dict[str, Any]], Decision], floor: float = 1.0
) -> dict | None:
    """The whole-model configuration to keep among `rows` (`_model_modes`): of those decidedly faster than the model
    as it is, the one with the best speedup, unless another ran faster in milliseconds. Each speedup is against the
    original timed beside that configuration, and the original's own time moves with what runs beside it (a
    launch-bound forward after a compiled one), so the lowest ratio can be the fastest forward. Then the two are
    timed against each other (`race(a, b)`: b's speedup over a) and b is kept only when that interval says it is
    faster; both rows say how the race went. None when no ratio beats `floor` (the replacements' own speedup)."""
    faster = [m for m in rows if m.get("ok") and m.get("decision") == FASTER]
    best = max(faster, key=lambda m: m["speedup"], default=None)
    if best is None or best["speedup"] <= floor:
        return None
    rival = min((m for m in faster if m is not best), key=lambda m: m["after_ms"], default=None)
    if rival is None or rival["after_ms"] >= best["after_ms"]:
        return best
    try:
        d = race(best, rival)
    except Exception as exc:  # noqa: BLE001 - two more copies of the model may not fit: the best ratio stays, said
        said = f"{_row_name(rival)} ran fewer milliseconds but could not be timed against it ({type(exc).__name__})"
        best["note"] = f"{best['note']}; {said}" if best.get("note") else said
        return best
    winner, loser = (rival, best) if d.outcome == FASTER else (best, rival)
    for row, other in ((winner, loser), (loser, winner)):  # each row names the other, not itself
        said = f"timed head to head against {_row_name(other)}: {_row_name(rival)} {d.says()}"
        row["note"] = f"{row['note']}; {said}" if row.get("note") else said
    winner["race"] = {"against": _row_name(loser), **d.to_json()}
    return winner


def _row_name(row: dict[str, Any]) -> str:
    return row["mode"] + (" without the replacements" if row.get("replacements") is False else "")


def _race(
    torch: Any,
    req: ModelCheckRequest,
    original: Any,
    kept: list[dict[str, Any]],
    args: tuple,
    kwargs: dict,
    a: dict[str, Any],
    b: dict[str, Any],
    reps: int,
    budget_s: float,
) -> Decision:
    """Configuration `b` (a row of `_model_modes`) timed against `a`, alternating, each on its own copy of the
    original model, set up as its row was (the kept replacements unless the row went without, its mode, its
    blocks): b's speedup over a, decided as every other change is."""
    import copy

    def configured(row: dict[str, Any]) -> Any:
        m = copy.deepcopy(original)
        if row.get("replacements") is not False:
            install(m, kept)
        compile_model(m, row["mode"], row.get("blocks") or req.blocks)
        for _ in range(3):  # compiles on the first call; CUDA graphs are recorded on later ones
            _outputs(torch, m, args, kwargs)
        return m

    torch._dynamo.reset()
    try:
        first, second = configured(a), configured(b)
        for _ in range(3):
            _time(torch, first, args, kwargs, req.device)
            _time(torch, second, args, kwargs, req.device)

        def sample(n: int) -> tuple[list[float], list[float]]:
            pairs = [
                (_time(torch, first, args, kwargs, req.device), _time(torch, second, args, kwargs, req.device))
                for _ in range(n)
            ]
            return [x for x, _ in pairs], [y for _, y in pairs]

        return decide(sample, reps, budget_s)
    finally:  # the two copies, their compiled code and graphs' memory go before anything else runs
        first = second = None
        torch._dynamo.reset()
        if req.device.startswith("cuda"):
            torch.cuda.empty_cache()


def _model_modes(
    torch: Any,
    req: ModelCheckRequest,
    original: Any,
    model: Any,
    kept: list[dict[str, Any]],
    args: tuple,
    kwargs: dict,
    ref: list[Any],
    modes: list[str],
    reps: int,
    truth: list[Any] | None = None,
    budget_s: float = 30.0,
) -> list[dict[str, Any]]:
    """The whole forward (the kept replacements in place) compiled in each mode: its outputs against the
    original's, and its time against the original model's (an untouched copy), alternating, decided as the
    replacements are (`decide`: faster only when the interval lies above 1)."""
    device, tolerances = req.device, req.tolerances
    rows = []
    uninstall(model)
    install(model, kept)
    queue = list(modes)

    def with_eager_casts(mode: str) -> None:
        """A compile whose low-precision outputs left eager's accuracy is tried again keeping eager's roundings."""
        parts = mode.split("+")
        again = f"{mode}+{EAGER_CASTS}"
        compiles = "blocks" in parts or any(p in COMPILE_MODES for p in parts)
        low = any(str(r.dtype).removeprefix("torch.") in LOW_PRECISION for r in ref)
        if low and compiles and EAGER_CASTS not in parts and again not in queue:
            queue.append(again)

    for mode in queue:  # grows while it is walked (`with_eager_casts`)
        row: dict[str, Any] = {"mode": mode}
        rows.append(row)
        torch._dynamo.reset()
        t0 = time.perf_counter()
        try:
            compile_model(model, mode, req.blocks)
            for _ in range(3):  # compiles on the first call; CUDA graphs are recorded on later ones
                _outputs(torch, model, args, kwargs)
            sync(torch, device)
            graphed = model.__dict__.get("_forge_graphed")
            if graphed is not None and graphed.failures:
                raise PatchError(f"cuda_graphs: the forward cannot be recorded: {graphed.failures[0]}")
            row["compile_s"] = round(time.perf_counter() - t0, 1)
            out = compare(torch, ref, _outputs(torch, model, args, kwargs), tolerances, truth)
            row["outputs"], row["ok"] = out, all(r["ok"] for r in out)
            if not row["ok"] and "blocks" in mode.split("+"):
                # the regions whose compiled error stays at eager's: blocks compiled one at a time, in the model's
                # order, each kept only while the model's outputs still hold
                whole = differ("with every hot block compiled the model's outputs differ", out)
                uncompile_model(model)
                chosen = accurate_blocks(
                    torch,
                    model,
                    mode,
                    req.blocks,
                    args,
                    kwargs,
                    ref,
                    tolerances,
                    truth,
                    time.monotonic() + budget_s,
                )
                if chosen:
                    compile_model(model, mode, chosen)
                    out = compare(torch, ref, _outputs(torch, model, args, kwargs), tolerances, truth)
                    row["outputs"], row["ok"] = out, all(r["ok"] for r in out)
                    row["blocks"] = chosen
                    row["note"] = (
                        f"{len(chosen)} of {len(req.blocks)} hot blocks compiled, the others left eager ({whole})"
                    )
                row["compile_s"] = round(time.perf_counter() - t0, 1)
                if not row["ok"]:
                    row["why"] = whole if not chosen else differ("the model's outputs differ", out)
                    with_eager_casts(mode)
                    continue
            elif not row["ok"]:
                row["why"] = differ("the model's outputs differ", out)
                with_eager_casts(mode)
                continue
            for _ in range(3):
                _time(torch, original, args, kwargs, device)
                _time(torch, model, args, kwargs, device)

            def sample(n: int) -> tuple[list[float], list[float]]:
                pairs = [
                    (_time(torch, original, args, kwargs, device), _time(torch, model, args, kwargs, device))
                    for _ in range(n)
                ]
                return [b for b, _ in pairs], [a for _, a in pairs]

            d = decide(sample, reps, budget_s)
            row["before_ms"], row["after_ms"], row["speedup"], row["ci"] = d.before_ms, d.after_ms, d.speedup, d.ci
            row["decision"], row["says"], row["reps"] = d.outcome, d.says(), d.pairs
        except PatchError as exc:  # a mode that does not apply to this model (no convolution, not on a GPU)
            said = str(exc).strip()
            for part in mode.split("+"):
                said = said.removeprefix(f"{part}: ")
            row["ok"], row["why"] = False, f"not tried: {said}"
        except Exception as exc:  # noqa: BLE001 - a mode that does not compile this model: said, not fatal
            row["ok"], row["why"] = (
                False,
                f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ''}",
            )
        finally:
            uncompile_model(model)
    uninstall(model)
    return rows


def accurate_blocks(
    torch: Any,
    model: Any,
    mode: str,
    blocks: list[str],
    args: tuple,
    kwargs: dict,
    ref: list[Any],
    tolerances: dict[str, Any],
    truth: list[Any] | None,
    deadline: float,
) -> list[str]:
    """The hot blocks that can be compiled with the model's outputs still within their tolerances (judged against
    the model in fp32 where it was): added one at a time, in the model's order, each kept only if the outputs hold
    with it and the ones before; the rest stay eager. Stops adding at `deadline`. The model is left uncompiled."""
    order = {n: i for i, n in enumerate(instances_by_name(model))}  # the model's own order: errors build up along it
    chosen: list[str] = []
    for name in sorted(blocks, key=lambda n: order.get(n, len(order))):
        if time.monotonic() > deadline:
            break
        try:
            compile_model(model, mode, [*chosen, name])
            for _ in range(2):
                _outputs(torch, model, args, kwargs)
            rows = compare(torch, ref, _outputs(torch, model, args, kwargs), tolerances, truth)
            if all(r["ok"] for r in rows):
                chosen.append(name)
        except PatchError:
            pass
        finally:
            uncompile_model(model)
    return chosen


def main(argv: list[str]) -> int:
    req = ModelCheckRequest.read(argv[1])
    out = req.out
    out.mkdir(parents=True, exist_ok=True)
    try:
        result = run(req)
    except SystemExit as exc:
        (out / "error.txt").write_text(str(exc.code))
        return 3
    except BaseException as exc:  # noqa: BLE001 - the user's model or a candidate failed: say it in its words
        (out / "error.txt").write_text(f"{type(exc).__name__}: {exc}\n\n{user_traceback(exc)}")
        return 3
    (out / "result.json").write_text(json.dumps(result, indent=1))
    return 0


def differ(what: str, rows: list[dict[str, Any]]) -> str:
    """`what`, with the worst error of the outputs that failed and, where they were judged against the model in fp32,
    their error there next to eager's own: "... (worst 1.5; against the model in fp32 1.37, eager's own 0.357)"."""
    failed = [r for r in rows if not r.get("ok")] or rows
    worst = max((r.get("max_abs") or 0.0 for r in failed), default=0.0)
    detail = f"worst {worst:.3g}"
    judged = [r["fp32"] for r in failed if isinstance(r.get("fp32"), dict) and r["fp32"].get("err_max") is not None]
    if judged:
        err = max(j["err_max"] for j in judged)
        eager = max(j.get("eager_err_max") or 0.0 for j in judged)
        detail += f"; against the model in fp32 {err:.3g}, eager's own {eager:.3g}"
    return f"{what} ({detail})"


if __name__ == "__main__":
    sys.exit(main(sys.argv))
