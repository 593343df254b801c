"""The forge language server (pygls 2): thin handlers over the index, the agent and the profiler.

Each handler reads the document, calls a pure function (`forge_lsp.workspace`, `forge_lsp.engine`,
`forge_lsp.agent`, `forge_lsp.profiler`) and converts the result to LSP types. Long jobs (optimize,
profile, explain) run on the server's job threads. Their candidates and profiled code run in
worker subprocesses, never here. Each job reports ``$/progress`` and stops, with its workers,
when the client cancels the progress or runs ``forge.cancel``.

The server never trusts the client's ``applied`` flag: an accept is confirmed from the
document's text.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types as t
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path

from .. import __version__
from .protocol import PROGRESS_TOKEN_PREFIX
from .settings import Settings
from .state import BackgroundJob, Proposal, Result, ServerState, text_sha

if TYPE_CHECKING:  # imported when first used (initialize): start-up stays light
    from ..agent.store import RunStore
    from ..workspace.index import WorkspaceIndex

log = logging.getLogger("forge_lsp.server")

SOURCE = "forge"
MAX_DOC_BYTES = 2_000_000


class ForgeServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("forge-lsp", __version__, text_document_sync_kind=t.TextDocumentSyncKind.Incremental)
        self.state = ServerState()
        self.settings = Settings()
        self.root: Path | None = None
        self.index: WorkspaceIndex | None = None
        self.store: RunStore | None = None
        self.jobs = ThreadPoolExecutor(max_workers=4, thread_name_prefix="forge-job")
        self.loop: asyncio.AbstractEventLoop | None = None
        self._ids = itertools.count(1)
        self._observer: Any = None
        self.shown: set[str] = set()

    # -------------------------------------------------------------------- helpers
    def path_of(self, uri: str) -> str | None:
        try:
            return to_fs_path(uri)
        except Exception:  # noqa: BLE001 - an unknown URI scheme is not an error of ours
            return None

    def doc_text(self, uri: str) -> str | None:
        """The editor's text of an open document, else the file on disk, else None."""
        try:
            doc = self.workspace.get_text_document(uri)
            if doc.uri in self.workspace.text_documents:
                return doc.source
        except Exception:  # noqa: BLE001
            pass
        path = self.path_of(uri)
        if path and os.path.isfile(path) and os.path.getsize(path) <= MAX_DOC_BYTES:
            return Path(path).read_bytes().decode("utf-8", errors="replace")
        return None

    def doc_version(self, uri: str) -> int | None:
        doc = self.workspace.text_documents.get(uri)
        return doc.version if doc is not None else None

    def message(self, text: str, kind: t.MessageType = t.MessageType.Info, once: bool = False) -> None:
        if once:
            if text in self.shown:
                return
            self.shown.add(text)
        self.call_soon(self.window_show_message, t.ShowMessageParams(type=kind, message=text))

    def call_soon(self, fn, *args) -> None:
        """Run `fn` on the server's event loop (from a job thread or the loop itself)."""
        if self.loop is None:
            fn(*args)
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:
            fn(*args)
        else:
            self.loop.call_soon_threadsafe(fn, *args)

    def next_id(self, prefix: str) -> str:
        return f"{prefix}-{next(self._ids)}"

    def line_range(self, uri: str, line: int) -> t.Range:
        """A whole source line as an LSP range, in the client's position encoding (UTF-16 for VS Code,
        UTF-8 for Neovim): the end is the line's length counted in the client's code units."""
        doc = self.workspace.text_documents.get(uri)
        if doc is not None and 0 <= line < len(doc.lines):
            text = doc.lines[line].rstrip("\r\n")
            end = doc.position_codec.position_to_client_units(doc.lines, t.Position(line=line, character=len(text)))
            return t.Range(start=t.Position(line=line, character=0), end=end)
        return t.Range(
            start=t.Position(line=max(line, 0), character=0), end=t.Position(line=max(line, 0) + 1, character=0)
        )

    # ------------------------------------------------------------------ diagnostics
    def set_diagnostics(self, uri: str, producer: str, diagnostics: list[t.Diagnostic]) -> None:
        """Replace one producer's diagnostics of a file; others' are kept (they never overwrite each other)."""
        with self.state.lock:
            per = self.state.diagnostics.setdefault(uri, {})
            if diagnostics:
                per[producer] = diagnostics
            else:
                per.pop(producer, None)
            merged = [d for ds in per.values() for d in ds]
        self.call_soon(
            self.text_document_publish_diagnostics,
            t.PublishDiagnosticsParams(uri=uri, diagnostics=merged, version=self.doc_version(uri)),
        )

    def clear_file_results(self, uri: str, reason: str) -> None:
        """The file changed: its proposals go away and its diagnostics are cleared (results become stale)."""
        with self.state.lock:
            dropped = [k for k, p in self.state.proposals.items() if p.uri == uri]
            for k in dropped:
                del self.state.proposals[k]
            producers = list(self.state.diagnostics.get(uri, {}))
        for producer in producers:
            self.set_diagnostics(uri, producer, [])
        if dropped or producers:
            log.info(
                "%s changed (%s): cleared %d proposals, %d diagnostic sets", uri, reason, len(dropped), len(producers)
            )
            self.refresh_lenses()

    def refresh_lenses(self) -> None:
        caps = self.client_capabilities.workspace
        if caps and caps.code_lens and caps.code_lens.refresh_support:
            self.call_soon(lambda: self.workspace_code_lens_refresh(None))

    # ---------------------------------------------------------------------- jobs
    def start_job(self, kind: str, uri: str, target: str, title: str, work) -> BackgroundJob:
        job = BackgroundJob(id=self.next_id(kind), kind=kind, uri=uri, target=target, title=title)
        with self.state.lock:
            self.state.jobs[job.id] = job
        self.jobs.submit(self._run_job, job, work)
        return job

    def _run_job(self, job: BackgroundJob, work) -> None:
        if job.status == "cancelled":
            return
        job.status = "running"
        log.info("job %s started: %s (%s)", job.id, job.title, self.path_of(job.uri) or job.uri)
        try:
            work(job)
            if job.status == "running":
                job.status = "done"
        except Exception as exc:  # noqa: BLE001 - a failed job is reported, never raised into the server
            if job.status != "cancelled":
                log.exception("job %s failed", job.id)
                from ..usecases import UseCaseError

                # a request the user can fix says just what to fix; anything else names the error's type
                job.status, job.message = (
                    "failed",
                    str(exc) if isinstance(exc, UseCaseError) else f"{type(exc).__name__}: {exc}",
                )
                self.message(f"forge: {job.title} failed: {job.message}", t.MessageType.Error)
        finally:
            job.finished = time.time()
            if job.status != "cancelled":  # cancel_job logged it
                log.info("job %s %s after %.1f s: %s", job.id, job.status, job.finished - job.started, job.message)
            self.progress_end(job)

    def progress_begin(self, job: BackgroundJob) -> None:
        caps = self.client_capabilities.window
        if not (caps and caps.work_done_progress):
            return
        token = f"{PROGRESS_TOKEN_PREFIX}{job.id}"
        job.token = token
        done = threading.Event()

        def created(*_args) -> None:
            done.set()

        def create() -> None:
            self.work_done_progress.create(token, created)

        self.call_soon(create)
        done.wait(10.0)

        def begin() -> None:
            self.work_done_progress.begin(
                token, t.WorkDoneProgressBegin(title=job.title, cancellable=True, message="starting", percentage=0)
            )
            fut = self.work_done_progress.tokens.get(token)
            if fut is not None:
                fut.add_done_callback(lambda f: self.cancel_job(job.id) if f.cancelled() else None)

        self.call_soon(begin)

    def job_progress(self, job: BackgroundJob, message: str, percentage: int | None = None) -> None:
        if job.ended or job.status == "cancelled":  # a reply in flight when the job was cancelled
            return
        job.message = message
        if percentage is not None:
            job.percentage = max(0, min(100, percentage))
        if job.token:
            self.call_soon(
                self.work_done_progress.report,
                job.token,
                t.WorkDoneProgressReport(message=message, percentage=job.percentage, cancellable=True),
            )

    def progress_end(self, job: BackgroundJob) -> None:
        if job.ended:
            return
        job.ended = True
        if job.token:
            self.call_soon(
                self.work_done_progress.end,
                job.token,
                t.WorkDoneProgressEnd(message=f"{job.status}: {job.message}"[:200]),
            )

    def cancel_job(self, job_id: str | None = None) -> list[str]:
        with self.state.lock:
            jobs = [
                j
                for j in self.state.jobs.values()
                if j.status in ("queued", "running") and (job_id is None or j.id == job_id)
            ]
        for job in jobs:
            job.status, job.message = "cancelled", "cancelled"
            log.info("job %s cancelled after %.1f s", job.id, time.time() - job.started)
            if job.cancel is not None:
                try:
                    job.cancel()  # kills the job's workers now; its thread stops at its next check
                except Exception:  # noqa: BLE001
                    log.exception("cancelling %s", job.id)
            job.finished = time.time()
            self.progress_end(job)
        return [j.id for j in jobs]

    def shutdown_jobs(self) -> None:
        """On exit: stop every job and the workers they started."""
        self.cancel_job(None)
        self.jobs.shutdown(wait=False, cancel_futures=True)
        if self._observer is not None:
            self._observer.stop()

    # --------------------------------------------------------------- task snapshots
    def forge_dir(self, *parts: str) -> Path:
        """A folder under the workspace's `.forge/` (the temp dir's without a workspace), created."""
        folder = (self.root or Path(tempfile.gettempdir())).joinpath(".forge", *parts)
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def snapshot(self, uri: str, text: str) -> Path:
        """Write the editor's text of a task file where workers can read it (nothing of the user's is touched)."""
        base = self.forge_dir("snapshots")
        name = Path(self.path_of(uri) or "module.py").stem
        path = base / f"{name}_{text_sha(text)[:10]}.py"
        if not path.exists():
            path.write_text(text, encoding="utf-8")
        return path

    def record_result(self, result: Result) -> None:
        with self.state.lock:
            self.state.results[(result.uri, result.target, result.kind)] = result

    def offer(self, proposal: Proposal) -> None:
        with self.state.lock:
            key = (proposal.uri, proposal.target, text_sha(proposal.source), proposal.doc_sha)
            if key in self.state.rejected:
                return
            self.state.proposals[(proposal.uri, proposal.target)] = proposal
        self.set_diagnostics(
            proposal.uri,
            f"proposal:{proposal.target}",
            [
                t.Diagnostic(
                    range=self.line_range(proposal.uri, proposal.line),
                    message=(
                        f"forge: {proposal.label} faster candidate for {proposal.target} "
                        f"(run {proposal.run_id}): {proposal.summary}"
                    ),
                    severity=t.DiagnosticSeverity.Information,
                    source=SOURCE,
                    code="faster-candidate",
                )
            ],
        )
        self.refresh_lenses()


def create_server() -> ForgeServer:
    from .features import actions, documents, hover, jobs, lifecycle

    ls = ForgeServer()
    for feature in (lifecycle, documents, actions, jobs, hover):
        feature.register(ls)
    return ls


def uri_of(path: str | Path) -> str:
    return from_fs_path(str(path)) or f"file://{path}"
