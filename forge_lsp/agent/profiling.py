"""The Judge's hardware feedback: profile a candidate, keep findings and roofline as plain data."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..engine import Candidate, Task


def make_profile_fn(device: str, cache_dir: Path | None = None, timeout: float = 300.0):
    """A `ProfileFn` for the optimizer: Nsight Compute on `device`, or None on the CPU."""
    if device == "cpu":
        return None

    def profile_candidate(task: Task, candidate: Candidate) -> dict[str, Any] | None:
        from ..profiler.analyze import analyze
        from ..profiler.ncu import device_peaks, profile
        from ..profiler.roofline import place

        result = profile(task, candidate, device=device, cache_dir=cache_dir, timeout=timeout)
        if not result.kernels:
            return {"mode": result.mode, "reason": result.reason, "findings": [], "roofline": None}
        peaks, _ = device_peaks(device, result.device_name, cache_dir=cache_dir)
        kernel = max(result.kernels, key=lambda k: k.duration_ns)
        roof = place(kernel, peaks) if peaks else None
        findings = analyze(kernel, peaks) if peaks else []
        return {
            "mode": "ncu",
            "kernel": kernel.name,
            "kernels": len(result.kernels),
            "roofline": roof.model_dump() if roof else None,
            "findings": [f.model_dump(mode="json") for f in findings],
        }

    return profile_candidate
