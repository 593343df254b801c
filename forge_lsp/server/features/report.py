"""The run report in the editor: `forge.openReport` and the page the server serves on 127.0.0.1.

`forge.openReport [runId, options?]` writes the run's report (`usecases.report`, ``.forge/reports/<run>.html``)
and starts, once per session, a small HTTP server bound to 127.0.0.1 only, on a port the system picks, that
serves the same page made afresh on each request (a run still going on shows more on reload):
``http://127.0.0.1:PORT/report/<run>?token=T`` and ``/model-wide/<stamp>?token=T``. ``T`` is a random token of
this session; a request without it, with another, or naming another host gets 403. Clients that can show a
document get ``window/showDocument`` (external) to that URL; the VS Code extension asks with ``show: false``
and puts the written file into its own webview instead. The page makes no request of its own (its
Content-Security-Policy allows none), so the token never leaves the URL the client was given.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import secrets
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, quote, unquote, urlsplit

from lsprotocol import types as t

from ..feature import Unit
from ..protocol import ReportArgs, ReportResult, positional, wire
from ..server import ForgeServer, uri_of

log = logging.getLogger("forge_lsp.server.report")

HOST = "127.0.0.1"


class ReportServer:
    """The session's report pages: 127.0.0.1, a port of the system's choosing, a token per session."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace
        self.token = secrets.token_urlsafe(24)
        self.httpd = ThreadingHTTPServer((HOST, 0), _handler(self))
        self.httpd.daemon_threads = True
        self.port = int(self.httpd.server_address[1])
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="forge-report-http", daemon=True)
        self.thread.start()
        log.info("report pages on http://%s:%d/ (token required)", HOST, self.port)

    def url(self, kind: str, name: str) -> str:
        return f"http://{HOST}:{self.port}/{kind}/{quote(name, safe='')}?token={self.token}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def page(self, path: str) -> tuple[int, str]:
        from ...usecases import UseCaseError
        from ...usecases.report import model_wide_report_html, run_report_html

        parts = [unquote(p) for p in path.strip("/").split("/")]
        if len(parts) != 2 or parts[0] not in ("report", "model-wide") or not parts[1]:
            return 404, "no such page: /report/<run> or /model-wide/<stamp>"
        try:
            if parts[0] == "report":
                return 200, run_report_html(self.workspace, parts[1])[1]
            return 200, model_wide_report_html(self.workspace, parts[1])[1]
        except UseCaseError as exc:
            return 404, str(exc)


def _handler(server: ReportServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # stdout is the protocol: the log only
            log.debug("report page: " + format, *args)

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            token = (parse_qs(url.query).get("token") or [""])[0]
            host = self.headers.get("Host", "")
            if not hmac.compare_digest(token.encode(), server.token.encode()) or host != f"{HOST}:{server.port}":
                self._send(403, "forbidden: this page needs the session's token (forge.openReport gives its URL)")
                return
            try:
                status, body = server.page(url.path)
            except Exception as exc:  # noqa: BLE001 - a page that cannot be made is an error page, not a crash
                log.exception("report page %s", url.path)
                status, body = 500, f"{type(exc).__name__}: {exc}"
            self._send(status, body, html=status == 200)

        def _send(self, status: int, body: str, html: bool = False) -> None:
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/html; charset=utf-8" if html else "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("Referrer-Policy", "no-referrer")
            self.send_header("X-Content-Type-Options", "nosniff")
            self.end_headers()
            self.wfile.write(data)

    return Handler


_servers: dict[int, ReportServer] = {}
_lock = threading.Lock()


def report_server(ls: ForgeServer, workspace: Path) -> ReportServer:
    with _lock:
        server = _servers.get(id(ls))
        if server is None or server.workspace != workspace:
            if server is not None:
                server.close()
            server = _servers[id(ls)] = ReportServer(workspace)
        return server


def close(ls: ForgeServer) -> None:
    with _lock:
        server = _servers.pop(id(ls), None)
    if server is not None:
        server.close()


def _can_show_document(ls: ForgeServer) -> bool:
    window = ls.client_capabilities.window
    return bool(window and window.show_document and window.show_document.support)


def register(ls: ForgeServer) -> None:
    @ls.command("forge.openReport")
    async def open_report(ls: ForgeServer, *args: object) -> dict[str, object]:
        a = positional(ReportArgs, args)
        if ls.root is None:
            return wire(ReportResult(error="no workspace folder: the run store is <workspace>/.forge/runs.sqlite"))
        from ...usecases import UseCaseError
        from ...usecases.report import write_run_report

        root = ls.root
        try:
            written = await asyncio.to_thread(write_run_report, root, a.run_id)
        except UseCaseError as exc:
            return wire(ReportResult(error=str(exc)))
        url = report_server(ls, root).url("report", written.run_id)
        shown = None
        if (a.options is None or a.options.show) and _can_show_document(ls):
            reply = await ls.window_show_document_async(t.ShowDocumentParams(uri=url, external=True))
            shown = bool(reply and reply.success)
        return wire(
            ReportResult(
                run_id=written.run_id,
                url=url,
                file=uri_of(written.path),
                path=str(written.path),
                in_progress=written.in_progress,
                shown=shown,
            )
        )


FEATURE = Unit("report", register, close=close)  # the session's end closes the report pages' HTTP server
