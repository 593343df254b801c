"""Worker processes seen from the engine: spawn, talk, time out, kill, respawn.

A `Worker` owns one subprocess (``python -m forge_lsp.engine.worker``) bound to one device.
The subprocess is started by `forge_lsp.sandbox.spawn`: a scrubbed environment (no API keys), its own
session and process group, death with this process however it ends; `forge_lsp.sandbox.kill_tree`
kills its whole tree (compilers and whatever the candidate started too) on timeout, cancel, close.
It gets two pipes for typed messages and a log file for everything it prints. While a request is in
flight the resident memory of its process tree is sampled from /proc (`host_memory_limit`): over
the cap, the tree is killed and the verdict is `out_of_memory`. A CUDA out-of-memory failure is tried
once more in a fresh worker before it is an `out_of_memory` verdict. Whatever the candidate does —
crash, hang, exhaust memory, print forever — the caller gets a `Verdict`, never an exception.
"""

from __future__ import annotations

import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from ..sandbox import child_env, default_cache_dir, kill_tree, spawn, tree_rss
from . import pipe, zygote
from .candidate import Candidate
from .options import EvalOptions
from .pipe import (
    BuildRequest,
    BuildResult,
    Compared,
    CompareRequest,
    EvaluateRequest,
    EvaluateResult,
    Held,
    Hello,
    HoldRequest,
    JudgedOutputs,
    JudgedSets,
    JudgeReady,
    JudgeRequest,
    Prepared,
    PrepareRequest,
    ReferenceTimes,
    StageStarted,
    TimeReferenceRequest,
)
from .task import Task
from .verdict import Check, MemoryUse, Status, Verdict

#: The worker's environment (`forge_lsp.sandbox.child_env`); the name stays importable from here
#: because benchmarks/profile_flawed.py imports it from this module.
worker_env = child_env
_EXCERPT = 6000
_ERROR_LINE = re.compile(r"\berror\b|Error:|FAILED", re.IGNORECASE)
_MEMORY_POLL_S = 0.1  # how often the worker tree's resident memory is sampled while a request runs
_CUDA_OOM = ("CUDA out of memory", "OutOfMemoryError", "CUDA_ERROR_OUT_OF_MEMORY", "cudaErrorMemoryAllocation")


def _gib(n: int) -> str:
    return f"{n / (1 << 30):.2f} GiB"


def is_cuda_oom(verdict: Verdict) -> bool:
    """Whether a failed verdict says the device ran out of memory (torch.OutOfMemoryError and the like)."""
    if verdict.status not in (Status.runtime_error, Status.compile_error):
        return False
    text = verdict.reason + "\n" + verdict.traceback
    return any(s in text for s in _CUDA_OOM)


_UNCONFIRMED = "the verdict of the candidate's process cannot be confirmed outside it"
_MAX_JUDGED = 64  # judged outputs a worker may send for one evaluation (it is asked for `EvalOptions.judged_sets`)
_JUDGED_TASKS = 4  # tasks whose judged input sets the parent keeps (the judge keeps as many reference outputs)


class EvaluationCancelled(Exception):
    """The evaluation was cancelled by the caller; its worker was killed."""


class WorkerStartError(RuntimeError):
    """A worker process could not start (bad interpreter, no GPU, torch missing)."""


def _signal_name(returncode: int | None) -> str:
    if returncode is None:
        return "still running"
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exited with code {returncode}"


def close_all(workers: Iterable[Worker]) -> None:
    """`Worker.close` on every one at once: each idle worker has a second to leave before it is killed, so a pool of
    nine takes about a second to close, not nine."""
    threads = [threading.Thread(target=w.close, name="forge-close", daemon=True) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


@dataclass
class _Process:
    """One started worker process: its pipes, its log, its hello."""

    proc: subprocess.Popen
    to: int
    from_: int
    rx: pipe.Receiver
    log: BinaryIO
    log_path: Path
    hello: Hello | None = None

    def end(self) -> None:
        kill_tree(self.proc, wait=10)
        for fd in (self.to, self.from_):
            try:
                os.close(fd)
            except OSError:
                pass
        self.log.close()


def _read_tail(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - _EXCERPT))
            return f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def sealed_sets() -> bool:
    """Whether the judge's sets go to workers in a sealed file they map (`engine.sealed`) rather than on the pipes:
    where that works, unless ``FORGE_JUDGE_SEALED=0``."""
    from .sealed import supported

    return os.environ.get("FORGE_JUDGE_SEALED", "1") != "0" and supported()


class _SetsFollow:
    """The judge's sets that follow an evaluation's request (`EvaluateRequest.judged_follow`): written to the worker
    by a thread as soon as the draw is done (`start`, its `Future`'s callback), while the evaluation runs; once it
    ended (`finish`), not any more. The thread writes to its own copy of the pipe's fd: a worker killed meanwhile
    makes the write fail, it never reaches another pipe given the same number."""

    def __init__(self, pending: Future[JudgeReady]) -> None:
        self.pending = pending
        self.fd = -1  # a copy of the fd the request went to, once it went (`open`)
        self.sent = False
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False
        pending.add_done_callback(self.start)

    def open(self, fd: int) -> None:
        """The request went out whole to `fd` (`_exchange`'s `sent`): the sets follow it there as soon as they are
        drawn, never before the request nor in the middle of it."""
        with self._lock:
            if self._closed or self.fd >= 0:
                return
            self.fd = os.dup(fd)
        if self.pending.done():
            self.start()

    def start(self, _future: object = None) -> None:
        with self._lock:
            if self.fd < 0 or self._closed or self._thread is not None:
                return
            self._thread = threading.Thread(target=self._send, name="forge-judged-sets", daemon=True)
            self._thread.start()

    def _send(self) -> None:
        try:
            try:
                r = self.pending.result()
            except BaseException as exc:  # noqa: BLE001 - a cancelled or failed draw: the worker goes on without
                r = JudgeReady(ok=False, reason=f"the judge's draw failed: {exc}")
            msg = JudgedSets(key=r.key, ok=r.ok, reason=r.reason, bandwidth=r.bandwidth, sealed=r.sealed)
            if r.ok and r.sealed is None:
                msg.with_data(r.data)
            pipe.send(self.fd, msg)
            self.sent = True
        except OSError:  # the worker ended
            pass
        finally:
            os.close(self.fd)

    def finish(self, within: float = 120.0) -> bool:
        """The evaluation ended: no sending from now on; one in flight (the worker reads it between requests) waited
        for. False if it still runs."""
        with self._lock:
            self._closed = True
            thread = self._thread
        if thread is None:
            if self.fd >= 0:
                os.close(self.fd)
            return True
        thread.join(within)
        return not thread.is_alive()


