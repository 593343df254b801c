"""Whole-model hot spots in the editor.

"Find hot spots" on each entry function of a Python file (``build``, ``build_*``, ``make_model``,
``get_model``) runs `forge.hotspots`: the hot-spot use case (`usecases.hotspots.find_model_hotspots`, which
runs the model in a child process) as a background job, with extraction, so that each hot class gets a task
of its captured inputs. The latest report (that run's, or ``.forge/hotspots.json`` at start-up) puts on each
hot class of the workspace's own files a lens and a hover with its share of the model's time, marked stale
once its file changes; "Optimize (captured inputs)" (`forge.optimizeCaptured`) runs the optimize job on the
task extracted for it, and offers its answer as the guarded rewrite of the user's class (Accept: one versioned
edit). Classes in library files get nothing: they are not the user's to edit.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections import OrderedDict
from dataclasses import replace
from pathlib import Path
from typing import Any

from lsprotocol import types as t

from ..feature import Unit, lens
from ..protocol import EntryArgs, JobStarted, TargetArgs, positional, wire
from ..server import ForgeServer, indexed
from ..state import BackgroundJob, HotClass, HotspotView, text_sha
from . import jobs

STALE = "(stale: changed since the hot-spot run)"
CAPTURED = "optimize (captured inputs)"  # the kind of the numbers an Optimize (captured inputs) run leaves
#: how far a run is at the start of each of the hot-spot child's steps (and, for counted steps, at their end)
_STEPS = {
    "importing torch": (2, 10),
    "building the model": (10, 20),
    "running the script": (20, 80),
    "warming up": (20, 40),
    "profiling": (40, 80),
    "attributing time": (80, 88),
    "saving captures": (88, 95),
}

_entries: OrderedDict[str, list[tuple[str, int]]] = OrderedDict()  # text sha -> entry functions (a small cache)
_entries_lock = threading.Lock()


def register(ls: ForgeServer) -> None:
    @ls.command("forge.hotspots")
    def hotspots(ls: ForgeServer, *args: Any) -> dict[str, Any]:
        a = positional(EntryArgs, args)
        return wire(start_hotspots(ls, a.uri, a.function))

    @ls.command("forge.optimizeCaptured")
    def optimize_captured(ls: ForgeServer, *args: Any) -> dict[str, Any]:
        a = positional(TargetArgs, args)
        return wire(start_optimize_captured(ls, a.uri, a.name))


# ---------------------------------------------------------------------------------------- lenses
def entry_functions(text: str) -> list[tuple[str, int]]:
    """The file's entry functions, from its AST, cached by text (lenses are asked for on every edit)."""
    from ...usecases.hotspots import entry_functions as find

    sha = text_sha(text)
    with _entries_lock:
        if sha in _entries:
            _entries.move_to_end(sha)
            return _entries[sha]
    found = find(text)
    with _entries_lock:
        _entries[sha] = found
        while len(_entries) > 64:
            _entries.popitem(last=False)
    return found


def lenses(ls: ForgeServer, uri: str) -> list[t.CodeLens]:
    """ "Find hot spots" on the entry functions; on each hot class of the latest report, its share of the
    model's time (a label) and, when the run extracted its task, "Optimize (captured inputs)"."""
    path = ls.path_of(uri)
    if path is None or not path.endswith(".py"):
        return []
    text = ls.doc_text(uri)
    if text is None:
        return []
    out = [lens(line, "forge: Find hot spots", "forge.hotspots", [uri, name]) for name, line in entry_functions(text)]
    for hot, line, stale in hot_classes_of(ls, path, text):
        out.append(lens(line, f"forge: {hot.summary}" + (f" {STALE}" if stale else ""), "", []))
        if hot.task is not None:
            out.append(lens(line, "Optimize (captured inputs)", "forge.optimizeCaptured", [uri, hot.name]))
    return out


