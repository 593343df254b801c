"""The engine's front door: evaluate candidates against a task on a device.

    with Evaluator(device="cuda:0") as ev:
        verdict = ev.evaluate(load_task("softmax.py"), load_candidate("softmax_triton.py"))

One device worker (and its judge), one evaluation at a time. Batches — builds overlapped with timing, several
tasks, several lanes or devices — go through an executor (`local_pool.LocalPool`), which runs each evaluation here.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

from .candidate import Candidate, gpu_requirement
from .options import EvalOptions
from .pipe import Hello, Prepared
from .task import Task
from .verdict import Status, Verdict
from .worker_client import EvaluationCancelled, Worker, close_all, default_cache_dir

StageCallback = Callable[[Candidate, str], None]


def resolve_device(device: str) -> str:
    """'auto' means the first CUDA device when an NVIDIA driver is present, else the CPU.

    Decided without importing torch in the engine's process (it may be a language server).
    """
    if device != "auto":
        return device
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return "cpu"
    if Path("/proc/driver/nvidia/version").exists() or shutil.which("nvidia-smi"):
        return "cuda:0"
    return "cpu"


def unrunnable_verdict(task: Task, candidate: Candidate, device: str) -> Verdict | None:
    """The `compile_error` verdict of a candidate that cannot run on `device` at all (CUDA sources, no GPU), said
    without a worker; None when it can run there. CPU workers run Triton under its interpreter
    (`sandbox.child_env` sets TRITON_INTERPRET=1)."""
    needs_gpu = gpu_requirement(candidate.backend, device, triton_interpreter=True)
    if needs_gpu is None:
        return None
    return Verdict(
        status=Status.compile_error,
        reason=needs_gpu,
        device=device,
        backend=candidate.backend.value,
        task_sha=task.sha,
        candidate_sha=candidate.sha,
        stages={"total": 0.0},
    )


class Evaluator:
    def __init__(
        self,
        device: str = "auto",
        *,
        options: EvalOptions | None = None,
        cache_dir: Path | None = None,
        python: str | None = None,
    ) -> None:
        self.device = resolve_device(device)
        self.options = (options or EvalOptions()).model_copy(update={"device": self.device})
        self.cache_dir = Path(cache_dir or default_cache_dir())
        self.python = python
        self.worker = Worker(
            self.device,
            cache_dir=self.cache_dir,
            python=python,
            startup_timeout=self.options.timeouts.startup,
            log_limit_bytes=self.options.log_limit_bytes,
            host_memory_limit=self.options.host_memory_limit(),
            judged=self.options.judged_sets > 0,
        )
        self._sanitizing = threading.Event()  # set by `cancel`: the compute-sanitizer run in flight is killed

    def __enter__(self) -> Evaluator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        close_all([self.worker])

    @property
    def capacity(self) -> int:
        """Evaluations at once: one, on its device (`executor.LocalPool` has one worker per device)."""
        return 1

    def hello(self) -> Hello:
        """What the device is (name, arch, torch's version), its worker started if needed."""
        return self.worker.ensure_started()

    def cancel(self) -> None:
        """Kill the workers of the evaluation in flight, and its compute-sanitizer run; it raises
        `EvaluationCancelled`."""
        self._sanitizing.set()
        self.worker.cancel()

    def evaluate(
        self,
        task: Task,
        candidate: Candidate,
        options: EvalOptions | None = None,
        on_stage: StageCallback | None = None,
        sanitize: bool = False,
    ) -> Verdict:
        """One candidate, verified and timed. With `sanitize` (final acceptance), a correct candidate on CUDA is
        also run once under compute-sanitizer; its findings fail the `sanitizer` check."""

        # a candidate that cannot run on this device is said at once, before any worker starts or builds it
        # (CPU workers run Triton under its interpreter: sandbox.child_env sets TRITON_INTERPRET=1)
        unrunnable = unrunnable_verdict(task, candidate, self.device)
        if unrunnable is not None:
            return unrunnable
        opts = (options or self.options).model_copy(update={"device": self.device})
        t0 = time.perf_counter()
        verdict = self.worker.evaluate(
            task, candidate, opts, on_stage=(lambda s: on_stage(candidate, s)) if on_stage else None
        )
        verdict.stages["total"] = round(time.perf_counter() - t0, 4)
        if sanitize and verdict.correct and self.device != "cpu":
            self.sanitize_into(verdict, task, candidate, on_stage)
        return verdict

    def sanitize_into(
        self, verdict: Verdict, task: Task, candidate: Candidate, on_stage: StageCallback | None = None
    ) -> None:
        """Add compute-sanitizer's word to a verdict (its time is reported apart, as the `sanitize` stage)."""
        from .sanitize import sanitize

        if on_stage:
            on_stage(candidate, "sanitize")
        self._sanitizing = cancel = threading.Event()
        report = sanitize(task, candidate, self.device, cache_dir=self.cache_dir, python=self.python, cancel=cancel)
        if report.cancelled:
            raise EvaluationCancelled()
        check = report.check()
        check.seconds = verdict.stages["sanitize"] = round(sum(report.seconds.values()), 4)
        verdict.checks.append(check)
        if not check.passed:
            verdict.status, verdict.failed_check, verdict.reason = Status.incorrect, "sanitizer", check.detail

    def check_reference(self, task: Task, options: EvalOptions | None = None) -> Prepared:
        """Load the task, draw its inputs and call its model once in the worker before any candidate code
        is there: a failure — an exception, a crash, `os._exit`, a hang — is the user's own, said as such
        (`reason` starts "the reference model failed", "the reference constructor failed" or "the task
        file failed to load"). The inputs stay in the worker for the candidates. Raises only
        `EvaluationCancelled`."""
        return self.worker.prepare(task, options or self.options, reference=True)
