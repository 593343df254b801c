"""`LocalPool`: the local executor — lanes of device workers on each device, GPU-less build workers beside them."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from pathlib import Path

from .candidate import Candidate
from .devices import BUILD_NICE, default_build_workers, device_lanes, local_devices
from .evaluate import Evaluator, unrunnable_verdict
from .executor import ExecEvent, Executor, Job, StageCallback
from .jobs import build_target, compile_error_verdict, needs_build, run_job
from .options import EvalOptions
from .pipe import Hello, Prepared
from .task import Task
from .verdict import Verdict
from .worker_client import EvaluationCancelled, Worker, close_all, default_cache_dir


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
            lane: Evaluator(d, options=self.options, cache_dir=self.cache_dir, python=python)
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
        self._lanes_ok: dict[str, bool] = {}  # device -> its lanes beyond the first may work (`_lane_usable`)

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

    @property
    def capacity(self) -> int:
        """Evaluations at once: every device's first lane, and its other lanes once its first worker said they may
        work (`Hello.own_memory`)."""
        return max(1, sum(1 for _, (d, k) in self.lanes.items() if k == 0 or self._lanes_ok.get(d)))

    def _lane_usable(self, lane: str) -> bool:
        """Whether a lane beyond its device's first may work: the first lane's worker says its device memory is
        measured apart from other processes' (`Hello.own_memory`). Asking starts that worker if it has not."""
        device, k = self.lanes[lane]
        if k == 0:
            return True
        try:
            ok = bool(self.evaluators[device].hello().own_memory)
        except Exception:  # noqa: BLE001 - the first lane says why, with its first candidate
            ok = False
        self._lanes_ok[device] = ok
        return ok

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

        def stage(c: Candidate, s: str) -> None:
            self._emit(ExecEvent("stage", job.id, task.name, c.name, device=device, stage=s, lane=index))
            if job.on_stage is not None:
                job.on_stage(c, s)

        failed = self._task_failed.get(task.sha)
        if failed is None:
            with self._cv:
                self._current[lane] = task.sha
        return run_job(
            ev, task, cand, job.options, build=job.build, task_failed=failed, on_stage=stage, sanitize=job.sanitize
        )

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
