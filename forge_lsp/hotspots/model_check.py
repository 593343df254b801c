"""The whole model, end to end, with its hot modules replaced (started by `hotspots.verify.check_model`).

    python -m forge_lsp.hotspots.model_check REQUEST.json

Builds the model from the entry, computes its outputs on the entry's inputs, then installs the patches
(`patching.install`) and compares the outputs again (tolerances per output dtype, ``atol`` scaled by the
reference's RMS as the engine does). When they differ, each patch is tried alone and the ones that make the
outputs differ are reverted (`reverted`, with the worst mismatch), the rest kept and checked together again.
Then the forward is timed with and without the kept patches, alternating, and the speedup given with a 95%
bootstrap interval. Writes ``result.json`` (or ``error.txt``) in the request's folder.
"""

from __future__ import annotations

import json
import random
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from .patching import PatchError, install, uninstall
from .runner import _flat_tensors, _sync, build_entry


def _outputs(torch: Any, model: Any, args: tuple, kwargs: dict) -> list[Any]:
    with torch.no_grad():
        return [t.detach().clone() for t in _flat_tensors(torch, model(*args, **kwargs))]


def compare(torch: Any, ref: list[Any], got: list[Any], tolerances: dict[str, list[float]]) -> list[dict[str, Any]]:
    """Per output: shape, dtype, the worst absolute error, and whether it is within the dtype's tolerance."""
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
        rows.append(
            {"ok": ok, "dtype": dtype, "shape": list(r.shape), "max_abs": worst, "atol": atol * scale, "rtol": rtol}
        )
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


def run(req: dict[str, Any]) -> dict[str, Any]:
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device = req["device"]
    model, args, kwargs = build_entry(torch, req["entry"], device, Path(req["workspace"]))
    tolerances = req.get("tolerances", {})
    for _ in range(2):
        _outputs(torch, model, args, kwargs)
    ref = _outputs(torch, model, args, kwargs)
    patches = list(req["patches"])
    reverted: list[dict[str, Any]] = []

    def check(chosen: list[dict[str, Any]]) -> tuple[bool, list[dict[str, Any]]]:
        uninstall(model)
        install(model, chosen)
        for _ in range(2):  # compiled candidates compile on their first calls
            _outputs(torch, model, args, kwargs)
        rows = compare(torch, ref, _outputs(torch, model, args, kwargs), tolerances)
        return all(r["ok"] for r in rows), rows

    kept: list[dict[str, Any]] = []
    for patch in patches:  # one that cannot even be installed is reverted with its reason
        try:
            uninstall(model)
            install(model, [patch])
            kept.append(patch)
        except PatchError as exc:
            reverted.append({"cls": patch["cls"], "why": str(exc)})
    ok, rows = check(kept) if kept else (True, [])
    if not ok:
        alone_ok = []
        for patch in kept:
            fine, prows = check([patch])
            if fine:
                alone_ok.append(patch)
            else:
                worst = max((r.get("max_abs") or 0.0 for r in prows), default=0.0)
                reverted.append({"cls": patch["cls"], "why": f"the model's outputs differ with it (worst {worst:.3g})"})
        kept = alone_ok
        ok, rows = check(kept) if kept else (True, [])
        if not ok:  # each is fine alone, not together: keep none
            reverted += [{"cls": p["cls"], "why": "the model's outputs differ with all of them together"} for p in kept]
            kept, rows = [], []
    uninstall(model)
    reps = int(req.get("reps", 30))

    def timed(chosen: list[dict[str, Any]], n: int) -> tuple[float, float, float | None, list[float] | None]:
        """(ms without, ms with, speedup, 95% interval), alternating one forward without and one with."""
        before: list[float] = []
        after: list[float] = []
        for _ in range(3):  # warm both ways (compiled candidates compile on their first calls)
            uninstall(model)
            _time(torch, model, args, kwargs, device)
            if chosen:
                install(model, chosen)
                _time(torch, model, args, kwargs, device)
        for _ in range(n):
            uninstall(model)
            before.append(_time(torch, model, args, kwargs, device))
            if chosen:
                install(model, chosen)
                after.append(_time(torch, model, args, kwargs, device))
        uninstall(model)
        _sync(torch, device)
        b, a = statistics.median(before), statistics.median(after) if after else statistics.median(before)
        if not after:
            return b, a, None, None
        rng = random.Random(0)
        ratios = sorted(
            statistics.median(rng.choices(before, k=n)) / max(statistics.median(rng.choices(after, k=n)), 1e-12)
            for _ in range(2000)
        )
        return b, a, b / a if a > 0 else None, [ratios[50], ratios[1949]]

    before_ms, after_ms, speedup, ci = timed(kept, reps)
    if kept and ci is not None and ci[1] < 1.0:  # the model is slower with them: keep only those that are not
        slower = []
        for patch in kept if len(kept) > 1 else []:
            _, _, s_alone, ci_alone = timed([patch], max(10, reps // 2))
            if ci_alone is not None and ci_alone[1] < 1.0:
                slower.append((patch, s_alone))
        if len(kept) == 1:
            slower = [(kept[0], speedup)]
        for patch, s_alone in slower:
            how = f"{s_alone:.2f}x" if s_alone is not None else "slower"
            reverted.append({"cls": patch["cls"], "why": f"the whole model is slower with it ({how} end to end)"})
        if slower:
            gone = {id(p) for p, _ in slower}
            kept = [p for p in kept if id(p) not in gone]
        else:  # none is slower alone, all are together: keep none
            how = f"{speedup:.2f}x" if speedup is not None else "slower"
            reverted += [{"cls": p["cls"], "why": f"the whole model is slower with them ({how})"} for p in kept]
            kept = []
        before_ms, after_ms, speedup, ci = timed(kept, reps)
    result: dict[str, Any] = {"kept": [p["cls"] for p in kept], "reverted": reverted, "outputs": rows}
    result["before_ms"], result["after_ms"], result["speedup"], result["ci"] = before_ms, after_ms, speedup, ci
    result["reps"] = reps
    return result


def main(argv: list[str]) -> int:
    req = json.loads(Path(argv[1]).read_text())
    out = Path(req["out"])
    out.mkdir(parents=True, exist_ok=True)
    try:
        result = run(req)
    except SystemExit as exc:
        (out / "error.txt").write_text(str(exc.code))
        return 3
    except BaseException as exc:  # noqa: BLE001 - the user's model or a candidate failed: say it in its words
        (out / "error.txt").write_text(f"{type(exc).__name__}: {exc}\n\n{traceback.format_exc()}")
        return 3
    (out / "result.json").write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
