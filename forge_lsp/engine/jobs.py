"""One evaluation as every executor runs it (`run_job`), and the verdicts given without a device: a task whose own
code failed, a build's compile error. `LocalPool` and Ray's `EvalActor` schedule differently and share this."""

from __future__ import annotations

from .candidate import Backend, Candidate, gpu_requirement
from .evaluate import Evaluator, StageCallback
from .options import EvalOptions
from .pipe import BuildResult, Hello, Prepared
from .task import Task
from .verdict import Status, Verdict


def needs_build(candidate: Candidate, device: str) -> bool:
    """Whether a candidate compiles something (load_inline, NVRTC) a build worker can do ahead of its device."""
    return (
        candidate.backend in (Backend.cuda_inline, Backend.cpp_inline, Backend.nvrtc)
        and gpu_requirement(candidate.backend, device) is None
    )


def failure_verdict(
    status: Status, reason: str, task: Task, candidate: Candidate, device: str, **fields: object
) -> Verdict:
    """A verdict for a candidate that was not run (its task failed to load, its build failed, its node died)."""
    return Verdict(
        status=status,
        reason=reason,
        device=device,
        backend=candidate.backend.value,
        task_sha=task.sha,
        candidate_sha=candidate.sha,
        **fields,
    )


def compile_error_verdict(build: BuildResult, task: Task, candidate: Candidate, device: str) -> Verdict:
    return failure_verdict(
        Status.compile_error,
        build.reason,
        task,
        candidate,
        device,
        traceback=build.traceback,
        stages=build_stages(build),
    )


def build_stages(build: BuildResult) -> dict[str, float]:
    """A build's part of a verdict's stages: `build`, and `build_fallback` — the seconds of header sets that failed
    before one built (part of `build`)."""
    stages = {"build": round(build.seconds, 4)}
    fallback = sum(s for _, s, ok in build.attempts if not ok)
    if fallback and any(ok for _, _, ok in build.attempts):
        stages["build_fallback"] = round(fallback, 4)
    return stages


def task_failure_verdict(prepared: Prepared, reference: bool, task: Task, candidate: Candidate, device: str) -> Verdict:
    """The verdict of every candidate of a task whose own code failed in the worker (said once, not blamed on
    the candidates): with `reference`, the task's model called alone failed; else loading it and drawing its
    inputs hung or crashed the worker."""
    if reference:
        return failure_verdict(
            prepared.killed or Status.runtime_error,
            prepared.reason,
            task,
            candidate,
            device,
            traceback=prepared.traceback,
            log_excerpt=prepared.log_excerpt,
            stages={"reference": -1.0},  # the mark of the task's own failure
        )
    return failure_verdict(
        prepared.killed or Status.runtime_error,
        f"{prepared.reason} (while loading the task and drawing its inputs)",
        task,
        candidate,
        device,
        stages={"prepare": -1.0},
    )


def build_target(ev: Evaluator) -> Hello | None:
    """What builds for `ev`'s device compile for: its worker's hello (None on the CPU, or where that worker cannot
    start: the device's own evaluations say why)."""
    if ev.device == "cpu":
        return None
    try:
        return ev.hello()
    except Exception:  # noqa: BLE001 - WorkerStartError
        return None


def run_job(
    ev: Evaluator,
    task: Task,
    candidate: Candidate,
    options: EvalOptions | None,
    *,
    build: BuildResult | None = None,
    task_failed: tuple[Prepared, bool] | None = None,
    on_stage: StageCallback | None = None,
    sanitize: bool = False,
) -> Verdict:
    """One evaluation on a device's `Evaluator`: a task whose own code failed (`task_failed`: what failed, and whether
    it was its model called alone) answers for each of its candidates; a build that failed on the candidate's own
    code needs no device; otherwise the candidate is evaluated, its build's seconds in the verdict's stages."""
    if task_failed is not None:
        prepared, was_reference = task_failed
        return task_failure_verdict(prepared, was_reference, task, candidate, ev.device)
    if build is not None and not build.ok and build.compile_error:
        return compile_error_verdict(build, task, candidate, ev.device)
    verdict = ev.evaluate(task, candidate, options, on_stage, sanitize=sanitize)
    if build is not None:
        verdict.stages.update(build_stages(build))
    return verdict
