"""Worker process: the only place where task and candidate code is executed.

Started by `forge_lsp.engine.worker_client.Worker` as ``python -m forge_lsp.engine.worker``. It imports
torch once, announces itself (`Hello`), then serves `EvaluateRequest` / `BuildRequest`
messages on its pipes, announcing each stage so the parent can apply per-stage timeouts.
Its stdout/stderr are the parent's log file for it, never the message pipes.

Started with ``--judge`` it is a judge: it serves only `JudgeRequest` / `CompareRequest` (the reference's outputs on
input sets it draws, compared with a candidate's sent as tensors), and never loads candidate code.
"""

from __future__ import annotations

import argparse
import copy
import faulthandler
import gc
import os
import random
import secrets
import sys
import threading
import time
import traceback
import warnings
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from ..sandbox import children_die_with_this_process
from . import pipe
from .candidate import Candidate
from .options import EvalOptions
from .pipe import (
    BuildRequest,
    BuildResult,
    Compared,
    CompareRequest,
    EvaluateRequest,
    EvaluateResult,
    Hello,
    JudgedOutputs,
    JudgeReady,
    JudgeRequest,
    Prepared,
    PrepareRequest,
    ReferenceTimes,
    ShutdownRequest,
    StageStarted,
    TimeReferenceRequest,
)
from .verdict import Check, Domain, InputSpec, MemoryUse, Mismatch, Narrowing, RepairKind, Status, Timing, Verdict

_TB_LIMIT = 8000


_FORGE_DIR = str(Path(__file__).resolve().parents[1]) + os.sep  # forge_lsp/: the harness's own frames
_MODULE_PY, _MODULE_CALL = os.path.join("torch", "nn", "modules", "module.py"), ("_wrapped_call_impl", "_call_impl")


def _tb(exc: BaseException) -> str:
    """The traceback of what the task's or the candidate's code raised, without the harness's own frames (the
    worker's call, the module loader): the user's frames and the libraries' they called, then the exception. A
    traceback with no frame but forge's (the harness failed) is kept whole."""
    frames = traceback.extract_tb(exc.__traceback__)
    theirs = [
        f
        for f in frames
        if not os.path.realpath(f.filename).startswith(_FORGE_DIR)
        and not (f.name in _MODULE_CALL and f.filename.endswith(_MODULE_PY))
    ]
    if theirs or isinstance(exc, SyntaxError):
        text = (
            "Traceback (most recent call last):\n" + "".join(traceback.format_list(theirs)) if theirs else ""
        ) + "".join(traceback.format_exception_only(type(exc), exc))
    else:
        text = "".join(traceback.format_exception(exc))
    return text if len(text) <= _TB_LIMIT else "...\n" + text[-_TB_LIMIT:]


def _exc_line(exc: BaseException) -> str:
    msg = str(exc).strip().splitlines()
    first = msg[0] if msg else ""
    return f"{type(exc).__name__}: {first}"[:500]


_STICKY = (
    "illegal memory access",
    "device-side assert",
    "unspecified launch failure",
    "an illegal instruction",
    "misaligned address",
    "CUDA error",
    "cudaErrorLaunchFailure",
    "CUDA_ERROR",
)


@contextmanager
def task_constants(mod: Any, overrides: dict[str, int]) -> Iterator[None]:
    """The task module's constants set to other values for a while (its functions and its Model read them)."""
    saved = {k: getattr(mod, k) for k in overrides}
    try:
        for k, v in overrides.items():
            setattr(mod, k, v)
        yield
    finally:
        for k, v in saved.items():
            setattr(mod, k, v)


class StageFailed(Exception):
    def __init__(
        self,
        status: Status,
        reason: str,
        failed_check: str | None = None,
        exc: BaseException | None = None,
        mismatch: Mismatch | None = None,
    ) -> None:
        super().__init__(reason)
        self.status, self.reason, self.failed_check, self.exc, self.mismatch = (
            status,
            reason,
            failed_check,
            exc,
            mismatch,
        )


@dataclass
class InputCase:
    name: str
    inputs: list[Any]
    init_inputs: list[Any]
    kind: str = "random"  # random | captured | size (a module constant at another value)
    overrides: dict[str, int] = field(default_factory=dict)  # the task module's constants for this case
    #: drawn when the case is run, and dropped after it (a task whose input sets would not fit all at once)
    loader: Callable[[], tuple[list[Any], list[Any]]] | None = None

    def load(self) -> bool:
        """Draw a lazy case's inputs now; whether it was lazy."""
        if self.loader is None:
            return False
        self.inputs, self.init_inputs = self.loader()
        return True

    def release(self) -> None:
        if self.loader is not None:
            self.inputs = []


@dataclass
class Kept:
    """An input set's candidate output, kept after it was verified, with its bits' digest then."""

    name: str
    out: Any
    digest: tuple[Any, ...] = ()
    nbytes: int = 0

    def __post_init__(self) -> None:
        from .harness.checks import bits_digest
        from .harness.probes import tensor_bytes

        self.digest = bits_digest(self.out)
        self.nbytes = tensor_bytes(self.out)


@dataclass
class Models:
    ref: Any
    cand: Any
    compatible: bool
    note: str = ""


def _no_gate() -> Any:
    from .harness.gate import NoGate

    return NoGate()


@dataclass
class WorkerState:
    device: Any
    task_modules: dict[str, Any] = field(default_factory=dict)
    unusable: bool = False
    _bandwidth: float | None = None
    #: Drawn inputs, by (task, seed, size overrides), of the tasks used last: `get_inputs()` makes them on the host
    #: (a 8192x8192 `randn` takes about 0.4 s), and every candidate of a task is verified on the same ones. A batch
    #: moves between tasks as their candidates finish building, so several tasks' stay, the least recently used
    #: dropped first.
    drawn: dict[tuple[Any, ...], tuple[list[Any], list[Any]]] = field(default_factory=dict)
    drawn_bytes: int = 0
    #: the device's gate (`harness.gate`): held shared around work on a GPU, exclusively around a timing
    gate: Any = field(default_factory=lambda: _no_gate())
    _drawn_sizes: dict[tuple[Any, ...], int] = field(default_factory=dict)
    _task_order: list[str] = field(default_factory=list)  # task shas, the one used last at the end

    DRAWN_LIMIT = 8 << 30  # bytes kept at most; larger input sets are drawn again for each candidate

    def use_task(self, sha: str) -> None:
        """Mark a task as the one used now (its kept inputs are dropped last)."""
        if sha in self._task_order:
            self._task_order.remove(sha)
        self._task_order.append(sha)

    def keep_drawn(
        self, key: tuple[Any, ...], inputs: list[Any], init: list[Any], nbytes: int, limit: float = float("inf")
    ) -> None:
        """Keep a task's inputs for its next candidates, up to `DRAWN_LIMIT` and `limit` bytes in all: other tasks'
        are dropped, the least recently used first, to make room; never this task's own."""
        cap = min(self.DRAWN_LIMIT, limit)
        self.use_task(key[0])
        for sha in list(self._task_order[:-1]):
            if self.drawn_bytes + nbytes <= cap:
                break
            self._drop_task(sha)
        if self.drawn_bytes + nbytes <= cap:
            self.drawn[key] = (inputs, init)
            self._drawn_sizes[key] = nbytes
            self.drawn_bytes += nbytes

    def _drop_task(self, sha: str) -> None:
        for k in [k for k in self.drawn if k[0] == sha]:
            del self.drawn[k]
            self.drawn_bytes -= self._drawn_sizes.pop(k, 0)
        if sha in self._task_order:
            self._task_order.remove(sha)

    def bandwidth(self, torch: Any) -> float:
        """The device's copy bandwidth in bytes per ms (a 256 MiB copy, read and written; the best of five),
        measured once per process: on a GPU device to device with CUDA events, on the CPU with torch's threads."""
        if self._bandwidth is None:
            with self.gate.exclusive():  # a measurement: the device to this process alone
                self._bandwidth = self._measure_bandwidth(torch)
        return self._bandwidth

    def _measure_bandwidth(self, torch: Any) -> float:
        """One measurement (see `bandwidth`)."""
        n = 64 << 20  # float32 elements: 256 MiB
        a = torch.ones(n, dtype=torch.float32, device=self.device)
        b = torch.empty_like(a)
        b.copy_(a)
        times = []
        for _ in range(5):
            if self.device.type == "cuda":
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                b.copy_(a)
                end.record()
                torch.cuda.synchronize(self.device)
                times.append(start.elapsed_time(end))
            else:
                t0 = time.perf_counter()
                b.copy_(a)
                times.append((time.perf_counter() - t0) * 1e3)
        bandwidth = 2 * a.numel() * a.element_size() / min(times)  # read + write
        del a, b
        return bandwidth


def last_level_cache_bytes() -> int:
    """The CPU's largest cache (sysfs), 32 MiB where it cannot be read."""
    best = 0
    for index in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            text = (index / "size").read_text().strip().upper()
            best = max(best, int(text.rstrip("KMG")) << {"K": 10, "M": 20, "G": 30}.get(text[-1:], 0))
        except (OSError, ValueError):
            continue
    return best or 32 << 20


def physical_floor(
    t_ms: float, in_bytes: int, out_bytes: int, bandwidth: float, cache_bytes: int, margin: float
) -> tuple[float | None, bool]:
    """(the floor in ms, or None where the outputs fit twice in the cache; whether the time is under reading the
    inputs and writing the outputs once) for a call timed at `t_ms` on a device copying `bandwidth` bytes per ms
    (read + write counted). A time under `margin` times the floor did not write the outputs."""
    floor = out_bytes / bandwidth if out_bytes >= 2 * cache_bytes else None
    under_io = in_bytes + out_bytes >= 2 * cache_bytes and t_ms < (in_bytes + out_bytes) / bandwidth
    return floor, under_io


