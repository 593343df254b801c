"""Use case: where does a whole model spend its time? (`forge hotspots`, the editor's "Find hot spots").

Reads the entry (given, else ``[tool.forge] entry``), checks the device, runs the entry in a child process
(`hotspots.find_hotspots`) and, when asked, writes a task per hot module class from the captures
(`hotspots.extract_tasks`). Plain data in, plain data out; the CLI and the server render it.

For the editor: `entry_functions` (where "Find hot spots" is offered), `latest_report` (the workspace's last
report, read at start-up) and `tasks_of_report` (the extracted tasks on disk that hold that report's captures).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..hotspots import (
    EntryError,
    HotspotError,
    HotspotOptions,
    HotspotReport,
    Instance,
    ModuleClass,
    find_hotspots,
    parse_entry,
)
from ..hotspots import latest_report as _latest_report
from ..hotspots.entry import Entry, defined_entry_functions
from ..hotspots.extract import ExtractedTask, Extraction, extract_tasks
from .common import UseCaseError, check_device, find_workspace

__all__ = [
    "EntryFailed",
    "ExtractedTask",
    "Extraction",
    "HotspotReport",
    "HotspotsRequest",
    "HotspotsResult",
    "Instance",
    "ModuleClass",
    "entry_functions",
    "find_model_hotspots",
    "latest_report",
    "tasks_of_report",
]


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
    entry: Entry | None = None  # as resolved (its file's absolute path)
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
    try:  # a relative path: from the current folder, else from the workspace
        entry = parse_entry(text, cwd if request.entry else workspace)
    except EntryError as exc:
        try:
            entry = parse_entry(text, workspace)
        except EntryError:
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
    result = HotspotsResult(report=report, workspace=workspace, entry=entry)
    if request.extract:
        result.extraction = extract_tasks(report, workspace, classes=list(request.classes) or None)
    return result


def entry_functions(source: str) -> list[tuple[str, int]]:
    """The module-level functions of a file that look like entries (``build``, ``build_*``, ``make_model``,
    ``get_model``), each as (name, 0-based line), read from its AST: nothing is imported or run."""
    return defined_entry_functions(source)


def latest_report(workspace: Path) -> HotspotReport | None:
    """The workspace's last hot-spot report (``.forge/hotspots.json``), if there is one that reads."""
    return _latest_report(workspace)


def tasks_of_report(report: HotspotReport, workspace: Path) -> dict[str, Path]:
    """The extracted tasks under ``.forge/tasks/`` that hold this report's captures, by class key: those a
    later run (another entry, or the same one again) has not replaced. Read from the files, not run."""
    if not report.capture_folder:
        return {}
    run = Path(report.capture_folder).parent.name  # .forge/captures/<run>/captures
    folder = workspace / ".forge" / "tasks"
    out: dict[str, Path] = {}
    for key in report.targets:
        cls = report.cls(key)
        if cls is None:
            continue
        name = "".join(ch if ch.isalnum() else "_" for ch in cls.name)
        path = folder / f"{name if name[:1].isalpha() else 'm_' + name}.py"
        try:
            text = path.read_text(encoding="utf-8")
        except OSError:
            continue
        if f"/captures/{run}/" in text:
            out[key] = path
    return out
