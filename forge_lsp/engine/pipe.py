"""Typed messages between the engine and its worker processes.

Frames on a pipe: 4-byte big-endian length, then the JSON of one message. Candidate output
never shares these pipes: a worker's stdout/stderr go to its log file.
"""

from __future__ import annotations

import json
import os
import select
import struct
import time
from typing import Annotated, Literal

from pydantic import BaseModel, Field, TypeAdapter

from .candidate import Candidate
from .options import EvalOptions
from .task import Task
from .verdict import Status, Verdict


class EvaluateRequest(BaseModel):
    kind: Literal["evaluate"] = "evaluate"
    task: Task
    candidate: Candidate
    options: EvalOptions


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


Request = Annotated[EvaluateRequest | BuildRequest | PrepareRequest | ShutdownRequest, Field(discriminator="kind")]


class Hello(BaseModel):
    kind: Literal["hello"] = "hello"
    pid: int
    device: str
    device_name: str
    arch: str | None = None  # NVRTC/nvcc target, e.g. sm_90a
    capability: tuple[int, int] | None = None
    torch_version: str
    cuda_version: str | None = None


class StageStarted(BaseModel):
    kind: Literal["stage"] = "stage"
    stage: str


class EvaluateResult(BaseModel):
    kind: Literal["result"] = "result"
    verdict: Verdict
    worker_unusable: bool = False


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


Reply = Annotated[Hello | StageStarted | EvaluateResult | BuildResult | Prepared, Field(discriminator="kind")]

REQUEST = TypeAdapter(Request)
REPLY = TypeAdapter(Reply)
_HEADER = struct.Struct(">I")


class ChannelClosed(EOFError):
    """The other end of the pipe went away."""


def send(fd: int, message: BaseModel) -> None:
    data = message.model_dump_json().encode()
    buf = _HEADER.pack(len(data)) + data
    while buf:
        n = os.write(fd, buf)
        buf = buf[n:]


class Receiver:
    """Reads frames from a pipe fd, with an optional deadline per read."""

    def __init__(self, fd: int, adapter: TypeAdapter) -> None:
        self.fd = fd
        self.adapter = adapter
        self._buf = b""

    def _fill(self, n: int, deadline: float | None) -> bool:
        while len(self._buf) < n:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                ready, _, _ = select.select([self.fd], [], [], left)
                if not ready:
                    return False
            chunk = os.read(self.fd, max(65536, n - len(self._buf)))
            if not chunk:
                raise ChannelClosed()
            self._buf += chunk
        return True

    def recv(self, deadline: float | None = None):
        """The next message, or None when `deadline` (monotonic seconds) passes first."""
        if not self._fill(_HEADER.size, deadline):
            return None
        (length,) = _HEADER.unpack(self._buf[: _HEADER.size])
        if not self._fill(_HEADER.size + length, deadline):
            return None
        data = self._buf[_HEADER.size : _HEADER.size + length]
        self._buf = self._buf[_HEADER.size + length :]
        return self.adapter.validate_python(json.loads(data))
