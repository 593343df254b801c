"""The forge language server (pygls 2): thin handlers over the index, the agent and the profiler.

Each handler reads the document, calls a pure function (`forge_lsp.workspace`, `forge_lsp.engine`,
`forge_lsp.agent`, `forge_lsp.profiler`) and converts the result to LSP types. Long jobs (optimize,
profile, explain) run on the server's job threads. Their candidates and profiled code run in
worker subprocesses, never here. Each job reports ``$/progress`` and stops, with its workers,
when the client cancels the progress or runs ``forge.cancel``, and with the session (`shutdown_jobs`).

The wire is ours (`transport`: framing; `messages`: the JSON-RPC envelope and the error replies), so that
no frame, however malformed, stops the server or leaves a request without its one reply.

The server never trusts the client's ``applied`` flag: an accept is confirmed from the
document's text.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import logging
import os
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types as t
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path

from .. import __version__
from .messages import ForgeProtocol
from .protocol import PROGRESS_TOKEN_PREFIX
from .settings import Settings
from .state import BackgroundJob, Proposal, Result, ServerState, text_sha

if TYPE_CHECKING:  # imported when first used (initialize): start-up stays light
    from ..agent.store import RunStore
    from ..workspace.index import WorkspaceIndex

log = logging.getLogger("forge_lsp.server")

SOURCE = "forge"
MAX_DOC_BYTES = 2_000_000
KEPT_JOBS = 200  # finished jobs `forge/runs` still lists
CREATE_WAIT_S = 10.0  # how long a job's progress begin waits for the client to answer the token's creation


class ForgeServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(
            "forge-lsp",
            __version__,
            text_document_sync_kind=t.TextDocumentSyncKind.Incremental,
            protocol_cls=ForgeProtocol,
        )
        self.state = ServerState()
        self.settings = Settings()
        self.root: Path | None = None
        self.index: WorkspaceIndex | None = None
        self.store: RunStore | None = None
        self._store_lock = threading.Lock()
        self.jobs = ThreadPoolExecutor(max_workers=4, thread_name_prefix="forge-job")
        self.loop: asyncio.AbstractEventLoop | None = None
        self._ids = itertools.count(1)
        self._observer: Any = None
        self.shown: set[str] = set()
        self.closing = False  # the session is over: nothing more is sent, no job starts
        #: each feature's `close` (the report pages' HTTP server), called by `end_session`, and its
        #: `workspace_opened` (the latest hot-spot report), run on a thread by the lifecycle feature once the workspace
        #: is indexed at `initialized`: put here by the composition root (`app.create_server`), in the features' order
        self.on_session_end: list[Callable[[ForgeServer], None]] = []
        self.on_workspace_open: list[Callable[[ForgeServer], None]] = []

    # ------------------------------------------------------------------ transport
    def start_io(self, stdin=None, stdout=None) -> int:
        """Serve one client over stdio (framing of our own, see `transport`); the process's exit code."""
        import sys

        from .session import serve_stdio

        return serve_stdio(self, stdin or sys.stdin.buffer, stdout or sys.stdout.buffer)

    def start_tcp(self, host: str, port: int) -> int:  # type: ignore[override]
        from .session import serve_tcp

        return serve_tcp(self, host, port)

    # -------------------------------------------------------------------- helpers
    def run_store(self, beside: Path | None = None) -> RunStore:
        """The session's run store, opened once: in the workspace's `.forge/`, or, with no workspace folder or
        one whose `.forge/` cannot be written, in the folder `beside` (a job's file). Raises what the last
        place tried raised."""
        from ..agent.store import RunStore

        with self._store_lock:
            if self.store is None:
                places = [p for p in (self.root, beside) if p is not None]
                if not places:
                    raise ValueError("no folder to keep the run store in")
                for i, place in enumerate(places):
                    try:
                        self.store = RunStore.for_workspace(place)
                        break
                    except Exception:  # noqa: BLE001 - the next place, or the caller hears it
                        if i == len(places) - 1:
                            raise
            assert self.store is not None
            return self.store

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

    def changed_since(self, uri: str, doc_sha: str) -> bool:
        """Whether the document's text (the editor's, else the file's) is no longer the text of `doc_sha`."""
        text = self.doc_text(uri)
        return text is None or text_sha(text) != doc_sha

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
        """Run `fn` on the server's event loop (from a job thread or the loop itself). Once the session is
        over (the client is gone, the loop closed) there is no one to tell: nothing runs."""
        if self.closing:
            return
        loop = self.loop
        if loop is None:
            fn(*args)
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            fn(*args)
            return
        try:
            loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # the loop closed in between: the session is over
            log.debug("dropped %s: the event loop is closed", getattr(fn, "__name__", fn))

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
        elif self.defines_hot_class(uri):  # its hot-spot lens now says stale
            self.refresh_lenses()

    def defines_hot_class(self, uri: str) -> bool:
        """Whether the latest hot-spot report has a hot class in this file."""
        path = self.path_of(uri)
        with self.state.lock:
            view = self.state.hotspots
            return bool(path and view is not None and view.in_file(os.path.realpath(path)))

    def refresh_lenses(self) -> None:
        caps = self.client_capabilities.workspace
        if caps and caps.code_lens and caps.code_lens.refresh_support:
            self.call_soon(lambda: self.workspace_code_lens_refresh(None))

    # ---------------------------------------------------------------------- jobs
    def start_job(self, kind: str, uri: str, target: str, title: str, work) -> BackgroundJob:
        job = BackgroundJob(id=self.next_id(kind), kind=kind, uri=uri, target=target, title=title)
        with self.state.lock:
            self.state.jobs[job.id] = job
            self._forget_old_jobs()
        self.progress_begin(job)  # every job has its begin and its end: queued, failed and cancelled ones too
        job.future = self.jobs.submit(self._run_job, job, work)
        return job

    def _run_job(self, job: BackgroundJob, work) -> None:
        if job.status == "cancelled" or self.closing:
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
            with self.state.lock:
                job.cancel = None  # it held the whole run (optimizer, evaluator, models): the job outlives it
            job.finished = time.time()
            if job.status != "cancelled":  # cancel_job logged it
                log.info("job %s %s after %.1f s: %s", job.id, job.status, job.finished - job.started, job.message)
            self.progress_end(job)

    def _forget_old_jobs(self) -> None:
        """Keep the last KEPT_JOBS finished jobs for `forge/runs` (their runs stay in the run store), and any
        job whose proposal is still open. Under the state lock."""
        offering = {p.job_id for p in self.state.proposals.values()}
        finished = [
            j for j in self.state.jobs.values() if j.status not in ("queued", "running") and j.id not in offering
        ]
        for job in finished[: max(0, len(finished) - KEPT_JOBS)]:  # oldest first: the dict keeps their order
            del self.state.jobs[job.id]

    def on_cancel(self, job: BackgroundJob, stop) -> None:
        """`stop` stops the job's work and kills its workers: called by `cancel_job`, or now if the job was
        cancelled before its work could say how to stop it. Kept only while the job's thread runs."""
        with self.state.lock:
            job.cancel = stop
            cancelled = job.status == "cancelled"
        if cancelled:
            stop()

    # ------------------------------------------------------------------- progress
    # A job's `$/progress` goes out on the event loop, in order: the token is created, then (on the client's
    # answer, or after CREATE_WAIT_S without one) the begin; reports only between the begin and the end; the
    # end once, after the begin. Nothing here waits on a job thread.
    def progress_begin(self, job: BackgroundJob) -> None:
        caps = self.client_capabilities.window
        if not (caps and caps.work_done_progress) or self.closing:
            return
        token = f"{PROGRESS_TOKEN_PREFIX}{job.id}"
        job.token = token

        def ready(*_args) -> None:
            if job.begun:
                return
            self._send_begin(job, token)
            fut = self.work_done_progress.tokens.get(token)
            if fut is not None:
                fut.add_done_callback(lambda f: self.cancel_job(job.id) if f.cancelled() else None)
            if job.ended:  # it ended before the client answered
                self._send_end(job, token)

        def create() -> None:
            try:
                self.work_done_progress.create(token, lambda *_: self.call_soon(ready))
            except Exception:  # noqa: BLE001 - a token in use, a closed writer: begin all the same
                log.exception("creating progress %s", token)
                ready()
                return
            if self.loop is not None:
                self.loop.call_later(CREATE_WAIT_S, ready)  # a client that never answers still sees the job

        self.call_soon(create)

    def _send_begin(self, job: BackgroundJob, token: str) -> None:
        job.begun = True
        self.work_done_progress.begin(
            token, t.WorkDoneProgressBegin(title=job.title, cancellable=True, message="starting", percentage=0)
        )

    def _send_end(self, job: BackgroundJob, token: str) -> None:
        if job.end_sent:
            return
        job.end_sent = True
        self.work_done_progress.end(token, t.WorkDoneProgressEnd(message=f"{job.status}: {job.message}"[:200]))
        self.work_done_progress.tokens.pop(token, None)  # pygls keeps every token's future otherwise

    def job_progress(self, job: BackgroundJob, message: str, percentage: int | None = None) -> None:
        """A report: the message, and the percentage, which never goes back."""
        if job.ended or job.status == "cancelled":  # a reply in flight when the job was cancelled
            return
        job.message = message
        if percentage is not None:
            job.percentage = max(job.percentage, min(100, percentage))
        token = job.token
        if not token:
            return
        value = t.WorkDoneProgressReport(message=message, percentage=job.percentage, cancellable=True)

        def report() -> None:
            if job.begun and not job.end_sent:
                self.work_done_progress.report(token, value)

        self.call_soon(report)

    def progress_end(self, job: BackgroundJob) -> None:
        with self.state.lock:
            if job.ended:
                return
            job.ended = True
        token = job.token
        if not token:
            return

        def end() -> None:
            if job.begun:  # else the begin, when the client answers, sends the end after it
                self._send_end(job, token)

        self.call_soon(end)

    def cancel_job(self, job_id: str | None = None) -> list[str]:
        with self.state.lock:
            jobs = [
                j
                for j in self.state.jobs.values()
                if j.status in ("queued", "running") and (job_id is None or j.id == job_id)
            ]
            for job in jobs:
                job.status, job.message = "cancelled", "cancelled"
        for job in jobs:  # each job on its own: one that fails to stop does not keep the others running
            log.info("job %s cancelled after %.1f s", job.id, time.time() - job.started)
            try:
                stop = job.cancel
                if stop is not None:
                    stop()  # kills the job's workers now; its thread stops at its next check
            except Exception:  # noqa: BLE001
                log.exception("cancelling %s", job.id)
            job.finished = time.time()
            try:
                self.progress_end(job)
            except Exception:  # noqa: BLE001
                log.exception("ending the progress of %s", job.id)
        return [j.id for j in jobs]

    def shutdown_jobs(self, wait: float = 0.0) -> None:
        """Stop every job and the workers they started (on `shutdown`, `exit`, and when the client is gone);
        with `wait`, give their threads that many seconds to wind down."""
        self.cancel_job(None)
        self.jobs.shutdown(wait=False, cancel_futures=True)
        if wait > 0:
            with self.state.lock:
                futures = [j.future for j in self.state.jobs.values() if j.future is not None]
            concurrent.futures.wait(futures, timeout=wait)
        if self._observer is not None:
            try:
                self._observer.stop()
            except Exception:  # noqa: BLE001
                log.debug("stopping the file watcher", exc_info=True)

    def end_session(self, wait: float = 0.5) -> int:
        """The client is gone or said `exit`: nothing more is sent, every job stops, and every process tree
        this server started (workers, profilers, what they started) is killed, also those a job thread was
        starting while it was cancelled; how many trees were still there."""
        from .. import sandbox

        self.closing = True
        try:
            for close in self.on_session_end:
                try:
                    close(self)
                except Exception:  # noqa: BLE001 - the others are closed all the same
                    log.exception("closing a feature at the session's end")
            self.shutdown_jobs(wait=wait)
        finally:
            killed = sandbox.kill_all(wait=0.5)
        if killed:
            log.info("killed %d child process trees left when the session ended", killed)
        return killed

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

    def offer(self, proposal: Proposal) -> bool:
        """Offer a verified candidate (diagnostic and lenses); False when the user rejected it for this text."""
        with self.state.lock:
            key = (proposal.uri, proposal.target, text_sha(proposal.source), proposal.doc_sha)
            if key in self.state.rejected:
                return False
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
        return True


def uri_of(path: str | Path) -> str:
    return from_fs_path(str(path)) or f"file://{path}"


def indexed(root: Path, path: str) -> bool:
    """Whether the workspace index covers this file: a .py/.cu/.cuh file outside forge's own `.forge/`,
    other dot-folders and the folders the index skips (virtualenvs, caches, node_modules...)."""
    from ..workspace.index import SKIP_DIRS

    try:
        parts = Path(path).relative_to(root).parts
    except ValueError:
        return False
    return path.endswith((".py", ".cu", ".cuh")) and not any(p in SKIP_DIRS or p.startswith(".") for p in parts[:-1])