def hot_classes_of(ls: ForgeServer, path: str, text: str) -> list[tuple[HotClass, int, bool]]:
    """The latest report's hot classes defined in this file: each with its class line in `text` (the
    report's line, or where the class is now) and whether the file changed since the report."""
    with ls.state.lock:
        view = ls.state.hotspots
        classes = view.in_file(os.path.realpath(path)) if view is not None else []
    if not classes:
        return []
    stale = text_sha(text) != classes[0].doc_sha
    lines = text.splitlines()
    out = []
    for hot in classes:
        line = class_line(lines, hot.name, hot.line)
        if line is not None:
            out.append((hot, line, stale))
    return out


def class_line(lines: list[str], name: str, hint: int) -> int | None:
    """The 0-based line of ``class <name>`` in a file: the report's line if it still is, else the nearest."""
    pattern = re.compile(rf"\s*class\s+{re.escape(name)}\b")
    if 0 <= hint < len(lines) and pattern.match(lines[hint]):
        return hint
    found = [i for i, line in enumerate(lines) if pattern.match(line)]
    return min(found, key=lambda i: abs(i - hint)) if found else None


# ----------------------------------------------------------------------------------------- hover
def hover_text(ls: ForgeServer, uri: str, line: int) -> tuple[str, str] | None:
    """(class name, Markdown) for a hot class's line: its share of the model's time, its top instances, the
    entry and the run it came from, and what was extracted for it."""
    path = ls.path_of(uri)
    text = ls.doc_text(uri) if path else None
    if path is None or text is None:
        return None
    hit = next(((h, stale) for h, at, stale in hot_classes_of(ls, path, text) if at == line), None)
    with ls.state.lock:
        view = ls.state.hotspots
    if hit is None or view is None:
        return None
    hot, stale = hit
    report = view.report
    where = report.device_name or report.device
    head = f"**forge: {hot.name}** · hot spot of `{view.entry}`, {_age(time.time() - view.when)} ago"
    if stale:
        head += f" — **{STALE.strip('()')}**"
    lines = [
        head,
        "",
        f"- {hot.summary}",
        f"- the model, {report.model}: {report.model_ms:.3f} ms per forward on {where} "
        f"({report.timer} time of its ops, {report.iterations} profiled forwards)",
    ]
    instances = sorted(report.instances_of(hot.key), key=lambda i: -i.total_ms)
    if instances:
        lines.append(
            "- top instances: "
            + ", ".join(f"`{i.name}` {i.total_pct:.1f}% ({i.self_pct:.1f}% own)" for i in instances[:3])
            + (f", and {len(instances) - 3} more" if len(instances) > 3 else "")
        )
    if hot.task is not None:
        task = Path(hot.task)
        shown = os.path.relpath(task, view.workspace) if task.is_relative_to(view.workspace) else str(task)
        lines.append(f"- its captured inputs are the task `{shown}`: **Optimize (captured inputs)** runs on it")
    elif hot.not_extracted:
        lines.append(f"- no task extracted: {hot.not_extracted}")
    ran = [r for r in ls.state.result_for(uri, hot.name) if r.kind == CAPTURED]
    if ran:
        lines.append(f"- last Optimize (captured inputs): {max(ran, key=lambda r: r.when).note}")
    return hot.name, "\n".join(lines)


def _age(seconds: float) -> str:
    if seconds < 90:
        return f"{max(seconds, 0):.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


# ---------------------------------------------------------------------------------- the report
def view_of(
    ls: ForgeServer,
    report: Any,
    workspace: Path,
    tasks: dict[str, Path],
    skipped: dict[str, str],
    since: float,
    job_id: str | None = None,
) -> HotspotView:
    """What the editor shows of a report: its classes defined in the workspace's files (not a library's),
    each with the text hash of its file now, or "" for a file written since `since` (the run, or the
    report, began: what it measured is not what is there)."""
    root = Path(os.path.realpath(ls.root or workspace))
    entry = report.entry
    where, sep, function = entry.partition(":")
    if sep and os.path.isabs(where) and Path(os.path.realpath(where)).is_relative_to(root):
        entry = f"{os.path.relpath(os.path.realpath(where), root)}:{function}"
    view = HotspotView(report=report, entry=entry, workspace=workspace, when=time.time(), job_id=job_id)
    shas: dict[str, str] = {}
    for cls in report.classes:
        file = os.path.realpath(cls.file) if cls.file else None
        if cls.library or not file or not cls.line or not indexed(root, file):
            continue
        if file not in shas:
            shas[file] = _sha_of_file(file, since)
        view.classes.append(
            HotClass(
                key=cls.key,
                name=cls.name.rsplit(".", 1)[-1],
                path=file,
                line=cls.line - 1,
                summary=cls.summary(),
                doc_sha=shas[file],
                task=tasks.get(cls.key),
                not_extracted=skipped.get(cls.key),
            )
        )
    return view


