"""Knobs of one evaluation."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel


class StageTimeouts(BaseModel):
    """Seconds each stage may take before the worker is killed and the verdict is `timeout`."""

    startup: float = 180.0
    load_task: float = 120.0
    compile: float = 600.0  # load_inline builds of CUDA sources can take minutes cold
    first_call: float = 180.0  # includes Triton's JIT compilation
    verify: float = 120.0
    time: float = 180.0


class EvalOptions(BaseModel):
    device: str = "cpu"
    trials: int | None = None
    timing: bool = True
    timing_mode: Literal["auto", "events", "graph"] = "auto"
    warmup: int = 3
    min_reps: int = 10
    max_reps: int = 200
    timing_budget_s: float = 1.0
    l2_flush: bool = True
    poison: bool = True
    graph_below_ms: float = 0.05
    timeouts: StageTimeouts = StageTimeouts()
    log_limit_bytes: int = 64 * 1024 * 1024