class Worker:
    """One persistent worker subprocess for one device. Thread-safe; one request at a time."""

    def __init__(
        self,
        device: str = "cpu",
        *,
        cache_dir: Path | None = None,
        python: str | None = None,
        env: dict[str, str] | None = None,
        startup_timeout: float = 180.0,
        log_limit_bytes: int = 64 * 1024 * 1024,
        host_memory_limit: int | None = None,
        standby: bool = False,
        judge: bool = False,
        judged: bool = False,
    ) -> None:
        self.device = device
        #: a judge: a process that never gets candidate code (``--judge``), only the task's reference and tensors
        self.judge = judge
        #: a device worker whose evaluations are judged apart: its judge starts beside it (its start-up overlapped)
        self.judged = judged and not judge
        self._judge: Worker | None = None  # this device worker's judge, started on first use
        #: task sha -> (the judge process's start count, its input sets for the task), the latest used last
        self._judged: dict[str, tuple[int, JudgeReady]] = {}
        self._draws = 0  # the judge's draws so far: each names its input sets (`EvaluateRequest.judged_key`)
        #: the judge draws a task's sets beside its first evaluation (`judged_follow`) only where the device's gate
        #: keeps the judge's own timings (the reference alone, the bandwidth) apart from the worker's work: a GPU's.
        #: On the CPU nothing can, so the draw comes first there.
        self.draw_beside = device.startswith("cuda")
        self._worker_holds: tuple[int, str] | None = None  # (worker pid, judged_key) of the sets the worker keeps
        self._judge_moved = False  # the judge ran on the device since the worker's last evaluation
        self.cache_dir = Path(cache_dir or default_cache_dir())
        self.python = python or sys.executable
        self.extra_env = env or {}
        self.startup_timeout = startup_timeout
        self.log_limit = log_limit_bytes
        #: bytes the worker's process tree may hold resident (None: no cap); a request's options may lower it
        self.host_memory_limit = host_memory_limit
        #: the most the tree held resident during the last request, as sampled
        self.peak_rss = 0
        self.hello: Hello | None = None
        self.proc: subprocess.Popen | None = None
        self.starts = 0
        self.served = 0  # evaluations the current process has finished
        self.exchange_stages: dict[str, float] = {}  # the parent's side of the last exchange (see `_exchange`)
        self._lock = threading.Lock()
        self._start_lock = threading.Lock()  # one start at a time; others wait for its hello
        self._cancelled = threading.Event()
        self._log_stem = self.cache_dir / "logs" / f"worker-{device.replace(':', '')}-{os.getpid()}-{id(self):x}"
        self._log_path = self._log_stem.with_name(self._log_stem.name + "-0.log")
        self._log: BinaryIO | None = None
        self._spawned = 0
        self._spawn_lock = threading.Lock()
        #: once the process was replaced (a crash, an unusable CUDA context, a timeout, out of memory), keep the next
        #: one started and waiting, so a batch with many crashing candidates does not wait for each start-up
        self.standby = standby
        self._spare: Future[_Process] | None = None
        self._starting: set[subprocess.Popen] = set()  # standby processes not yet past their hello
        self._closing = False
        self._stale = False  # its process was killed by `cancel`, perhaps not yet seen to end

    # --------------------------------------------------------------- lifecycle
    def _spawn(self, standby: bool = False) -> _Process:
        """A new worker process, its hello received (raises `WorkerStartError`). The process is known at once, before
        its hello — as `proc` (or, for a standby, in `_starting`) — so `close` and `cancel` end it while it starts."""
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        with self._spawn_lock:
            self._spawned += 1
            n = self._spawned
        log_path = self._log_stem.with_name(f"{self._log_stem.name}-{n}.log")
        log_path.parent.mkdir(parents=True, exist_ok=True)
        p2c_r, p2c_w = os.pipe()
        c2p_r, c2p_w = os.pipe()
        log: BinaryIO = open(log_path, "wb")
        args = [
            "--device",
            self.device,
            "--in-fd",
            str(p2c_r),
            "--out-fd",
            str(c2p_w),
            *(["--judge"] if self.judge else []),
        ]
        env = child_env(self.device, self.cache_dir, self.extra_env)
        try:
            proc: subprocess.Popen | None = None
            if zygote.enabled(self.device):
                try:
                    proc = zygote.fork_worker(
                        self.python,
                        args,
                        env=env,
                        cwd=self.cache_dir,
                        log_fd=log.fileno(),
                        fds=(p2c_r, c2p_w),
                        cache_dir=self.cache_dir,
                    ).as_popen()
                except zygote.ZygoteError as exc:  # started the usual way, and said why in its log
                    log.write(f"forge: no zygote to fork this worker from ({exc}); started afresh\n".encode())
                    log.flush()
            if proc is None:
                proc = spawn(
                    [self.python, "-m", "forge_lsp.engine.worker", *args],
                    pass_fds=(p2c_r, c2p_w),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    cwd=self.cache_dir,
                )
        except BaseException:
            for fd in (p2c_w, c2p_r):
                os.close(fd)
            log.close()
            raise
        finally:
            os.close(p2c_r)
            os.close(c2p_w)
        started = _Process(proc, p2c_w, c2p_r, pipe.Receiver(c2p_r, pipe.REPLY), log, log_path)
        if standby:
            self._starting.add(proc)
        else:
            self.proc = proc
        try:
            msg = started.rx.recv(time.monotonic() + self.startup_timeout)
        except pipe.ChannelClosed:
            msg = None
        finally:
            self._starting.discard(proc)
        if not isinstance(msg, Hello):
            code = proc.poll()
            started.end()
            raise WorkerStartError(
                f"worker for {self.device} did not start ({_signal_name(code)}):\n{_read_tail(log_path)}"
            )
        started.hello = msg
        return started

    def _adopt(self, p: _Process) -> Hello:
        assert p.hello is not None
        self.proc, self._to, self._from, self._rx, self._log, self._log_path = (
            p.proc,
            p.to,
            p.from_,
            p.rx,
            p.log,
            p.log_path,
        )
        self.hello = p.hello
        self.starts += 1
        self.served = 0  # evaluations this process has finished
        return p.hello

    def start(self) -> Hello:
        """Start the worker process: the standby's, when one is waiting (see `standby`), else a new one."""
        self._closing = False
        spare, self._spare = self._spare, None
        if spare is not None:
            try:
                waiting = spare.result()
            except Exception:  # noqa: BLE001 - the standby failed to start: start one here, and say why if it fails
                waiting = None
            if waiting is not None and waiting.proc.poll() is None:
                hello = self._adopt(waiting)
                self._start_spare()
                return hello
            if waiting is not None:  # it died while it waited
                waiting.end()
        if self.judged:
            self._start_judge()
        hello = self._adopt(self._spawn())
        if self.standby and self.starts > 1:
            self._start_spare()
        return hello

    def _new_judge(self) -> Worker:
        if self._judge is None:
            self._judge = Worker(
                self.device,
                cache_dir=self.cache_dir,
                python=self.python,
                env=self.extra_env,
                startup_timeout=self.startup_timeout,
                host_memory_limit=self.host_memory_limit,
                judge=True,
            )
        return self._judge

    def _start_judge(self) -> None:
        """Start this worker's judge in the background, if it is not running: its start-up (torch's import, a CUDA
        context) then overlaps the worker's own."""
        judge = self._new_judge()
        if judge.proc is not None and judge.proc.poll() is None:
            return

        def start() -> None:
            if self._judge is not judge:  # this worker was closed before the thread ran: no judge to start
                return
            try:
                judge.ensure_started()
            except Exception:  # noqa: BLE001 - said when it is asked for its sets (`ready`)
                pass
            if self._judge is not judge:  # closed while it started (its `start` had cleared the judge's own close)
                judge.close()

        threading.Thread(target=start, name=f"forge-judge-{self.device}", daemon=True).start()

    def _start_spare(self) -> None:
        """Start the next standby process in the background: a respawn after a crash then costs no start-up."""
        if self._closing or self._spare is not None:
            return
        future: Future[_Process] = Future()
        self._spare = future

        def run() -> None:
            try:
                p = self._spawn(standby=True)
            except BaseException as exc:  # noqa: BLE001 - said when it is adopted
                future.set_exception(exc)
                return
            future.set_result(p)
            if self._closing:  # closed while it started
                self._end_spare()

        threading.Thread(target=run, name=f"forge-standby-{self.device}", daemon=True).start()

    def _end_spare(self) -> None:
        spare, self._spare = self._spare, None
        for proc in list(self._starting):  # a standby still starting: it ends, its thread sees the pipe close
            kill_tree(proc)
        if spare is not None and spare.done() and spare.exception() is None:
            spare.result().end()

    @property
    def restarts(self) -> int:
        """How many times a worker was started again after the first (crash, timeout, cancel)."""
        return max(0, self.starts - 1)

    def ensure_started(self) -> Hello:
        """The running worker's hello, starting it first if needed (safe from several threads)."""
        with self._start_lock:
            if self.proc is None or self._stale or self.proc.poll() is not None or self.hello is None:
                self.kill()
                return self.start()
            return self.hello

    def kill(self) -> None:
        proc, self.proc = self.proc, None
        self._stale = False
        self._worker_holds = None
        if proc is not None:
            kill_tree(proc, wait=10)
        for fd in ("_to", "_from"):
            if getattr(self, fd, None) is not None:
                try:
                    os.close(getattr(self, fd))
                except OSError:
                    pass
                setattr(self, fd, None)
        log = getattr(self, "_log", None)
        if log is not None:
            log.close()
            self._log = None
            if self._log_path.exists():  # read already where a verdict needed it; a new process gets a new log
                try:
                    self._log_path.unlink()
                except OSError:
                    pass

    def close(self) -> None:
        """End the worker and its whole tree (and its standby's): asked to leave when idle (it has a second), killed
        when busy."""
        self._closing = True
        self._end_spare()
        judge, self._judge = self._judge, None
        if judge is not None:
            judge.close()
        if not self._lock.acquire(blocking=False):  # a request in flight (another thread)
            self.cancel()  # its tree dies now; that thread sees the cancel and cleans up
            if not self._lock.acquire(timeout=2):
                return
        try:
            to = getattr(self, "_to", None)  # None while the worker is still starting: it is killed below
            if self.proc is not None and self.proc.poll() is None and to is not None:
                try:
                    pipe.send(to, pipe.ShutdownRequest())
                    self.proc.wait(timeout=1)
                except (OSError, subprocess.TimeoutExpired):
                    pass
            self.kill()
        finally:
            self._lock.release()

    def cancel(self) -> None:
        """Stop the request in flight now: the worker's tree is killed and the worker restarted on next use."""
        self._cancelled.set()
        proc = self.proc
        if proc is not None:
            self._stale = True  # killed: started again on next use, however soon its end is seen (`ensure_started`)
            kill_tree(proc)
        judge = self._judge
        if judge is not None:  # its request in flight, if any, is this evaluation's; it starts again when asked
            judge.cancel()

    # --------------------------------------------------------------- requests
    def _tail(self, offset: int) -> str:
        try:
            with open(self._log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                end = f.tell()
                start = max(offset, end - _EXCERPT)
                f.seek(start)
                data = f.read(end - start)
        except OSError:
            return ""
        text = data.decode("utf-8", errors="replace")
        if start > offset:  # cut: keep the compiler's error lines from the part left out
            try:
                with open(self._log_path, "rb") as f:
                    f.seek(offset)
                    head = f.read(min(start - offset, 4 * self.log_limit)).decode("utf-8", errors="replace")
            except OSError:
                head = ""
            errors = [ln for ln in head.splitlines() if _ERROR_LINE.search(ln)][:20]
            text = "\n".join(errors) + ("\n" if errors else "") + "...\n" + text
        return text

    def _log_size(self) -> int:
        try:
            return os.path.getsize(self._log_path)
        except OSError:
            return 0

    def _over_memory(self, limit: int | None) -> int | None:
        """Sample the tree's resident memory (keeping the peak); the bytes held when over `limit`, else None."""
        proc = self.proc
        if proc is None:
            return None
        rss = tree_rss(proc.pid)
        self.peak_rss = max(self.peak_rss, rss)
        return rss if limit and rss > limit else None

    def _rotate_log(self) -> None:
        """Between requests: a worker whose log grew past half its limit is ended (the next request starts another)."""
        if self._log_size() > self.log_limit // 2:
            self.kill()

    def _exchange(
        self,
        request,
        timeouts: dict[str, float],
        first_stage: str,
        on_stage=None,
        memory_limit: int | None = None,
        judged: list[JudgedOutputs] | None = None,
        sent: Callable[[], None] | None = None,
    ):
        """Send one request, follow its stages, sample the tree's memory; `judged` collects the `JudgedOutputs` the
        worker sends on the way; `sent` is called once the request is written whole.

        Returns (reply | None, failure status | None, reason, last stage, log excerpt)."""
        self._rotate_log()
        t0 = time.perf_counter()
        self.ensure_started()
        t1 = time.perf_counter()
        self._cancelled.clear()
        limit = memory_limit if memory_limit is not None else self.host_memory_limit
        self.peak_rss = 0
        offset = self._log_size()
        stage = first_stage
        deadline = time.monotonic() + timeouts.get(stage, 600.0)
        try:
            pipe.send(self._to, request)
        except OSError as exc:  # it ended after `ensure_started` saw it running (killed from outside)
            self.kill()
            if self._cancelled.is_set():
                raise EvaluationCancelled() from exc
            raise WorkerStartError(f"the worker ended before its request was written: {exc}") from exc
        if sent is not None:
            sent()
        #: the parent's side of this exchange: a worker (re)started for it, and the request (with its data) written
        self.exchange_stages = {"worker_start": round(t1 - t0, 4), "send": round(time.perf_counter() - t1, 4)}
        sampled = 0.0
        while True:
            if self._cancelled.is_set():
                self.kill()
                raise EvaluationCancelled()
            now = time.monotonic()
            if now - sampled >= _MEMORY_POLL_S:
                sampled = now
                held = self._over_memory(limit)
                if held is not None and limit is not None:
                    excerpt = self._tail(offset)
                    self.kill()
                    return (
                        None,
                        Status.out_of_memory,
                        (
                            f"out of host memory during stage {stage!r}: the worker's processes held {_gib(held)} "
                            f"resident, over the {_gib(limit)} limit (host_memory_limit); worker killed"
                        ),
                        stage,
                        excerpt,
                    )
            tick = min(deadline, time.monotonic() + _MEMORY_POLL_S)
            try:
                msg = self._rx.recv(tick)
            except pipe.Oversized as exc:
                excerpt = self._tail(offset)
                self.kill()
                return None, Status.runtime_error, f"the worker sent more than forge takes: {exc}", stage, excerpt
            except pipe.ChannelClosed:
                if self._cancelled.is_set():
                    self.kill()
                    raise EvaluationCancelled() from None
                code = self.proc.wait(timeout=10) if self.proc else None
                reason = f"the worker process died during stage {stage!r} ({_signal_name(code)})"
                excerpt = self._tail(offset)
                self.kill()
                return None, Status.crashed, reason, stage, excerpt
            if msg is None:
                if self._log_size() - offset > self.log_limit:
                    excerpt = self._tail(offset)
                    self.kill()
                    return (
                        None,
                        Status.runtime_error,
                        (f"output limit exceeded: the candidate printed more than {self.log_limit >> 20} MiB"),
                        stage,
                        excerpt,
                    )
                if time.monotonic() >= deadline:
                    excerpt = self._tail(offset)
                    self.kill()
                    return (
                        None,
                        Status.timeout,
                        (f"stage {stage!r} exceeded its {timeouts.get(stage, 600.0):g} s limit; worker killed"),
                        stage,
                        excerpt,
                    )
                continue
            if isinstance(msg, StageStarted):
                stage = msg.stage
                deadline = time.monotonic() + timeouts.get(stage, 600.0)
                if on_stage is not None:
                    on_stage(stage)
                continue
            if isinstance(msg, JudgedOutputs) and judged is not None and len(judged) < _MAX_JUDGED:
                if msg.relayed:  # streamed to the judge as it came: the judge says it holds it whole
                    msg._held = not msg.relay_failed and self._judge is not None and self._judge.held(msg.index)
                judged.append(msg)
                continue
            return msg, None, "", stage, self._tail(offset)

    def evaluate(self, task: Task, candidate: Candidate, options: EvalOptions, on_stage=None) -> Verdict:
        """Evaluate in the worker; every failure mode becomes a `Verdict`. Raises only `EvaluationCancelled`.

        A verdict that says the device ran out of memory is tried once more in a fresh worker (the last
        candidates may have left the device fragmented or held); out of memory again, it is `out_of_memory`.
        Likewise a worker that died (a signal: an abort, a segfault) after serving other candidates: their host code
        runs in the same process and may have left its heap corrupt, which the next allocation, anyone's, aborts on;
        the candidate is tried in a fresh worker, and `crashed` only if it dies there too."""
        with self._lock:
            served = self.served
            verdict = self._evaluate(task, candidate, options, on_stage)
            if verdict.status is Status.crashed and served > 0:
                first = verdict
                self.kill()
                verdict = self._evaluate(task, candidate, options, on_stage)
                if verdict.memory is None:
                    verdict.memory = MemoryUse()
                verdict.memory.retried = True
                if verdict.status is Status.crashed:
                    verdict.reason = f"{verdict.reason}, again in a fresh worker"
                else:
                    print(
                        f"forge: {candidate.name}: the worker died after {served} other candidates ({first.reason}); "
                        "in a fresh worker it did not",
                        file=sys.stderr,
                    )
            if not is_cuda_oom(verdict):
                return verdict
            first = verdict
            self.kill()  # a fresh worker: a fresh CUDA context, all of the device's free memory
            cuda = self.device.startswith("cuda")
            if cuda:  # and its memory in segments that grow in place (see `EvalOptions.expandable_segments`)
                options = options.model_copy(update={"expandable_segments": True})
            verdict = self._evaluate(task, candidate, options, on_stage)
            if verdict.memory is None:
                verdict.memory = MemoryUse()
            verdict.memory.retried = True
            if is_cuda_oom(verdict):
                verdict.status = Status.out_of_memory
                how = " (its memory in expandable segments)" if cuda else ""
                verdict.reason = f"out of device memory, again in a fresh worker{how}: {verdict.reason or first.reason}"
            return verdict

    def _evaluate(self, task: Task, candidate: Candidate, options: EvalOptions, on_stage=None) -> Verdict:
        limit = options.host_memory_limit()
        verdict = self._evaluate_in_worker(task, candidate, options, on_stage, limit)
        if verdict.memory is None:
            verdict.memory = MemoryUse()
        verdict.memory.host_peak_bytes = self.peak_rss or None
        verdict.memory.host_limit_bytes = limit
        return verdict

    def _evaluate_in_worker(
        self,
        task: Task,
        candidate: Candidate,
        options: EvalOptions,
        on_stage,
        limit: int | None,
        judge_retried: bool = False,
    ) -> Verdict:
        timeouts = options.timeouts.model_dump()
        request = EvaluateRequest(task=task, candidate=candidate, options=options)
        got = self._judge_ready(task, options, background=self.draw_beside)
        pending = got if isinstance(got, Future) else None  # the judge draws as the evaluation starts
        ready = None if isinstance(got, Future) else got
        follow: _SetsFollow | None = None
        if pending is not None or (ready is not None and ready.ok):
            self._rotate_log()
            self.ensure_started()  # the process the request goes to: its receiver routes the judged outputs
        if pending is not None:
            request.judged_follow = True
            follow = _SetsFollow(pending)
        if ready is not None and ready.ok:
            request.bandwidth = ready.bandwidth
            request.judged_key = ready.key
            # the worker keeps the last sets it was sent: sent again only to another process or for another draw
            if self.proc is None or self._worker_holds != (self.proc.pid, ready.key):
                if ready.sealed is not None:
                    request.judged_sealed = ready.sealed
                else:
                    request.with_data(ready.data)
        request.device_shared, self._judge_moved = self._judge_moved, False
        judged: list[JudgedOutputs] = []
        judge_proc = self._judge.proc if self._judge is not None else None  # the judge that drew the sets
        rx = self._rx if (ready is not None and ready.ok) or follow is not None else None
        if rx is not None:
            sets = ready.sets if ready is not None else options.judged_sets
            rx.route = self._route_judged(task, sets, judged, lambda: pending is None or pending.done())
        try:
            msg, status, reason, stage, excerpt = self._exchange(
                request,
                timeouts,
                "load_task",
                on_stage,
                memory_limit=limit,
                judged=judged,
                sent=(lambda: follow.open(self._to)) if follow is not None and self._to is not None else None,
            )
        except WorkerStartError as exc:
            return Verdict(
                status=Status.crashed,
                reason=f"worker could not start: {exc}".splitlines()[0],
                log_excerpt=str(exc)[-_EXCERPT:],
                device=self.device,
                backend=candidate.backend.value,
                task_sha=task.sha,
                candidate_sha=candidate.sha,
            )
        finally:
            if rx is not None:
                rx.route = None
            if follow is not None and not follow.finish():
                self.kill()  # the sets still being written: the pipe's next bytes are not a request's
        if pending is not None:
            ready = pending.result()  # the draw, done or awaited: the judge compares what the worker sent
            judge_proc = self._judge.proc if self._judge is not None else None
            self._judge_moved = True  # the judge drew beside this evaluation: the worker measures its level again
        drawn_now = pending is not None
        if msg is None:
            return Verdict(
                status=status,
                reason=reason,
                failed_check=None,
                log_excerpt=excerpt,
                device=self.device,
                backend=candidate.backend.value,
                stages={stage: -1.0},
                task_sha=task.sha,
                candidate_sha=candidate.sha,
                device_name=self.hello.device_name if self.hello else "",
            )
        assert isinstance(msg, EvaluateResult)
        self.served += 1
        if request.judged_key and 0 < request.judged_bytes <= pipe.JUDGED_KEPT_BYTES and self.proc is not None:
            self._worker_holds = (self.proc.pid, request.judged_key)  # the worker keeps them (`WorkerState.judged`)
        if follow is not None and follow.sent and ready is not None and self.proc is not None:
            if ready.ok and 0 < ready.size <= pipe.JUDGED_KEPT_BYTES:
                self._worker_holds = (self.proc.pid, ready.key)
        verdict = msg.verdict
        verdict.stages.update({k: s for k, s in self.exchange_stages.items() if s >= 0.001})
        if msg.worker_unusable:
            self.kill()  # it exits by itself; make sure, and respawn on next use
        if ready is not None:
            if drawn_now:
                verdict.stages["judge_draw"] = round(ready.seconds, 4)
                verdict.stages.update({f"judge_draw.{k}": s for k, s in ready.stages.items() if s >= 0.001})
            unsent = not request.judged_bytes and pending is None
            if ready.ok and unsent and verdict.status is Status.correct and len(judged) < ready.sets:
                # sent without the sets the worker was to keep, and it ran none: they were lost in it (what the last
                # candidate did to its process, or forge's bookkeeping), not this candidate's doing: again, with them
                self._worker_holds = None
                return self._evaluate_in_worker(task, candidate, options, on_stage, limit, judge_retried)
            judge = self._judge  # the judge that drew the sets ended since (its draw may have failed for it)
            ended = judge is None or judge_proc is None or judge.proc is not judge_proc or judge_proc.poll() is not None
            # or before it: its sealed file went with it, and the worker could not map the sets (`judged_unmapped`)
            ended = ended or bool(msg.judged_unmapped)
            if self._judge_verdict(verdict, task, options, ready, judged, ended, final=judge_retried):
                # the judge ended, or lost what it was to compare, during this evaluation: whatever ended it (a crash,
                # or the candidate's own doing), the candidate is evaluated again beside a new judge, once
                self._judged.pop(task.sha, None)
                if judge is not None:
                    judge.kill()
                return self._evaluate_in_worker(task, candidate, options, on_stage, limit, judge_retried=True)
        if verdict.status is not Status.correct:
            verdict.log_excerpt = excerpt
        return verdict

    # --------------------------------------------------------------- the judge
    def _route_judged(self, task: Task, sets: int, judged: list[JudgedOutputs], drawn: Callable[[], bool]):
        """The device worker's `Receiver.route` during an evaluation: its outputs on each judged set stream on to the
        judge as they arrive (`HoldRequest`), so they cross the host once and the comparison after it copies nothing.
        Any other data, a set already sent, or a judge not running: kept here, as before."""

        def route(msg: pipe.WithData) -> int | None:
            judge = self._judge
            if (
                not isinstance(msg, JudgedOutputs)
                or not 0 <= msg.index < sets
                or any(j.index == msg.index for j in judged)
                or len(judged) >= _MAX_JUDGED
                or judge is None
                or not drawn()  # (the judge is in use while it draws: no outputs before its sets went out)
            ):
                return None
            return judge.hold_start(HoldRequest(task_sha=task.sha, index=msg.index, nbytes=msg.nbytes))

        return route

    def hold_start(self, request: HoldRequest) -> int | None:
        """(A judge's.) Announce outputs that another pipe streams to this judge: the fd to stream them to, None where
        the judge is not running."""
        if self.proc is None or self._stale or self.proc.poll() is not None or self._to is None:
            return None
        try:
            pipe.send(self._to, request, with_data=False)
        except OSError:
            self.kill()
            return None
        return self._to

    def held(self, index: int, within: float = 60.0) -> bool:
        """(A judge's.) Whether it says it holds the outputs streamed to it for set `index` (`hold_start`); a judge
        that says nothing else in time is ended (its replies would be out of step)."""
        try:
            reply = self._rx.recv(time.monotonic() + within) if self._rx is not None else None
        except pipe.ChannelClosed:
            reply = None
        if isinstance(reply, Held) and reply.index == index:
            return True
        self.kill()
        return False

    def _judge_ready(
        self, task: Task, options: EvalOptions, background: bool = False
    ) -> JudgeReady | Future[JudgeReady] | None:
        """The judge's input sets for `task` (the judge started and asked once per task and judge process), None
        without judging. A draw to make is made now, or with `background`, in a thread (its `Future`)."""
        if options.judged_sets <= 0 or self.judge:
            return None
        judge = self._new_judge()
        process = judge.starts if judge.proc is not None and judge.proc.poll() is None else -1
        held = {sha: r for sha, r in self._judged.items() if r[0] == process}  # a judge started again holds none
        ready = held.pop(task.sha, (process, None))[1]
        if ready is not None and ready.sealed is not None and not os.path.exists(ready.sealed.path):
            ready = None  # its judge ended (its sealed file with it), not yet seen to: drawn again
        if ready is not None:
            self._judged = held
            self._judged[task.sha] = (judge.starts, ready)
            return ready
        while len(held) >= _JUDGED_TASKS:  # the judge drops what the parent drops
            held.pop(next(iter(held)))
        self._judged = held
        self._draws += 1
        key = f"{self._draws}"

        def draw() -> JudgeReady:
            t0 = time.monotonic()
            drawn = judge.ready(task, options, keep=list(held))
            drawn.stages["wall"] = round(time.monotonic() - t0, 4)  # the judge's seconds and the sets' way here
            drawn.key = f"{judge.starts}:{key}"
            self._judge_moved = True
            self._judged[task.sha] = (judge.starts, drawn)
            return drawn

        if not background:
            return draw()
        future: Future[JudgeReady] = Future()

        def run() -> None:
            try:
                future.set_result(draw())
            except BaseException as exc:  # noqa: BLE001 - EvaluationCancelled included: read where it is awaited
                future.set_exception(exc)

        threading.Thread(target=run, name=f"forge-judge-draw-{self.device}", daemon=True).start()
        return future

    def ready(self, task: Task, options: EvalOptions, keep: list[str] | None = None) -> JudgeReady:
        """(A judge's.) Draw `options.judged_sets` input sets of `task` and keep the reference's outputs on them,
        and on the tasks in `keep` only."""
        assert self.judge, "only a judge draws judged input sets"
        t = options.timeouts
        msg, why = self._ask(
            JudgeRequest(task=task, options=options, sets=options.judged_sets, keep=keep or [], sealed=sealed_sets()),
            {"load_task": t.load_task, "reference": t.first_call + t.verify},
            "load_task",
            options,
        )
        return msg if isinstance(msg, JudgeReady) else JudgeReady(ok=False, reason=why)

    def compare(self, task: Task, options: EvalOptions, judged: JudgedOutputs) -> Compared:
        """(A judge's.) A candidate's outputs on a judged input set against the reference's: those it holds (streamed
        to it during the evaluation), else those sent now."""
        assert self.judge, "only a judge compares judged outputs"
        if judged.relayed and not judged._held:
            return Compared(
                passed=False,
                detail=f"[judged input set #{judged.index + 1}] the candidate's outputs did not reach the judge whole "
                "(it ended while they were sent): its verdict cannot be confirmed outside its process; evaluate it again",
            )
        request = CompareRequest(task_sha=task.sha, index=judged.index, held=judged.relayed)
        if not judged.relayed:
            request.with_data(judged.data)
        msg, why = self._ask(request, {"compare": options.timeouts.verify}, "compare", options)
        return msg if isinstance(msg, Compared) else Compared(passed=False, detail=why)

    def time_reference(self, task: Task, options: EvalOptions) -> list[float]:
        """(A judge's.) The reference of `task` timed alone now (ms per call); empty where it cannot be."""
        assert self.judge, "only a judge times the reference alone"
        request = TimeReferenceRequest(task_sha=task.sha, l2_flush=options.l2_flush)
        msg, _ = self._ask(request, {"time_reference": options.timeouts.time}, "time_reference", options)
        return msg.ms if isinstance(msg, ReferenceTimes) else []

    def _ask(self, request, timeouts: dict[str, float], first_stage: str, options: EvalOptions) -> tuple[Any, str]:
        """(A judge's.) One request: (its reply, "") or (None, why there is none: it could not start, or failed)."""
        with self._lock:
            try:
                msg, _status, reason, stage, _excerpt = self._exchange(
                    request, timeouts, first_stage, memory_limit=options.host_memory_limit()
                )
            except WorkerStartError as exc:
                return None, f"the judge could not start: {exc}".splitlines()[0]
        return (msg, "") if msg is not None else (None, f"the judge failed in stage {stage!r}: {reason}")

    @staticmethod
    def _median_upper(xs: list[float], n_boot: int = 1000) -> float:
        """The upper end of the 95% bootstrap interval of the median of `xs` (here, no numpy: the parent's side)."""
        import random

        rng = random.Random(0)
        meds = sorted(statistics.median(rng.choices(xs, k=len(xs))) for _ in range(n_boot))
        return meds[int(0.975 * n_boot)]

    #: the reference's median beside the candidate may be this many times its time alone in the judge (the slower end
    #: of that median's interval) before its timing is in doubt: on the CPU the interleaved loop's own effects (input
    #: refreshes, thread pools that sleep between calls) already reach 1.5x for an honest candidate on 2 cores
    REFERENCE_SLOWER = {"cpu": 2.0, "events": 1.3}
    #: the shortest reference (alone, ms) compared: below it, per-call overheads of the interleaved loop dominate
    REFERENCE_TIMED_FROM_MS = {"cpu": 1.0, "events": 0.05}

    def _check_reference_timing(self, verdict: Verdict, task: Task, options: EvalOptions, ready: JudgeReady) -> Check:
        """`reference_timing`: the reference timed beside the candidate, in its process, against the reference timed
        alone in the judge. Slower beside it than `REFERENCE_SLOWER` allows, the judge times it again now; still
        slower, the timing is withheld as inconclusive (the verdict claims no speedup): the candidate's process slowed
        the reference, or the machine was busy while it was timed, which cannot be told apart afterwards."""
        timing = verdict.timing
        if timing is None or timing.mode not in ("cpu", "events") or not ready.ref_ms:
            return Check(name="reference_timing", passed=True, detail="not compared: no timing of the reference alone")
        shortest = self.REFERENCE_TIMED_FROM_MS[timing.mode]
        beside = timing.reference.median_ms
        limit = self.REFERENCE_SLOWER[timing.mode]
        if statistics.median(ready.ref_ms) < shortest:
            return Check(
                name="reference_timing",
                passed=True,
                detail=f"not compared: the reference takes {statistics.median(ready.ref_ms):.3g} ms alone, under the "
                f"{shortest:g} ms from which calls in two processes compare (the interleaving's own overheads differ)",
            )
        # within the limit of the median alone: the same; past it (also where only a noisy timing alone, as on a busy
        # machine, would let it pass), timed again now and judged on the slower end of that median's interval
        if beside <= limit * statistics.median(ready.ref_ms):
            return Check(
                name="reference_timing",
                passed=True,
                detail=f"the reference beside the candidate ({timing.reference.median_ms:.4g} ms) as alone in the "
                f"judge ({statistics.median(ready.ref_ms):.4g} ms)",
            )
        assert self._judge is not None
        # now, under the load the worker's timing saw (no new timing: the one before)
        again = self._judge.time_reference(task, options) or ready.ref_ms
        slower = beside / self._median_upper(again)
        if slower <= limit:
            return Check(
                name="reference_timing",
                passed=True,
                detail=f"the reference beside the candidate ({beside:.4g} ms) as alone in the judge, timed again "
                f"({statistics.median(again):.4g} ms)",
            )
        # what slowed it cannot be told apart here: the candidate's doing (its processes, settings, memory) or load
        # on the machine that came and went (builds running beside the timing); no speedup is claimed either way
        return Check(
            name="reference_timing",
            passed=True,
            detail=f"inconclusive, timing withheld: the reference ran {slower:.2f}× slower beside the candidate (median "
            f"{beside:.4g} ms) than alone in the judge, timed again just after (median "
            f"{statistics.median(again):.4g} ms): something slowed it in the candidate's process (its "
            "processes, settings, hooks or memory) or the machine was busy then; time it again on a quiet machine",
        )

    def _judge_verdict(
        self,
        verdict: Verdict,
        task: Task,
        options: EvalOptions,
        ready: JudgeReady,
        judged: list[JudgedOutputs],
        ended: bool = False,
        final: bool = True,
    ) -> bool:
        """Fold the judge's word into a verdict the worker called correct: the candidate's outputs on every judged
        input set, compared in the judge, or `clean_judge` fails. A verdict the worker did not call correct stands
        as it is (its process's word against itself is enough).

        The judge that drew the sets `ended` during the evaluation, or holds nothing to compare: True (the verdict
        untouched) to have the candidate evaluated again, unless this evaluation was that (`final`): then
        `clean_judge` fails, since a judge that ends whenever a candidate runs confirms nothing."""
        if verdict.status is not Status.correct:
            return False
        t0 = time.monotonic()
        lost = "the judge ended during the candidate's evaluation" if ended else ""
        if lost and not final:
            return True
        if not ready.ok and not lost:
            verdict.checks.append(Check(name="clean_judge", passed=True, detail=f"not judged apart: {ready.reason}"))
            return False
        assert self._judge is not None
        got = {j.index: j for j in judged if 0 <= j.index < ready.sets}
        failed: Compared | None = None
        if lost:
            failed = Compared(passed=False, detail=f"{lost}, and again when it was evaluated again: {_UNCONFIRMED}")
        elif len(got) < ready.sets:
            failed = Compared(
                passed=False,
                detail=f"the candidate's process sent its outputs on {len(got)} of the {ready.sets} input sets the "
                "judge drew: its verdict cannot be confirmed outside it",
            )
        for index in sorted(got):
            if failed is not None:
                break
            answer = self._judge.compare(task, options, got[index])
            if answer.unheld:  # the judge was started again since it drew the sets
                if not final:
                    return True
                answer = Compared(passed=False, detail=f"{answer.detail}, twice: {_UNCONFIRMED}")
            if not answer.passed:
                failed = answer
        seconds = round(time.monotonic() - t0, 4)
        verdict.stages["judge"] = seconds
        if failed is None:
            timed = self._check_reference_timing(verdict, task, options, ready)
            verdict.checks.append(timed)
            if timed.detail.startswith("inconclusive"):  # a speedup against a slowed reference is not one
                verdict.timing = None
                verdict.reason += "; " + timed.detail
            verdict.checks.append(
                Check(
                    name="clean_judge",
                    passed=True,
                    detail=f"{ready.sets} input set(s) drawn, and the reference run, in a process that never ran "
                    "candidate code: the candidate's outputs on them match",
                    seconds=seconds,
                )
            )
            return False
        verdict.checks = [c for c in verdict.checks if c.name != "clean_judge"]
        verdict.checks.append(Check(name="clean_judge", passed=False, detail=failed.detail, seconds=seconds))
        verdict.status, verdict.reason, verdict.failed_check = Status.incorrect, failed.detail, "clean_judge"
        verdict.mismatch = failed.mismatch
        verdict.timing = None  # a speedup of outputs that are wrong is no speedup
        return False

    def prepare(self, task: Task, options: EvalOptions, reference: bool = False) -> Prepared:
        """Load the task and draw its inputs in the worker, kept there for its candidates' evaluations;
        with `reference`, also build the task's model and call it once (within the first-call limit).
        Never raises but `EvaluationCancelled`; a failure is said in `Prepared.reason`."""
        with self._lock:
            timeouts = options.timeouts.model_dump()
            timeouts["reference"] = timeouts["first_call"]
            try:
                msg, status, reason, stage, excerpt = self._exchange(
                    PrepareRequest(task=task, options=options, reference=reference),
                    timeouts,
                    "load_task",
                    memory_limit=options.host_memory_limit(),
                )
            except WorkerStartError as exc:
                return Prepared(ok=False, reason=f"worker could not start: {exc}".splitlines()[0])
            if msg is None:
                if stage == "reference":  # no candidate code was loaded: the user's model did this
                    reason = f"the reference model failed: {reason}"
                return Prepared(ok=False, reason=reason, killed=status, log_excerpt=excerpt)
            assert isinstance(msg, Prepared)
            if not msg.ok:
                msg.log_excerpt = excerpt
            return msg

    def build(self, candidate: Candidate, timeout: float = 600.0, target: Hello | None = None) -> BuildResult:
        """Execute the candidate module only (fills compile caches), compiling for `target`'s device when given.
        Never raises but `EvaluationCancelled`."""
        arch = arch_list = None
        if target is not None and target.arch and target.capability:
            arch, arch_list = target.arch, "{}.{}".format(*target.capability)
        with self._lock:
            try:
                msg, status, reason, _stage, excerpt = self._exchange(
                    BuildRequest(candidate=candidate, arch=arch, arch_list=arch_list), {"build": timeout}, "build"
                )
            except WorkerStartError as exc:
                return BuildResult(ok=False, reason=str(exc).splitlines()[0])
            if msg is None:
                return BuildResult(ok=False, reason=reason, traceback=excerpt)
            assert isinstance(msg, BuildResult)
            if not msg.ok and msg.compile_error:
                msg.traceback = (msg.traceback + "\n--- build log ---\n" + excerpt)[-2 * _EXCERPT :]
            return msg
