"""Run an entry in a child process and read back where its time went (`find_hotspots`).

The caller never imports torch or the user's code: the entry runs in ``python -m forge_lsp.hotspots.runner``,
started through `forge_lsp.sandbox` (the scrubbed child environment, its own process tree, a timeout, and a
cancel event that ends the tree at once). Its progress file is read while it runs. The report and the
captures land in ``.forge/captures/<run>/`` under the workspace; ``.forge/hotspots.json`` is the latest
report, for the editor.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..sandbox import child_env, default_cache_dir, run_sandboxed
from .entry import Entry
from .report import HotspotReport
from .requests import HotspotRequest

LATEST = Path(".forge") / "hotspots.json"


class HotspotError(RuntimeError):
    """The entry could not be profiled; the message says why (the user's own error, in its words)."""


@dataclass(frozen=True)
class HotspotOptions:
    device: str = "cpu"
    warmup: int = 2  # forwards before the profiled ones (function entries); their first calls are captured
    iterations: int = 5  # profiled forwards (function entries)
    top: int = 5  # classes to capture and rank as targets
    classes: tuple[str, ...] = ()  # more classes to capture, by key or name
    capture_calls: int = 2  # calls captured per hot instance
    capture_call_mb: int = 256  # largest inputs of one call that are captured
    capture_total_mb: int = 2048  # all captures of one run
    timeout_s: float = 1800.0
    extra_env: dict[str, str] = field(default_factory=dict)


def find_hotspots(
    entry: Entry,
    workspace: Path,
    options: HotspotOptions,
    *,
    cancel: threading.Event | None = None,
    on_progress: Callable[[str, int | None, int | None], None] | None = None,
    python: str | None = None,
    cache_dir: Path | None = None,
) -> HotspotReport:
    """Profile the entry's model; raises `HotspotError` when it cannot (the entry failed, timed out, was
    cancelled)."""
    import sys

    workspace = workspace.resolve()
    stamp = time.strftime("%Y%m%d-%H%M%S") + f"-{time.monotonic_ns() % 10**6:06d}"
    out = workspace / ".forge" / "captures" / stamp
    out.mkdir(parents=True, exist_ok=True)
    progress_file = out / "progress.jsonl"
    request = HotspotRequest(
        entry=entry,
        device=options.device,
        workspace=workspace,
        out=out,
        progress=progress_file,
        warmup=options.warmup,
        iterations=options.iterations,
        top=options.top,
        classes=list(options.classes),
        capture_calls=options.capture_calls,
        capture_call_mb=options.capture_call_mb,
        capture_total_mb=options.capture_total_mb,
    ).write(out / "request.json")
    cache = Path(cache_dir or default_cache_dir())
    env = child_env(options.device, cache, dict(options.extra_env))
    cmd = [python or sys.executable, "-m", "forge_lsp.hotspots.runner", str(request)]
    box: dict = {}
    worker = threading.Thread(
        target=lambda: box.setdefault(
            "run", run_sandboxed(cmd, env=env, cwd=workspace, timeout=options.timeout_s, cancel=cancel)
        ),
        name="forge-hotspots",
        daemon=True,
    )
    worker.start()
    seen = 0
    while worker.is_alive():
        worker.join(0.25)
        seen = _relay(progress_file, seen, on_progress)
    _relay(progress_file, seen, on_progress)
    run = box.get("run")
    if run is None:
        raise HotspotError("the hot-spot run could not start")
    if run.cancelled:
        raise HotspotError("cancelled")
    if run.timed_out:
        raise HotspotError(f"the entry did not finish within {options.timeout_s:g} s")
    error = out / "error.txt"
    if error.exists():
        raise HotspotError(f"the entry failed: {error.read_text().strip()}")
    report_file = out / "report.json"
    if run.returncode != 0 or not report_file.exists():
        raise HotspotError(f"the hot-spot run exited with code {run.returncode}: {run.output.strip()[-2000:]}")
    report = HotspotReport.model_validate_json(report_file.read_text())
    latest = workspace / LATEST
    latest.write_text(report_file.read_text())
    return report


def _relay(path: Path, seen: int, on_progress: Callable[[str, int | None, int | None], None] | None) -> int:
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return seen
    for line in lines[seen:]:
        try:
            step = json.loads(line)
        except ValueError:
            return seen  # a line being written: read it next time
        if on_progress is not None:
            on_progress(step["step"], step.get("done"), step.get("of"))
        seen += 1
    return seen


def latest_report(workspace: Path) -> HotspotReport | None:
    """The workspace's last hot-spot report, if any."""
    try:
        return HotspotReport.model_validate_json((workspace / LATEST).read_text())
    except (OSError, ValueError):
        return None
