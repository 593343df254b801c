"""What a child process and the forge process that starts it share: the typed request, and running a user's script.

A child that takes a request file (the graph probe, the sanitized call, the hot-spot runner, the whole-model check,
the profiled process, the roofline micro-benchmarks) has one pydantic model for it, a `ChildRequest` defined once in
a module both sides import. The parent builds it and writes it (`ChildRequest.write`: ``model_dump_json``); the child
reads it back (`read_request`, or `ChildRequest.read`), and a request it cannot use ends the child with one line
naming the field (`MalformedRequest`), never a traceback. Defaults live in the model only.

`run_script_as_main` runs a user's script as ``python script.py ARGS`` would, in the child that observes it.
`StageClock` times a child's stages for its result. `fit_cpu_threads` fits a CPU child's torch threads to the
cores it gets (torch is passed in, never imported here).

Standard library and pydantic only, and importing it starts nothing: every layer may use it.
"""

from __future__ import annotations

import os
import runpy
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar, overload

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

M = TypeVar("M", bound=BaseModel)


class StageClock:
    """Seconds per stage, into `stages`: each `mark(name)` records the time since the last mark (or since the
    clock was made), under `prefix` + name."""

    def __init__(self, stages: dict[str, float], prefix: str = "") -> None:
        self.stages, self.prefix, self._last = stages, prefix, time.perf_counter()

    def mark(self, name: str) -> None:
        now = time.perf_counter()
        self.stages[self.prefix + name] = round(now - self._last, 3)
        self._last = now


class MalformedRequest(SystemExit):
    """A request file the child cannot use. Its `code` is one line naming the file and the field (a `SystemExit`:
    raised out of a child's main, Python prints that line on stderr and exits with status 1)."""


class ChildRequest(BaseModel):
    """The request a child process reads: a field the child does not know is refused, not ignored."""

    model_config = ConfigDict(extra="forbid")

    def write(self, path: str | os.PathLike[str]) -> Path:
        """Write the request as JSON to `path`; returns the path (what the child's command line names)."""
        out = Path(path)
        out.write_text(self.model_dump_json(indent=1), encoding="utf-8")
        return out

    @classmethod
    def read(cls: type[M], path: str | os.PathLike[str]) -> M:
        """The request in `path`; `MalformedRequest` when it cannot be read or is not one of these."""
        return read_request(cls, path)


@overload
def read_request(kind: type[M], path: str | os.PathLike[str]) -> M: ...
@overload
def read_request(kind: Any, path: str | os.PathLike[str]) -> Any: ...
def read_request(kind: Any, path: str | os.PathLike[str]) -> Any:
    """The request of type `kind` (a model, or a union of models) in the file `path`. Raises `MalformedRequest`,
    whose one line names the file and the first field at fault, when the file cannot be read, is not JSON, or
    does not validate."""
    where = Path(path)
    name = kind.__name__ if isinstance(kind, type) else "request"
    try:
        text = where.read_text(encoding="utf-8")
    except OSError as exc:
        raise MalformedRequest(f"cannot read the {name} {where}: {exc.strerror or exc}") from None
    try:
        return TypeAdapter(kind).validate_json(text)
    except ValidationError as exc:
        raise MalformedRequest(f"malformed {name} {where}: {describe_error(exc)}") from None


def describe_error(exc: ValidationError) -> str:
    """A validation error in one line: the first field at fault and what is wrong with it, and how many more."""
    errors = exc.errors(include_url=False)
    if not errors:  # pragma: no cover - pydantic raises with at least one error
        return " ".join(str(exc).split())
    first = errors[0]
    message = " ".join(str(first.get("msg", "invalid")).split())
    field = _dotted(first.get("loc", ()))
    if not field and "discriminator" in first.get("ctx", {}):  # a union's tag: the field that names the kind
        field = str(first["ctx"]["discriminator"]).strip("'")
    line = f"field {field!r}: {message}" if field else message
    more = len(errors) - 1
    return line + (f" (and {more} more problem{'s' if more > 1 else ''})" if more else "")


def _dotted(loc: Sequence[int | str]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def run_script_as_main(path: str | os.PathLike[str], argv: Sequence[str] = ()) -> dict[str, Any]:
    """Run the user's script at `path` as ``python path ARGV...`` would: as the module ``__main__`` (its
    ``if __name__ == "__main__":`` part runs), with ``sys.argv`` its path and `argv`, and its own folder first on
    ``sys.path``, so that it imports the modules beside it. ``sys.argv`` and ``sys.path`` stay so after it returns
    (what it defined may import its neighbours later). What it raises, its `SystemExit` included, goes to the
    caller. Returns the script's globals."""
    script = os.fspath(path)
    sys.argv = [script, *argv]
    sys.path.insert(0, str(Path(script).parent))
    return runpy.run_path(script, run_name="__main__")


class CpuShare(BaseModel):
    """What `fit_cpu_threads` saw: torch's intra-op threads, the cores the process got while all of them worked,
    and the threads it set when that was fewer."""

    threads: int
    cores: float | None = None  # None: one thread, nothing to fit (not measured)
    fitted: int | None = None

    def says(self) -> str:
        """What a timing made under the fit says of it; "" where nothing was fitted (nothing to say)."""
        if self.fitted is None:
            return ""
        return (
            f"the CPU is busy: {self.threads} threads got {self.cores:.1f} cores, so this run used {self.fitted} "
            f"thread{'s' if self.fitted != 1 else ''} (threads that spin waiting for a core they do not get make "
            "every parallel op many times slower)"
        )


def fit_cpu_threads(torch: Any, probe_s: float = 0.05) -> CpuShare:
    """Fit torch's intra-op threads to the cores this process gets now, before anything runs or compiles.

    A process given fewer cores than it has threads (a busy machine: Linux shares the CPU between sessions, and
    each forge child is a session of its own) runs every OpenMP op many times slower: its threads wait spinning
    for a core another of them needs. Timings there say nothing of the code. Measured as process CPU time over
    wall time while torch's pool runs one parallel op after another (twice, the larger kept); when that is under
    the thread count by more than half a core, the threads are set to it, rounded (at least 1). One thread has
    nothing to fit: not measured (0.1 s saved)."""
    threads = torch.get_num_threads()
    if threads <= 1:
        return CpuShare(threads=threads)
    x = torch.rand(1 << 20)
    cores = 0.0
    for _ in range(2):
        cpu0, wall0 = time.process_time(), time.perf_counter()
        while time.perf_counter() - wall0 < probe_s:
            torch.sin(x, out=x)
        cores = max(cores, (time.process_time() - cpu0) / (time.perf_counter() - wall0))
    share = CpuShare(threads=threads, cores=round(cores, 2))
    if cores < threads - 0.5:
        share.fitted = max(1, min(threads - 1, int(cores + 0.5)))
        torch.set_num_threads(share.fitted)
    return share
