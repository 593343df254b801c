"""Model-wide runs in the editor: the use case `usecases.model_wide.optimize_model` as a background job, its kept
replacements accepted into the user's own classes as one versioned edit, and undone as one.

On each entry function (the ones "Find hot spots" is on) a lens starts "Optimize model-wide" (`forge.optimizeModelWide`):
hot spots, each hot class optimized on its captured inputs, the whole model checked end to end, as
``forge optimize ENTRY --model-wide``. Its progress is the use case's own; a cancel stops it the way Ctrl-C stops the
CLI: the module run in flight is marked interrupted, what finished is saved, and a "Resume" lens on the entry goes on
from there (`resume`). A finished run whose end-to-end check kept replacements of classes in the workspace's files
offers them on the entry: "Accept into <classes>" (`forge.acceptModelWide`) sends one `WorkspaceEdit` with one
`TextDocumentEdit` per file, each the guarded rewrite (`usecases.model_wide.class_edits`: other calls run the
original forward), each carrying the version it was computed for, confirmed from the documents' texts. "Undo"
(`forge.undoModelWide`) puts every file back with one edit, while the files are still as the accept left them.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

from lsprotocol import types as t

from ..feature import Unit, lens
from ..protocol import JobStarted, ModelWideArgs, ModelWideEditResult, positional, wire
from ..server import ForgeServer, uri_of
from ..state import BackgroundJob, FileChange, ModelWideOffer
from . import jobs

CONFIRM_S = 5.0
log = logging.getLogger("forge_lsp.server")
_interrupted_cache: dict[tuple[str, str], tuple[Any, list[Any]]] = {}
_cache_lock = threading.Lock()


def register(ls: ForgeServer) -> None:
    @ls.command("forge.optimizeModelWide")
    def optimize_model_wide(ls: ForgeServer, *args: Any) -> dict[str, Any]:
        a = positional(ModelWideArgs, args)
        return wire(start(ls, a.uri, a.function, a.resume))

    @ls.command("forge.acceptModelWide")
    async def accept_model_wide(ls: ForgeServer, *args: Any) -> dict[str, Any]:
        a = positional(ModelWideArgs, args)
        return wire(await accept(ls, a.uri, a.function))

    @ls.command("forge.rejectModelWide")
    def reject_model_wide(ls: ForgeServer, *args: Any) -> dict[str, Any]:
        a = positional(ModelWideArgs, args)
        with ls.state.lock:
            offer = ls.state.model_wide.pop((a.uri, a.function), None)
        if offer is None:
            return wire(ModelWideEditResult(applied=False, message="no model-wide offer on this entry"))
        _forget(ls, offer, "rejected")
        return wire(ModelWideEditResult(applied=True, classes=offer.classes))

    @ls.command("forge.undoModelWide")
    async def undo_model_wide(ls: ForgeServer, *args: Any) -> dict[str, Any]:
        a = positional(ModelWideArgs, args)
        return wire(await undo(ls, a.uri, a.function))


# ---------------------------------------------------------------------------------------------- lenses
def lenses(ls: ForgeServer, uri: str) -> list[t.CodeLens]:
    """On each entry function: its open offer (Accept, Reject) or its undo, a Resume for its latest interrupted
    run, and "Optimize model-wide"."""
    from .hotspots import entry_functions

    path = ls.path_of(uri)
    text = ls.doc_text(uri) if path is not None and path.endswith(".py") else None
    out: list[t.CodeLens] = []
    for name, line in entry_functions(text) if text is not None else []:
        with ls.state.lock:
            offer = ls.state.model_wide.get((uri, name))
        if offer is not None and not offer.accepted:
            out += [
                lens(
                    line,
                    f"forge: model-wide {offer.summary} — Accept into {', '.join(offer.classes)}",
                    "forge.acceptModelWide",
                    [uri, name],
                ),
                lens(line, "Reject", "forge.rejectModelWide", [uri, name]),
            ]
        elif offer is not None:
            out.append(
                lens(
                    line,
                    f"forge: Undo model-wide accept ({', '.join(offer.classes)})",
                    "forge.undoModelWide",
                    [uri, name],
                )
            )
        if path is not None and ls.root is not None:
            stopped = _interrupted(ls.root, f"{path}:{name}")
            if stopped and not _running(ls, uri, name):
                r = stopped[0]
                done = sum(1 for m in r.modules if m.status in _finished())
                out.append(
                    lens(
                        line,
                        f"forge: Resume model-wide run ({done} of {r.top} hot modules done)",
                        "forge.optimizeModelWide",
                        [uri, name, r.folder.name],
                    )
                )
        out.append(lens(line, "forge: Optimize model-wide", "forge.optimizeModelWide", [uri, name]))
    return out


def _finished() -> frozenset[str]:
    from ...usecases.model_wide import FINISHED

    return FINISHED


def _running(ls: ForgeServer, uri: str, function: str) -> bool:
    with ls.state.lock:
        return any(
            j.kind == "model-wide" and j.uri == uri and j.target == function and j.status in ("queued", "running")
            for j in ls.state.jobs.values()
        )


def _interrupted(root: Path, entry: str) -> list[Any]:
    """`usecases.model_wide.interrupted_runs`, read again only when a result.json under .forge/model_wide changed
    (lenses are asked for on every edit)."""
    from ...usecases.model_wide import interrupted_runs

    stamps = []
    for p in sorted((root / ".forge" / "model_wide").glob("*/result.json")):
        try:
            stamps.append((p.parent.name, p.stat().st_mtime_ns))
        except OSError:
            continue
    key = (str(root), entry)
    with _cache_lock:
        hit = _interrupted_cache.get(key)
        if hit is not None and hit[0] == stamps:
            return hit[1]
    found = interrupted_runs(root, entry) if stamps else []
    with _cache_lock:
        _interrupted_cache[key] = (stamps, found)
    return found


# ------------------------------------------------------------------------------------------------- job
def start(ls: ForgeServer, uri: str, function: str, resume: str | None = None) -> JobStarted:
    from .hotspots import entry_file

    try:
        path = entry_file(ls, uri, function, "model-wide")
    except jobs.JobError as exc:
        return jobs.refused(ls, exc)
    if _running(ls, uri, function):
        return jobs.refused(ls, jobs.JobError(f"a model-wide run of {function} is already going"))
    title = f"forge: model-wide {'resume ' if resume else ''}{function}"
    return jobs.launch(ls, "model-wide", uri, function, title, lambda job: _run(ls, job, path, function, resume))


def _run(ls: ForgeServer, job: BackgroundJob, path: Path, function: str, resume: str | None) -> None:
    from ...usecases.model_wide import ModelWideRequest, RunInterrupted, optimize_model

    cancel = threading.Event()
    ls.on_cancel(job, cancel.set)  # the use case stops its module run's worker, or the end-to-end check's child
    workspace = ls.root or path.parent
    s = ls.settings
    since = time.time()
    request = ModelWideRequest(
        entry=f"{path}:{function}",
        workspace=workspace,
        device=s.device,
        overrides=s.agent_overrides(),
        offline=s.offline,
        resume=resume,
    )
    try:
        result = optimize_model(request, cancel=cancel, on_progress=lambda text, pct: ls.job_progress(job, text, pct))
    except RunInterrupted as exc:
        job.status = "cancelled"
        job.message = str(exc).split("; resume with")[0] + f"; Resume from the lens on {function}"
        log.info("job %s: %s", job.id, exc)
        ls.refresh_lenses()
        return
    if job.status == "cancelled":
        return
    job.message = summary(result)
    offer = _offer_of(ls, result, workspace, job, function, since)
    if offer is not None:
        with ls.state.lock:
            ls.state.model_wide[(job.uri, function)] = offer
        job.message += f"; Accept into {', '.join(offer.classes)} from the lens on {function}"
    ls.refresh_lenses()
    ls.message(f"forge: model-wide {function}: {job.message}")


def summary(result: Any) -> str:
    """One line: what the end-to-end check decided, and what became of the hot modules."""
    check = result.check
    kept = [m.name for m in result.modules if m.status == "kept"]
    if result.outcome == "kept" and check is not None and check.speedup is not None and check.ci:
        head = f"{check.speedup:.2f}× end to end (99% CI {check.ci[0]:.2f}-{check.ci[1]:.2f})"
    elif result.outcome == "inconclusive":
        head = next((n for n in result.notes if n.startswith("inconclusive")), "inconclusive")
    else:
        head = "nothing kept"
    mode = ""
    if check is not None and check.model_mode:
        mode = f", {check.model_mode} " + ("without the replacements" if check.model_mode_alone else "on top")
    return head + (f", kept {', '.join(kept)}" if kept else "") + mode


def _offer_of(
    ls: ForgeServer, result: Any, workspace: Path, job: BackgroundJob, function: str, since: float
) -> ModelWideOffer | None:
    """The kept classes of the workspace's files as guarded rewrites, on the texts the editor has now. A file
    written or edited since the run began is left out and said (the run measured what was on disk then)."""
    from ...usecases.model_wide import class_edits, file_edits

    def editor_text(p: Path) -> str | None:
        u = uri_of(p)
        return ls.doc_text(u) if u in ls.workspace.text_documents else None

    edits = class_edits(result, workspace, texts=editor_text)
    notes = [f"{e.name} not rewritten: {e.why}" for e in edits if e.new_text is None and e.why]
    files: list[FileChange] = []
    for p, (before, after, classes) in file_edits(edits).items():
        try:
            on_disk = p.read_text(encoding="utf-8")
            changed = os.path.getmtime(p) > since or on_disk != before
        except OSError:
            changed = True
        if changed:
            notes.append(f"{', '.join(classes)} not offered: {p.name} changed during the run (run it again)")
            continue
        files.append(FileChange(uri=uri_of(p), before=before, after=after, classes=classes))
    if notes:
        job.message += "; " + "; ".join(notes)
    if not files:
        return None
    assert result.folder is not None
    head = summary(result).split(",")[0]
    return ModelWideOffer(
        uri=job.uri, function=function, stamp=result.folder.name, summary=head, files=files, job_id=job.id
    )


# ------------------------------------------------------------------------------------------ accept, undo
async def accept(ls: ForgeServer, uri: str, function: str) -> ModelWideEditResult:
    with ls.state.lock:
        offer = ls.state.model_wide.get((uri, function))
    if offer is None or offer.accepted:
        return _refuse(ls, f"no open model-wide offer on {function}: it was accepted, rejected or never made")
    changed = [f for f in offer.files if ls.doc_text(f.uri) != f.before]
    if changed:
        with ls.state.lock:
            ls.state.model_wide.pop((uri, function), None)
        _forget(ls, offer, "stale")
        names = ", ".join(Path(ls.path_of(f.uri) or f.uri).name for f in changed)
        return _refuse(ls, f"{names} changed since the model-wide run, so nothing was changed; run it again")
    label = f"forge: model-wide {offer.summary}, {', '.join(offer.classes)} (run {offer.stamp})"
    done = await _edit(ls, [(f.uri, f.before, f.after) for f in offer.files], label)
    if not done:
        return _refuse(ls, "the editor did not apply forge's edit; your code is unchanged")
    with ls.state.lock:
        offer.accepted = True
        job = ls.state.jobs.get(offer.job_id or "")
        if job is not None:
            job.decision, job.message = "accepted", f"{job.message.split('; Accept into')[0]}; accepted"
    for f in offer.files:
        ls.clear_file_results(f.uri, "accepted")
    log.info("model-wide run %s accepted into %s", offer.stamp, ", ".join(offer.classes))
    if len(done) < len(offer.files):
        missed = [Path(ls.path_of(f.uri) or f.uri).name for f in offer.files if f.uri not in done]
        ls.message(
            f"forge: the edit did not reach {', '.join(missed)}; Undo puts back the others", t.MessageType.Warning
        )
    ls.refresh_lenses()
    return ModelWideEditResult(applied=len(done) == len(offer.files), files=done, classes=offer.classes)


async def undo(ls: ForgeServer, uri: str, function: str) -> ModelWideEditResult:
    with ls.state.lock:
        offer = ls.state.model_wide.get((uri, function))
    if offer is None or not offer.accepted:
        return _refuse(ls, f"no accepted model-wide edit on {function} to undo")
    now = {f.uri: ls.doc_text(f.uri) for f in offer.files}
    edited = [f for f in offer.files if now[f.uri] not in (f.after, f.before)]
    if edited:
        names = ", ".join(Path(ls.path_of(f.uri) or f.uri).name for f in edited)
        return _refuse(ls, f"{names} changed since the accept; nothing was undone (the editor's own undo still can)")
    back = [(f.uri, f.after, f.before) for f in offer.files if now[f.uri] == f.after]
    done = (
        await _edit(ls, back, f"forge: undo model-wide {', '.join(offer.classes)} (run {offer.stamp})") if back else []
    )
    if len(done) < len(back):
        return _refuse(ls, "the editor did not apply forge's undo; the files are as they were")
    with ls.state.lock:
        ls.state.model_wide.pop((uri, function), None)
    _forget(ls, offer, "undone")
    return ModelWideEditResult(applied=True, files=done, classes=offer.classes)


async def _edit(ls: ForgeServer, changes: list[tuple[str, str, str]], label: str) -> list[str]:
    """One `WorkspaceEdit` turning each (uri, text, new text): a `TextDocumentEdit` per document, with the version
    the editor has (null for a file it has not open: the file as on disk, checked just before), over the lines
    that differ. The URIs whose text became the new one, confirmed from the documents, not from the reply."""
    caps = ls.client_capabilities.workspace
    annotated = bool(caps and caps.workspace_edit and caps.workspace_edit.change_annotation_support)
    doc_changes = []
    for uri, old, new in changes:
        rng, text = changed_lines(old, new)
        item: t.TextEdit | t.AnnotatedTextEdit = (
            t.AnnotatedTextEdit(range=rng, new_text=text, annotation_id="forge-model-wide")
            if annotated
            else t.TextEdit(range=rng, new_text=text)
        )
        version = ls.doc_version(uri)
        doc_changes.append(
            t.TextDocumentEdit(
                text_document=t.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version), edits=[item]
            )
        )
    edit = t.WorkspaceEdit(
        document_changes=doc_changes,
        change_annotations={"forge-model-wide": t.ChangeAnnotation(label=label, needs_confirmation=False)}
        if annotated
        else None,
    )
    for uri, _, new in changes:
        ls.state.accepting[uri] = new
    try:
        try:
            await ls.workspace_apply_edit_async(t.ApplyWorkspaceEditParams(edit=edit, label=label))
        except Exception:  # noqa: BLE001 - an error reply: the texts decide what happened
            log.exception("workspace/applyEdit")
        deadline = asyncio.get_running_loop().time() + CONFIRM_S
        while True:
            done = [uri for uri, _, new in changes if ls.doc_text(uri) == new]
            if len(done) == len(changes) or asyncio.get_running_loop().time() >= deadline:
                return done
            await asyncio.sleep(0.05)
    finally:
        for uri, _, _ in changes:
            ls.state.accepting.pop(uri, None)


def changed_lines(old: str, new: str) -> tuple[t.Range, str]:
    """The smallest run of whole lines of `old` to replace, and its replacement, that turns `old` into `new`."""
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    start = 0
    while start < min(len(a), len(b)) and a[start] == b[start]:
        start += 1
    end = 0
    while end < min(len(a), len(b)) - start and a[len(a) - 1 - end] == b[len(b) - 1 - end]:
        end += 1
    rng = t.Range(start=t.Position(line=start, character=0), end=t.Position(line=len(a) - end, character=0))
    return rng, "".join(b[start : len(b) - end])


def _forget(ls: ForgeServer, offer: ModelWideOffer, what: str) -> None:
    log.info("model-wide run %s: %s (%s)", offer.stamp, what, ", ".join(offer.classes))
    with ls.state.lock:
        job = ls.state.jobs.get(offer.job_id or "")
        if job is not None:
            job.decision = what if what in ("accepted", "rejected", "stale") else None
            job.message = f"{job.message.split('; Accept into')[0]}; {what}"
    ls.refresh_lenses()


def _refuse(ls: ForgeServer, message: str) -> ModelWideEditResult:
    ls.message(f"forge: {message}", t.MessageType.Warning)
    return ModelWideEditResult(applied=False, message=message)


FEATURE = Unit("model_wide", register, code_lenses=lenses)
