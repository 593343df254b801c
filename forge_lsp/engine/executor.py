"""Executors: where (task, candidate) evaluations run, and how many at once — the interface.

An `Executor` takes evaluations (`submit`, `evaluate_many`, `evaluate_all`) and answers each with a
`Verdict`, reporting progress as `ExecEvent`s (a build started or finished, a stage began, a verdict).
Two implementations, chosen with `executors.make_executor` (``forge eval|optimize --executor``, ``[tool.forge]
executor``):

- `local_pool.LocalPool` (``local``, the default): persistent device workers on each visible device
  (``CUDA_VISIBLE_DEVICES`` respected; on a machine without a GPU one ``cpu`` device), several lanes on a GPU,
  each timing with the device to itself (`harness.gate`); and a pool of GPU-less build workers that compile the
  queued candidates — of every task submitted, in submission order — while the devices verify and time those
  already built. Every evaluation still goes through `Evaluator` and its `Worker` (`jobs.run_job`): per-stage
  deadlines, the sandbox, the scrubbed environment, the memory caps, every failure a `Verdict`.
- `forge_lsp.engine.ray_executor.RayExecutor` (``ray`` or ``ray://HOST:PORT``): the same evaluations as
  tasks of Ray actors, one actor per GPU. Ray is imported there only.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from typing import Literal

from .candidate import Candidate
from .evaluate import StageCallback
from .options import EvalOptions
from .pipe import BuildResult, Hello, Prepared
from .task import Task
from .verdict import Verdict

VerdictCallback = Callable[[Candidate, Verdict], None]

EventKind = Literal["queued", "build_started", "build_finished", "stage", "reference", "verdict"]


@dataclass
class ExecEvent:
    """One thing that happened to an evaluation. `t` is wall-clock seconds (time.time()), comparable across
    processes and, for Ray, across the nodes' clocks as far as they agree."""

    kind: EventKind
    job: int
    task: str
    candidate: str
    device: str = ""
    stage: str = ""
    t: float = field(default_factory=time.time)
    lane: int = 0  # which of the device's lanes (`LocalPool`): 0 where it has one
    seconds: float | None = None
    status: str | None = None


EventCallback = Callable[[ExecEvent], None]


@dataclass(eq=False)
class Job:
    id: int
    task: Task
    candidate: Candidate
    options: EvalOptions | None
    sanitize: bool
    reference: bool
    on_stage: StageCallback | None
    future: Future[Verdict]
    generation: int
    build: BuildResult | None = None


class Executor(ABC):
    """Where evaluations run. Thread-safe; `submit` returns at once."""

    #: the devices (local) or actors (Ray) evaluations run on, one evaluation at a time each
    devices: list[str]
    options: EvalOptions

    def __init__(self) -> None:
        self._listeners: list[EventCallback] = []
        self._ids = 0
        self._ids_lock = threading.Lock()

    # -------------------------------------------------------------------- what the callers use
    @property
    def device(self) -> str:
        """The kind of device evaluations run on (``cpu``, ``cuda:0``): the first one's name."""
        return self.devices[0]

    @property
    def capacity(self) -> int:
        """How many evaluations run at once (one per device): how many candidates a search round should bring."""
        return max(1, len(self.devices))

    def subscribe(self, listener: EventCallback) -> None:
        self._listeners.append(listener)

    def _emit(self, event: ExecEvent) -> None:
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception:  # noqa: BLE001 - a listener's failure is not the evaluation's
                pass

    def _next_id(self) -> int:
        with self._ids_lock:
            self._ids += 1
            return self._ids

    @abstractmethod
    def submit(
        self,
        task: Task,
        candidate: Candidate,
        options: EvalOptions | None = None,
        *,
        on_stage: StageCallback | None = None,
        sanitize: bool = False,
        reference: bool = False,
    ) -> Future[Verdict]:
        """Queue one evaluation. With `reference`, the task's own model is first called alone (once per task):
        when it fails, every candidate of the task gets that failure as its verdict. The future's result is the
        verdict; its exception only ever `EvaluationCancelled`."""

    def busy_seconds(self) -> dict[str, float]:
        """Seconds each device spent on evaluations (and on loading tasks and their own models) so far; {} where the
        executor does not count them."""
        return {}

    @abstractmethod
    def check_reference(self, task: Task, options: EvalOptions | None = None) -> Prepared:
        """The task's model alone, before any candidate (see `Evaluator.check_reference`)."""

    @abstractmethod
    def hello(self) -> Hello:
        """What the first device is (its name, arch), its worker started if needed."""

    @abstractmethod
    def cancel(self) -> None:
        """Every evaluation submitted so far ends: those queued and those in flight (their workers killed) raise
        `EvaluationCancelled`. Later submissions run."""

    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def evaluate(
        self,
        task: Task,
        candidate: Candidate,
        options: EvalOptions | None = None,
        on_stage: StageCallback | None = None,
        sanitize: bool = False,
    ) -> Verdict:
        return self.submit(task, candidate, options, on_stage=on_stage, sanitize=sanitize).result()

    def evaluate_all(
        self,
        jobs: Sequence[tuple[Task, Candidate]],
        options: EvalOptions | None = None,
        *,
        on_stage: StageCallback | None = None,
        on_verdict: VerdictCallback | None = None,
        reference: bool = False,
        sanitize: bool = False,
    ) -> list[Verdict]:
        """Evaluations of any tasks at once, spread over the devices; the verdicts in the order of `jobs`.
        `on_verdict` is called on the caller's thread, as each verdict arrives."""
        futures = [
            self.submit(t, c, options, on_stage=on_stage, sanitize=sanitize, reference=reference) for t, c in jobs
        ]
        index = {id(f): i for i, f in enumerate(futures)}
        pending = set(futures)
        try:
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for f in sorted(done, key=lambda f: index[id(f)]):
                    verdict = f.result()  # raises EvaluationCancelled
                    if on_verdict is not None:
                        on_verdict(jobs[index[id(f)]][1], verdict)
        except BaseException:
            for f in pending:
                f.cancel()
            raise
        return [f.result() for f in futures]

    def evaluate_many(
        self,
        task: Task,
        candidates: Iterable[Candidate],
        options: EvalOptions | None = None,
        on_stage: StageCallback | None = None,
        on_verdict: VerdictCallback | None = None,
    ) -> list[Verdict]:
        """One task's candidates, spread over the executor's devices (and their lanes); the verdicts in the order given."""
        return self.evaluate_all([(task, c) for c in candidates], options, on_stage=on_stage, on_verdict=on_verdict)


class ExecutorUnavailable(RuntimeError):
    """The executor asked for cannot be made. The message is one line that says why: what to install, or the
    address and the cluster's own reason (`reason_line`)."""


def reason_line(exc: BaseException, limit: int = 500) -> str:
    """An exception's message as one line. A message whose first line only introduces what follows ("Initialization
    failure from server:" above the server's traceback) keeps its last line too, where the cause is said."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    text = lines[0]
    if len(lines) > 1 and text.endswith(":"):
        text = f"{text} {lines[-1]}"
    return text if len(text) <= limit else text[: limit - 1] + "…"
