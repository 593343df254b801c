"""Executors: where (task, candidate) evaluations run, and how many at once.

An `Executor` takes evaluations (`submit`, `evaluate_many`, `evaluate_all`) and answers each with a
`Verdict`, reporting progress as `ExecEvent`s (a build started or finished, a stage began, a verdict).
Two implementations, chosen with `executors.make_executor` (``forge eval|optimize --executor``, ``[tool.forge]
executor``):

- `LocalPool` (``local``, the default): one persistent device worker per visible device
  (``CUDA_VISIBLE_DEVICES`` respected; on a machine without a GPU one ``cpu`` device), each serving one
  request at a time, so a device never times two candidates at once; and a pool of GPU-less build workers
  that compile the queued candidates — of every task submitted, in submission order — while the devices
  verify and time those already built. Every evaluation still goes through `Evaluator` and its `Worker`:
  per-stage deadlines, the sandbox, the scrubbed environment, the memory caps, every failure a `Verdict`.
- `forge_lsp.engine.ray_executor.RayExecutor` (``ray`` or ``ray://HOST:PORT``): the same evaluations as
  tasks of Ray actors, one actor per GPU. Ray is imported there only.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from .candidate import Backend, Candidate, gpu_requirement
from .evaluate import Evaluator, resolve_device, unrunnable_verdict
from .options import EvalOptions
from .pipe import BuildResult, Hello, Prepared
from .task import Task
from .verdict import Status, Verdict
from .worker_client import EvaluationCancelled, Worker, close_all, default_cache_dir

StageCallback = Callable[[Candidate, str], None]
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


def visible_gpu_count() -> int | None:
    """How many NVIDIA GPUs this process may use, read without torch: ``CUDA_VISIBLE_DEVICES`` when set, else
    the driver's list (0: none; None: there is a driver but the count cannot be read)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return 0
    gpus = Path("/proc/driver/nvidia/gpus")
    driver = Path("/proc/driver/nvidia/version").exists() or gpus.exists() or shutil.which("nvidia-smi") is not None
    if not driver:
        return 0
    try:
        count = sum(1 for _ in gpus.iterdir())
    except OSError:
        count = 0
    if not count:  # a container may show the driver's tool but not its /proc folder
        count = _gpus_listed_by_nvidia_smi()
    if visible is not None:
        listed = len([d for d in visible.split(",") if d.strip()])
        return min(listed, count) if count else listed
    return count or None


def _gpus_listed_by_nvidia_smi() -> int:
    """The GPUs ``nvidia-smi -L`` lists (0 where it is missing or fails)."""
    from ..sandbox import run_sandboxed, scrubbed_env

    exe = shutil.which("nvidia-smi")
    if exe is None:
        return 0
    env = {k: v for k, v in scrubbed_env().items() if k != "CUDA_VISIBLE_DEVICES"}  # every GPU of the machine
    try:
        result = run_sandboxed([exe, "-L"], env=env, cwd=Path.cwd(), timeout=15.0)
    except OSError:
        return 0
    if result.returncode != 0:
        return 0
    return sum(1 for line in result.output.splitlines() if line.startswith("GPU "))


def visible_gpus() -> int:
    """`visible_gpu_count`, at least one where a driver is present."""
    count = visible_gpu_count()
    return 1 if count is None else count


def local_devices(device: str = "auto") -> list[str]:
    """The devices a local pool gets one worker each for: ``auto`` or ``cuda`` mean every visible GPU (the CPU
    when there is none), ``cuda:N`` and ``cpu`` that one device."""
    name = device.strip().lower()
    if name in ("auto", "cuda"):
        n = visible_gpus()
        if n == 0:
            return [resolve_device("auto") if name == "auto" else "cuda:0"]
        return [f"cuda:{i}" for i in range(n)]
    return [name]


#: Lanes a GPU runs by default (`LocalPool`): each a worker and its judge, two CUDA contexts of about 0.5 GiB.
GPU_LANES = 3


