"""Knobs of one evaluation."""

from __future__ import annotations

import os
from typing import Literal

from pydantic import BaseModel, Field


class StageTimeouts(BaseModel):
    """Seconds each stage may take before the worker is killed and the verdict is `timeout`."""

    startup: float = 180.0
    load_task: float = 120.0
    compile: float = 600.0  # load_inline builds of CUDA sources can take minutes cold
    first_call: float = 180.0  # includes Triton's JIT compilation
    verify: float = 120.0
    time: float = 180.0
    #: waiting for the device's gate (`harness.gate`): another process's work on the GPU in flight before a timing,
    #: or another's timing before this one's work; the stage that waited gets its whole limit again after
    device_wait: float = 600.0


class EvalOptions(BaseModel):
    device: str = "cpu"
    trials: int | None = None
    timing: bool = True
    timing_mode: Literal["auto", "events", "graph"] = "auto"
    warmup: int = 3
    min_reps: int = 10
    max_reps: int = 200
    timing_budget_s: float = 1.0
    #: Timing stops early once the speedup's 95% interval spans at most this share of the speedup (0.02: 2%); the
    #: budget and `max_reps` still bound it, `min_reps` and 30 pairs come first. 0: always spend the whole budget.
    timing_precision: float = 0.02
    l2_flush: bool = True
    poison: bool = True
    #: `repeatable` runs the candidate on one input set up to `repeats` times (2 at least) within `repeat_budget_s`
    #: seconds: a race right on most calls shows here whatever the timing budget leaves for the timed calls.
    repeats: int = Field(default=32, ge=2)
    repeat_budget_s: float = 0.25
    graph_below_ms: float = 0.05
    timeouts: StageTimeouts = StageTimeouts()
    log_limit_bytes: int = 64 * 1024 * 1024
    #: Resident memory the worker's whole process tree may hold (candidate, compilers, anything it starts) before
    #: it is killed and the verdict is `out_of_memory`. None: ``$FORGE_HOST_MEMORY_LIMIT_GIB`` if set, else
    #: min(16 GiB, 75% of the machine's RAM); 0: no cap. Enforced by the parent sampling /proc, never by
    #: RLIMIT_AS (CUDA reserves far more address space than it uses).
    host_memory_limit_bytes: int | None = None
    #: How far below its starting level the device's free memory may be after an evaluation (beyond the inputs the
    #: worker keeps) before the worker is replaced; the allocator's own count gets an eighth of it.
    gpu_memory_slack_bytes: int = 512 << 20
    #: Ask for the full domain: a candidate wrong only outside the task's own conditions (a strided copy of the
    #: inputs, a side stream) is `incorrect` with that check, instead of correct on a narrowed `Domain`.
    strict: bool = False
    #: Input sets the candidate is also run on whose outputs are judged apart: drawn, run through the reference and
    #: compared in a judge process that never runs candidate code (half after verification, half after timing).
    #: 0: none (the verdict then rests on the checks inside the candidate's own process alone).
    judged_sets: int = 2
    #: The device's caching allocator maps this evaluation's new memory in expandable segments (PyTorch's
    #: ``expandable_segments``). Set by the engine on the retry after out of memory: a block the harness split
    #: between calls (a copy of an output, in the free half of a candidate's big scratch) can pin a segment, and a
    #: second scratch of the same size then finds no room on a device that holds one twice over; an expandable
    #: segment grows in place instead. The worker that ran with it is replaced after.
    expandable_segments: bool = False

    def host_memory_limit(self) -> int | None:
        """The host-memory cap in bytes, None for none (see `host_memory_limit_bytes`)."""
        if self.host_memory_limit_bytes is not None:
            return self.host_memory_limit_bytes or None
        env = os.environ.get("FORGE_HOST_MEMORY_LIMIT_GIB", "").strip()
        if env:
            try:
                gib = float(env)
            except ValueError:
                gib = -1.0
            if gib >= 0:
                return int(gib * (1 << 30)) or None
        return default_host_memory_limit()


def default_host_memory_limit() -> int | None:
    """min(16 GiB, 75% of physical memory); 16 GiB where the machine's memory cannot be read."""
    cap = 16 << 30
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return cap
    return min(cap, int(ram * 0.75)) if ram > 0 else cap