def _sha_of_file(path: str, since: float) -> str:
    """The hash of a file's text on disk (what the run imported), or "" when it was written after `since`."""
    try:
        if os.path.getmtime(path) > since:
            return ""
        return text_sha(Path(path).read_bytes().decode("utf-8", errors="replace"))
    except OSError:
        return ""


def show(ls: ForgeServer, view: HotspotView) -> None:
    """Make `view` the latest report: lenses and hover follow it."""
    with ls.state.lock:
        ls.state.hotspots = view
    ls.refresh_lenses()


def load_latest(ls: ForgeServer) -> None:
    """At start-up: the workspace's last report (``.forge/hotspots.json``), with the tasks on disk that hold
    its captures; a file written after the report is stale from the start."""
    from ...usecases.hotspots import latest_report, tasks_of_report

    if ls.root is None:
        return
    report = latest_report(ls.root)
    if report is None:
        return
    try:
        made = os.path.getmtime(ls.root / ".forge" / "hotspots.json")
    except OSError:
        return
    view = view_of(ls, report, ls.root, tasks_of_report(report, ls.root), {}, made)
    view.when = made
    show(ls, view)


# -------------------------------------------------------------------------------- the hot-spot job
def entry_file(ls: ForgeServer, uri: str, function: str, what: str) -> Path:
    """The saved file of `uri` whose entry function `function` a `what` run imports; `JobError` saying what is
    wrong when it cannot."""
    path = ls.path_of(uri)
    text = ls.doc_text(uri)
    if path is None or text is None or not os.path.isfile(path):
        raise jobs.JobError(f"cannot read {uri}: a {what} run imports the file as saved")
    if function not in {name for name, _ in entry_functions(text)}:
        raise jobs.JobError(
            f"no entry function {function!r} in {Path(path).name} (build, build_*, make_model or get_model, "
            "returning (model, args))"
        )
    return Path(path)


def start_hotspots(ls: ForgeServer, uri: str, function: str) -> JobStarted:
    try:
        path = entry_file(ls, uri, function, "hot-spot")
    except jobs.JobError as exc:
        return jobs.refused(ls, exc)
    title = f"forge: hot spots of {function}"
    return jobs.launch(ls, "hotspots", uri, function, title, lambda job: _hotspots(ls, job, path, function))


def _hotspots(ls: ForgeServer, job: BackgroundJob, path: Path, function: str) -> None:
    from ...usecases.hotspots import HotspotsRequest, find_model_hotspots

    cancel = threading.Event()
    ls.on_cancel(job, cancel.set)  # kills the child's whole tree at once
    workspace = ls.root or path.parent
    since = time.time()

    def on_progress(step: str, done: int | None, of: int | None) -> None:
        start, end = _STEPS.get(step, (0, 0))
        pct = start + (end - start) * done // of if done is not None and of else start
        ls.job_progress(job, f"{step} {done}/{of}" if done is not None and of else step, pct)

    request = HotspotsRequest(entry=f"{path}:{function}", workspace=workspace, device=ls.settings.device, extract=True)
    result = find_model_hotspots(request, on_progress=on_progress, cancel=cancel)
    if job.status == "cancelled":
        return
    ls.job_progress(job, "extracted the hot classes' tasks", 98)
    extraction = result.extraction
    tasks = {x.cls: x.path for x in extraction.tasks} if extraction else {}
    skipped = dict(extraction.skipped) if extraction else {}
    view = view_of(ls, result.report, result.workspace, tasks, skipped, since, job.id)
    show(ls, view)
    job.message = summary(view)
    ls.message(f"forge: hot spots of {view.entry}: {job.message}")


