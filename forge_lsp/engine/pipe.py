"""Typed messages between the engine and its worker processes.

Frames on a pipe: 4-byte big-endian length, then the JSON of one message; a message that carries data
(`WithData`: packed tensors, `harness.wire`) is followed by its `nbytes` raw bytes. Candidate output
never shares these pipes: a worker's stdout/stderr go to its log file.
"""

from __future__ import annotations

import errno
import json
import os
import select
import struct
import time
from collections.abc import Callable
from typing import Annotated, Literal

from pydantic import BaseModel, Field, PrivateAttr, TypeAdapter

from .candidate import Candidate
from .options import EvalOptions
from .task import Task
from .verdict import Mismatch, Status, Verdict


class WithData(BaseModel):
    """A message followed on the pipe by `nbytes` bytes of data (set with `with_data`, read as `data`)."""

    nbytes: int = 0
    _data: bytes | bytearray = PrivateAttr(default=b"")
    #: set by the receiving `Receiver` only (never read from the sender's JSON): the data went on to another pipe
    #: (`Receiver.route`), not into `data`; `_relay_failed`: not all of it did
    _relayed: bool = PrivateAttr(default=False)
    _relay_failed: bool = PrivateAttr(default=False)

    @property
    def relayed(self) -> bool:
        return self._relayed

    @property
    def relay_failed(self) -> bool:
        return self._relay_failed

    @property
    def data(self) -> bytes | bytearray:
        return self._data

    def with_data(self, data: bytes | bytearray):
        self._data, self.nbytes = data, len(data)
        return self


#: the judge's input sets a worker keeps for the next request of the same draw, in packed bytes at most
JUDGED_KEPT_BYTES = 2 << 30


class Sealed(BaseModel):
    """Data in a sealed memory file the judge holds (`engine.sealed`), mapped by its path instead of sent."""

    path: str
    nbytes: int


class EvaluateRequest(WithData):
    """Evaluate a candidate. Its data, when any, is the judged input sets (`harness.wire`, a list of input lists)
    drawn by the judge: the worker runs the candidate on each and sends its outputs back as `JudgedOutputs`."""

    kind: Literal["evaluate"] = "evaluate"
    task: Task
    candidate: Candidate
    options: EvalOptions
    #: another process on the device (the worker's judge) took or gave back device memory since the last evaluation:
    #: the worker measures the level its candidates must give memory back to again
    device_shared: bool = False
    #: the device's memory bandwidth in bytes per ms as the judge measured it (`impossible_timing`), None: unknown
    bandwidth: float | None = None
    #: which of the judge's draws the judged input sets are: a worker keeps the last ones it was sent, and a request
    #: for the same draw comes without data (the sets of a task are the same for all its candidates)
    judged_key: str = ""
    #: the judge is drawing the sets as the evaluation starts: they follow on the pipe (`JudgedSets`), read when the
    #: worker first needs them
    judged_follow: bool = False
    #: the judged input sets in the judge's sealed file, in place of the data
    judged_sealed: Sealed | None = None

    @property
    def judged_bytes(self) -> int:
        """The judged input sets' packed size sent with this request, in the data or sealed (0: none sent)."""
        return self.judged_sealed.nbytes if self.judged_sealed is not None else self.nbytes


class JudgedSets(WithData):
    """To a worker, mid-evaluation (`EvaluateRequest.judged_follow`): the judge's input sets (data), drawn while the
    evaluation ran; or, not `ok`, why there are none."""

    kind: Literal["judged_sets"] = "judged_sets"
    key: str = ""
    ok: bool = True
    reason: str = ""
    bandwidth: float | None = None  # as in `EvaluateRequest`
    sealed: Sealed | None = None  # the sets in the judge's sealed file, in place of the data


class BuildRequest(BaseModel):
    """Execute the candidate module only, so compile caches fill without touching a GPU."""

    kind: Literal["build"] = "build"
    candidate: Candidate
    #: the device's target (``sm_90a``) and torch's arch list (``9.0``) to compile for: a build worker has no GPU,
    #: and it may start before the device's worker has said what the device is
    arch: str | None = None
    arch_list: str | None = None


