"""What every use case shares: the error a person can act on, where a workspace is, whether this machine has
the device asked for, and the user's own file names in what a worker printed."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..engine import Candidate, Task


class UseCaseError(Exception):
    """A request that cannot be carried out as asked (a missing file, no such class or kernel, a bad
    configuration). Its message says what to change; adapters show it (the CLI exits 2)."""


def find_workspace(path: Path) -> Path:
    """The nearest folder above `path` with pyproject.toml, forge.toml, .forge or .git; else its folder.
    That folder's `.forge/` keeps the runs, and its configuration applies."""
    start = path.resolve().parent if path.is_file() or path.suffix else path.resolve()
    for folder in (start, *start.parents):
        if any((folder / marker).exists() for marker in ("forge.toml", "pyproject.toml", ".forge", ".git")):
            return folder
    return start


DEVICES = "cpu, cuda, cuda:N or auto"


def _visible_gpus() -> int | None:
    """How many NVIDIA GPUs this process may use, read without torch (0: none; None: there is a driver but
    the count cannot be read)."""
    from ..engine.devices import visible_gpu_count

    return visible_gpu_count()


def check_device(device: str) -> str:
    """`device` as given (cpu, cuda, cuda:N, auto) when this machine has it; else a `UseCaseError` that says
    what is wrong in one line. Called before any work, so that a wrong device is not found out by a worker."""
    name = device.strip().lower()
    if name in ("auto", "cpu"):
        return name
    kind, _, index = name.partition(":")
    if kind != "cuda" or (index and not index.isdigit()):
        raise UseCaseError(f"unknown device {device!r}: use {DEVICES}")
    gpus = _visible_gpus()
    if gpus == 0:
        raise UseCaseError(
            f"device {device!r}: no NVIDIA GPU here (no NVIDIA driver, or CUDA_VISIBLE_DEVICES hides them); use cpu"
        )
    if index and gpus is not None and int(index) >= gpus:
        plural = "s" if gpus != 1 else ""
        raise UseCaseError(
            f"device {device!r}: this machine has {gpus} visible GPU{plural} (cuda:0 to cuda:{gpus - 1})"
        )
    return name


def user_paths(text: str, files: Mapping[str, str | Path]) -> str:
    """`text` (a worker's traceback or log) with the worker's copies of the user's files named by the user's own
    paths: `files` maps a worker module's file name (`engine.logparse.worker_module_name`) to the user's path."""
    import re

    for module, path in files.items():
        user_file = str(path)
        text = re.sub(r'[^\s"\'(]*' + re.escape(module), lambda _m: user_file, text)  # noqa: B023 (used at once)
    return text


def worker_copies(task: Task, candidate: Candidate | None = None) -> dict[str, str]:
    """The file names of the worker's copies of the task's (and the candidate's) source, each with the user's file it
    copies: what tracebacks and a profiler's hot lines (a Triton kernel's) name."""
    from ..engine.logparse import worker_module_name

    files = {worker_module_name(task.source, "task"): str(task.path)}
    if candidate is not None and candidate.path is not None:
        files[worker_module_name(candidate.source, "candidate")] = str(candidate.path)
    return files


def task_paths(text: str, task: Task, candidate: Candidate | None = None) -> str:
    """`text` with the worker's copies of the task's (and the candidate's) source named by the user's files."""
    return user_paths(text, worker_copies(task, candidate))


def failure_line(log: str, task: Task) -> int | None:
    """The line of the user's task file where `log` (a traceback, or faulthandler's stack after a crash) says the
    user's code failed, if it says so."""
    from ..engine.logparse import traceback_error, worker_module_name

    error = traceback_error(log, [task.path, worker_module_name(task.source, "task")])
    return error.line if error else None
