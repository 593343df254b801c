"""What an evaluation says about a candidate: plain data, no editor or worker types."""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel, Field


class Status(str, Enum):
    """Outcome of one evaluation, from worst to best."""

    compile_error = "compile_error"
    runtime_error = "runtime_error"
    timeout = "timeout"
    crashed = "crashed"
    incorrect = "incorrect"
    correct = "correct"


class Check(BaseModel):
    """One named verification check and what it found."""

    name: str
    passed: bool
    detail: str = ""
    seconds: float | None = Field(None, description="what the check cost, where it is a step of its own")


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

    @property
    def correct(self) -> bool:
        return self.status is Status.correct

    @property
    def speedup(self) -> float | None:
        return self.timing.speedup if self.timing else None