class Evaluation:
    """One candidate against one task, stage by stage."""

    def __init__(self, req: EvaluateRequest | PrepareRequest | JudgeRequest, state: WorkerState, out_fd: int) -> None:
        import torch

        self.torch = torch
        self.req, self.state, self.out_fd = req, state, out_fd
        self.task, self.opt = req.task, req.options
        self._cand = req.candidate if isinstance(req, EvaluateRequest) else None
        self.device = state.device
        self.is_cuda = self.device.type == "cuda"
        self.checks: list[Check] = []
        self.state0: dict[str, Any] | None = None  # process-wide state the candidate must leave as it was
        self.harness_threads: set[int] = set()  # the Python threads alive before candidate code ran
        self.threads: Any = None  # the stage's `ThreadWatch`, while one runs
        self.guard: Any = None  # the `PatchGuard` taken before the candidate's module loads
        self.references: list[Any] = []  # a `ModuleWatch` of each reference model built since then
        self.overridden: set[str] = set()  # what of the guard's the harness itself has changed for a while
        #: outputs the harness no longer keeps, watched through weak references where the candidate still holds them
        self.held: list[tuple[str, list[tuple[Any, Any]]]] = []
        self.stages: dict[str, float] = {}
        self.compatible: bool | None = None
        self.timing: Timing | None = None
        self.input_specs: list[InputSpec] = []
        self.ref_types: dict[str, type] | None = None  # the reference's output leaf types, once it has run
        self.costs: dict[str, float] = {}  # seconds spent on checks that are steps of their own
        # the domain verified so far (`Domain`): contiguous inputs and the default stream until a probe shows more
        self.layouts: str = "contiguous"
        self.streams: str | None = "default" if self.is_cuda else None
        self.narrowed: list[Narrowing] = []
        self.verifying = False  # verification has begun: the verdict states its domain
        self.domain_sizes: list[str] = []
        self.where = ""  # the input set the candidate is being run on, named in a crash's reason
        #: the judge's input sets (`harness.wire`), the candidate's outputs on which go to the judge (`judged_calls`)
        self.judged_data = req.data if isinstance(req, EvaluateRequest) else b""
        #: the device's bandwidth as the judge measured it (bytes per ms), None: measured here
        self.bandwidth_given = req.bandwidth if isinstance(req, EvaluateRequest) else None
        self._judged_sets: list[Any] | None = None

    @property
    def cand_src(self) -> Candidate:
        assert self._cand is not None, "a prepare request has no candidate"
        return self._cand

    # ------------------------------------------------------------------ helpers
    def stage(self, name: str) -> None:
        self._stage_name, self._stage_t0 = name, time.perf_counter()
        self.state.gate.stage = name
        pipe.send(self.out_fd, StageStarted(stage=name))
        self.state.gate.checkpoint()  # a timing that waits for the device goes first

    def stage_done(self) -> None:
        self.stages[self._stage_name] = round(time.perf_counter() - self._stage_t0, 4)

    def check(self, name: str, passed: bool, detail: str = "", mismatch: Mismatch | None = None) -> None:
        """Record a check (one entry per name, the latest word wins); a failure ends the evaluation."""
        entry = Check(name=name, passed=passed, detail=detail if not passed or detail else "")
        for i, c in enumerate(self.checks):
            if c.name == name:
                if passed and c.detail and not entry.detail:
                    entry = c
                self.checks[i] = entry
                break
        else:
            self.checks.append(entry)
        if not passed:
            raise StageFailed(Status.incorrect, detail, failed_check=name, mismatch=mismatch)

    def narrow(
        self,
        name: str,
        axis: str,
        found: str,
        detail: str,
        repair: RepairKind | None,
        mismatch: Mismatch | None = None,
    ) -> None:
        """A check that failed only outside the task's own conditions (`axis`: a layout, a stream): the domain leaves
        those conditions out and the evaluation goes on; with `EvalOptions.strict`, the check fails as any other."""
        if self.opt.strict and found == "wrong_values":
            self.check(name, False, detail, mismatch)
        if axis == "layouts":
            self.layouts = "contiguous"
        else:
            self.streams = "default"
        self.narrowed.append(Narrowing(check=name, axis=axis, found=found, detail=detail, repair=repair))
        entry = Check(name=name, passed=True, detail=detail, narrows=axis)
        for i, c in enumerate(self.checks):
            if c.name == name:
                self.checks[i] = entry
                break
        else:
            self.checks.append(entry)

    def domain(self, cases: list[InputCase]) -> Domain | None:
        """What the checks so far covered (None before verification began)."""
        if not self.verifying:
            return None
        dtypes = sorted({s.dtype for s in self.input_specs if s.dtype})
        return Domain(
            sizes=self.domain_sizes,
            dtypes=dtypes,
            layouts=self.layouts,
            streams=self.streams,
            narrowed=self.narrowed,
        )

    def describe_set(self, case: InputCase, inputs: list[Any] | None = None, what: str = "") -> str:
        """An input set in words, for a reason: "batch_size=257, forge's size: float32[257, 16384]"."""
        torch = self.torch
        shown = []
        for x in (inputs if inputs is not None else case.inputs)[:4]:
            if isinstance(x, torch.Tensor):
                text = f"{str(x.dtype).removeprefix('torch.')}{list(x.shape)}"
                if not x.is_contiguous():
                    text += f" strides {list(x.stride())}"
                shown.append(text)
        own = {"random": "the task's own sizes", "captured": "captured inputs"}.get(case.kind, "forge's size")
        label = f"{case.name}{', ' + what if what else ''} ({own})"
        return f"{label}: {', '.join(shown)}" if shown else label

    @contextmanager
    def cost(self, name: str) -> Iterator[None]:
        """Count the time spent inside towards the check `name` (reported as its `seconds`)."""
        self.state.gate.checkpoint()  # between checks: a timing that waits for the device goes first
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.costs[name] = self.costs.get(name, 0.0) + time.perf_counter() - t0

    def sync(self) -> None:
        if self.is_cuda:
            self.torch.cuda.synchronize(self.device)

    def to_device(self, xs: list[Any]) -> list[Any]:
        return [x.to(self.device) if isinstance(x, self.torch.Tensor) else x for x in xs]

    def call(self, model: Any, inputs: list[Any], who: str, poisoned: bool = False) -> Any:
        """`model(*inputs)`, any failure a `StageFailed`. `poisoned`: memory the call may get uninitialized reads
        as NaN (see `poisoned_memory`)."""
        from .harness.loading import call_model, is_compile_error

        watch = self.threads if who == "candidate" else None
        if watch is not None:
            watch.call_begins()
        try:
            if poisoned and self.opt.poison:
                with self.poisoned_memory():
                    out = call_model(model, inputs)
            else:
                out = call_model(model, inputs)
        except Exception as exc:  # noqa: BLE001 - any failure of user code becomes a verdict
            if who == "reference":
                raise StageFailed(
                    Status.runtime_error, f"the reference model failed: {_exc_line(exc)}", exc=exc
                ) from exc
            status = Status.compile_error if is_compile_error(exc) else Status.runtime_error
            where = f" [on {self.where}]" if self.where and status is Status.runtime_error else ""
            raise StageFailed(status, _exc_line(exc) + where, exc=exc) from exc
        finally:
            if watch is not None:
                watch.call_ends()
        if who == "reference":
            from .harness.probes import output_types

            self.ref_types = output_types(out)
            self.rebase_state()  # what the task's own code does to the process is the baseline
            for watch in self.references:
                watch.rebase()
            if self.threads is not None:
                self.threads.sample()
        else:
            self.watch_state(f"after a call of the candidate on {self.where}" if self.where else "after its call")
            self.check_patches()  # before anything of the harness reads the output
            if self.ref_types is not None:  # before anything reads the output: a subclass runs code on first touch
                self.check_plain_outputs(out, "candidate output")
        return out

    def tolerance_values(self) -> tuple:
        """The tolerances the harness judges with, as plain numbers (`PatchGuard`'s `values`)."""
        from .task import DEFAULT_TOLERANCES

        return tuple(
            (which, k, float(t.atol), float(t.rtol))
            for which, tols in (("task", self.task.tolerances), ("default", DEFAULT_TOLERANCES))
            for k, t in sorted(tols.items())
        )

    def check_patches(self, stage_end: bool = False) -> None:
        """Fail `no_monkeypatch` where anything `PatchGuard` watches changed, and `reference_untouched` where the
        candidate changed the reference model object (`harness.checks.ModuleWatch`; its parameters' values with
        `stage_end`): checked after the candidate's construction, after every call of it that is verified (before
        the harness reads the output), and at the end of each stage; the worker is then replaced."""
        if self.guard is None:
            return
        changes = [c for c in self.guard.changes() if c not in self.overridden]
        if changes:  # said directly, not through `check`: that too is the harness's, and may be what was replaced
            detail = f"the candidate replaced {', '.join(changes[:8])}"
            self.checks = [c for c in self.checks if c.name != "no_monkeypatch"]
            self.checks.append(Check(name="no_monkeypatch", passed=False, detail=detail))
            raise StageFailed(Status.incorrect, detail, failed_check="no_monkeypatch")
        self.check("no_monkeypatch", True)
        touched = [c for w in self.references for c in (w.changes() + (w.value_changes() if stage_end else []))]
        if touched:  # said directly, as `no_monkeypatch` is
            self.state.unusable = True
            detail = (
                f"the candidate changed {', '.join(dict.fromkeys(touched[:8]))} — the reference it is compared with "
                "and timed against, reached from inside the candidate's own process"
            )
            self.checks = [c for c in self.checks if c.name != "reference_untouched"]
            self.checks.append(Check(name="reference_untouched", passed=False, detail=detail))
            raise StageFailed(Status.incorrect, detail, failed_check="reference_untouched")
        if self.references:
            self.check("reference_untouched", True)

    def watch_threads(self, watch: Any, stage: str, own: float | None = None) -> None:
        """Fail `background_threads` where threads the candidate started used CPU while the reference and the
        candidate were being {stage} (`harness.checks.ThreadWatch`); the worker is then replaced, threads and all."""
        stolen = watch.too_much(own)
        if stolen:
            self.state.unusable = True
            self.check(
                "background_threads",
                False,
                f"threads the candidate started kept running while it was {stage}: {stolen} — CPU taken from the "
                "reference's calls and timings (threads a candidate starts must be joined before its call returns)",
            )

    def rebase_state(self) -> None:
        """Take the process-wide state as it is now, after code of the task's own, as what the candidate must keep."""
        from .harness.checks import global_state

        self.state0 = global_state()

    def watch_state(self, when: str) -> None:
        """Fail `global_state` or `global_hooks` where the candidate's code changed what the whole process runs with
        (`harness.checks.global_state`): a thread count, a precision or backend flag, a module hook or mode. The
        worker is then replaced: the change would outlive the verdict."""
        from .harness.checks import global_state, state_changes

        if self.state0 is None:
            return
        changes = state_changes(self.state0, global_state())
        for check in ("global_hooks", "global_state"):
            if check in changes:
                self.state.unusable = True
                what = "process-wide hooks or modes" if check == "global_hooks" else "process-wide settings"
                self.check(
                    check,
                    False,
                    f"the candidate changed {what} {when}: {'; '.join(changes[check][:6])} — settings and hooks the "
                    "reference runs under too (a slower reference, a looser check, or the reference's own calls "
                    "reached into)",
                )

    @contextmanager
    def poisoned_memory(self) -> Iterator[None]:
        """Uninitialized memory reads as NaN (or an integer type's maximum) during the candidate's call: every
        `empty`/`empty_like` it makes, in Python or C++, is filled (torch's deterministic mode with
        `fill_uninitialized_memory`, warnings only, so no op is refused), and the allocator's free blocks are
        filled beforehand for memory that does not go through `empty`. An output left unwritten, hoping to
        hold the reference's result from recycled memory, cannot match."""
        from .harness.checks import poison_free_cpu_memory, poison_free_cuda_memory

        torch = self.torch
        if self.is_cuda:
            self._poisoned = max(getattr(self, "_poisoned", 0), poison_free_cuda_memory(self.device))
        else:
            poison_free_cpu_memory(1 << 20)
        before = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
        fill = torch._C._get_deterministic_fill_uninitialized_memory()
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*determinis.*")
            # torch._C's setters: the public one also imports torch._inductor (seconds, and it rebinds torch's
            # functions, which the monkeypatch guard would then blame on the candidate)
            torch._C._set_deterministic_algorithms(True, warn_only=True)
            torch._C._set_deterministic_fill_uninitialized_memory(True)
            try:
                yield
            finally:
                torch._C._set_deterministic_algorithms(before[0], warn_only=before[1])
                torch._C._set_deterministic_fill_uninitialized_memory(fill)

    # ------------------------------------------------------------------ stages
    def load_task(self) -> Any:
        from .harness.loading import exec_module

        self.stage("load_task")
        mod = self.state.task_modules.get(self.task.sha)
        if mod is None:
            try:
                mod = exec_module(self.task.source, self.task.name, "task")
                self.lift_inline_sizes(mod)
            except Exception as exc:  # noqa: BLE001
                raise StageFailed(
                    Status.runtime_error, f"the task file failed to load: {_exc_line(exc)}", exc=exc
                ) from exc
            self.state.task_modules[self.task.sha] = mod
        self.stage_done()
        return mod

    def unvaried_why(self, skipped: list[str]) -> str:
        """Why `other_sizes` verified no other size."""
        if skipped:
            return "the reference itself fails at every other size tried"
        if not self.task.vary_default:
            return "the task asks for its own sizes only"
        return "get_inputs() has no size constant or literal size to vary"

    def lift_inline_sizes(self, mod: Any) -> None:
        """A task whose get_inputs() writes its sizes as literals gets them as module globals (`Task.inline_sizes`),
        read by a get_inputs() compiled from the task's own source with those literals replaced: `other_sizes` can
        then vary them as it varies constants. Same values, same line numbers."""
        from .task import lift_inline_sizes

        lifted = lift_inline_sizes(self.task.source, self.task.inline_sizes)
        if lifted is None:
            return
        for name, value in self.task.inline_sizes.items():
            setattr(mod, name, value)
        exec(compile(lifted, getattr(mod, "__file__", None) or self.task.name, "exec"), vars(mod))  # noqa: S102

    def draw_inputs(self, mod: Any, seed: int, overrides: dict[str, int] | None = None) -> tuple[list[Any], list[Any]]:
        """(forward inputs on the device, constructor inputs) from the task's functions, seeded, with module
        constants overridden for the call."""
        from .harness.probes import tensor_bytes

        torch = self.torch
        key = (self.task.sha, seed, tuple(sorted((overrides or {}).items())))
        kept = self.state.drawn.get(key)
        if kept is not None:  # never handed out: every call gets clones, so these stay as drawn
            self.state.use_task(self.task.sha)
            return list(kept[0]), copy.deepcopy(kept[1])
        with task_constants(mod, overrides or {}):
            torch.manual_seed(seed)
            init = list(getattr(mod, self.task.init_inputs_fn)())
            torch.manual_seed(seed)
            inputs = self.to_device(list(getattr(mod, self.task.inputs_fn)()))
        try:
            kept_init = copy.deepcopy(init)
        except Exception:  # noqa: BLE001 - constructor arguments that cannot be copied: draw again next time
            return inputs, init
        self.state.keep_drawn(key, list(inputs), kept_init, tensor_bytes(inputs), self.memory_budget())
        return inputs, init

    #: the share of the device's free memory (of the host-memory cap, on the CPU) that forge's own copies of a task's
    #: inputs and outputs may hold at once; beyond it, input sets are drawn one at a time and fewer outputs are kept
    OWN_MEMORY_SHARE = 0.125

    def memory_budget(self) -> float:
        """Bytes forge's own copies may hold (`OWN_MEMORY_SHARE`)."""
        if self.is_cuda:
            free = self.free_memory()
            return self.OWN_MEMORY_SHARE * free if free else float("inf")
        return self.OWN_MEMORY_SHARE * (self.opt.host_memory_limit() or (16 << 30))

    def make_cases(self, mod: Any) -> list[InputCase]:
        """The input sets to verify on. The first is drawn now; the others too when they all fit in
        `memory_budget`, else each is drawn when it is run and dropped after (`InputCase.loader`)."""
        from .harness.probes import tensor_bytes

        torch = self.torch
        cases: list[InputCase] = []
        trials = self.opt.trials or self.task.trials
        first, base_init = self.draw_inputs(mod, self.task.seed + 1)
        cases.append(InputCase("random#1", first, base_init))
        count = trials + len(self.task.input_sets) + sum(len(v) for v in self.task.vary.values())
        lazy = tensor_bytes(first) * count > self.memory_budget()

        def drawn(seed: int, overrides: dict[str, int] | None = None) -> Callable[[], tuple[list[Any], list[Any]]]:
            return lambda: self.draw_inputs(mod, seed, overrides)

        def captured(path: Path, init: list[Any]) -> Callable[[], tuple[list[Any], list[Any]]]:
            def load() -> tuple[list[Any], list[Any]]:
                loaded = torch.load(path, map_location=self.device, weights_only=True)
                loaded = list(loaded) if isinstance(loaded, (list, tuple)) else [loaded]
                return self.to_device(loaded), init

            return load

        def case(name: str, load: Callable[[], tuple[list[Any], list[Any]]], kind: str, over: dict[str, int]) -> None:
            if lazy:
                cases.append(InputCase(name, [], [], kind, over, loader=load))
            else:
                inputs, init = load()
                cases.append(InputCase(name, inputs, init, kind, over))

        for t in range(1, trials):
            case(f"random#{t + 1}", drawn(self.task.seed + 1 + t), "random", {})
        for s in self.task.input_sets:
            case(f"captured:{s.name}", captured(s.path, base_init), "captured", {})
        for name, values in self.task.vary.items():
            for v in values:
                case(f"{name}={v}", drawn(self.task.seed + 1000 + v, {name: v}), "size", {name: v})
        return cases

    def build_reference(self, mod: Any, init: list[Any]) -> Any:
        """The task's model, constructed with the task's seed (on the host)."""
        try:
            self.torch.manual_seed(self.task.seed)
            return getattr(mod, self.task.model_class)(*init)
        except Exception as exc:  # noqa: BLE001
            raise StageFailed(
                Status.runtime_error, f"the reference constructor failed: {_exc_line(exc)}", exc=exc
            ) from exc

    def build_models(self, mod: Any, cand_mod: Any, init: list[Any]) -> Models:
        torch = self.torch
        cand_cls = getattr(cand_mod, self.cand_src.class_name, None)
        if cand_cls is None:
            raise StageFailed(Status.compile_error, f"the candidate defines no class {self.cand_src.class_name!r}")
        from .harness.checks import ModuleWatch

        seed = self.task.seed
        ref = self.build_reference(mod, init).to(self.device)
        if self.guard is not None:  # watched from before the candidate's constructor runs
            self.references.append(ModuleWatch(ref))
        if self.state0 is not None:
            self.rebase_state()
        try:
            torch.manual_seed(seed)  # KernelBench's same-seed construction, the fallback
            cand = cand_cls(*init)
        except Exception as exc:  # noqa: BLE001
            from .harness.loading import is_compile_error

            status = Status.compile_error if is_compile_error(exc) else Status.runtime_error
            raise StageFailed(status, f"ModelNew constructor failed: {_exc_line(exc)}", exc=exc) from exc
        self.watch_state("in its constructor")
        compatible, note = True, ""
        try:
            cand.load_state_dict(ref.state_dict(), strict=True)
        except Exception as exc:  # noqa: BLE001
            compatible, note = False, str(exc).strip().replace("\n", " ")[:600]
        return Models(ref, cand.to(self.device), compatible, note)

    def verify(self, mod: Any, cand_mod: Any, cases: list[InputCase], models: Models) -> None:
        tol = self.task.tolerance_for
        per_init: dict[str, Models] = {repr((cases[0].init_inputs, [])): models}
        history: list[Kept] = []  # earlier input sets' candidate outputs
        self.verifying = True
        if self.is_cuda:
            with self.cost("current_stream"):
                self.probe_streams(models, cases[0])

        skipped: list[str] = []
        budget = self.memory_budget()
        for i, case in enumerate(cases):
            if case.load():
                self.input_specs += _input_specs([case], self.torch)
            # the candidate's copies of the task's constants follow them: reintegrated, both classes read
            # the same module's constants (a candidate may depend on them exactly as the reference does)
            shared = {k: v for k, v in case.overrides.items() if isinstance(getattr(cand_mod, k, None), int)}
            # the harness's own overrides of the task's constants, which the monkeypatch guard then expects
            self.overridden = {f"task module.{k}" for k in case.overrides}
            with (
                task_constants(mod, case.overrides),
                task_constants(cand_mod, shared),
                self.cost("other_sizes" if case.kind == "size" else "outputs_match"),
            ):
                try:
                    ref_out, cand_out, cand_in, m = self.run_case(i, case, mod, cand_mod, per_init)
                except StageFailed as sf:
                    self.overridden = set()
                    case.release()
                    if case.kind == "size" and self.task.vary_default and sf.reason.startswith("the reference"):
                        skipped.append(f"{case.name} ({sf.reason.removeprefix('the reference ')})")
                        continue  # a size forge chose that the module itself does not take
                    raise
            self.overridden = set()
            with self.cost("other_sizes" if case.kind == "size" else "outputs_match"):
                self.check_case(case, ref_out, cand_out, cand_in, history)
            del ref_out, cand_in
            case.release()
            history.append(Kept(case.name, cand_out))
            # earlier outputs are kept (to see whether later calls change them) while they fit the budget; the
            # latest is always kept, so a buffer reused by every call is still seen
            while len(history) > 1 and sum(h.nbytes for h in history) > budget:
                self.release_kept(history.pop(0))
            self.check_held()
        verified = [c for c in cases if not any(s.startswith(f"{c.name} (") for s in skipped)]
        self.input_specs = [s for s in self.input_specs if any(c.name == s.case for c in verified)]
        self.domain_sizes = list(dict.fromkeys("the task's own" if c.kind == "random" else c.name for c in verified))
        self.verify_after(cases, verified, skipped, history, per_init, tol)

    def run_case(
        self, i: int, case: InputCase, mod: Any, cand_mod: Any, per_init: dict[str, Models]
    ) -> tuple[Any, Any, list[Any], Models]:
        """Reference and candidate on one input set (alternating which goes first): their outputs."""
        from .harness.checks import clone_inputs, same_bits
        from .harness.compare import tensors_of

        key = repr((case.init_inputs, sorted(case.overrides.items())))
        if key not in per_init:
            per_init[key] = self.build_models(mod, cand_mod, case.init_inputs)
        m = per_init[key]
        ref_in, cand_in = clone_inputs(case.inputs), clone_inputs(case.inputs)
        self.where = self.describe_set(case)

        def run_candidate() -> Any:
            out = self.call(m.cand, cand_in, "candidate", poisoned=True)
            if self.is_cuda:  # stream-ordered copy before the device-wide sync
                early = [t.clone() for t in tensors_of(out)]
                self.sync()
                late = tensors_of(out)
                if not all(same_bits(a, b) for a, b in zip(early, late, strict=False)):
                    self.check(
                        "stream_ordered",
                        False,
                        f"[{case.name}] outputs were still being written after the call returned on "
                        "the current stream: work on another stream is not joined to it",
                    )
            return out

        if i % 2 == 0:
            ref_out = self.call(m.ref, ref_in, "reference")
            self.sync()
            cand_out = run_candidate()
        else:
            try:
                cand_out = run_candidate()
            except StageFailed:
                if case.kind == "size":  # a size the module itself does not take is the reference's to say
                    self.call(m.ref, ref_in, "reference")
                raise
            ref_out = self.call(m.ref, ref_in, "reference")
            self.sync()
        return ref_out, cand_out, cand_in, m

    def release_kept(self, kept: Kept) -> None:
        """Stop keeping an earlier output (checked once more first), but keep watching it where the candidate still
        holds it: a weak reference and its digest. An honest candidate's output is gone once the harness drops it;
        one the candidate kept is a buffer it may write again (`check_held`)."""

        self.check_kept(kept)
        self.hold(kept.name, kept.out)

    def hold(self, name: str, out: Any) -> None:
        """Watch an output the harness does not keep (`release_kept`)."""
        from .harness.checks import bits_digest
        from .harness.compare import tensors_of

        self.held.append((name, [(weakref.ref(t), bits_digest(t)) for t in tensors_of(out)]))

    def check_held(self, when: str = "") -> None:
        """`no_result_reuse` for outputs the harness let go of: one the candidate still holds must not have changed
        since it was returned — a ring of output buffers, each handed out again a few calls later, however many
        calls later that is and whatever the outputs' size."""
        from .harness.checks import bits_digest

        alive = []
        for name, refs in self.held:
            live = [(r, d) for r, d in refs if r() is not None]
            for r, d in live:
                t = r()
                if t is not None and bits_digest(t) != d:
                    self.check(
                        "no_result_reuse",
                        False,
                        f"[{name}] its output, which the candidate kept, changed after later calls{when}: output "
                        "buffers handed out again (a ring of buffers), so an earlier result does not stay a result",
                    )
            if live:
                alive.append((name, live))
        self.held = alive

    def check_kept(self, kept: Kept) -> None:
        """An earlier input set's output, kept since it was verified: its bits must not have changed since."""
        from .harness.checks import bits_digest

        unchanged = bits_digest(kept.out) == kept.digest
        self.check(
            "no_result_reuse",
            unchanged,
            ""
            if unchanged
            else f"[{kept.name}] its output changed after later calls: the candidate reuses output memory or cached "
            "results across calls",
        )

    def check_case(self, case: InputCase, ref_out: Any, cand_out: Any, cand_in: list[Any], history: list[Any]) -> None:
        """The checks of one input set: inputs intact, no aliasing, plain outputs, the reference's values."""
        from .harness.checks import aliased_outputs, bits_digest, changed_inputs
        from .harness.compare import compare_outputs

        tol = self.task.tolerance_for
        changed = changed_inputs(case.inputs, cand_in)
        self.check(
            "inputs_unchanged",
            not changed,
            f"[{case.name}] the candidate modified input(s) {changed}" if changed else "",
        )
        aliased = aliased_outputs(cand_out, cand_in)
        self.check(
            "no_output_aliasing",
            not aliased,
            f"[{case.name}] {', '.join(aliased)} share memory with an input" if aliased else "",
        )
        self.check_plain_outputs(cand_out, case.name)
        self.check_dense_outputs(ref_out, cand_out, case.name)
        mismatch, _ = compare_outputs(ref_out, cand_out, tol, case.name)
        if mismatch is not None:
            now = bits_digest(cand_out)
            for prev in history:
                if now and prev.digest == now:
                    self.check(
                        "no_result_reuse",
                        False,
                        f"[{case.name}] returned the same result as for an earlier, different input",
                    )
            if case.kind == "size":
                self.check(
                    "other_sizes",
                    False,
                    f"[{case.name}] {mismatch.output}: {mismatch.detail} — correct at the task's own sizes "
                    "only (hard-coded shapes?)",
                    mismatch,
                )
            self.check("outputs_match", False, f"[{case.name}] {mismatch.output}: {mismatch.detail}", mismatch)

    def verify_after(
        self,
        cases: list[InputCase],
        verified: list[InputCase],
        skipped: list[str],
        history: list[Any],
        per_init: dict[str, Models],
        tol: Any,
    ) -> None:
        """The checks over all input sets: sizes, result reuse, repeatability, the probes."""
        from .harness.checks import clone_inputs, same_bits
        from .harness.compare import compare_outputs, tensors_of

        self.check("outputs_match", True, f"{len(verified)} input sets: " + ", ".join(c.name for c in verified))
        sizes = [c.name for c in verified if c.kind == "size"]
        detail = (
            ("verified at " + ", ".join(sizes) + (" (chosen by forge)" if self.task.vary_default else ""))
            if sizes
            else "not varied: " + self.unvaried_why(skipped)
        )
        if skipped:
            detail += "; skipped where the reference itself fails: " + "; ".join(skipped)
        self.check("other_sizes", True, detail)
        if self.is_cuda:
            self.check("stream_ordered", True, "outputs complete when the call returns on the current stream")

        # outputs of earlier calls must survive later calls (no shared output buffers / caches)
        for kept in history[:-1]:
            self.check_kept(kept)
        if len(history) < 2:
            self.check("no_result_reuse", True, "only one input set")
        while history:
            self.release_kept(history.pop(0))

        # repeated runs on the same input must agree (races, uninitialized reads)
        m = per_init[repr((cases[0].init_inputs, []))]
        outs = []
        with self.cost("repeatable"):
            for _ in range(2):
                outs.append(self.call(m.cand, clone_inputs(cases[0].inputs), "candidate", poisoned=True))
                self.sync()
            mismatch, _ = compare_outputs(outs[0], outs[1], tol, f"{cases[0].name} (repeat)")
        bitwise = mismatch is None and all(
            same_bits(a, b) for a, b in zip(tensors_of(outs[0]), tensors_of(outs[1]), strict=False)
        )
        self.check(
            "repeatable",
            mismatch is None,
            f"two runs on the same input disagree at {mismatch.output}: {mismatch.detail} (race or "
            "read of uninitialized memory?)"
            if mismatch
            else ("bitwise identical" if bitwise else "equal within tolerance, not bitwise"),
        )
        with self.cost("trained_parameters"):
            self.probe_trained_parameters(m, cases[0])
        with self.cost("noncontiguous_inputs"):
            self.probe_layout(m, cases[0])
        with self.cost("input_range"):
            self.probe_range(m, cases[0])
        if self.opt.poison:
            self.check(
                "poisoned_memory",
                True,
                (
                    f"freed device memory filled with NaN before each candidate run "
                    f"(up to {getattr(self, '_poisoned', 0) / 2**20:.1f} MiB)"
                )
                if self.is_cuda
                else "best effort on CPU: NaN-filled chunks left in the allocator before each run",
            )

    # ------------------------------------------------------------------ probes
    def check_dense_outputs(self, ref_out: Any, cand_out: Any, where: str) -> None:
        """`dense_outputs`: every output element the candidate returns is its own memory where the reference's are. An
        output whose elements share memory (a stride-0 `expand`, overlapping `as_strided`) reads right while writing a
        fraction of what the reference writes: a speedup of memory not written."""
        from .harness.checks import overlapping_outputs

        shared = overlapping_outputs(ref_out, cand_out)
        self.check(
            "dense_outputs",
            not shared,
            f"[{where}] {', '.join(shared)}: elements of the output share memory (a stride-0 or overlapping view) "
            "where the reference's do not — fewer values written than the output holds"
            if shared
            else "",
        )

    def check_plain_outputs(self, cand_out: Any, where: str) -> None:
        from .harness.probes import foreign_outputs

        foreign = foreign_outputs(self.ref_types, cand_out)
        self.check(
            "plain_tensor_outputs",
            not foreign,
            f"[{where}] {', '.join(foreign)}: outputs must be plain torch.Tensor objects like the reference's (a "
            "tensor subclass or wrapper can defer its work until after the timer stops)"
            if foreign
            else "",
        )

    def probe_trained_parameters(self, m: Models, case: InputCase) -> None:
        """Verify again with parameters drawn at each tensor's scale, loaded into reference and candidate alike:
        a term that vanishes at initialization (zero bias, unit scale) must still be computed."""
        from .harness.checks import clone_inputs
        from .harness.compare import compare_outputs
        from .harness.probes import randomized_state_dict

        if not m.compatible:
            self.check(
                "trained_parameters",
                True,
                "not checked: the candidate does not load the reference's state_dict, so it cannot be given the "
                "same trained parameters (it cannot be reintegrated either)",
            )
            return
        original = {k: v.detach().clone() for k, v in m.ref.state_dict().items()}
        buffers = frozenset(name for name, _ in m.ref.named_buffers())
        trained = randomized_state_dict(original, self.task.seed + 7, buffers)
        try:
            m.ref.load_state_dict(trained, strict=True)
            m.cand.load_state_dict(trained, strict=True)
            if not trained:
                self.check("trained_parameters", True, "the module has no parameters or buffers")
                return
            ref_out = self.call(m.ref, clone_inputs(case.inputs), "reference")
            self.sync()
            cand_out = self.call(m.cand, clone_inputs(case.inputs), "candidate", poisoned=True)
            self.sync()
            mismatch, _ = compare_outputs(
                ref_out, cand_out, self.task.tolerance_for, f"{case.name}, trained parameters"
            )
            self.check(
                "trained_parameters",
                mismatch is None,
                f"with parameters other than the reference's initial ones, {mismatch.output}: {mismatch.detail} — "
                "the candidate relies on values the parameters have only at initialization (a zero bias, a unit "
                "scale), wrong for any trained weights"
                if mismatch
                else (
                    "1 tensor of the state_dict drawn at its own scale"
                    if len(trained) == 1
                    else f"{len(trained)} tensors of the state_dict drawn at their own scale"
                ),
                mismatch,
            )
        finally:
            m.ref.load_state_dict(original, strict=True)
            m.cand.load_state_dict(original, strict=True)

    def probe_layout(self, m: Models, case: InputCase) -> None:
        """The same values in non-contiguous tensors (a strided view, and a dense column-major layout), where the
        reference accepts them. The task's own inputs are contiguous: a candidate wrong there (it indexes raw memory
        as if contiguous) or refusing them is verified for contiguous inputs only, and the verdict's domain says so
        (with `EvalOptions.strict`, wrong values there fail the check). Both layouts right: any layout."""
        from .harness.compare import compare_outputs
        from .harness.loading import call_model
        from .harness.probes import LAYOUTS

        torch = self.torch
        notes = []
        any_layout = True

        def own(laid: list[Any]) -> list[Any]:
            """Inputs in a layout; a tensor the layout leaves as is (a vector) is cloned, never handed out."""
            return [
                y.clone() if isinstance(y, torch.Tensor) and y is x else y
                for x, y in zip(case.inputs, laid, strict=True)
            ]

        laid_out = 0
        for layout, relaid in LAYOUTS.items():
            laid = [relaid(x) for x in case.inputs]
            if all(y is x for x, y in zip(case.inputs, laid, strict=True)):
                continue
            laid_out += 1
            try:
                ref_out = call_model(m.ref, own(laid))
                self.sync()
            except Exception:  # noqa: BLE001 - the reference does not take them: nothing to hold the candidate to
                notes.append(f"{layout}: not checked, the reference does not accept it")
                any_layout = False
                continue
            del laid
            cand_in = own([relaid(x) for x in case.inputs])
            self.where = self.describe_set(case, cand_in, f"a {layout} copy")
            try:
                cand_out = self.call(m.cand, cand_in, "candidate", poisoned=True)
                self.sync()
            except StageFailed as sf:
                if sf.failed_check or (self.is_cuda and any(t in sf.reason for t in _STICKY)):
                    raise  # a check of its own failed, or the device is gone: not a refusal
                any_layout = False
                detail = f"{layout}: the candidate refuses it ({sf.reason})"
                notes.append(detail)
                self.narrowed.append(
                    Narrowing(
                        check="noncontiguous_inputs",
                        axis="layouts",
                        found="refused",
                        detail=detail,
                        repair="contiguous_inputs",
                    )
                )
                continue
            mismatch, _ = compare_outputs(ref_out, cand_out, self.task.tolerance_for, f"{case.name}, {layout}")
            del ref_out, cand_out, cand_in
            if mismatch is not None:
                self.narrow(
                    "noncontiguous_inputs",
                    "layouts",
                    "wrong_values",
                    f"with the same values in {layout} tensors, {mismatch.output}: {mismatch.detail} — the candidate "
                    "assumes a contiguous layout without checking it (call .contiguous(), or pass strides): verified "
                    "for contiguous inputs only",
                    "contiguous_inputs",
                    mismatch,
                )
                return
            notes.append(f"{layout}: correct")
        self.layouts = "any" if any_layout else "contiguous"
        if not laid_out:
            notes.append("no tensor input to lay out differently")
        if not any_layout:
            notes.append("verified for contiguous inputs only")
        self.check("noncontiguous_inputs", True, "; ".join(notes))

    def probe_range(self, m: Models, case: InputCase) -> None:
        """Inputs scaled up (while the reference's output stays finite): intermediates that overflow a narrow
        dtype for values larger than the task's random inputs show here."""
        from .harness.checks import clone_inputs
        from .harness.compare import compare_outputs, tensors_of
        from .harness.probes import scaled_copy

        if not any(isinstance(x, self.torch.Tensor) and x.is_floating_point() for x in case.inputs):
            self.check("input_range", True, "no floating-point input to scale")
            return
        kinds = self.task.input_kinds
        scalable = [k == "normal" for k in kinds] if kinds is not None and len(kinds) == len(case.inputs) else []
        if not any(scalable):
            self.check(
                "input_range",
                True,
                "not checked: no input is drawn from torch.randn (scaling another kind of input would take it out of "
                "the task's distribution)",
            )
            return
        for factor in (16.0, 4.0):
            scaled = [scaled_copy(x, factor) if up else x for x, up in zip(case.inputs, scalable, strict=True)]
            try:
                ref_out = self.call(m.ref, clone_inputs(scaled), "reference")
                self.sync()
            except StageFailed:
                self.check("input_range", True, "not checked: the reference fails for scaled inputs")
                return
            outs = tensors_of(ref_out)
            if outs and all(bool(self.torch.isfinite(t).all()) for t in outs if t.is_floating_point()):
                break
        else:
            self.check("input_range", True, "not checked: the reference's output is not finite for scaled inputs")
            return
        cand_in = clone_inputs(scaled)
        del scaled
        self.where = self.describe_set(case, cand_in, f"inputs x{factor:g}")
        cand_out = self.call(m.cand, cand_in, "candidate", poisoned=True)
        self.sync()
        mismatch, _ = compare_outputs(ref_out, cand_out, self.task.tolerance_for, f"{case.name}, inputs x{factor:g}")
        self.check(
            "input_range",
            mismatch is None,
            f"with the inputs scaled by {factor:g}, {mismatch.output}: {mismatch.detail} — intermediates overflow or "
            "lose precision for values larger than the task's random inputs (accumulate in a wider dtype)"
            if mismatch
            else f"correct with the inputs scaled by {factor:g}",
            mismatch,
        )

    #: the stream probes' GPU-side delay: `PROBE_DELAY_CALLS` times the candidate's longest call on the host (what its
    #: code takes to launch its kernels), within these bounds in ms
    PROBE_DELAY_MS = (10.0, 50.0)
    PROBE_DELAY_CALLS = 50

    def probe_delay_ms(self, m: Models, case: InputCase) -> float:
        """How long the stream probes hold the inputs back: far longer than the candidate's own host code takes to reach
        its kernels (a warm call, timed on the host without waiting for the device), so a kernel that does not wait
        for the stream is launched, and reads the placeholders, well inside the delay."""
        from .harness.checks import clone_inputs

        inputs = clone_inputs(case.inputs)
        self.sync()
        t0 = time.perf_counter()
        self.call(m.cand, inputs, "candidate")
        host_ms = (time.perf_counter() - t0) * 1e3
        self.sync()
        lo, hi = self.PROBE_DELAY_MS
        return min(hi, max(lo, self.PROBE_DELAY_CALLS * host_ms))

    def delayed_call(self, model: Any, case: InputCase, stream: Any, delay_ms: float = 50.0) -> Any:
        """`model` called on `stream` (made current) with inputs that become ready only after a GPU-side delay on that
        stream: NaN placeholders, then a `delay_ms` sleep, then the real values. Kernels that wait for work queued on the
        stream read the real values; kernels on a stream that does not wait for it read the placeholders."""
        from .harness import timing as T
        from .harness.checks import clone_inputs

        torch = self.torch
        cycles = int(delay_ms * T.CudaTimer(self.device, False).cycles_per_ms)
        delayed = clone_inputs(case.inputs)
        self.sync()
        with torch.cuda.stream(stream):
            for x in delayed:
                if isinstance(x, torch.Tensor) and x.is_floating_point():
                    x.fill_(float("nan"))
            torch.cuda._sleep(cycles)
            for x, real in zip(delayed, case.inputs, strict=True):
                if isinstance(x, torch.Tensor) and x.is_floating_point():
                    x.copy_(real)
            out = self.call(model, delayed, "candidate")
        self.sync()
        return out

    def probe_streams(self, m: Models, case: InputCase) -> None:
        """Whether the candidate's kernels wait for the work queued before the call, on two streams.

        1. `stream_ordered`, in the task's own conditions: the inputs are made ready by work queued on the device's
           default stream (the current one) after a delay. Kernels on that stream (the legacy default stream
           included) or on one joined to it wait; kernels on a non-blocking stream of their own that is never joined
           read the placeholders: their outputs are not ordered after the caller's work, a race wherever they run.
        2. `current_stream`: the same on a side stream made current, as `torch.cuda.stream(...)`, CUDA-graph capture
           and `torch.compile(mode="reduce-overhead")` run a module. Kernels on the legacy default stream
           (`<<<grid, block>>>` with no stream) read the placeholders: verified on the default stream only (the
           domain says so; with `EvalOptions.strict` the check fails)."""
        from .harness.checks import clone_inputs
        from .harness.compare import compare_outputs

        torch = self.torch
        if not any(isinstance(x, torch.Tensor) and x.is_floating_point() for x in case.inputs):
            self.check(
                "current_stream",
                True,
                "not checked: no floating-point input to delay; verified on the default stream only",
            )
            return
        ref_out = self.call(m.ref, clone_inputs(case.inputs), "reference")
        self.sync()
        delay = self.probe_delay_ms(m, case)
        self.where = self.describe_set(case, what="inputs made ready on the default stream after a delay")
        own = self.delayed_call(m.cand, case, torch.cuda.current_stream(self.device), delay)
        mismatch, _ = compare_outputs(ref_out, own, self.task.tolerance_for, f"{case.name}, delayed on its stream")
        del own
        if mismatch is not None and self.right_when_ready(m, case, ref_out):
            self.check(
                "stream_ordered",
                False,
                f"{mismatch.output}: {mismatch.detail} — with the inputs made ready by work queued on the caller's "
                "stream after a delay, the candidate read them before they were ready: its kernels run on a stream "
                "of their own that does not wait for the caller's (join it: side.wait_stream(current) before the "
                "kernels, current.wait_stream(side) after)",
                mismatch,
            )
        elif mismatch is not None:
            # wrong with ready inputs too: a candidate wrong throughout (outputs_match says so next), or one whose
            # output races with the caller's stream (work on a stream of its own, read back unjoined): then some
            # calls with ready inputs come out right
            if any(self.right_when_ready(m, case, ref_out) for _ in range(3)):
                self.check(
                    "stream_ordered",
                    False,
                    f"{mismatch.output}: {mismatch.detail} — with the inputs made ready by work queued on the caller's "
                    "stream after a delay the output was wrong, and with ready inputs it is right on some calls only: "
                    "its work runs on a stream of its own, not ordered with the caller's (join it: "
                    "side.wait_stream(current) before the kernels, current.wait_stream(side) after)",
                    mismatch,
                )
            self.check("current_stream", True, "not decided: the output is wrong with ready inputs too")
            return
        self.where = self.describe_set(case, what="inputs made ready on a side stream after a delay")
        side = self.delayed_call(m.cand, case, torch.cuda.Stream(self.device), delay)
        mismatch, _ = compare_outputs(ref_out, side, self.task.tolerance_for, f"{case.name}, delayed stream")
        del side
        if mismatch is None:
            self.streams = "any"
            self.check("current_stream", True, "waits for work queued on torch's current stream, whichever it is")
            return
        self.narrow(
            "current_stream",
            "streams",
            "wrong_values",
            f"{mismatch.output}: {mismatch.detail} — with the inputs made ready on a side stream after a delay, the "
            "candidate read them before they were ready: its kernels do not run on the current stream (the legacy "
            "default stream: `<<<grid, block>>>` with no stream). Right on the default stream only; launch on "
            "at::cuda::getCurrentCUDAStream() in C++ / torch.cuda.current_stream() in Python",
            "current_stream",
            mismatch,
        )

    def right_when_ready(self, m: Models, case: InputCase, ref_out: Any) -> bool:
        """Whether the candidate is right on the same inputs made ready before the call: then a stream probe's wrong
        output is the stream's doing."""
        from .harness.checks import clone_inputs
        from .harness.compare import compare_outputs

        plain = self.call(m.cand, clone_inputs(case.inputs), "candidate")
        self.sync()
        return compare_outputs(ref_out, plain, self.task.tolerance_for, case.name)[0] is None

    def time_both(self, mod: Any, models: Models, case: InputCase) -> None:
        """Interleaved timing that verifies itself: before every call the inputs get new contents in place
        (reference and candidate the same ones), and every timed candidate output is compared with the
        reference's on the same inputs. A candidate right when verified but wrong when timed fails."""
        from .harness import timing as T
        from .harness.checks import clone_inputs
        from .harness.compare import compare_outputs
        from .harness.loading import call_model
        from .harness.probes import InputRefresher, tensor_bytes

        torch = self.torch
        ref_in, cand_in = clone_inputs(case.inputs), clone_inputs(case.inputs)
        self.where = self.describe_set(case, what="timed, with new contents drawn from get_inputs() before each call")
        opt, notes = self.opt, list[str]()
        draw, pool, how = self.timing_contents(mod, case)
        kinds = self.task.input_kinds
        permutable = (
            [k in ("normal", "iid") for k in kinds]
            if kinds is not None and len(kinds) == len(case.inputs)
            else [False] * len(case.inputs)
        )
        refresher = InputRefresher([ref_in, cand_in], draw=draw, pool=pool, permutable=permutable, seed=None)
        if how:
            notes.append(how)
        last: dict[str, Any] = {}

        def ref_fn() -> Any:
            last["ref"] = call_model(models.ref, ref_in)
            return last["ref"]

        def cand_fn() -> Any:
            last["cand"] = call_model(models.cand, cand_in)
            return last["cand"]

        # every timed call is checked when outputs are small; big ones: the first calls, every nudged call, a
        # random eighth of the others (which ones, a candidate cannot tell) and the last
        small = tensor_bytes(case.inputs) < (4 << 20)
        # which calls are checked: the OS's randomness per call, no generator whose state the candidate could read
        # or replay
        checked = {"calls": 0, "last": -1, "seen": -1}

        def refresh(i: int) -> None:
            with self.cost("timed_outputs_match"):
                refresher.refresh(i)

        def check_call(i: int, force: bool = False) -> None:
            checked["seen"] = max(checked["seen"], i)
            if not (force or small or i < 3 or refresher.nudges(i) or secrets.randbelow(8) == 0):
                return
            with self.cost("timed_outputs_match"):
                compare_call(i)

        def compare_call(i: int) -> None:
            self.sync()
            ref_out, cand_out = last.get("ref"), last.get("cand")
            where = f"timed call {i + 1}"
            if i < 3 or secrets.randbelow(4) == 0:  # the comparison below is the harness's own (a check: ~0.6 ms)
                self.check_patches()
            self.check_plain_outputs(cand_out, where)
            mismatch, _ = compare_outputs(ref_out, cand_out, self.task.tolerance_for, where)
            if mismatch is not None:
                self.check(
                    "timed_outputs_match",
                    False,
                    f"[{where}] {mismatch.output}: {mismatch.detail} — while being timed (new input contents every "
                    "call) the candidate's output differs from the reference's on the same inputs: results reused "
                    "or cached on the inputs, or behaviour that changes between calls",
                    mismatch,
                )
            self.hold(where, cand_out)  # a buffer the candidate hands out again later is seen at the end
            checked["calls"] += 1
            checked["last"] = i

        kw: dict[str, Any] = dict(
            warmup=opt.warmup,
            min_reps=opt.min_reps,
            max_reps=opt.max_reps,
            budget_s=opt.timing_budget_s,
            precision=opt.timing_precision,
            before_pair=refresh,
            after_pair=check_call,
        )
        if not self.is_cuda:
            ref, cand = T.run_interleaved(T.cpu_sampler(ref_fn), T.cpu_sampler(cand_fn), **kw)
            self.timing = T.summarize("cpu", ref, cand, False, notes)
            self.check_physical_floor(tensor_bytes(cand_in), tensor_bytes(last.get("cand")), notes)
        else:
            timer = T.CudaTimer(self.device, opt.l2_flush)
            gap = timer.escaped_ms(ref_fn, cand_fn)
            cand_host = timer.hide_host_overhead(ref_fn, cand_fn)
            limit = max(0.05, 0.5 * cand_host)
            # work that escapes the stream delays every round; another process's kernels on the device delay some:
            # the smallest of up to four rounds decides
            for _ in range(3 if gap > limit else 0):
                gap = min(gap, timer.escaped_ms(ref_fn, cand_fn))
                if gap <= limit:
                    break
            self.check(
                "all_streams_timed",
                gap <= limit,
                f"the device stays busy {gap:.3f} ms after the candidate's stream finished: work on "
                "another stream escapes the timed region; join it to the current stream",
            )
            mode = opt.timing_mode
            if self.streams == "default" and mode != "events":
                # CUDA graphs capture on a side stream, where a legacy-stream launch is an error: time it with events
                notes.append(
                    "timed with events: the candidate launches on the legacy default stream, which a CUDA "
                    "graph cannot capture"
                )
                mode = "events"
            if mode == "auto":
                probe = T.Samples()
                for _ in range(5):
                    timer.sample(ref_fn, probe)
                mode = "graph" if min(probe.device_ms) < opt.graph_below_ms else "events"
            self.timing = None
            if mode == "graph":
                try:
                    ref_t, cand_t = (
                        T.GraphTimer(self.device, opt.l2_flush, ref_fn),
                        T.GraphTimer(self.device, opt.l2_flush, cand_fn),
                    )
                    ref_t.delay_cycles = cand_t.delay_cycles = timer.delay_cycles  # replays enqueue faster still
                    ref, cand = T.run_interleaved(
                        lambda s: ref_t.sample(ref_fn, s), lambda s: cand_t.sample(cand_fn, s), **kw
                    )
                    self.timing = T.summarize("graph", ref, cand, opt.l2_flush, notes)
                except StageFailed:
                    raise
                except Exception as exc:  # noqa: BLE001 - capture is optional; fall back to events
                    notes.append(f"CUDA graph capture failed, timed with events instead: {_exc_line(exc)}")
                    torch.cuda.synchronize(self.device)
            if self.timing is None:
                ref, cand = T.run_interleaved(
                    lambda s: timer.sample(ref_fn, s), lambda s: timer.sample(cand_fn, s), **kw
                )
                self.timing = T.summarize("events", ref, cand, opt.l2_flush, notes)
            self.check_physical_floor(tensor_bytes(cand_in), tensor_bytes(last.get("cand")), notes)
        if checked["seen"] >= 0 and checked["last"] != checked["seen"]:
            check_call(checked["seen"], force=True)  # the last call's outputs, if not checked yet
        self.check(
            "timed_outputs_match",
            True,
            f"every timed call ({checked['calls']}) checked against the reference on new input contents",
        )

    #: a fresh draw of get_inputs() per timed call when one costs at most this (seconds); else a pool drawn beforehand
    FRESH_DRAW_S = 0.003
    #: the pool's draws may take this long in all (seconds), and hold at most this share of the device's free memory
    POOL_DRAW_S = 2.0
    POOL_MEMORY_SHARE = 0.125
    POOL_MAX = 8

    def draw_fresh(self, mod: Any, case: InputCase, seed: int) -> list[Any] | None:
        """A new call of the task's `get_inputs()` (its sizes as in `case`), seeded, made on the device where it can
        be (factory calls default to it: far faster than drawing large inputs on the host and copying them over);
        None when it fails or gives inputs laid out otherwise than `case`'s."""
        from .harness.probes import same_layout

        torch = self.torch
        fn = getattr(mod, self.task.inputs_fn)
        with task_constants(mod, case.overrides):
            for where in [self.device, None] if self.is_cuda else [None]:
                try:
                    _seed_all(torch, seed)
                    if where is not None:
                        with torch.device(where):
                            drawn = list(fn())
                    else:
                        drawn = list(fn())
                    drawn = self.to_device(drawn)
                except Exception:  # noqa: BLE001 - the task's code cannot draw here; try the host, else none
                    continue
                if same_layout(drawn, case.inputs):
                    return drawn
        return None

    def timing_contents(self, mod: Any, case: InputCase) -> tuple[Any, list[list[Any]], str]:
        """Where the timed calls' contents come from: (draw, pool, a note). A new draw of `get_inputs()` per call when
        one is cheap; else a pool of draws made now, within a time and memory budget, plus the verified input sets of
        the same sizes. Never a transform of the task's inputs: only new draws keep structured inputs (a triangular
        matrix, probability rows, sorted ids) in the task's distribution."""
        from .harness.probes import same_layout, tensor_bytes

        # seeds nobody can know in advance (not the task's seed plus a constant): a candidate that drew the timed
        # calls' inputs itself beforehand, at construction, would have their answers ready
        base = 20_000 + secrets.randbelow(1 << 30)
        took = float("inf")
        first = None
        for k in range(2):  # the second draw's time: the first may pay for a warm-up of its own
            t0 = time.perf_counter()
            first = self.draw_fresh(mod, case, base - k)
            self.sync()
            took = time.perf_counter() - t0
            if first is None:
                break
        if first is not None and took <= self.FRESH_DRAW_S:
            cache = {0: first}

            def draw(call: int) -> list[Any] | None:
                return cache.pop(call) if call in cache else self.draw_fresh(mod, case, base + call)

            return draw, [], ""
        pool = [case.inputs] + ([first] if first is not None else [])
        kept = self.state.drawn
        for key, (inputs, _init) in kept.items():
            if (
                key[0] == self.task.sha
                and not key[2]
                and inputs is not case.inputs
                and same_layout(inputs, case.inputs)
            ):
                pool.append(inputs)  # the other verified input sets of the task's own sizes
        if first is not None:
            budget = self.POOL_MEMORY_SHARE * (self.free_memory() or float("inf"))
            size = max(1, tensor_bytes(case.inputs))
            n = 1
            while len(pool) < self.POOL_MAX and (n + 1) * took <= self.POOL_DRAW_S and size * (len(pool) + 1) <= budget:
                more = self.draw_fresh(mod, case, base + n)
                n += 1
                if more is None:
                    break
                pool.append(more)
        if first is None:
            note = (
                f"get_inputs() cannot draw new inputs of these sizes in the worker: the timed calls cycle through "
                f"{len(pool)} verified input set(s)"
            )
        else:
            note = (
                f"drawing get_inputs() takes {took * 1000:.0f} ms: the timed calls cycle through {len(pool)} input "
                "sets drawn beforehand"
            )
        return None, pool, note

    def free_memory(self) -> int | None:
        if not self.is_cuda:
            return None
        try:
            return int(self.torch.cuda.mem_get_info(self.device)[0])
        except Exception:  # noqa: BLE001
            return None

    #: on the CPU, a time under this share of the floor fails (a share of the GPU's 0.9): the bandwidth is measured
    #: once, and a machine busy then measures it low
    CPU_FLOOR_MARGIN = 0.5

    def check_physical_floor(self, in_bytes: int, out_bytes: int, notes: list[str]) -> None:
        """A candidate timed faster than writing its outputs once at the device's measured memory bandwidth did
        not produce them in the timed call; one faster than reading its inputs and writing its outputs once is
        noted (an algorithmic shortcut can be honest). The bandwidth comes from the judge (a process no candidate
        ran in) where there is one, else it is measured here; outputs that fit twice in the cache are not judged."""
        torch = self.torch
        if self.timing is None:
            return
        if self.is_cuda:
            cache = getattr(torch.cuda.get_device_properties(self.device), "L2_cache_size", 64 << 20)
            margin = 0.9
        else:
            cache, margin = last_level_cache_bytes(), self.CPU_FLOOR_MARGIN
        with self.cost("impossible_timing"):  # measured once per process
            bandwidth = self.bandwidth_given or self.state.bandwidth(torch)  # bytes/ms
        rate = f"{bandwidth / 1e9:.2f} TB/s" if bandwidth >= 1e9 else f"{bandwidth / 1e6:.1f} GB/s"
        t = self.timing.candidate.median_ms
        floor, under_io = physical_floor(t, in_bytes, out_bytes, bandwidth, cache, margin)
        if floor is not None:
            self.check(
                "impossible_timing",
                t >= margin * floor,
                f"timed at {t * 1000:.1f} us, less than writing its {out_bytes / 2**20:.0f} MiB of outputs once takes "
                f"at the measured {rate} ({floor * 1000:.1f} us): the timed call cannot have produced them",
            )
        if under_io:
            notes.append(
                f"faster than reading its inputs and writing its outputs once at {rate}: an algorithmic shortcut "
                "that skips part of the inputs (or a result not computed in the timed call)"
            )

    # ------------------------------------------------------------------ driver
    def judged_sets(self) -> list[tuple[int, list[Any]]]:
        """The judge's input sets sent with the request, as (index, inputs on the host)."""
        from .harness.wire import WireError, unpack

        if self._judged_sets is None:
            self._judged_sets = []
            if self.judged_data:
                try:
                    sets = unpack(self.judged_data)
                except WireError as exc:  # forge's own bytes: the parent sends only what the judge packed
                    raise RuntimeError(f"the judge's input sets did not arrive whole: {exc}") from exc
                self._judged_sets = list(enumerate(sets))
        return self._judged_sets

    #: seconds the eager calls after a graph-replayed timing may take (`eager_calls`)
    EAGER_CALLS_S = 0.5

    def eager_calls(self, models: Models, case: InputCase) -> None:
        """After a timing that replayed a CUDA graph, the candidate's Python forward ran only to record it: call it
        eagerly as many times as the timing replayed it (within `EAGER_CALLS_S`), so that the judged calls after
        timing come after as many calls as a timed candidate's anywhere: what changes after N calls shows there."""
        from .harness.checks import clone_inputs
        from .harness.loading import call_model

        timing = self.timing
        if timing is None or timing.mode != "graph":
            return
        wanted = timing.candidate.n + self.opt.warmup
        with self.cost("clean_judge"):
            inputs = self.to_device(clone_inputs(case.inputs))
            deadline = time.perf_counter() + self.EAGER_CALLS_S
            for i in range(wanted):
                call_model(models.cand, inputs)
                if i % 16 == 15:
                    self.sync()
                    if time.perf_counter() > deadline:
                        break
            self.sync()

    def judged_calls(self, models: Models, sets: list[tuple[int, list[Any]]]) -> None:
        """The candidate on the judge's input sets, each output sent to the parent (`JudgedOutputs`) as soon as the
        call returned and the usual checks after a call passed, before any more candidate code runs: the judge, a
        process that never ran candidate code, compares it with the reference's output computed there."""
        from .harness.checks import clone_inputs
        from .harness.wire import WireError, pack

        for index, inputs in sets:
            with self.cost("clean_judge"):
                self.where = f"judged input set #{index + 1} (the task's own sizes)"
                out = self.call(models.cand, self.to_device(clone_inputs(inputs)), "candidate")
                self.sync()
                try:
                    data = pack(out)
                except WireError as exc:
                    self.check("clean_judge", False, f"[{self.where}] its output cannot be sent to the judge: {exc}")
                del out
                pipe.send(self.out_fd, JudgedOutputs(index=index).with_data(data))

    def prepare(self, reference: bool) -> Prepared:
        """The task loaded and its inputs drawn, kept in the worker state for its candidates; with
        `reference`, the task's model also built and called once on the first input set (stage
        `reference`), before any candidate code is loaded, so that a failure here is the user's own."""
        t0 = time.perf_counter()
        try:
            mod = self.load_task()
            cases = self.make_cases(mod)
            if reference:
                from .harness.checks import clone_inputs

                self.stage("reference")
                ref = self.build_reference(mod, cases[0].init_inputs).to(self.device)
                self.call(ref, clone_inputs(cases[0].inputs), "reference")
                self.sync()
                self.stage_done()
        except StageFailed as sf:
            tb = _tb(sf.exc) if sf.exc is not None else ""
            return Prepared(ok=False, reason=sf.reason, traceback=tb, seconds=time.perf_counter() - t0)
        except Exception as exc:  # noqa: BLE001 - the task's own failure: its evaluations report it
            return Prepared(ok=False, reason=_exc_line(exc), traceback=_tb(exc), seconds=time.perf_counter() - t0)
        return Prepared(ok=True, seconds=time.perf_counter() - t0)

    def run(self) -> Verdict:
        from .harness.checks import PatchGuard
        from .harness.loading import cached_load_inline, exec_module, forget_module, is_compile_error

        torch = self.torch
        status, reason, failed, exc_tb, mismatch = Status.correct, "", None, "", None
        cand_mod = None
        cases: list[InputCase] = []
        try:
            mod = self.load_task()
            t0 = time.perf_counter()
            cases = self.make_cases(mod)
            self.stages["inputs"] = round(time.perf_counter() - t0, 4)
            self.input_specs = _input_specs(cases, torch)
            if "torch.compile" in self.cand_src.source or "torch._dynamo" in self.cand_src.source:
                import torch._dynamo  # noqa: F401 - it rebinds torch.manual_seed on import: not the candidate's doing
            with cached_load_inline():
                self.guard = PatchGuard(
                    {"task module": mod, "reference class": getattr(mod, self.task.model_class)},
                    values=self.tolerance_values,
                )
                self.stage("compile")
                self.rebase_state()
                self.harness_threads = {t.ident for t in threading.enumerate() if t.ident is not None}
                try:
                    cand_mod = exec_module(self.cand_src.source, self.cand_src.name, "candidate")
                except Exception as exc:  # noqa: BLE001
                    status = Status.compile_error if is_compile_error(exc) else Status.runtime_error
                    raise StageFailed(status, _exc_line(exc), exc=exc) from exc
                self.watch_state("when its module was loaded")
                models = self.build_models(mod, cand_mod, cases[0].init_inputs)
                self.compatible = models.compatible
                self.checks.append(
                    Check(
                        name="checkpoint_compatible",
                        passed=models.compatible,
                        detail="reference state_dict loaded with strict=True"
                        if models.compatible
                        else f"load_state_dict(strict=True) failed, fell back to same-seed construction: {models.note}",
                    )
                )
                # not a failure: reported, and such a candidate cannot be reintegrated
                self.stage_done()
                self.stage("first_call")  # Triton JIT-compiles here; a hang here is a timeout, not a compile
                self.where = self.describe_set(cases[0])
                self.call(
                    models.cand, [x.clone() if isinstance(x, torch.Tensor) else x for x in cases[0].inputs], "candidate"
                )
                self.sync()
                self.stage_done()
                self.check_patches()
                self.stage("verify")
                from .harness.checks import ThreadWatch, thread_cpu_seconds

                self.threads = ThreadWatch(self.harness_threads)
                self.verify(mod, cand_mod, cases, models)
                judged = self.judged_sets()
                first = judged[: max(1, len(judged) // 2)] if self.opt.timing else judged
                self.judged_calls(models, first)
                self.watch_threads(self.threads, "verified")
                self.threads = None
                self.check_patches(stage_end=True)
                self.stage_done()
                if self.opt.timing:
                    self.stage("time")
                    threads = ThreadWatch(self.harness_threads)
                    waited = self.state.gate.waited_s
                    with self.state.gate.exclusive():  # the device to this process alone while it times
                        self.time_both(mod, models, cases[0])
                    if self.state.gate.waited_s > waited:
                        self.stages["device_wait"] = round(self.state.gate.waited_s - waited, 4)
                    self.check_held(" while it was timed")
                    self.watch_state("while it was timed")
                    threads.sample()
                    # timed calls are not wrapped (that would be timed too): its threads may use, inside its calls,
                    # at most their number times the candidate's timed seconds
                    own = 0.0
                    if self.timing is not None:
                        timed = self.timing.candidate
                        alive = len(thread_cpu_seconds(self.harness_threads))
                        own = alive * timed.mean_ms / 1e3 * (timed.n + self.opt.warmup) * 1.5
                    self.watch_threads(threads, "timed", own)
                    self.check_patches()
                    self.eager_calls(models, cases[0])
                    self.judged_calls(models, judged[len(first) :])
                    self.check_patches(stage_end=True)
                    self.stage_done()
        except StageFailed as sf:
            status, reason, failed, mismatch = sf.status, sf.reason, sf.failed_check, sf.mismatch
            if sf.exc is not None:
                exc_tb = _tb(sf.exc)
            if failed == "no_monkeypatch":
                self.state.unusable = True
                if not reason:
                    reason = "the candidate replaced torch or harness functions"
        except Exception as exc:  # noqa: BLE001 - a harness-level failure is still a verdict
            # an asynchronous CUDA error surfaces at the next synchronization: name the input set being run
            where = f" [on {self.where}]" if self.where else ""
            status, reason, exc_tb = Status.runtime_error, _exc_line(exc) + where, _tb(exc)
        if status in (Status.runtime_error, Status.compile_error) and self.is_cuda:
            text = reason + exc_tb
            try:
                torch.cuda.synchronize(self.device)
            except Exception:  # noqa: BLE001
                self.state.unusable = True
            if any(s in text for s in _STICKY):
                self.state.unusable = True
        if cand_mod is not None:
            forget_module(cand_mod)
        if status is Status.correct:
            limits = self.domain(cases)
            reason = "all checks passed" + (f"; verified for {limits.describe()}" if limits and not limits.full else "")
            sizes = next((c for c in self.checks if c.name == "other_sizes"), None)
            if sizes is not None and sizes.detail.startswith("not varied"):
                reason += "; at the task's own sizes only (" + sizes.detail.removeprefix("not varied: ") + ")"
        for c in self.checks:
            if c.name in self.costs:
                c.seconds = round(self.costs[c.name], 4)
        return Verdict(
            status=status,
            reason=reason,
            failed_check=failed,
            checks=self.checks,
            mismatch=mismatch,
            checkpoint_compatible=self.compatible,
            timing=self.timing,
            stages=self.stages,
            traceback=exc_tb,
            device=str(self.device),
            backend=self.cand_src.backend.value,
            task_sha=self.task.sha,
            candidate_sha=self.cand_src.sha,
            inputs=self.input_specs,
            domain=self.domain(cases),
        )


@dataclass
class Judged:
    """What a judge keeps of a task: the reference's outputs on its sets (on the host), and for timing it alone again,
    the model (on the host between requests) and the first set's inputs."""

    task: Any
    outs: list[Any]
    ref: Any
    inputs: list[Any]


class Judge:
    """A judge's side (``--judge``): for the tasks its parent still holds input sets of, the reference's outputs on
    input sets it drew itself, from seeds of the OS's randomness that never leave it; a candidate's outputs on those
    sets arrive as tensors and are compared here, and the reference is timed here alone. No candidate code ever runs
    in this process: what a candidate does to its own process (hooks on the reference, its weights, forge's compare
    functions, what slows the reference's calls) cannot reach these outputs and times."""

    def __init__(self, state: WorkerState, memory: DeviceMemory | None) -> None:
        self.state, self.memory = state, memory
        self.kept: dict[str, Judged] = {}

    def ready(self, req: JudgeRequest, out_fd: int) -> JudgeReady:
        from .harness.wire import WireError

        t0 = time.perf_counter()
        ev = Evaluation(req, self.state, out_fd)
        try:
            judged, data, size, ref_ms = self._draw_and_run(req, ev)
        except StageFailed as sf:
            return JudgeReady(ok=False, reason=sf.reason, seconds=time.perf_counter() - t0)
        except WireError as exc:
            return JudgeReady(ok=False, reason=f"the task's inputs or outputs cannot be sent: {exc}")
        except Exception as exc:  # noqa: BLE001 - the task's own failure: its evaluations report it
            return JudgeReady(ok=False, reason=_exc_line(exc), seconds=time.perf_counter() - t0)
        finally:
            if self.memory is not None:  # the device's memory as the judge found it: its worker measures it
                self.memory.release()
        if judged is None:
            return JudgeReady(
                ok=False,
                reason=f"an input set of the task is {size >> 20} MiB, over the {req.max_bytes >> 20} MiB the judge "
                "sends",
                seconds=time.perf_counter() - t0,
            )
        self.kept = {sha: kept for sha, kept in self.kept.items() if sha in req.keep}
        self.kept[req.task.sha] = judged
        bandwidth = self.state.bandwidth(ev.torch)  # once per judge: no candidate ran here to slow or fake it
        if self.memory is not None:
            self.memory.release()
        return JudgeReady(
            ok=True, sets=len(judged.outs), bandwidth=bandwidth, ref_ms=ref_ms, seconds=time.perf_counter() - t0
        ).with_data(data)

    @staticmethod
    def _draw_and_run(req: JudgeRequest, ev: Evaluation) -> tuple[Judged | None, bytes, int, list[float]]:
        """(what the judge keeps, the packed input sets, their bytes, the reference's times alone); nothing kept when
        the first set is over `req.max_bytes`."""
        from .harness.checks import clone_inputs
        from .harness.probes import tensor_bytes
        from .harness.wire import pack, unpack

        torch = ev.torch
        mod = ev.load_task()
        ev.stage("reference")
        _, init = ev.draw_inputs(mod, req.task.seed + 1)  # the constructor inputs every evaluation builds with
        ref = ev.build_reference(mod, init).to(ev.device)
        sets: list[list[Any]] = []
        outs: list[Any] = []
        size = 0
        for _ in range(req.sets):
            _seed_all(torch, secrets.randbits(62))
            inputs = list(getattr(mod, req.task.inputs_fn)())
            size += tensor_bytes(inputs)
            if size > req.max_bytes:
                break
            out = ev.call(ref, ev.to_device(clone_inputs(inputs)), "reference")
            ev.sync()
            outs.append(unpack(pack(out)))
            sets.append(inputs)
        if not sets:
            return None, b"", size, []
        ref_ms = Judge.time_reference(ev, ref, sets[0], req.options.l2_flush) if req.options.timing else []
        ev.stage_done()
        return Judged(req.task, outs, ref.to("cpu"), sets[0]), pack(sets), size, ref_ms

    @staticmethod
    def time_reference(ev: Evaluation, ref: Any, inputs: list[Any], l2_flush: bool) -> list[float]:
        """The reference alone on `inputs`, with the timer the worker's interleaved timing uses (ms per call)."""
        from .harness.checks import clone_inputs
        from .harness.loading import call_model
        from .harness.timing import time_alone

        on_device = ev.to_device(clone_inputs(inputs))
        with ev.state.gate.exclusive():  # the device to this process alone while it times
            return time_alone(lambda: call_model(ref, on_device), ev.device, l2_flush)

    def retime(self, req: TimeReferenceRequest, out_fd: int) -> ReferenceTimes:
        judged = self.kept.get(req.task_sha)
        if judged is None:
            return ReferenceTimes()
        ev = Evaluation(JudgeRequest(task=judged.task, options=EvalOptions()), self.state, out_fd)
        ref = judged.ref.to(ev.device)
        try:
            return ReferenceTimes(ms=self.time_reference(ev, ref, judged.inputs, req.l2_flush))
        finally:
            judged.ref = ref.to("cpu")
            del ref
            if self.memory is not None:
                self.memory.release()

    def compare(self, req: CompareRequest) -> Compared:
        from .harness.compare import compare_outputs
        from .harness.wire import WireError, unpack

        t0 = time.perf_counter()
        judged = self.kept.get(req.task_sha)
        if judged is None or not 0 <= req.index < len(judged.outs):
            return Compared(
                passed=False, unheld=True, detail=f"the judge holds no input set #{req.index + 1} of this task"
            )
        where = f"judged input set #{req.index + 1}"
        try:
            actual = unpack(req.data)
        except WireError as exc:
            return Compared(passed=False, detail=f"[{where}] its outputs did not arrive as tensors: {exc}")
        expected = judged.outs[req.index]
        device = self.state.device
        if getattr(device, "type", "cpu") == "cuda":  # a GPU compares in milliseconds what the host takes seconds for
            import torch

            def on(x: Any) -> Any:
                return torch.utils._pytree.tree_map_only(torch.Tensor, lambda t: t.to(device), x)

            expected, actual = on(expected), on(actual)
        try:
            mismatch, _ = compare_outputs(expected, actual, judged.task.tolerance_for, where)
        finally:
            del expected, actual
            if self.memory is not None:
                self.memory.release()
        return Compared(
            passed=mismatch is None,
            detail=(
                f"[{where}] {mismatch.output}: {mismatch.detail} — on input sets drawn, and the reference run, in a "
                "process where no candidate code ever ran"
                if mismatch is not None
                else ""
            ),
            mismatch=mismatch,
            seconds=time.perf_counter() - t0,
        )


def _seed_all(torch: Any, seed: int) -> None:
    """The generators a task's `get_inputs()` may draw from: torch's, Python's, NumPy's (if it is loaded)."""
    torch.manual_seed(seed)
    random.seed(seed)
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed(seed % (2**32))


def _input_specs(cases: list[Any], torch: Any) -> list[InputSpec]:
    specs = []
    for case in cases:
        for i, x in enumerate(case.inputs):
            if isinstance(x, torch.Tensor):
                specs.append(
                    InputSpec(
                        case=case.name,
                        index=i,
                        dtype=str(x.dtype).removeprefix("torch."),
                        shape=list(x.shape),
                        contiguous=x.is_contiguous(),
                    )
                )
            else:
                specs.append(InputSpec(case=case.name, index=i, python_type=type(x).__name__))
    return specs


def _build(req: BuildRequest) -> BuildResult:
    from .harness.loading import BUILD_ATTEMPTS, cached_load_inline, exec_module, forget_module, is_compile_error

    BUILD_ATTEMPTS.clear()
    if req.arch and req.arch_list:  # read by load_inline, NVRTC and the build cache's key when the build runs
        os.environ["FORGE_CUDA_ARCH"] = req.arch
        os.environ["TORCH_CUDA_ARCH_LIST"] = req.arch_list
    t0 = time.perf_counter()
    try:
        with cached_load_inline():
            mod = exec_module(req.candidate.source, req.candidate.name, "candidate")
        forget_module(mod)
        return BuildResult(ok=True, seconds=time.perf_counter() - t0, attempts=list(BUILD_ATTEMPTS))
    except Exception as exc:  # noqa: BLE001
        return BuildResult(
            ok=False,
            compile_error=is_compile_error(exc),
            reason=_exc_line(exc),
            traceback=_tb(exc),
            seconds=time.perf_counter() - t0,
            attempts=list(BUILD_ATTEMPTS),
        )


class DeviceMemory:
    """The device's memory as the worker started, given back after each evaluation, or the worker is unusable.

    After an evaluation the candidate's objects are dropped, the garbage collected, the device synchronized,
    the caches emptied (torch's caching allocator, cuBLAS workspaces, CuPy's pool if a candidate used it);
    then the allocator may hold at most the task's kept inputs (`WorkerState.drawn_bytes`) more than at the
    start, and the device's free memory may be at most what the allocator reserves plus the slack below its
    starting level. A worker that cannot get back is replaced before the next candidate, so each candidate
    starts from the free memory the first one had."""

    def __init__(self, torch: Any, device: Any) -> None:
        from .harness.nvml import own_memory_reader

        self.torch, self.device = torch, device
        self.release()
        self.free0, self.total = torch.cuda.mem_get_info(device)
        self.allocated0 = torch.cuda.memory_allocated(device)
        #: this process's own bytes on the device (NVML), where the driver tells them apart: then what it holds
        #: outside torch's allocator is its own, whatever other processes (device lanes, judges) do beside it
        self.own = own_memory_reader(str(torch.cuda.get_device_properties(device).uuid))
        self.outside0 = self._outside_own() if self.own is not None else None

    def _outside_own(self) -> int | None:
        """This process's device bytes outside torch's allocator (its context, CuPy, raw allocations), or None."""
        used = self.own() if self.own is not None else None
        return None if used is None else used - int(self.torch.cuda.memory_reserved(self.device))

    def release(self, collect: bool = True) -> None:
        torch = self.torch
        dynamo = sys.modules.get("torch._dynamo")
        if dynamo is not None:  # compiled frames of a torch.compile candidate hold its module and tensors
            try:
                dynamo.reset()
            except Exception:  # noqa: BLE001
                pass
        if collect:
            gc.collect()
        torch.cuda.synchronize(self.device)
        cupy = sys.modules.get("cupy")
        if cupy is not None:
            try:
                cupy.get_default_memory_pool().free_all_blocks()
                cupy.get_default_pinned_memory_pool().free_all_blocks()
            except Exception:  # noqa: BLE001 - a candidate may have broken it; the measurement says the rest
                pass
        clear_cublas = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
        if clear_cublas is not None:
            clear_cublas()
        torch.cuda.empty_cache()

    def free(self) -> int:
        return int(self.torch.cuda.mem_get_info(self.device)[0])

    def rebase(self) -> None:
        """Take the device's memory as it is now, between evaluations, as the level to get back to: another process
        on the device (this worker's judge) took or gave back memory since. What this worker's allocator reserves
        now (its kept inputs, recovered after the last evaluation) counts as free, as it did at the start."""
        self.release(collect=False)
        self.free0 = self.free() + int(self.torch.cuda.memory_reserved(self.device))

    def after(self, state: WorkerState, slack: int, free_before: int, kept_before: int) -> MemoryUse:
        """Release what the evaluation left and measure; `recovered` False when the worker cannot go on."""
        torch = self.torch
        use = MemoryUse(
            gpu_total_bytes=int(self.total),
            gpu_free_at_start_bytes=int(self.free0),
            gpu_free_before_bytes=free_before,
            gpu_kept_before_bytes=kept_before,
            gpu_kept_bytes=state.drawn_bytes,
        )
        for collect in (False, True):
            # first without a garbage collection (about 0.1 s with torch loaded): most candidates leave no cycle that
            # holds device memory; a full collection only when the memory is not back without one
            try:
                self.release(collect=collect)
                use.gpu_free_after_bytes = free = self.free()
                use.gpu_allocated_after_bytes = allocated = int(torch.cuda.memory_allocated(self.device))
                use.gpu_reserved_after_bytes = reserved = int(torch.cuda.memory_reserved(self.device))
            except Exception as exc:  # noqa: BLE001 - a device that cannot even say: the worker is done
                print(f"forge worker: device memory cannot be measured: {_exc_line(exc)}", file=sys.stderr, flush=True)
                use.recovered = False
                return use
            held = allocated - self.allocated0 - state.drawn_bytes  # live tensors nobody should hold any more
            own = self._outside_own() if self.outside0 is not None else None
            if own is not None and self.outside0 is not None:  # this process's own, as the driver counts it
                outside = own - self.outside0
                use.gpu_outside_bytes = outside
            else:  # device memory outside torch's allocator (CuPy, cudaMalloc...), from the device's free memory
                outside = self.free0 - free - reserved
            use.recovered = held <= slack // 8 and outside <= slack
            if use.recovered:
                break
        if not use.recovered:
            print(
                f"forge worker: device memory not given back ({held / 2**20:.0f} MiB still allocated beyond the kept "
                f"inputs, {outside / 2**20:.0f} MiB used outside the allocator); this worker is replaced",
                file=sys.stderr,
                flush=True,
            )
        return use


#: the stage the parent's deadline starts in, by request (`WorkerClient._exchange`'s `first_stage`)
_FIRST_STAGE = {"CompareRequest": "compare", "TimeReferenceRequest": "time_reference"}


def _say_where_os_exit_is_called() -> None:
    """User or candidate code that calls ``os._exit`` ends this worker with no traceback: print the Python stack
    first, as faulthandler does for a crash, so that the line that called it is found in the log."""
    real_exit = os._exit

    def _exit(status: int) -> NoReturn:
        try:
            sys.stderr.write(f"Fatal Python error: os._exit({status}) was called\n")
            sys.stderr.flush()
            faulthandler.dump_traceback(sys.stderr, all_threads=False)
            sys.stderr.flush()
        finally:
            real_exit(status)

    os._exit = _exit


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="forge-worker")
    ap.add_argument("--device", required=True)
    ap.add_argument("--in-fd", type=int, required=True)
    ap.add_argument("--out-fd", type=int, required=True)
    ap.add_argument("--judge", action="store_true", help="serve only judge requests: no candidate code, ever")
    args = ap.parse_args(argv)
    faulthandler.enable()  # a segfault or abort prints the Python stack to the log: the crash's line is found
    _say_where_os_exit_is_called()
    # what this worker starts (compilers, ninja, a candidate's own processes) dies with it, as it dies with forge
    children_die_with_this_process()
    nice = os.environ.get("FORGE_WORKER_NICE", "").strip()
    if nice.isdigit():  # a build worker: its compilers yield the CPU to the devices' workers while they time
        os.nice(int(nice))

    import torch

    device = torch.device(args.device)
    arch = None
    capability = None
    name = "cpu"
    if device.type == "cuda":
        if device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        torch.cuda.set_device(device)
        major, minor = capability = torch.cuda.get_device_capability(device)
        # the 'a' targets unlock Hopper+ instructions (wgmma); a cubin only runs on this device anyway
        arch = f"sm_{major}{minor}" + ("a" if major >= 9 else "")
        os.environ["TORCH_CUDA_ARCH_LIST"] = f"{major}.{minor}"
        os.environ["FORGE_CUDA_ARCH"] = arch
        name = torch.cuda.get_device_name(device)
        torch.empty(1, device=device)  # create the context now, not in the first candidate
        memory: DeviceMemory | None = DeviceMemory(torch, device)
    else:
        memory = None
    if device.type != "cuda" and os.environ.get("FORGE_CUDA_ARCH"):
        arch = os.environ["FORGE_CUDA_ARCH"]
    pipe.send(
        args.out_fd,
        Hello(
            pid=os.getpid(),
            device=str(device),
            device_name=name,
            arch=arch,
            capability=capability,
            torch_version=torch.__version__,
            cuda_version=torch.version.cuda,
            own_memory=memory is not None and memory.outside0 is not None,
        ),
    )
    from .harness.checks import process_changes, process_state

    state = WorkerState(device=device)
    if device.type == "cuda":
        from .harness.gate import DeviceGate

        state.gate = DeviceGate(str(torch.cuda.get_device_properties(device).uuid))
        state.gate.notify = lambda stage: pipe.send(args.out_fd, StageStarted(stage=stage))
        state.gate.drain = lambda: torch.cuda.synchronize(device)
    receiver = pipe.Receiver(args.in_fd, pipe.REQUEST)
    judge = Judge(state, memory) if args.judge else None

    def serve(req: Any) -> int | None:
        """One request answered; the worker's exit code when it must end after it."""
        if judge is not None:
            if isinstance(req, JudgeRequest):
                pipe.send(args.out_fd, judge.ready(req, args.out_fd))
            elif isinstance(req, TimeReferenceRequest):
                pipe.send(args.out_fd, judge.retime(req, args.out_fd))
            else:
                pipe.send(args.out_fd, judge.compare(req))
            return None
        if isinstance(req, BuildRequest):
            pipe.send(args.out_fd, _build(req))
            return None
        if isinstance(req, PrepareRequest):
            pipe.send(args.out_fd, Evaluation(req, state, args.out_fd).prepare(req.reference))
            return None
        if memory is not None and req.device_shared:
            memory.rebase()
        free_before, kept_before = (memory.free() if memory is not None else 0), state.drawn_bytes
        clean = process_state()
        verdict = Evaluation(req, state, args.out_fd).run()  # the evaluation and what it held are dropped here
        left = process_changes(clean, process_state())
        if left:  # proven clean, or not kept: what it left would meet the next candidate
            print(
                f"forge worker: the candidate left {', '.join(left)} changed; this worker is replaced", file=sys.stderr
            )
            state.unusable = True
        verdict.device_name = name
        if memory is not None and not state.unusable:
            t0 = time.perf_counter()
            verdict.memory = memory.after(state, req.options.gpu_memory_slack_bytes, free_before, kept_before)
            verdict.stages["release"] = round(time.perf_counter() - t0, 4)
            if not verdict.memory.recovered:
                state.unusable = True
        pipe.send(args.out_fd, EvaluateResult(verdict=verdict, worker_unusable=state.unusable))
        sys.stdout.flush()
        sys.stderr.flush()
        if state.unusable:
            return 3
        if memory is None:
            gc.collect()
        return None

    while True:
        try:
            req = receiver.recv()
        except pipe.ChannelClosed:
            return 0
        if isinstance(req, ShutdownRequest):
            return 0
        if (judge is not None) != isinstance(req, JudgeRequest | CompareRequest | TimeReferenceRequest):
            print(f"forge worker: a {req.kind} request to a {'judge' if judge else 'worker'}: refused", file=sys.stderr)
            return 2
        # the stage the parent's deadline is in as the request begins: it restarts after a wait for the gate
        state.gate.stage = _FIRST_STAGE.get(type(req).__name__, "load_task")
        with state.gate.shared():  # work on the device, beside other processes' but never beside a timing
            code = serve(req)
        if code is not None:
            return code


if __name__ == "__main__":
    sys.exit(main())
