"""A real HTTP server on 127.0.0.1 that speaks the OpenAI chat-completions protocol from a script.

Tests queue replies with `FakeOpenAI.script` and point a client at `FakeOpenAI.base_url`; every
request (method, path, lower-cased headers, JSON body) is recorded in `FakeOpenAI.requests`.
Each ``POST /v1/chat/completions`` consumes one script entry:

* ``"text"``: a normal ``chat.completion`` whose message content is the text;
* ``{"content": "...", "usage": {"prompt_tokens": 10, "completion_tokens": 5}, "finish_reason": "length"}``:
  the same with explicit usage / finish reason / ``"model"``;
* ``{"status": 429, "headers": {"Retry-After": "0"}, "error": "message", "code": "..."}``: an
  OpenAI-style error body ``{"error": {"message", "type", "code", "param"}}`` with that status;
* ``{"refusal": "I can't help with that"}``: a reply whose message carries a refusal;
* ``{"delay": 5.0, ...}``: sleep first (cut short when the server closes), then reply with the
  rest of the entry (``{"delay": d}`` alone replies ``"{}"``);
* ``{"stall": 5.0, ...}``: for a streamed request, sleep that long after the first piece of content;
* ``{"drip": 0.2, ...}``: for a streamed request, sleep that long before every event;
* ``{"no_stream": True, ...}``: answer a streamed request with a 400 saying streaming is unsupported;
* ``{"ignore_stream": True, ...}``: answer a streamed request with one JSON response, as if not asked to stream;
* a callable ``(request_json) -> entry``, called when the request arrives.

``GET /v1/models`` lists `FakeOpenAI.models` and consumes nothing. A request that finds the
script empty gets a 418 error naming the problem, so a test that under-scripts fails loudly.

A request with ``"stream": true`` gets the reply as server-sent events, as OpenAI sends it: a first
chunk with the role, the content in pieces of a few characters, a chunk with the finish reason, a
chunk with the usage when ``stream_options.include_usage`` asks for it, then ``data: [DONE]``.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

import pytest

Entry = str | dict[str, Any] | Callable[[Any], Any]

DEFAULT_USAGE = {"prompt_tokens": 100, "completion_tokens": 20}

_ERROR_TEXT = {
    400: "Invalid request.",
    401: "Incorrect API key provided.",
    403: "You are not allowed to sample from this model.",
    404: "The model does not exist or you do not have access to it.",
    418: "fake_openai: no scripted reply left for this request",
    429: "Rate limit reached for requests.",
}
_ERROR_TYPE = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "invalid_request_error",
    404: "invalid_request_error",
    429: "rate_limit_exceeded",
}


@dataclass
class RecordedRequest:
    """One request as the server saw it."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.body.get("messages", []) if isinstance(self.body, dict) else []


class FakeOpenAI:
    """The scripted server; use it as a context manager or through the `fake_openai` fixture."""

    def __init__(self, models: list[str] | None = None) -> None:
        self.models = models or ["fake-model"]
        self.requests: list[RecordedRequest] = []
        self._queue: deque[Entry] = deque()
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._counter = 0
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, name="fake-openai", daemon=True
        )

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        """The recorded ``POST .../chat/completions`` requests."""
        return [r for r in self.requests if r.method == "POST" and r.path.endswith("/chat/completions")]

    def script(self, *entries: Entry) -> None:
        """Queue replies for the coming chat requests, in order."""
        with self._lock:
            self._queue.extend(entries)

    @property
    def pending(self) -> int:
        """Script entries not consumed yet."""
        with self._lock:
            return len(self._queue)

    def start(self) -> Self:
        self._thread.start()
        return self

    def close(self) -> None:
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- used by the handler -------------------------------------------------------------------

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def _next_entry(self) -> Entry | None:
        with self._lock:
            return self._queue.popleft() if self._queue else None

    def _next_id(self) -> str:
        with self._lock:
            self._counter += 1
            return f"chatcmpl-fake-{self._counter}"

    def _chat_reply(self, body: Any) -> tuple[int, dict[str, str], dict[str, Any]]:
        """(status, headers, JSON body) for one chat request."""
        entry = self._next_entry()
        if callable(entry):
            entry = entry(body)
        if entry is None:
            return 418, {}, _error_body(418, None, None)
        if isinstance(entry, str):
            entry = {"content": entry}
        entry = dict(entry)
        delay = float(entry.pop("delay", 0.0))
        if delay > 0:
            self._closing.wait(delay)
        headers = {str(k): str(v) for k, v in entry.get("headers", {}).items()}
        if entry.get("no_stream") and isinstance(body, dict) and body.get("stream"):
            return 400, headers, _error_body(400, "stream is not supported by this server", None)
        status = int(entry.get("status", 200))
        if status != 200:
            return status, headers, _error_body(status, entry.get("error"), entry.get("code"))
        requested = body.get("model") if isinstance(body, dict) else None
        usage = {**DEFAULT_USAGE, **entry.get("usage", {})}
        refusal = entry.get("refusal")
        content = entry.get("content", None if refusal is not None else "{}")
        reply = {
            "id": self._next_id(),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": entry.get("model", requested or self.models[0]),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content, "refusal": refusal},
                    "finish_reason": entry.get("finish_reason", "stop"),
                    "logprobs": None,
                }
            ],
            "usage": {**usage, "total_tokens": usage["prompt_tokens"] + usage["completion_tokens"]},
        }
        if entry.get("stall"):
            reply["_stall"] = float(entry["stall"])
        if entry.get("drip"):
            reply["_drip"] = float(entry["drip"])
        if entry.get("ignore_stream"):
            reply["_ignore_stream"] = True
        return 200, headers, reply


