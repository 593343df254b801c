"""What an evaluation says about a candidate: plain data, no editor or worker types."""

from __future__ import annotations

from enum import Enum
from typing import Literal

from pydantic import BaseModel, Field


class Status(str, Enum):
    """Outcome of one evaluation, from worst to best."""

    compile_error = "compile_error"
    runtime_error = "runtime_error"
    timeout = "timeout"
    out_of_memory = "out_of_memory"  # over the worker's host-memory cap, or out of device memory twice
    crashed = "crashed"
    incorrect = "incorrect"
    correct = "correct"


class Check(BaseModel):
    """One named verification check and what it found."""

    name: str
    passed: bool
    detail: str = ""
    seconds: float | None = Field(None, description="what the check cost, where it is a step of its own")
    narrows: Literal["layouts", "streams"] | None = Field(
        None,
        description="the check found a limit outside the task's own conditions: it passed, and the verdict's domain "
        "was narrowed on this axis (see `Domain`)",
    )


#: The automatic repairs forge knows (`engine.repair`): which limit or failure each one lifts.
RepairKind = Literal["current_stream", "contiguous_inputs", "scalar_type"]


class Narrowing(BaseModel):
    """A check that failed only outside the task's own conditions (a strided view, a side stream): the verdict
    stands, and its domain leaves those conditions out. A guard keeps such calls on the original."""

    check: str = Field(description="the check that found the limit: noncontiguous_inputs | current_stream")
    axis: Literal["layouts", "streams"]
    found: Literal["wrong_values", "refused"] = Field(
        description="wrong_values: the candidate computes something else there; refused: it raises"
    )
    detail: str
    repair: RepairKind | None = Field(None, description="the automatic repair that lifts this limit, if one does")


class Domain(BaseModel):
    """The conditions a verdict was verified on: what a caller may rely on, and what a guard must check.

    `layouts`: "any" when the candidate was also right on strided and column-major copies of the inputs;
    "contiguous" when it was wrong there, refused them, or the reference itself does not take them.
    `streams` (CUDA only, else None): "any" when the candidate waits for work queued on whatever stream is current
    (a side stream, CUDA-graph capture); "default" when it is right on the device's default stream only (kernels
    launched on the legacy default stream: `<<<grid, block>>>` with no stream)."""

    sizes: list[str] = Field(default_factory=list, description="the input sets verified: the task's own, 'N=7'...")
    dtypes: list[str] = Field(default_factory=list, description="dtypes of the tensor inputs")
    layouts: Literal["any", "contiguous"] = "contiguous"
    streams: Literal["any", "default"] | None = None
    narrowed: list[Narrowing] = Field(default_factory=list, description="each limit found, and the check that found it")

    @property
    def full(self) -> bool:
        """Verified for any layout and (CUDA) any current stream."""
        return self.layouts == "any" and self.streams in (None, "any")

    def limits(self) -> list[str]:
        """The domain's limits in words ("contiguous inputs only", "the default stream only")."""
        out = []
        if self.layouts == "contiguous":
            out.append("contiguous inputs only")
        if self.streams == "default":
            out.append("the default stream only (not a side stream, not under CUDA-graph capture)")
        return out

    def describe(self) -> str:
        """One line: "any layout, any stream" or "contiguous inputs only; the default stream only (...)"."""
        limits = self.limits()
        if limits:
            return "; ".join(limits)
        return "any layout" + (", any current stream" if self.streams == "any" else "")


class Mismatch(BaseModel):
    """Where a candidate's output disagrees with the reference, with the worst element."""

    input_set: str
    output: str = Field(description="path of the output, e.g. out[1]['h']")
    problem: str = Field(description="dtype / shape / device / values / nan / structure")
    detail: str
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    index: list[int] | None = None
    expected: float | None = None
    actual: float | None = None
    bad_fraction: float | None = None
    near_miss: bool = Field(
        False, description="every error is within a few times the tolerance, spread over many elements: systematic"
    )


class TimingStats(BaseModel):
    """Summary of repeated timings of one callable (milliseconds)."""

    median_ms: float
    mean_ms: float
    min_ms: float
    p10_ms: float
    p90_ms: float
    n: int


class Timing(BaseModel):
    """Interleaved reference/candidate timing and the resulting speedup."""

    mode: str = Field(description="events | graph | cpu")
    reference: TimingStats
    candidate: TimingStats
    speedup: float = Field(description="median(reference) / median(candidate)")
    speedup_ci95: tuple[float, float]
    l2_flush: bool
    reference_host_ms: float | None = Field(None, description="host-side time per call (launch overhead)")
    candidate_host_ms: float | None = None
    notes: list[str] = []


class InputSpec(BaseModel):
    """One positional input of one verified input set: a tensor's dtype and shape, or a Python value's type."""

    case: str
    index: int
    dtype: str | None = Field(None, description="torch dtype name without 'torch.', for tensors")
    shape: list[int] | None = None
    contiguous: bool | None = None
    python_type: str | None = Field(None, description="type name for non-tensor inputs")


class MemoryUse(BaseModel):
    """What the evaluation's worker held in memory (bytes), and whether it gave the device's memory back."""

    host_peak_bytes: int | None = Field(
        None, description="the most the worker's process tree held resident, as sampled about every 0.1 s"
    )
    host_limit_bytes: int | None = Field(None, description="the cap on it (over it: `out_of_memory`)")
    gpu_total_bytes: int | None = None
    gpu_free_at_start_bytes: int | None = Field(
        None, description="the device's free memory once the worker had started: the level it must get back to"
    )
    gpu_free_before_bytes: int | None = Field(None, description="the device's free memory as this evaluation began")
    gpu_kept_before_bytes: int | None = Field(
        None, description="the drawn inputs the worker kept on the device as this evaluation began"
    )
    gpu_free_after_bytes: int | None = Field(
        None, description="after it, the candidate's objects dropped, the garbage collected, the caches emptied"
    )
    gpu_allocated_after_bytes: int | None = None
    gpu_reserved_after_bytes: int | None = None
    gpu_outside_bytes: int | None = Field(
        None,
        description="what the worker's own process held on the device outside torch's allocator, beyond its level "
        "at start (NVML's count for the process; None where the driver does not tell processes apart)",
    )
    gpu_kept_bytes: int | None = Field(
        None, description="the task's drawn inputs the worker keeps on the device for the next candidates"
    )
    recovered: bool | None = Field(
        None, description="the worker got back to its starting level; when not, it was replaced before the next"
    )
    retried: bool = Field(
        False,
        description="tried again in a fresh worker: out of device memory, or the worker died after serving other "
        "candidates",
    )


class Verdict(BaseModel):
    """The full answer for one (task, candidate, device) evaluation."""

    status: Status
    reason: str = ""
    failed_check: str | None = None
    checks: list[Check] = []
    mismatch: Mismatch | None = None
    checkpoint_compatible: bool | None = None
    timing: Timing | None = None
    stages: dict[str, float] = Field(default_factory=dict, description="seconds per stage")
    log_excerpt: str = ""
    traceback: str = ""
    device: str = ""
    device_name: str = ""
    backend: str = ""
    task_sha: str = ""
    candidate_sha: str = ""
    inputs: list[InputSpec] = Field(default_factory=list, description="the input sets the verdict covers")
    domain: Domain | None = Field(
        None, description="the conditions the checks covered (set once verification ran, whatever the outcome)"
    )
    memory: MemoryUse | None = None

    @property
    def correct(self) -> bool:
        return self.status is Status.correct

    @property
    def speedup(self) -> float | None:
        return self.timing.speedup if self.timing else None
