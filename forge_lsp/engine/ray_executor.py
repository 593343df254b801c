"""The Ray executor: evaluations as tasks of Ray actors, one actor per GPU of the cluster.

``--executor ray`` joins the cluster ``RAY_ADDRESS`` names (else starts a Ray instance on this machine);
``ray://HOST:PORT`` joins that one through the Ray Client (grpcio: ``ray[client]``, which ``forge-lsp[ray]``
installs; the head runs ``ray start --head --ray-client-server-port=PORT``). Each actor holds one GPU
(``num_gpus=1``; on a cluster without GPUs, one CPU) and, inside it, an `Evaluator`: the same sandboxed, persistent
device worker as the local pool — its stage deadlines, memory caps and scrubbed environment — and a GPU-less build
worker, so that an actor compiles its next candidate while its device verifies and times the one before (at most two
evaluations in flight per actor; one timing at a time, the device worker's lock). The task and candidate go as their
source text (pydantic JSON); the compile cache is the node's own (``FORGE_CACHE_DIR`` of the actor, else
``~/.cache/forge-lsp``), shared by the actors of the node. Each node needs forge-lsp (and torch) installed, as on
this machine. Verdicts come back whole (log excerpts included); the actors' stage events are read while evaluations
run and given to the same callbacks and listeners as the local pool's, so the run store, the events and the editor's
progress are the same either way.

An actor that dies (``ray.kill``, its node lost, its process killed) ends its in-flight evaluations with
`crashed` verdicts; the queued ones go on on the other actors.

Ray is imported here only, when this executor is made (`forge-lsp[ray]`).
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from .candidate import Candidate
from .evaluate import Evaluator
from .executor import ExecEvent, Executor, ExecutorUnavailable, Job, StageCallback
from .jobs import build_target, failure_verdict, needs_build, run_job
from .options import EvalOptions
from .pipe import Hello, Prepared
from .task import Task
from .verdict import Status, Verdict
from .worker_client import EvaluationCancelled, Worker, close_all

#: build workers per actor at most (as the local pool has): the actor's share of its node's cores, halved
MAX_BUILDERS = 8
_POLL_S = 0.25


class RayNotInstalled(ExecutorUnavailable):
    """The Ray executor was asked for where ray is not installed."""


def import_ray(address: str | None = None) -> Any:
    """The `ray` module; for a ``ray://`` address, also the Ray Client's transport (grpcio, ``ray[client]``),
    so that its absence is said at once rather than as Ray's own advice to install a bare ``ray[client]``."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # forge sends nothing anywhere
    # gRPC's fork support off (unless the user chose), before gRPC is loaded: forge starts every child with a
    # `preexec_fn` (sandbox.spawn), a plain fork, and while the Ray Client's gRPC threads are busy that fork skips
    # gRPC's handlers and its child dies now and then (1 child in 200 measured; none with it off). Forge never uses
    # gRPC in a forked child, which is all fork support is for. A local Ray instance forge starts inherits it.
    os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "0")
    try:
        import ray
    except ImportError as exc:
        raise RayNotInstalled(
            "the Ray executor needs ray: pip install 'forge-lsp[ray]' (ray==2.60.0), or use --executor local"
        ) from exc
    if address is not None and address.startswith("ray://"):
        try:
            import grpc  # noqa: F401 - what ray[client] adds to ray
        except ImportError as exc:
            raise RayNotInstalled(
                "the Ray Client (ray://) needs ray[client]: pip install 'forge-lsp[ray]' (ray[client]==2.60.0), "
                "or use --executor ray or local"
            ) from exc
    return ray