def summary(view: HotspotView) -> str:
    """One line: the model, its time per forward and its three hottest classes (the model itself aside)."""
    report = view.report
    top = sorted((c for c in report.classes if c.name != report.model), key=lambda c: -c.total_ms)[:3]
    line = f"{report.model} {report.model_ms:.3f} ms per forward on {report.device_name or report.device}"
    if top:
        line += " · " + ", ".join(f"{c.name} {c.total_pct:.1f}%" for c in top)
    if not view.classes:
        line += " · no hot class is in this workspace's files"
    return line


# ------------------------------------------------------------------------ optimize (captured inputs)
def start_optimize_captured(ls: ForgeServer, uri: str, name: str) -> JobStarted:
    path = ls.path_of(uri)
    with ls.state.lock:
        view = ls.state.hotspots
        hot = next((c for c in view.in_file(os.path.realpath(path)) if c.name == name), None) if view and path else None
    if view is None or hot is None:
        return jobs.refused(
            ls, jobs.JobError(f"{name} is not a hot class of the last hot-spot run: run Find hot spots")
        )
    if hot.task is None or not Path(hot.task).is_file():
        why = hot.not_extracted or "its task is not under .forge/tasks/ (run Find hot spots again)"
        return jobs.refused(ls, jobs.JobError(f"no captured-inputs task for {name}: {why}"))
    text = ls.doc_text(uri) or ""
    task, workspace, doc_sha, version = Path(hot.task), Path(view.workspace), text_sha(text), ls.doc_version(uri)
    line = class_line(text.splitlines(), name, hot.line)
    line = hot.line if line is None else line
    title = f"forge: optimize {name} (captured inputs)"
    return jobs.launch(
        ls,
        "optimize",
        uri,
        name,
        title,
        lambda job: _optimize_captured(ls, job, task, workspace, name, doc_sha, version, line),
        reruns=False,  # not the class's own optimize run: its stale lens stays
    )


def _optimize_captured(
    ls: ForgeServer,
    job: BackgroundJob,
    task: Path,
    workspace: Path,
    name: str,
    doc_sha: str,
    version: int | None,
    line: int,
) -> None:
    """The optimize job on the extracted task. Its answer, when it is the task's source plus a ``ModelNew`` (as
    the offline candidates are), is offered as the guarded rewrite of the user's class (`usecases.model_wide.
    class_source`): Accept then sends one versioned edit of this file, as for the class's own optimize run."""
    from ...usecases.model_wide import NOT_A_SUBCLASS, class_source

    result = jobs.run_optimization(ls, job, task, "Model", workspace)
    if result is None:
        return
    outcome = result.outcome
    res = replace(jobs.optimize_result(job, name, doc_sha, outcome), kind=CAPTURED)
    job.message = f"{result.words} (run {result.run_id})"
    if result.reference_failure is not None:
        job.message = f"the captured task's reference failed: {result.reference_failure.reason}"
    res.note = job.message
    ls.record_result(res)
    if result.withheld == "failed":
        job.status = "failed"
        ls.message(f"forge: optimizing {name} (captured inputs) failed: {outcome.stop_reason}", t.MessageType.Error)
        return
    answer = result.answer
    if answer is not None and ls.changed_since(job.uri, doc_sha):
        jobs.stale_answer(ls, job, name, answer.label)
    elif answer is not None:
        text = ls.doc_text(job.uri) or ""
        source = class_source(answer.candidate.source, task.read_text(), name, text)
        if source is None:
            job.message += f"; not offered as an edit of {name}: {NOT_A_SUBCLASS}"
        elif not ls.offer(jobs.proposal_of(job, name, result, doc_sha, version, line, source)):
            job.decision = "rejected"
            job.message = f"not offered again: this {answer.label} candidate was rejected for this code before"
    ls.message(f"forge: {name} (captured inputs): {job.message}")


# the latest report (.forge/hotspots.json) is read once the workspace is indexed
FEATURE = Unit("hotspots", register, code_lenses=lenses, workspace_opened=load_latest)