def _error_body(status: int, message: str | None, code: str | None) -> dict[str, Any]:
    text = message or _ERROR_TEXT.get(status, "The server had an error while processing your request.")
    return {"error": {"message": text, "type": _ERROR_TYPE.get(status, "server_error"), "param": None, "code": code}}


def _make_handler(fake: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            fake._record(RecordedRequest("GET", self.path, _lower(self.headers.items()), None))
            if self.path.rstrip("/").endswith("/models"):
                data = [{"id": m, "object": "model", "created": 0, "owned_by": "fake-openai"} for m in fake.models]
                self._send(200, {}, {"object": "list", "data": data})
            else:
                self._send(404, {}, _error_body(404, f"no route {self.path}", None))

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body: Any = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode("utf-8", "replace")
            fake._record(RecordedRequest("POST", self.path, _lower(self.headers.items()), body))
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(404, {}, _error_body(404, f"no route {self.path}", None))
                return
            status, headers, reply = fake._chat_reply(body)
            ignore = bool(reply.pop("_ignore_stream", False))
            if status == 200 and isinstance(body, dict) and body.get("stream") and not ignore:
                usage_wanted = bool((body.get("stream_options") or {}).get("include_usage"))
                self._send_stream(headers, reply, usage_wanted)
            else:
                reply.pop("_stall", None)
                reply.pop("_drip", None)
                self._send(status, headers, reply)

        def _send_stream(self, headers: dict[str, str], reply: dict[str, Any], usage_wanted: bool) -> None:
            stall = float(reply.pop("_stall", 0.0))
            drip = float(reply.pop("_drip", 0.0))
            message = reply["choices"][0]["message"]
            content = message.get("content") or ""
            base = {k: reply[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}

            def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
                choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
                return {**base, "choices": [choice]}

            events = [chunk({"role": "assistant", "content": ""})]
            if message.get("refusal") is not None:
                events.append(chunk({"refusal": message["refusal"]}))
            events += [chunk({"content": content[i : i + 8]}) for i in range(0, len(content), 8)]
            events.append(chunk({}, reply["choices"][0]["finish_reason"]))
            if usage_wanted:
                events.append({**base, "choices": [], "usage": reply["usage"]})
            try:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                for i, event in enumerate(events):
                    if drip:
                        fake._closing.wait(drip)
                    self.wfile.write(b"data: " + json.dumps(event).encode() + b"\n\n")
                    self.wfile.flush()
                    if stall and i == 1:
                        fake._closing.wait(stall)
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass
            self.close_connection = True

        def _send(self, status: int, headers: dict[str, str], payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test): nothing to answer

    return Handler


def _lower(items: Any) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in items}


@pytest.fixture()
def fake_openai() -> Iterator[FakeOpenAI]:
    """A started `FakeOpenAI`, closed after the test."""
    with FakeOpenAI() as server:
        yield server