class EvalActor:
    """The body of one Ray actor (made remote by `RayExecutor`): an `Evaluator` on the actor's device and
    `builders` build workers, so the next candidates compile on the node's cores while the device verifies and
    times (the device worker takes one evaluation at a time). Module-level so that Ray imports it on the node
    rather than pickling it."""

    def __init__(
        self,
        device: str,
        options: dict[str, Any],
        cache_dir: str | None,
        builders: int = 1,
        omp_threads: str | None = None,
    ) -> None:
        from ..sandbox import default_cache_dir

        # Ray sets OMP_NUM_THREADS=1 in an actor that holds no CPU (a GPU actor): its workers' torch would then make
        # and compare every input on one core. The workers get the driver's setting instead (none: torch's default).
        if omp_threads is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = omp_threads
        self.options = EvalOptions.model_validate(options)
        cache = Path(cache_dir) if cache_dir else default_cache_dir()
        self.ev = Evaluator(device, options=self.options, cache_dir=cache)
        self.device = self.ev.device
        env = {"CUDA_VISIBLE_DEVICES": ""}
        self._builder_env = env
        self.n_builders = max(1, builders)
        self.builders: list[Worker] = []  # started on first use, up to n_builders
        self._idle: queue.Queue[Worker] = queue.Queue()
        self._builders_lock = threading.Lock()
        self.cache = cache
        self._events: list[tuple[int, str, float]] = []
        self._lock = threading.Lock()
        self._referenced: dict[str, Prepared] = {}
        self._reference_lock = threading.Lock()

    def _event(self, job: int, stage: str) -> None:
        with self._lock:
            self._events.append((job, stage, time.time()))

    def events(self) -> list[tuple[int, str, float]]:
        with self._lock:
            out, self._events = self._events, []
        return out

    def where(self) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "device": self.device,
            "cuda_visible": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "omp_threads": os.environ.get("OMP_NUM_THREADS"),  # what its workers inherit
        }

    def hello(self) -> dict[str, Any]:
        return self.ev.hello().model_dump(mode="json")

    def check_reference(self, task: dict[str, Any], options: dict[str, Any] | None) -> dict[str, Any]:
        t = Task.model_validate(task)
        opts = EvalOptions.model_validate(options) if options else None
        return self.ev.check_reference(t, opts).model_dump(mode="json")

    def _start_builders(self) -> None:
        """Every build worker, started at once (each imports torch) while the device's worker checks the task:
        a build is told what to compile for with its request. Idempotent."""
        with self._builders_lock:
            if self.builders:
                return
            for _ in range(self.n_builders):
                worker = Worker(
                    "cpu",
                    cache_dir=self.cache,
                    env=dict(self._builder_env),
                    host_memory_limit=self.options.host_memory_limit(),
                )
                self.builders.append(worker)
                threading.Thread(target=self._warm, args=(worker,), name="forge-builder", daemon=True).start()

    def _warm(self, worker: Worker) -> None:
        try:
            worker.ensure_started()
        except Exception:  # noqa: BLE001 - WorkerStartError: its first build tries again and says why
            pass
        self._idle.put(worker)

    def _builder(self) -> Worker:
        """The next idle build worker."""
        self._start_builders()
        return self._idle.get()

    def _build(self, job: int, cand: Candidate) -> Any:
        builder = self._builder()
        try:
            self._event(job, "build")
            build = builder.build(cand, timeout=self.options.timeouts.compile, target=build_target(self.ev))
            self._event(job, "built")
            return build
        finally:
            self._idle.put(builder)

    def evaluate(
        self,
        job: int,
        task: dict[str, Any],
        candidate: dict[str, Any],
        options: dict[str, Any] | None,
        sanitize: bool,
        reference: bool,
    ) -> dict[str, Any]:
        """One evaluation; the verdict as JSON. Raises only `EvaluationCancelled` (the actor's `cancel`)."""
        t = Task.model_validate(task)
        c = Candidate.model_validate(candidate)
        opts = EvalOptions.model_validate(options) if options else None
        if needs_build(c, self.device):
            self._start_builders()  # they import torch while the task is checked
        failed: tuple[Prepared, bool] | None = None
        if reference:
            with self._reference_lock:
                if t.sha not in self._referenced:
                    self._event(job, "reference")
                    self._referenced[t.sha] = self.ev.check_reference(t, opts)
            prepared = self._referenced[t.sha]
            if not prepared.ok:
                failed = (prepared, True)
        build = self._build(job, c) if failed is None and needs_build(c, self.device) else None
        verdict = run_job(
            self.ev,
            t,
            c,
            opts,
            build=build,
            task_failed=failed,
            on_stage=lambda _c, s: self._event(job, s),
            sanitize=sanitize,
        )
        return verdict.model_dump(mode="json")

    def cancel(self) -> None:
        self.ev.cancel()
        for b in list(self.builders):
            b.cancel()

    def close(self) -> None:
        close_all([self.ev.worker, *self.builders])