class PrepareRequest(BaseModel):
    """Load a task and draw its inputs ahead of its candidates (while their sources build elsewhere); the
    worker keeps them for the candidates' evaluations."""

    kind: Literal["prepare"] = "prepare"
    task: Task
    options: EvalOptions
    reference: bool = False  # also build the task's model and call it once


class ShutdownRequest(BaseModel):
    kind: Literal["shutdown"] = "shutdown"


class JudgeRequest(BaseModel):
    """To a judge (a worker that never loads candidate code): draw `sets` input sets of the task at its own sizes,
    from seeds of the OS's randomness that never leave the judge, and keep the reference's outputs on them.
    Replied to with `JudgeReady`, whose data are the input sets."""

    kind: Literal["judge"] = "judge"
    task: Task
    options: EvalOptions
    sets: int = 2
    max_bytes: int = 256 << 20  # the input sets' packed size at most: larger, the judge says it cannot judge
    keep: list[str] = []  # the other tasks (shas) whose sets the parent still holds: the judge drops all others
    #: the sets in a sealed memory file the workers map (`JudgeReady.sealed`), not in the reply's data
    sealed: bool = False


class TimeReferenceRequest(BaseModel):
    """To a judge: time the reference of a task it holds alone, now (replied to with `ReferenceTimes`)."""

    kind: Literal["time_reference"] = "time_reference"
    task_sha: str
    l2_flush: bool = True


class ReferenceTimes(BaseModel):
    kind: Literal["reference_times"] = "reference_times"
    ms: list[float] = []  # empty: the judge holds no such task


class CompareRequest(WithData):
    """To a judge: a candidate's outputs (data) on judged input set `index`; replied to with `Compared`."""

    kind: Literal["compare"] = "compare"
    task_sha: str
    index: int
    held: bool = False  # no data: compare the outputs the judge holds for this set (`HoldRequest`)


class HoldRequest(WithData):
    """To a judge: a candidate's outputs (data) on judged input set `index`, streamed from the candidate's worker as it
    sends them (`Receiver.route`); the judge keeps them for the `CompareRequest` after the evaluation, so they cross
    the host once and the comparison waits for no copy. Replied to with `Held`."""

    kind: Literal["hold"] = "hold"
    task_sha: str
    index: int


Request = Annotated[
    EvaluateRequest
    | BuildRequest
    | PrepareRequest
    | ShutdownRequest
    | JudgeRequest
    | CompareRequest
    | HoldRequest
    | JudgedSets
    | TimeReferenceRequest,
    Field(discriminator="kind"),
]


class Hello(BaseModel):
    kind: Literal["hello"] = "hello"
    pid: int
    device: str
    device_name: str
    arch: str | None = None  # NVRTC/nvcc target, e.g. sm_90a
    capability: tuple[int, int] | None = None
    torch_version: str
    cuda_version: str | None = None
    #: the driver tells this process's device memory apart from other processes' (NVML): a device may then run
    #: several lanes, each worker's memory measured on its own (`LocalPool`)
    own_memory: bool = False


class StageStarted(BaseModel):
    kind: Literal["stage"] = "stage"
    stage: str


class EvaluateResult(BaseModel):
    kind: Literal["result"] = "result"
    verdict: Verdict
    worker_unusable: bool = False
    #: why the judge's sealed sets could not be mapped (its judge ended since it drew them): no judged call ran, and
    #: the candidate is evaluated again beside a new judge, not failed for it
    judged_unmapped: str = ""


class BuildResult(BaseModel):
    kind: Literal["built"] = "built"
    ok: bool
    compile_error: bool = False
    reason: str = ""
    traceback: str = ""
    seconds: float = 0.0
    #: each load_inline build tried, in order: (header set, seconds, built?); more than one: a header fallback
    attempts: list[tuple[str, float, bool]] = []