def device_lanes(device: str, lanes: int | None = None) -> int:
    """How many lanes `device` runs: `lanes`, else ``$FORGE_DEVICE_LANES``, else `GPU_LANES` for a GPU. The CPU runs
    one: its timings run on the host's cores, which no gate can keep to themselves."""
    if not device.startswith("cuda"):
        return 1
    if lanes is None:
        env = os.environ.get("FORGE_DEVICE_LANES", "").strip()
        lanes = int(env) if env.isdigit() else GPU_LANES
    return max(1, lanes)


# ------------------------------------------------------------------------------------------ interface
#: A load_inline build's peak resident memory: nvcc on a slim-prelude .cu peaked at 0.87 GB (`/usr/bin/time -v`, nvcc
#: 13.0, the CPU host, 2026-12-03), beside g++ on main.cpp at the same time (ninja builds both), plus the build
#: worker's own interpreter with torch imported (~0.4 GB): 2 GiB a build worker, with room to spare.
BUILD_PEAK_BYTES = 2 << 30
#: The share of the machine's available memory the build workers may take together.
BUILD_MEMORY_SHARE = 0.5


def available_memory() -> int | None:
    """MemAvailable from /proc/meminfo, in bytes (None where it cannot be read)."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


#: the niceness of build workers and their compilers
BUILD_NICE = 10


def default_build_workers(cores: int | None = None, memory: int | None = None) -> int:
    """How many build workers this machine runs: ``$FORGE_BUILD_WORKERS`` when set (a cap the user chose), else one
    per core but the device worker's, as many as `BUILD_MEMORY_SHARE` of the available memory holds at
    `BUILD_PEAK_BYTES` each; at least one."""
    env = os.environ.get("FORGE_BUILD_WORKERS", "").strip()
    if env.isdigit():
        return max(0, int(env))
    cores = cores if cores is not None else (os.cpu_count() or 2)
    memory = memory if memory is not None else available_memory()
    n = max(1, cores - 1)
    if memory is not None:
        n = min(n, int(memory * BUILD_MEMORY_SHARE // BUILD_PEAK_BYTES))
    return max(1, n)


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
        """`Evaluator.evaluate_many` over the executor's devices."""
        return self.evaluate_all([(task, c) for c in candidates], options, on_stage=on_stage, on_verdict=on_verdict)


