"""Use case: where does a whole model spend its time? (`forge hotspots`, the editor's "Find hot spots").

Reads the entry (given, else ``[tool.forge] entry``), checks the device, runs the entry in a child process
(`hotspots.find_hotspots`) and, when asked, writes a task per hot module class from the captures
(`hotspots.extract_tasks`). Plain data in, plain data out; the CLI and the server render it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..hotspots import EntryError, HotspotError, HotspotOptions, HotspotReport, find_hotspots, parse_entry
from ..hotspots.extract import Extraction, extract_tasks
from .common import UseCaseError, check_device, find_workspace


class EntryFailed(UseCaseError):
    """The request was good, but running the entry failed (its own error, a timeout, a cancel)."""


@dataclass(frozen=True)
class HotspotsRequest:
    entry: str | None = None  # None: the workspace's [tool.forge] entry
    workspace: Path | None = None  # None: the project around the entry (or the current folder)
    device: str = "auto"  # "auto": the configured device, else the first GPU, else the CPU
    warmup: int = 2
    iterations: int = 5
    top: int = 5
    classes: tuple[str, ...] = ()
    capture_calls: int = 2
    capture_mb: int = 2048
    extract: bool = False
    timeout_s: float = 1800.0
    cache_dir: Path | None = None


@dataclass
class HotspotsResult:
    report: HotspotReport
    workspace: Path
    extraction: Extraction | None = None
    notes: list[str] = field(default_factory=list)


def find_model_hotspots(
    request: HotspotsRequest,
    *,
    on_progress: Callable[[str, int | None, int | None], None] | None = None,
    cancel: threading.Event | None = None,
) -> HotspotsResult:
    """Profile the entry's model and capture its hot modules. `UseCaseError` says in one line what is wrong
    with the request; `EntryFailed`, what happened to the run (the entry's own error, in its words)."""
    from ..agent.config import ConfigError, load_config

    cwd = Path.cwd()
    text = request.entry
    guess = Path(text.split(":")[0]) if text else cwd
    workspace = (request.workspace or find_workspace(guess if guess.exists() else cwd)).resolve()
    try:
        config = load_config(workspace)
    except ConfigError as exc:
        raise UseCaseError(str(exc)) from exc
    text = text or config.entry
    if not text:
        raise UseCaseError(
            "no entry: give a script (train.py) or a function returning (model, args) (models.py:build), or set "
            "entry under [tool.forge]"
        )
    try:
        entry = parse_entry(text, cwd if request.entry else workspace)
    except EntryError as exc:
        raise UseCaseError(str(exc)) from exc
    device = check_device(request.device if request.device != "auto" else config.device)
    if device == "auto":
        from ..engine.evaluate import resolve_device

        device = resolve_device("auto")
    options = HotspotOptions(
        device=device,
        warmup=request.warmup,
        iterations=request.iterations,
        top=request.top,
        classes=request.classes,
        capture_calls=request.capture_calls,
        capture_total_mb=request.capture_mb,
        timeout_s=request.timeout_s,
    )
    try:
        report = find_hotspots(
            entry, workspace, options, cancel=cancel, on_progress=on_progress, cache_dir=request.cache_dir
        )
    except HotspotError as exc:
        raise EntryFailed(str(exc)) from exc
    result = HotspotsResult(report=report, workspace=workspace)
    if request.extract:
        result.extraction = extract_tasks(report, workspace, classes=list(request.classes) or None)
    return result