class Prepared(BaseModel):
    kind: Literal["prepared"] = "prepared"
    ok: bool
    reason: str = ""  # why not: the evaluations will say it again, as verdicts
    #: set when the worker was killed (the task's code hung or crashed it): evaluating would do it again
    killed: Status | None = None
    traceback: str = ""
    log_excerpt: str = ""
    seconds: float = 0.0


class JudgedOutputs(WithData):
    """From a worker, mid-evaluation: the candidate's outputs (data) on judged input set `index`, sent as soon as
    the call returned, for the judge to compare."""

    kind: Literal["judged"] = "judged"
    index: int
    _held: bool = PrivateAttr(default=False)  # (the parent's) relayed, and the judge said it holds them whole


class JudgeReady(WithData):
    """From a judge: the input sets (data) it keeps the reference's outputs for, or why it cannot judge."""

    kind: Literal["judge_ready"] = "judge_ready"
    ok: bool
    sets: int = 0
    reason: str = ""
    bandwidth: float | None = None  # the device's copy bandwidth, bytes per ms, measured in the judge
    ref_ms: list[float] = []  # the reference timed alone on the first set (ms per call), with the worker's timer
    seconds: float = 0.0
    #: where the draw's seconds went, in the judge: "load", "sets", "time_reference", "bandwidth", "pack"
    stages: dict[str, float] = {}
    key: str = ""  # set by the parent: which draw these sets are (`EvaluateRequest.judged_key`)
    sealed: Sealed | None = None  # the sets in the judge's sealed file, in place of the data

    @property
    def size(self) -> int:
        """The input sets' packed size, in the data or sealed."""
        return self.sealed.nbytes if self.sealed is not None else self.nbytes


class Held(BaseModel):
    kind: Literal["held"] = "held"
    index: int


class Compared(BaseModel):
    kind: Literal["compared"] = "compared"
    passed: bool
    unheld: bool = False  # the judge holds no such set (it was started again since): nothing was compared
    detail: str = ""
    mismatch: Mismatch | None = None
    seconds: float = 0.0


Reply = Annotated[
    Hello
    | StageStarted
    | EvaluateResult
    | BuildResult
    | Prepared
    | JudgedOutputs
    | JudgeReady
    | Compared
    | Held
    | ReferenceTimes,
    Field(discriminator="kind"),
]

REQUEST = TypeAdapter(Request)
REPLY = TypeAdapter(Reply)
_HEADER = struct.Struct(">I")


class ChannelClosed(EOFError):
    """The other end of the pipe went away."""


class Oversized(ChannelClosed):
    """A message announced more data than the receiver takes: the sender is not trusted any further."""


def _write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    view = memoryview(data).cast("B")
    while view:
        n = os.write(fd, view)
        view = view[n:]


def send(fd: int, message: BaseModel, with_data: bool = True) -> None:
    """Write a message, then its data (without `with_data`, the sender writes the `nbytes` announced itself)."""
    data = message.model_dump_json().encode()
    _write_all(fd, _HEADER.pack(len(data)) + data)
    if with_data and isinstance(message, WithData) and message.nbytes:
        _write_all(fd, message.data)