# ------------------------------------------------------------------------------------------ local pool
class LocalPool(Executor):
    """Persistent workers on each device, and GPU-less build workers shared by every task and candidate.

    A GPU runs several *lanes*: a worker (and its judge) each, evaluating different candidates at once. Most of an
    evaluation is host-side work, small kernels and waits (the stream probes' delays, synchronizations, the outputs
    sent to the judge), during which one worker leaves the device idle; the device's gate (`harness.gate`) still
    times each candidate with the device to itself. Lanes beyond the first start only where each worker's device
    memory can be measured apart (`Hello.own_memory`), so that each candidate's memory is still its own."""

    #: tasks a device's worker is counted as still holding (`WorkerState` keeps their inputs while memory allows)
    RECENT_TASKS = 16

    def __init__(
        self,
        device: str = "auto",
        *,
        options: EvalOptions | None = None,
        cache_dir: Path | None = None,
        build_workers: int | None = None,
        python: str | None = None,
        lanes: int | None = None,
    ) -> None:
        super().__init__()
        self.devices = local_devices(device)
        self.options = options or EvalOptions()
        self.cache_dir = Path(cache_dir or default_cache_dir())
        self.python = python
        #: lane name -> (device, lane index); lane 0 of a device is named after the device
        self.lanes: dict[str, tuple[str, int]] = {}
        for d in self.devices:
            for k in range(device_lanes(d, lanes)):
                self.lanes[d if k == 0 else f"{d}#{k}"] = (d, k)
        self.evaluators = {
            lane: Evaluator(d, options=self.options, cache_dir=self.cache_dir, build_workers=0, python=python)
            for lane, (d, _) in self.lanes.items()
        }
        for ev in self.evaluators.values():
            ev.worker.standby = True  # once a device's worker is replaced, the next is started ahead, waiting
        self.n_builders = build_workers if build_workers is not None else default_build_workers()
        self._builders: list[Worker] = []
        self._cv = threading.Condition()
        self._build_q: list[Job] = []  # waiting for a build worker, in submission order
        self._building: list[Job] = []  # with a build worker now
        self._ready: list[Job] = []  # built (or nothing to build): waiting for a device
        self._in_flight: dict[str, Job] = {}  # lane -> the job its worker runs
        # device -> seconds at least one of its lanes' workers spent on evaluations and task preparation
        self._busy: dict[str, float] = {}
        self._lane_busy: dict[str, float] = {}  # lane -> its worker's seconds on them
        self._working: dict[str, tuple[int, float]] = {}  # device -> (lanes at work now, since when one was)
        self._current: dict[str, str] = {}  # lane -> sha of the task its worker holds the inputs of
        # lane -> shas of the tasks its worker prepared last (it keeps their inputs while memory allows), newest last
        self._recent: dict[str, list[str]] = {}
        self._task_failed: dict[str, tuple[Prepared, bool]] = {}  # task sha -> (what failed, reference?)
        self._referenced: set[str] = set()  # task shas whose own model ran alone and passed
        self._reference_lock = threading.Lock()
        self._builders_lock = threading.Lock()
        self._target: Hello | None = None  # the devices' hello, for the builds (`_build_target`)
        self._target_lock = threading.Lock()
        self._generation = 0
        self._closed = False
        self._threads: list[threading.Thread] = []
        self._device_threads_started = False

    # ---------------------------------------------------------------------------------- lifecycle
    def _start(self) -> None:
        with self._cv:
            if self._device_threads_started:
                return
            self._device_threads_started = True
        for lane in self.lanes:
            t = threading.Thread(target=self._device_loop, args=(lane,), name=f"forge-device-{lane}", daemon=True)
            t.start()
            self._threads.append(t)

    def _start_builders(self) -> None:
        """Build workers, started on the first candidate that builds (each is a process that imports torch), at
        once and beside the devices' workers: a builder learns the devices' target with its first build."""
        with self._builders_lock:
            if self._builders or self.n_builders == 0:
                return
            # builders compile; they never touch the GPU. Niced, with their compilers: a device worker timing beside
            # them keeps its core (host-side launch work that waits on a core shows in launch-bound timings)
            env = {"CUDA_VISIBLE_DEVICES": "", "FORGE_WORKER_NICE": str(BUILD_NICE)}
            limit = self.options.host_memory_limit()
            self._builders = [
                Worker("cpu", cache_dir=self.cache_dir, python=self.python, env=env, host_memory_limit=limit)
                for _ in range(self.n_builders)
            ]
            for b in self._builders:
                t = threading.Thread(target=self._build_loop, args=(b,), name="forge-builder", daemon=True)
                t.start()
                self._threads.append(t)

    def _build_target(self) -> Hello | None:
        """What the builds compile for: the first device's (`build_target`), asked once it is known."""
        with self._target_lock:
            if self._target is None:
                self._target = build_target(self.evaluators[self.device])
            return self._target

    def close(self) -> None:
        with self._cv:
            self._closed = True
            orphans = self._build_q + self._ready
            self._build_q, self._ready = [], []
            self._cv.notify_all()
        for job in orphans:
            self._fail(job, EvaluationCancelled())
        close_all([*(ev.worker for ev in self.evaluators.values()), *self._builders])  # the devices' and builders'
        for t in self._threads:
            t.join(timeout=5)

    def cancel(self) -> None:
        with self._cv:
            self._generation += 1
            dropped = self._build_q + self._ready
            self._build_q, self._ready = [], []
            self._cv.notify_all()
        for job in dropped:
            self._fail(job, EvaluationCancelled())
        for ev in self.evaluators.values():
            ev.cancel()
        for b in self._builders:
            b.cancel()

    def hello(self) -> Hello:
        return self.evaluators[self.device].hello()

    def check_reference(self, task: Task, options: EvalOptions | None = None) -> Prepared:
        return self.evaluators[self.device].check_reference(task, options)

    # ---------------------------------------------------------------------------------- submission
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
        future: Future[Verdict] = Future()
        future.set_running_or_notify_cancel()
        with self._cv:
            if self._closed:
                future.set_exception(EvaluationCancelled())
                return future
            job = Job(
                self._next_id(), task, candidate, options, sanitize, reference, on_stage, future, self._generation
            )
        self._emit(ExecEvent("queued", job.id, task.name, candidate.name))
        unrunnable = unrunnable_verdict(task, candidate, self.device)
        if unrunnable is not None:  # no device time, no task model: it cannot run here at all
            self._answer(job, unrunnable)
            return future
        builds = self.n_builders > 0 and needs_build(candidate, self.device)
        if builds:
            self._start_builders()
        with self._cv:
            (self._build_q if builds else self._ready).append(job)
            self._cv.notify_all()
        self._start()
        return future

    # ---------------------------------------------------------------------------------- builders
    def _buildable(self) -> Job | None:
        """The next queued job for a build worker, in submission order. Builds do not wait for their task's own model:
        they run in processes of their own, without a GPU, and the device's worker still calls the task's model alone
        before any of its candidates. Under the lock; jobs of a task that failed go straight to a device, which says
        so."""
        while self._build_q:
            job = self._build_q[0]
            if job.task.sha in self._task_failed:
                self._ready.append(self._build_q.pop(0))
                self._cv.notify_all()
                continue
            return self._build_q.pop(0)
        return None

    def _build_loop(self, builder: Worker) -> None:
        try:  # import torch now, while the devices' workers start and check the first tasks
            builder.ensure_started()
        except Exception:  # noqa: BLE001 - WorkerStartError: its first build tries again and says why
            pass
        with self._cv:
            closed = self._closed
        if closed:  # closed while it started: `close` found no process to end
            builder.close()
            return
        while True:
            with self._cv:
                job = self._buildable()
                while job is None and not self._closed:
                    self._cv.wait()
                    job = self._buildable()
                if self._closed or job is None:
                    return
                self._building.append(job)
            self._emit(ExecEvent("build_started", job.id, job.task.name, job.candidate.name, stage="build"))
            if job.on_stage is not None:
                job.on_stage(job.candidate, "build")
            try:
                job.build = builder.build(
                    job.candidate, timeout=self.options.timeouts.compile, target=self._build_target()
                )
            except EvaluationCancelled:
                job.build = None
            b = job.build
            self._emit(
                ExecEvent(
                    "build_finished",
                    job.id,
                    job.task.name,
                    job.candidate.name,
                    stage="build",
                    seconds=b.seconds if b else None,
                    status="ok" if b and b.ok else ("compile_error" if b and b.compile_error else "failed"),
                )
            )
            failed_build = b is not None and not b.ok and b.compile_error
            with self._cv:
                self._building.remove(job)
                cancelled = job.generation != self._generation
                if not cancelled and not failed_build:
                    self._ready.append(job)
                self._cv.notify_all()
            if cancelled:
                self._fail(job, EvaluationCancelled())
            elif failed_build:  # said now: a build error needs no device, nor its task's own model
                assert b is not None
                self._answer(job, compile_error_verdict(b, job.task, job.candidate, self.device))

    # ---------------------------------------------------------------------------------- devices
    def _pick(self, lane: str) -> tuple[Job | None, Job | None]:
        """(the next job for `lane`, or one whose task to check or prepare first). Under the lock.

        Built candidates first: those of the task the device holds, then those whose task's own model passed. Then a
        built candidate whose task's model has not run yet: that model, alone, now (its candidates follow). Idle
        while candidates build, the task of the one nearest to ready (building, then queued) is checked or loaded
        ahead, its inputs drawn — unless a device holds that task already. So each task's model runs when its first
        candidate is about ready, not all of them before any candidate."""
        held = set(self._current.values()) | {sha for shas in self._recent.values() for sha in shas}
        current = self._current.get(lane)
        for i, job in enumerate(self._ready):
            if job.task.sha == current:
                return self._ready.pop(i), None
        recent = self._recent.get(lane, [])
        for sha in reversed(recent):  # a task this worker still holds: no inputs to draw again
            for i, job in enumerate(self._ready):
                if job.task.sha == sha and (not job.reference or sha in self._referenced or sha in self._task_failed):
                    return self._ready.pop(i), None
        for i, job in enumerate(self._ready):
            sha = job.task.sha
            if not job.reference or sha in self._referenced or sha in self._task_failed:
                return self._ready.pop(i), None
        for job in self._ready:
            if job.task.sha not in held:
                return None, job  # its task's own model first
        for job in self._building + self._build_q:
            sha = job.task.sha
            if sha not in held and sha not in self._task_failed:
                return None, job
        return None, None

    def _lane_usable(self, lane: str) -> bool:
        """Whether a lane beyond its device's first may work: the first lane's worker says its device memory is
        measured apart from other processes' (`Hello.own_memory`). Asking starts that worker if it has not."""
        device, k = self.lanes[lane]
        if k == 0:
            return True
        try:
            return bool(self.evaluators[device].hello().own_memory)
        except Exception:  # noqa: BLE001 - the first lane says why, with its first candidate
            return False

    def _device_loop(self, lane: str) -> None:
        ev = self.evaluators[lane]
        device, index = self.lanes[lane]
        if not self._lane_usable(lane):
            return
        while True:
            with self._cv:
                job, ahead = self._pick(lane)
                while job is None and ahead is None and not self._closed:
                    self._cv.wait()
                    job, ahead = self._pick(lane)
                if self._closed and job is None:
                    return
                if ahead is not None:
                    self._current[lane] = ahead.task.sha  # no other lane prepares it meanwhile
                if job is not None:
                    self._in_flight[lane] = job
                working, since = self._working.get(device, (0, 0.0))
                self._working[device] = (working + 1, time.monotonic() if working == 0 else since)
            began = time.monotonic()
            try:
                if ahead is not None:
                    if ahead.reference and ahead.task.sha not in self._referenced:
                        with self._reference_lock:
                            if ahead.task.sha not in self._referenced and ahead.task.sha not in self._task_failed:
                                self._prepare(ev, lane, ahead, reference=True)
                    else:
                        self._prepare(ev, lane, ahead)
                    continue
                assert job is not None
                if job.generation != self._generation:
                    raise EvaluationCancelled()
                verdict = self._run(ev, lane, job)
            except EvaluationCancelled as exc:
                if job is not None:
                    self._fail(job, exc)
                continue
            except Exception as exc:  # noqa: BLE001 - a bug of ours must not hang the caller
                if job is not None:
                    self._fail(job, exc)
                continue
            finally:
                now = time.monotonic()
                held = now - began
                with self._cv:
                    self._lane_busy[lane] = self._lane_busy.get(lane, 0.0) + held
                    working, since = self._working[device]
                    if working == 1:  # the device's last lane at work finished: the span it was busy ends
                        self._busy[device] = self._busy.get(device, 0.0) + now - since
                    self._working[device] = (working - 1, since)
                    if job is not None:
                        self._in_flight.pop(lane, None)
                    self._cv.notify_all()
            self._emit(
                ExecEvent(
                    "verdict",
                    job.id,
                    job.task.name,
                    job.candidate.name,
                    device=device,
                    status=verdict.status.value,
                    seconds=round(held, 4),  # the lane's time on this evaluation
                    lane=index,
                )
            )
            if not job.future.done():
                job.future.set_result(verdict)

    def _answer(self, job: Job, verdict: Verdict) -> None:
        """A verdict given without a device (a build error, a candidate that cannot run here)."""
        self._emit(
            ExecEvent("verdict", job.id, job.task.name, job.candidate.name, status=verdict.status.value, seconds=0.0)
        )
        if not job.future.done():
            job.future.set_result(verdict)

    def _fail(self, job: Job, exc: BaseException) -> None:
        if not job.future.done():
            job.future.set_exception(exc)

    def _prepare(self, ev: Evaluator, lane: str, job: Job, reference: bool = False) -> bool:
        """Load `job`'s task and draw its inputs in `lane`'s worker (with `reference`, also call its model);
        False when the task's own code failed (its candidates are then not run)."""
        task = job.task
        device, index = self.lanes[lane]
        with self._cv:
            self._current[lane] = task.sha
        if reference:
            self._emit(
                ExecEvent("stage", job.id, task.name, job.candidate.name, device=device, stage="reference", lane=index)
            )
            if job.on_stage is not None:
                job.on_stage(job.candidate, "reference")
        prepared = ev.worker.prepare(task, job.options or self.options, reference=reference)
        failed = prepared.killed is not None or (reference and not prepared.ok)
        with self._cv:
            if reference and prepared.ok:
                self._referenced.add(task.sha)
            if prepared.ok:
                recent = self._recent.setdefault(lane, [])
                if task.sha in recent:
                    recent.remove(task.sha)
                recent.append(task.sha)
                del recent[: -self.RECENT_TASKS]
            if failed:
                self._task_failed.setdefault(task.sha, (prepared, reference))
                self._current.pop(lane, None)
            self._cv.notify_all()  # builds of the task may start, or its candidates be answered
        if failed:
            self._emit(
                ExecEvent(
                    "reference", job.id, task.name, job.candidate.name, device=device, status="failed", lane=index
                )
            )
        return not failed

    def _run(self, ev: Evaluator, lane: str, job: Job) -> Verdict:
        task, cand = job.task, job.candidate
        device, index = self.lanes[lane]
        if job.reference and task.sha not in self._referenced and task.sha not in self._task_failed:
            with self._reference_lock:  # one lane calls the task's own model; the others wait for its word
                if task.sha not in self._referenced and task.sha not in self._task_failed:
                    self._prepare(ev, lane, job, reference=True)
        elif task.sha not in self._task_failed and self._current.get(lane) != task.sha:
            self._prepare(ev, lane, job)  # a hanging or crashing task is then said once, for all its candidates
        failed = self._task_failed.get(task.sha)
        if failed is not None:
            prepared, was_reference = failed
            return task_failure_verdict(prepared, was_reference, task, cand, device)
        build = job.build

        def stage(c: Candidate, s: str) -> None:
            self._emit(ExecEvent("stage", job.id, task.name, c.name, device=device, stage=s, lane=index))
            if job.on_stage is not None:
                job.on_stage(c, s)

        with self._cv:
            self._current[lane] = task.sha
        verdict = ev.evaluate(task, cand, job.options, stage, sanitize=job.sanitize)
        if build is not None:
            verdict.stages.update(build_stages(build))
        return verdict

    # ---------------------------------------------------------------------------------- tests and tools
    def busy_seconds(self) -> dict[str, float]:
        """Each device's seconds with at least one of its lanes at work (a span at work now counts to now)."""
        now = time.monotonic()
        with self._cv:
            busy = dict(self._busy)
            for device, (working, since) in self._working.items():
                if working > 0:
                    busy[device] = busy.get(device, 0.0) + now - since
            return busy

    def lane_seconds(self) -> dict[str, float]:
        """Each lane's seconds at work (their sum over a device's lanes may exceed the wall time)."""
        with self._cv:
            return dict(self._lane_busy)

    def queue_lengths(self) -> dict[str, int]:
        with self._cv:
            return {"to_build": len(self._build_q), "building": len(self._building), "ready": len(self._ready)}


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