class _Actor:
    def __init__(self, name: str, handle: Any, slots: int = 2) -> None:
        self.name, self.handle = name, handle
        self.slots = slots  # evaluations in flight: one on its device, the others building beside it
        self.jobs: dict[Any, Job] = {}  # object ref -> job
        self.dead: str | None = None


class RayExecutor(Executor):
    """Evaluations on Ray actors, one per GPU (one per CPU on a cluster without GPUs)."""

    def __init__(
        self,
        address: str | None = None,
        *,
        device: str = "auto",
        options: EvalOptions | None = None,
        cache_dir: Path | None = None,
        actors: int | None = None,
        build_workers: int | None = None,
    ) -> None:
        super().__init__()
        ray = self._ray = import_ray(address)
        self.options = options or EvalOptions()
        self._owns_ray = not ray.is_initialized()
        if self._owns_ray:
            ray.init(
                address=address,
                include_dashboard=False,
                log_to_driver=False,  # stdout may be a language server's protocol stream
                logging_level=logging.WARNING,
                configure_logging=False,
            )
        try:  # a connection made here is not left behind by an executor that could not be made
            resources = ray.cluster_resources()
            gpus = int(resources.get("GPU", 0))
            cpus = int(resources.get("CPU", 1))
            on_gpu = gpus > 0 and device.strip().lower() != "cpu"
            n = actors or (gpus if on_gpu else max(1, cpus))
            # each actor's build workers: its share of the cluster's cores, halved (compilers run several jobs)
            builders = build_workers if build_workers is not None else max(1, min(MAX_BUILDERS, cpus // (2 * n)))
            builders = max(1, builders)
            slots = builders + 1
            remote = ray.remote(EvalActor).options(
                num_gpus=1 if on_gpu else 0,
                num_cpus=1 if not on_gpu else 0,
                max_concurrency=slots + 3,  # evaluations, plus events, cancel and close beside them
            )
            # Ray gives each GPU actor its GPU as CUDA_VISIBLE_DEVICES: inside, it is cuda:0
            dev = "cuda:0" if on_gpu else "cpu"
            opts = self.options.model_dump(mode="json")
            cache = str(cache_dir) if cache_dir else None
            threads = os.environ.get("OMP_NUM_THREADS")
            self._actors = [
                _Actor(f"{dev}@actor{i}", remote.remote(dev, opts, cache, builders, threads), slots) for i in range(n)
            ]
            self.devices = [a.name for a in self._actors]
            self._dev = dev
        except BaseException:
            if self._owns_ray:
                ray.shutdown()
            raise
        self._cv = threading.Condition()
        self._queue: list[Job] = []
        self._generation = 0
        self._closed = False
        self._hello: Hello | None = None
        self._thread = threading.Thread(target=self._dispatch, name="forge-ray-dispatch", daemon=True)
        self._thread.start()

    @property
    def device(self) -> str:
        return self._dev

    @property
    def actors(self) -> list[Any]:
        """The actors' handles (for tools and tests)."""
        return [a.handle for a in self._actors]

    def actor_of(self, candidate_name: str) -> Any | None:
        """The handle of the actor evaluating a candidate of that name now, if any."""
        with self._cv:
            for a in self._actors:
                if any(j.candidate.name == candidate_name for j in a.jobs.values()):
                    return a.handle
        return None

    def _live(self) -> list[_Actor]:
        return [a for a in self._actors if a.dead is None]

    # ---------------------------------------------------------------------------------- interface
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
        job = Job(self._next_id(), task, candidate, options, sanitize, reference, on_stage, future, self._generation)
        with self._cv:
            if self._closed:
                future.set_exception(EvaluationCancelled())
                return future
            self._queue.append(job)
            self._cv.notify_all()
        self._emit(ExecEvent("queued", job.id, task.name, candidate.name))
        return future

    def _call(self, method: str, *args: Any) -> Any:
        """A method of the first live actor, waited for (raises when none is left)."""
        for a in self._live():
            try:
                return self._ray.get(getattr(a.handle, method).remote(*args))
            except self._ray.exceptions.RayActorError as exc:
                self._bury(a, str(exc))
        raise RuntimeError("no Ray actor is left to evaluate on")

    def check_reference(self, task: Task, options: EvalOptions | None = None) -> Prepared:
        data = self._call(
            "check_reference", task.model_dump(mode="json"), options.model_dump(mode="json") if options else None
        )
        return Prepared.model_validate(data)

    def hello(self) -> Hello:
        if self._hello is None:
            self._hello = Hello.model_validate(self._call("hello"))
        return self._hello

    def cancel(self) -> None:
        with self._cv:
            self._generation += 1
            dropped, self._queue = self._queue, []
            live = self._live()
        for job in dropped:
            if not job.future.done():
                job.future.set_exception(EvaluationCancelled())
        for a in live:
            try:
                a.handle.cancel.remote()
            except Exception:  # noqa: BLE001 - an actor gone already
                pass

    def close(self) -> None:
        with self._cv:
            self._closed = True
            dropped, self._queue = self._queue, []
            self._cv.notify_all()
        for job in dropped:
            if not job.future.done():
                job.future.set_exception(EvaluationCancelled())
        self._thread.join(timeout=10)
        refs = []
        for a in self._live():
            try:
                refs.append(a.handle.close.remote())
            except Exception:  # noqa: BLE001
                pass
        try:
            self._ray.wait(refs, num_returns=len(refs), timeout=15)
        except Exception:  # noqa: BLE001
            pass
        for a in self._actors:
            try:
                self._ray.kill(a.handle)
            except Exception:  # noqa: BLE001
                pass
        if self._owns_ray:
            self._ray.shutdown()

    # ---------------------------------------------------------------------------------- dispatch
    def _bury(self, actor: _Actor, why: str) -> None:
        """An actor died: its in-flight evaluations are `crashed`; the queue goes on with the others."""
        with self._cv:
            if actor.dead is None:
                actor.dead = why.strip().splitlines()[0][:300] if why.strip() else "the actor died"
            orphans = list(actor.jobs.values())
            actor.jobs.clear()
            self._cv.notify_all()
        for job in orphans:
            self._answer(
                job,
                failure_verdict(
                    Status.crashed,
                    f"the Ray actor evaluating it ({actor.name}) died: {actor.dead}",
                    job.task,
                    job.candidate,
                    actor.name,
                ),
                actor.name,
            )

    def _answer(self, job: Job, verdict: Verdict, device: str = "") -> None:
        self._emit(
            ExecEvent("verdict", job.id, job.task.name, job.candidate.name, device=device, status=verdict.status.value)
        )
        if not job.future.done():
            job.future.set_result(verdict)

    def _assign(self) -> None:
        """Give queued jobs to live actors with a free slot (the actor already holding the task first)."""
        with self._cv:
            while self._queue:
                free = [a for a in self._live() if len(a.jobs) < a.slots]
                if not free:
                    break
                job = self._queue.pop(0)
                # the least busy actor; of those, one that holds the task's inputs already
                actor = min(
                    free, key=lambda a: (len(a.jobs), not any(j.task.sha == job.task.sha for j in a.jobs.values()))
                )
                ref = actor.handle.evaluate.remote(
                    job.id,
                    job.task.model_dump(mode="json"),
                    job.candidate.model_dump(mode="json"),
                    job.options.model_dump(mode="json") if job.options else None,
                    job.sanitize,
                    job.reference,
                )
                actor.jobs[ref] = job
            if self._queue and not self._live():
                orphans, self._queue = self._queue, []
            else:
                orphans = []
        for job in orphans:
            self._answer(
                job,
                failure_verdict(
                    Status.crashed, "every Ray actor died before it was evaluated", job.task, job.candidate, ""
                ),
            )

    def _poll_events(self) -> None:
        ray = self._ray
        busy = [a for a in self._live() if a.jobs]
        refs = {}
        for a in busy:
            try:
                refs[a] = a.handle.events.remote()
            except Exception:  # noqa: BLE001
                continue
        for a, ref in refs.items():
            try:
                events = ray.get(ref, timeout=5)
            except Exception:  # noqa: BLE001 - a dead actor is found out by its evaluation's ref
                continue
            with self._cv:
                jobs = {j.id: j for j in a.jobs.values()}
            for job_id, stage, t in events:
                job = jobs.get(job_id)
                if job is None:
                    continue
                kind = "build_started" if stage == "build" else "build_finished" if stage == "built" else "stage"
                self._emit(
                    ExecEvent(
                        kind,  # type: ignore[arg-type]
                        job.id,
                        job.task.name,
                        job.candidate.name,
                        device=a.name,
                        stage="build" if stage == "built" else stage,
                        t=t,
                    )
                )
                if job.on_stage is not None and stage != "built":
                    try:
                        job.on_stage(job.candidate, stage)
                    except Exception:  # noqa: BLE001
                        pass

    def _dispatch(self) -> None:
        ray = self._ray
        last_poll = 0.0
        while True:
            with self._cv:
                if self._closed:
                    return
                idle = not self._queue and not any(a.jobs for a in self._actors)
                if idle:
                    self._cv.wait(timeout=1.0)
                    continue
            self._assign()
            with self._cv:
                refs = {ref: a for a in self._live() for ref in a.jobs}
            if not refs:
                time.sleep(_POLL_S)
                continue
            done, _ = ray.wait(list(refs), num_returns=1, timeout=_POLL_S)
            if done or time.monotonic() - last_poll >= _POLL_S:
                # a finished evaluation's last stages come back before its verdict (its job is still listed)
                last_poll = time.monotonic()
                self._poll_events()
            for ref in done:
                actor = refs[ref]
                with self._cv:
                    job = actor.jobs.get(ref)
                if job is None:
                    continue
                try:
                    data = ray.get(ref)
                except ray.exceptions.RayActorError as exc:
                    self._bury(actor, str(exc))
                    continue
                except ray.exceptions.RayTaskError as exc:
                    with self._cv:
                        actor.jobs.pop(ref, None)
                    cause = getattr(exc, "cause", None)
                    if isinstance(cause, EvaluationCancelled) or "EvaluationCancelled" in str(exc):
                        if not job.future.done():
                            job.future.set_exception(EvaluationCancelled())
                    else:  # a failure of forge's own code in the actor: said, never hung on
                        self._answer(
                            job,
                            failure_verdict(
                                Status.crashed,
                                f"the evaluation failed in Ray actor {actor.name}: {str(exc).splitlines()[0][:300]}",
                                job.task,
                                job.candidate,
                                actor.name,
                            ),
                        )
                    continue
                with self._cv:
                    actor.jobs.pop(ref, None)
                verdict = Verdict.model_validate(data)
                if job.generation != self._generation:
                    if not job.future.done():
                        job.future.set_exception(EvaluationCancelled())
                    continue
                self._answer(job, verdict, actor.name)
