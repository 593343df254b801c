"""The worker's state between requests, and what its parts share: a stage's failure (`StageFailed`), the input sets
(`InputCase`) and kept outputs (`Kept`) of an evaluation, the task's inputs kept for its next candidates
(`WorkerState`), and the tracebacks and one-line reasons a verdict carries. Runs in the worker process only."""

from __future__ import annotations

import os
import random
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..harness.gate import NoGate
from ..verdict import InputSpec, Mismatch, Status

_TB_LIMIT = 8000


_FORGE_DIR = str(Path(__file__).resolve().parents[2]) + os.sep  # forge_lsp/: the harness's own frames


_FORGE_DIR = str(Path(__file__).resolve().parents[2]) + os.sep  # forge_lsp/: the harness's own frames
_MODULE_PY, _MODULE_CALL = os.path.join("torch", "nn", "modules", "module.py"), ("_wrapped_call_impl", "_call_impl")


def traceback_text(exc: BaseException) -> str:
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


def exception_line(exc: BaseException) -> str:
    msg = str(exc).strip().splitlines()
    first = msg[0] if msg else ""
    return f"{type(exc).__name__}: {first}"[:500]


STICKY_ERRORS = (
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
        from ..harness.checks import bits_digest
        from ..harness.probes import tensor_bytes

        self.digest = bits_digest(self.out)
        self.nbytes = tensor_bytes(self.out)


@dataclass
class Models:
    ref: Any
    cand: Any
    compatible: bool
    note: str = ""


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
    gate: Any = field(default_factory=NoGate)
    _drawn_sizes: dict[tuple[Any, ...], int] = field(default_factory=dict)
    _task_order: list[str] = field(default_factory=list)  # task shas, the one used last at the end

    DRAWN_LIMIT = 8 << 30  # bytes kept at most; larger input sets are drawn again for each candidate
    #: the judge's input sets last sent (`EvaluateRequest.judged_key`, their packed bytes or the judge's sealed file
    #: mapped), up to `pipe.JUDGED_KEPT_BYTES`
    judged: tuple[str, Any] | None = None
    judged_unmapped: str = ""  # why the judge's sets for the evaluation in hand could not be mapped, if they could not
    receiver: Any = None  # the worker's `pipe.Receiver` of requests
    #: the operators each task's reference dispatches (`harness.checks.watch_reference_ops`), by task sha
    reference_ops: dict[str, list[str]] = field(default_factory=dict)
    threads0: int | None = None  # torch's intra-op threads as the worker started (`fit_threads`)

    def fit_threads(self, torch: Any) -> Any:
        """(CPU, before an evaluation that times.) torch's threads fitted to the cores the worker gets now
        (`child.fit_cpu_threads`, from the worker's own count each time): on a busy machine, threads spinning for a
        core another of them needs make the reference's parallel ops many times slower, a single-threaded
        candidate's not. The fit is hidden from the code that runs (`harness.checks.thread_view`)."""
        from ...child import fit_cpu_threads
        from ..harness.checks import thread_view

        if self.threads0 is None:
            self.threads0 = torch.get_num_threads()
        thread_view(self.threads0, None)
        share = fit_cpu_threads(torch)
        thread_view(self.threads0, share.fitted)
        return share

    def take_judged(self, key: str, data: Any, sealed: Any) -> Any:
        """The judge's sets as a request or `JudgedSets` brings them (`judged_data`), kept for the next request of
        their draw up to the size kept; None where its sealed file cannot be mapped (its judge ended since it drew
        them): why is in `judged_unmapped`, which the evaluation's result says."""
        from ..pipe import JUDGED_KEPT_BYTES

        try:
            data = judged_data(data, sealed)
        except RuntimeError as exc:
            self.judged, self.judged_unmapped = None, str(exc)
            return None
        self.judged = (key, data) if 0 < len(data) <= JUDGED_KEPT_BYTES else None
        return data

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


def seed_all(torch: Any, seed: int) -> None:
    """The generators a task's `get_inputs()` may draw from: torch's, Python's, NumPy's (if it is loaded)."""
    torch.manual_seed(seed)
    random.seed(seed)
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed(seed % (2**32))


def input_specs_of(cases: list[Any], torch: Any) -> list[InputSpec]:
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


def judged_data(data: Any, sealed: Any) -> Any:
    """The judge's packed input sets as a request or `JudgedSets` brings them: its data, or the judge's sealed file
    (`pipe.Sealed`) mapped read-only. `RuntimeError` where that file cannot be mapped (forge's own trouble)."""
    if sealed is None:
        return data
    from ..sealed import open_sealed

    try:
        return open_sealed(sealed.path, sealed.nbytes)
    except OSError as exc:
        raise RuntimeError(f"the judge's input sets could not be mapped: {exc}") from exc