class Receiver:
    """Reads frames from a pipe fd, with an optional deadline per read. A message's data longer than `max_data`
    bytes is `Oversized`."""

    def __init__(self, fd: int, adapter: TypeAdapter, max_data: int = 1 << 40) -> None:
        self.fd = fd
        self.adapter = adapter
        self.max_data = max_data
        #: where a message's data goes instead of into its buffer: called with each message that has data, it gives
        #: a pipe fd to stream the data to (kernel to kernel where the OS can) or None to keep it here. A relayed
        #: message arrives without its data, `relayed` set; one whose fd stopped taking it, `relay_failed` too
        self.route: Callable[[WithData], int | None] | None = None
        self._buf = bytearray()
        self._pending: WithData | None = None  # a message whose data is still arriving
        self._data = bytearray()
        self._filled = 0
        self._out: int | None = None  # the pending message's data goes there (`route`)
        self._out_failed = False

    def _wait(self, deadline: float | None) -> bool:
        if deadline is None:
            return True
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        ready, _, _ = select.select([self.fd], [], [], left)
        return bool(ready)

    def _fill(self, n: int, deadline: float | None) -> bool:
        while len(self._buf) < n:
            if not self._wait(deadline):
                return False
            chunk = os.read(self.fd, max(65536, n - len(self._buf)))
            if not chunk:
                raise ChannelClosed()
            self._buf += chunk
        return True

    def _fill_data(self, deadline: float | None) -> bool:
        """Read the pending message's data into its own buffer, straight from the pipe."""
        if self._filled == 0 and self._buf:
            take = min(len(self._buf), len(self._data))
            self._data[:take] = self._buf[:take]
            del self._buf[:take]
            self._filled = take
        view = memoryview(self._data)
        while self._filled < len(self._data):
            if not self._wait(deadline):
                return False
            n = os.readv(self.fd, [view[self._filled : self._filled + (8 << 20)]])
            if not n:
                raise ChannelClosed()
            self._filled += n
        return True

    def recv(self, deadline: float | None = None):
        """The next message, or None when `deadline` (monotonic seconds) passes first."""
        if self._pending is None:
            if not self._fill(_HEADER.size, deadline):
                return None
            (length,) = _HEADER.unpack(self._buf[: _HEADER.size])
            if not self._fill(_HEADER.size + length, deadline):
                return None
            data = bytes(self._buf[_HEADER.size : _HEADER.size + length])
            del self._buf[: _HEADER.size + length]
            msg = self.adapter.validate_python(json.loads(data))
            if not isinstance(msg, WithData) or msg.nbytes <= 0:
                return msg
            if msg.nbytes > self.max_data:
                raise Oversized(f"{type(msg).__name__} announced {msg.nbytes} bytes of data, over {self.max_data}")
            self._out = self.route(msg) if self.route is not None else None
            self._out_failed = False
            self._pending, self._data, self._filled = msg, bytearray(0 if self._out is not None else msg.nbytes), 0
        if self._out is not None:
            if not self._stream(deadline):
                return None
            msg, self._pending, self._out = self._pending, None, None
            msg._relayed, msg._relay_failed = True, self._out_failed
            return msg
        if not self._fill_data(deadline):
            return None
        msg, self._pending = self._pending, None
        msg._data, self._data = self._data, bytearray()
        return msg

    def _stream(self, deadline: float | None) -> bool:
        """Move the pending message's data to `_out` as it arrives: spliced pipe to pipe (no copy here), else read and
        written. Where `_out` stops taking it (its reader ended), the rest is read and dropped: the channel stays in
        step, and the message says the relay failed."""
        assert self._pending is not None and self._out is not None
        total = self._pending.nbytes
        if self._filled == 0 and self._buf:
            take = min(len(self._buf), total)
            self._relay(bytes(self._buf[:take]))
            del self._buf[:take]
            self._filled = take
        while self._filled < total:
            if not self._wait(deadline):
                return False
            want = min(total - self._filled, 1 << 20)
            n = 0
            if not self._out_failed and _SPLICE is not None:
                try:
                    n = _SPLICE(self.fd, self._out, want)
                except BrokenPipeError:
                    self._out_failed = True
                    continue
                except OSError as exc:
                    if exc.errno not in (errno.EINVAL, errno.ENOSYS):
                        raise
                    _no_splice()
                    continue
            else:
                chunk = os.read(self.fd, want)
                n = len(chunk)
                if n:
                    self._relay(chunk)
            if not n:
                raise ChannelClosed()
            self._filled += n
        return True

    def _relay(self, chunk: bytes) -> None:
        if self._out_failed or self._out is None:
            return
        try:
            _write_all(self._out, chunk)
        except BrokenPipeError:
            self._out_failed = True


_SPLICE: Callable[[int, int, int], int] | None = getattr(os, "splice", None)


def _no_splice() -> None:
    """The OS refused to splice these pipes: read and write from now on."""
    global _SPLICE
    _SPLICE = None
