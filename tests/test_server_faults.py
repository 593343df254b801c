"""The language server under a raw JSON-RPC client: bytes written to its stdin as they are, frames read
from its stdout with a parser of our own (no LSP library in between), so that broken frames, bad params
and a client that vanishes reach the server exactly as a faulty editor would send them."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURES
from lsp_session import scripted_settings
from proctree import cmdline, descendants, running

pytestmark = pytest.mark.integration  # real processes end to end: left out of the fast loop (./dev test --fast)

pytest_plugins = ["fake_openai"]

SERVER = [sys.executable, "-m", "forge_lsp.server"]
CACHE = tempfile.mkdtemp(prefix="forge-lsp-faults-cache-")
atexit.register(shutil.rmtree, CACHE, True)  # the servers' compile cache, shared by the module's tests
TASK = (FIXTURES / "slow_softmax.py").read_text()
FAST = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)
"""
MISSING = object()
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602


def frame(obj: Any) -> bytes:
    body = json.dumps(obj).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def coder(source: str, summary: str) -> str:
    return json.dumps({"summary": summary, "source": source})


# ------------------------------------------------------------------------------------ the client
class RawClient:
    """The server in a subprocess, and a client that writes raw bytes and reads frames itself. Requests the
    server sends (progress create, registrations, applyEdit...) are answered as an editor would."""

    def __init__(self, tmp_path: Path, env: dict[str, str] | None = None, light: bool = False) -> None:
        self.log_path = tmp_path / f"server-{time.monotonic_ns()}.log"
        self.stderr = open(tmp_path / f"stderr-{time.monotonic_ns()}.txt", "w+b")  # noqa: SIM115
        self.proc = subprocess.Popen(
            SERVER,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            env={
                "FORGE_CACHE_DIR": CACHE,
                "PATH": "/usr/local/bin:/usr/bin:/bin",
                "OMP_NUM_THREADS": "1",
                "FORGE_LSP_LOG": str(self.log_path),
                **(env or {}),
            },
        )
        self.received: list[dict[str, Any]] = []  # everything (not in light mode)
        self.by_id: dict[Any, list[dict[str, Any]]] = {}  # replies by request id (null: under None)
        # light mode (the soak): replies kept as {id, error} except those `call` waits for; notifications counted
        self.light = light
        self.keep: set[Any] = set()
        self.counts: dict[str, int] = {}
        self.cond = threading.Condition()
        self.next_id = 1000
        self.docs: dict[str, dict[str, Any]] = {}
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    # -- wire
    def _read(self) -> None:
        out = self.proc.stdout
        while True:
            length = None
            while True:
                line = out.readline()
                if not line:
                    with self.cond:
                        self.cond.notify_all()
                    return
                if line in (b"\r\n", b"\n"):
                    break
                name, _, value = line.decode("ascii").partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
            assert length is not None, "the server sent a frame without Content-Length"
            body = out.read(length)
            msg = json.loads(body)
            if "method" in msg and "id" in msg:
                self._answer(msg)
            with self.cond:
                if "method" not in msg:
                    rid = msg.get("id")
                    kept = msg if not self.light or rid in self.keep else {"id": rid, "error": msg.get("error")}
                    self.by_id.setdefault(rid, []).append(kept)
                else:
                    self.counts[msg["method"]] = self.counts.get(msg["method"], 0) + 1
                if not self.light:
                    self.received.append(msg)
                self.cond.notify_all()

    def _answer(self, msg: dict[str, Any]) -> None:
        method = msg["method"]
        result: Any = None
        if method == "workspace/configuration":
            result = [None for _ in msg["params"]["items"]]
        elif method == "workspace/applyEdit":
            result = {"applied": True}
        elif method == "window/showDocument":
            result = {"success": True}
        self.send({"jsonrpc": "2.0", "id": msg["id"], "result": result})

    def send_bytes(self, data: bytes) -> None:
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, obj: Any) -> None:
        self.send_bytes(frame(obj))

    def request(self, method: str, params: Any = MISSING, msg_id: Any = None) -> Any:
        if msg_id is None:
            self.next_id += 1
            msg_id = self.next_id
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not MISSING:
            msg["params"] = params
        self.send(msg)
        return msg_id

    def notify(self, method: str, params: Any = MISSING) -> None:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not MISSING:
            msg["params"] = params
        self.send(msg)

    def wait(self, predicate: Callable[[], Any], timeout: float = 30.0, what: str = "a condition") -> Any:
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                value = predicate()
                if value:
                    return value
                left = deadline - time.monotonic()
                assert left > 0, f"timed out waiting for {what}; last messages: {self.received[-5:]}"
                self.cond.wait(min(left, 0.2))

    def replies(self, msg_id: Any) -> list[dict[str, Any]]:
        return list(self.by_id.get(msg_id, []))

    def reply(self, msg_id: Any, timeout: float = 30.0) -> dict[str, Any]:
        return self.wait(lambda: next(iter(self.replies(msg_id)), None), timeout, f"the reply to {msg_id!r}")

    def call(self, method: str, params: Any = MISSING, timeout: float = 30.0) -> dict[str, Any]:
        self.next_id += 1
        msg_id = self.next_id
        self.keep.add(msg_id)
        reply = self.reply(self.request(method, params, msg_id=msg_id), timeout)
        if self.light:  # read: keep only what the accounting needs
            with self.cond:
                self.by_id[msg_id] = [{"id": msg_id, "error": m.get("error")} for m in self.by_id[msg_id]]
                self.keep.discard(msg_id)
        return reply

    def notifications(self, method: str) -> list[dict[str, Any]]:
        with self.cond:
            return [m for m in self.received if m.get("method") == method and "id" not in m]

    def alive_and_answering(self) -> None:
        """A valid request right after: answered, and promptly."""
        reply = self.call("forge/runs", None, timeout=10)
        assert "result" in reply and "runs" in reply["result"], reply

    # -- LSP
    def initialize(self, root: Path | None = None, capabilities: dict | None = None, options: dict | None = None):
        reply = self.call(
            "initialize",
            {
                "processId": os.getpid(),
                "rootUri": root.as_uri() if root else None,
                "capabilities": capabilities or {},
                "initializationOptions": {"forge": options or {}},
            },
            timeout=60,
        )
        assert "result" in reply, reply
        self.notify("initialized", {})
        return reply

    def open(self, path: Path) -> str:
        uri = path.as_uri()
        text = path.read_text()
        self.docs[uri] = {"text": text, "version": 1}
        self.notify(
            "textDocument/didOpen",
            {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": text}},
        )
        return uri

    def edit(self, uri: str, text: str) -> None:
        doc = self.docs[uri]
        doc["text"], doc["version"] = text, doc["version"] + 1
        self.notify(
            "textDocument/didChange",
            {"textDocument": {"uri": uri, "version": doc["version"]}, "contentChanges": [{"text": text}]},
        )

    def progress(self, token: str) -> list[dict[str, Any]]:
        return [m["params"]["value"] for m in self.notifications("$/progress") if m["params"]["token"] == token]

    def diagnostics(self, uri: str) -> list[dict[str, Any]]:
        published = [m["params"] for m in self.notifications("textDocument/publishDiagnostics")]
        mine = [p for p in published if p["uri"] == uri]
        return mine[-1]["diagnostics"] if mine else []

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def stderr_text(self) -> str:
        self.stderr.flush()
        self.stderr.seek(0)
        return self.stderr.read().decode(errors="replace")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.stderr.close()


# ------------------------------------------------------------------------------- process helpers
@pytest.fixture()
def raw(tmp_path):
    clients: list[RawClient] = []

    def make(**kw) -> RawClient:
        c = RawClient(tmp_path, **kw)
        clients.append(c)
        return c

    yield make
    for c in clients:
        c.close()


@pytest.fixture()
def server(raw, tmp_path) -> RawClient:
    """An initialized server on a workspace holding the slow softmax module."""
    (tmp_path / "softmax_mod.py").write_text(TASK)
    c = raw()
    c.initialize(tmp_path)
    return c


# ------------------------------------------------------------------------- 1, 2: broken frames
def test_a_frame_declaring_a_huge_length_is_refused_and_the_server_goes_on(server):
    """`Content-Length: 99999999999` made pygls allocate the frame (MemoryError) and the server exit."""
    server.send_bytes(b"Content-Length: 99999999999\r\n\r\n" + b'{"jsonrpc": "2.0", "id": 1, "method": "x"}')
    server.alive_and_answering()
    assert server.proc.poll() is None
    assert "refused a frame of 99999999999 bytes" in server.log()
    assert not server.replies(1)  # the refused frame's id is not known: no reply


def test_a_real_frame_over_the_limit_is_skipped_byte_for_byte(server):
    """A frame over 64 MiB that does arrive is skipped exactly (its declared bytes), then the next one is read."""
    text = "x" * (65 * 1024 * 1024)
    body = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "forge/runs", "params": {"pad": text}}).encode()
    server.send_bytes(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    server.alive_and_answering()
    assert not server.replies(7) and "refused a frame" in server.log()


def test_a_body_shorter_than_its_header_says_is_a_parse_error_then_the_server_resynchronizes(server):
    body = json.dumps({"jsonrpc": "2.0", "id": 11, "method": "forge/runs", "params": None}).encode()
    # the rest of the body is junk before the next header: no stray CRLF is needed to get past it
    server.send_bytes(
        b"Content-Length: 20\r\n\r\n" + body + frame({"jsonrpc": "2.0", "id": 12, "method": "forge/runs"})
    )
    parse_error = server.wait(lambda: next((m for m in server.received if m.get("id") is None and "error" in m), None))
    assert parse_error["error"]["code"] == PARSE_ERROR
    assert "result" in server.reply(12, timeout=10)
    server.alive_and_answering()


def test_a_body_longer_than_its_header_says_is_cut_at_the_next_header(server):
    first = json.dumps({"jsonrpc": "2.0", "id": 21, "method": "forge/runs", "params": None}).encode()
    # the declared length runs 30 bytes into the next frame: it is found there, not waited for
    server.send_bytes(
        b"Content-Length: %d\r\n\r\n" % (len(first) + 30)
        + first
        + frame({"jsonrpc": "2.0", "id": 22, "method": "forge/runs"})
    )
    assert "result" in server.reply(21, timeout=10)
    assert "result" in server.reply(22, timeout=10)
    server.alive_and_answering()


@pytest.mark.parametrize(
    "header",
    [b"Content-Length: abc\r\n", b"Content-Length: -5\r\n", b"Content-Type: application/vscode-jsonrpc\r\n", b""],
    ids=["non-numeric", "negative", "missing", "no-header-at-all"],
)
def test_a_request_without_a_usable_length_gets_an_invalid_request_error_and_the_next_one_is_read(server, header):
    body = json.dumps({"jsonrpc": "2.0", "id": 31, "method": "forge/runs", "params": None}).encode()
    blank = b"\r\n" if header else b""
    server.send_bytes(header + blank + body + frame({"jsonrpc": "2.0", "id": 32, "method": "forge/runs"}))
    (error,) = server.wait(lambda: server.replies(31), 10)
    assert error["error"]["code"] == INVALID_REQUEST and "not read" in error["error"]["message"], error
    assert "result" in server.reply(32, timeout=10)
    time.sleep(0.3)
    assert len(server.replies(31)) == 1  # exactly one reply
    server.alive_and_answering()


@pytest.mark.parametrize(
    "junk",
    [b"garbage\r\n", b"\x00\xff\xfe binary", b'"}}', b"Content-Length: 5\r\nX-Bad header\r\n\r\n", b"\r\n\r\n"],
    ids=["text-line", "binary", "json-tail", "bad-header-line", "blank-lines"],
)
def test_junk_between_frames_is_skipped_without_waiting_for_a_line_end(server, junk):
    server.send_bytes(junk + frame({"jsonrpc": "2.0", "id": 41, "method": "forge/runs"}))
    assert "result" in server.reply(41, timeout=10)
    server.alive_and_answering()


@pytest.mark.parametrize(
    "body, code",
    [
        (b'{"jsonrpc": "2.0", "id": 51, "method": "forge/runs"', PARSE_ERROR),
        (b"not json at all", PARSE_ERROR),
        (b"\xff\xfe\x00", PARSE_ERROR),
        (b"", PARSE_ERROR),
        (b"[" * 100_000 + b"]" * 100_000, PARSE_ERROR),
        (b'[{"jsonrpc": "2.0", "id": 51, "method": "forge/runs"}]', INVALID_REQUEST),
        (b"42", INVALID_REQUEST),
        (b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "forge/runs"}', INVALID_REQUEST),
    ],
    ids=["truncated-json", "text", "bad-utf8", "empty", "deep-nesting", "batch", "number", "object-id"],
)
def test_a_body_that_is_not_a_message_gets_an_error_with_id_null(server, body, code):
    server.send_bytes(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    error = server.wait(lambda: next((m for m in server.received if m.get("id") is None and "error" in m), None), 10)
    assert error["error"]["code"] == code, error
    server.alive_and_answering()


def test_a_request_in_a_wrong_jsonrpc_version_or_with_a_bad_method_is_invalid(server):
    server.send({"jsonrpc": "1.0", "id": 61, "method": "forge/runs"})
    server.send({"jsonrpc": "2.0", "id": 62, "method": 42})
    server.send({"jsonrpc": "2.0", "id": 63, "method": "forge/runs", "params": "a string"})
    assert server.reply(61)["error"]["code"] == INVALID_REQUEST
    assert server.reply(62)["error"]["code"] == INVALID_REQUEST
    assert server.reply(63)["error"]["code"] == INVALID_PARAMS
    server.alive_and_answering()


def test_frames_split_anywhere_are_read_whole(server):
    data = b"".join(frame({"jsonrpc": "2.0", "id": 70 + i, "method": "forge/runs"}) for i in range(5))
    for i in range(len(data)):  # one byte per write: headers and bodies cut at every position
        server.proc.stdin.write(data[i : i + 1])
        if i % 7 == 0:
            server.proc.stdin.flush()
    server.proc.stdin.flush()
    for i in range(5):
        assert "result" in server.reply(70 + i, timeout=10)


# ---------------------------------------------------------------------- 3: every request answered
@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """One initialized server for the params cases (each case also checks that it still answers)."""
    tmp = tmp_path_factory.mktemp("params")
    (tmp / "softmax_mod.py").write_text(TASK)
    client = RawClient(tmp)
    client.initialize(tmp)
    client.open(tmp / "softmax_mod.py")
    yield client
    client.close()


DOC = {"uri": "file:///nowhere/m.py"}
ZERO = {"line": 0, "character": 0}
RANGE = {"start": ZERO, "end": ZERO}
CTX = {"diagnostics": []}
BAD_PARAMS = [
    ("textDocument/hover", MISSING),
    ("textDocument/hover", None),
    ("textDocument/hover", {}),
    ("textDocument/hover", {"textDocument": DOC, "position": {"line": -1, "character": 0}}),
    ("textDocument/codeAction", MISSING),
    ("textDocument/codeAction", None),
    ("textDocument/codeAction", {"textDocument": DOC, "context": CTX}),
    ("textDocument/codeAction", {"textDocument": DOC, "range": RANGE}),
    ("textDocument/codeAction", {"range": RANGE, "context": CTX}),
    (
        "textDocument/codeAction",
        {"textDocument": DOC, "range": {"start": {"line": -1, "character": 0}, "end": ZERO}, "context": CTX},
    ),
    (
        "textDocument/codeAction",
        {"textDocument": DOC, "range": {"start": ZERO, "end": {"line": 0, "character": -3}}, "context": CTX},
    ),
    ("textDocument/codeLens", MISSING),
    ("textDocument/codeLens", None),
    ("textDocument/codeLens", {}),
    ("workspace/executeCommand", MISSING),
    ("workspace/executeCommand", None),
    ("workspace/executeCommand", {"arguments": []}),
    ("workspace/executeCommand", {"command": "forge.optimize", "arguments": "not-a-list"}),
    ("workspace/executeCommand", {"command": "forge.optimize", "arguments": {"uri": "x"}}),
    ("workspace/executeCommand", {"command": "forge.optimize", "arguments": []}),
    ("workspace/executeCommand", {"command": "forge.optimize"}),
    ("workspace/executeCommand", {"command": "forge.optimize", "arguments": [42, "Model"]}),
    ("workspace/executeCommand", {"command": "forge.accept", "arguments": ["file:///m.py", "Model"]}),
    ("workspace/executeCommand", {"command": "forge.showDiff", "arguments": [None, None, None, None]}),
    ("workspace/executeCommand", {"command": "forge.cancel", "arguments": [42]}),
    ("workspace/executeCommand", {"command": "forge.cancel", "arguments": ["a", "b"]}),
    ("workspace/executeCommand", {"command": "forge.noSuchCommand", "arguments": []}),
]


@pytest.mark.parametrize(("method", "params"), BAD_PARAMS, ids=lambda v: "missing" if v is MISSING else None)
def test_bad_params_get_invalid_params_and_the_server_goes_on(shared, method, params):
    reply = shared.call(method, params, timeout=10)
    assert reply.get("error", {}).get("code") == INVALID_PARAMS, reply
    assert reply["error"]["message"], reply
    shared.alive_and_answering()


def test_arguments_that_are_not_a_list_are_not_read_character_by_character(shared):
    reply = shared.call("workspace/executeCommand", {"command": "forge.optimize", "arguments": "not-a-list"})
    assert reply["error"]["code"] == INVALID_PARAMS and "array" in reply["error"]["message"], reply
    assert "cannot read n" not in shared.log()


@pytest.mark.parametrize("params", [MISSING, None], ids=["missing", "null"])
def test_forge_requests_without_params_are_answered(shared, params):
    runs = shared.call("forge/runs", params, timeout=10)
    assert "runs" in runs["result"], runs
    run = shared.call("forge/run", params, timeout=10)  # documented: malformed params are the result's `error`
    assert "runId" in run["result"]["error"] and "run" not in run["result"], run


def test_an_unknown_method_is_method_not_found_and_a_second_initialize_is_invalid(shared):
    assert shared.call("forge/noSuchRequest", {}, timeout=10)["error"]["code"] == METHOD_NOT_FOUND
    again = shared.call("initialize", {"processId": None, "rootUri": None, "capabilities": {}}, timeout=10)
    assert again["error"]["code"] == INVALID_REQUEST, again
    shared.alive_and_answering()


def test_every_request_got_exactly_one_reply(shared):
    ids = [m["id"] for m in shared.received if "method" not in m and m.get("id") is not None]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)


@pytest.mark.parametrize(
    "params",
    [MISSING, None, {"processId": None}, {"processId": "abc", "capabilities": {}}],
    ids=["missing", "null", "no-capabilities", "bad-process-id"],
)
def test_initialize_without_valid_params_is_invalid_params_and_a_valid_one_still_works(raw, tmp_path, params):
    c = raw()
    early = c.call("forge/runs", None, timeout=30)
    assert early["error"]["code"] == -32002, early  # not initialized yet
    reply = c.call("initialize", params, timeout=30)
    assert reply["error"]["code"] == INVALID_PARAMS, reply
    assert "result" in c.initialize(tmp_path)
    c.alive_and_answering()


def test_after_shutdown_requests_are_refused_and_exit_ends_with_0(server):
    assert server.call("shutdown", timeout=10)["result"] is None
    assert server.call("forge/runs", None, timeout=10)["error"]["code"] == INVALID_REQUEST
    server.notify("exit")
    assert server.proc.wait(timeout=10) == 0
    assert "Traceback" not in server.stderr_text()


def test_exit_without_shutdown_ends_with_1(server):
    server.notify("exit")
    assert server.proc.wait(timeout=10) == 1


# ------------------------------------------------------------------ 5: the client goes away mid-run
def workers_of(pid: int) -> list[int]:
    return [p for p in descendants(pid) if "forge_lsp.engine.worker" in cmdline(p)]


@pytest.mark.slow
def test_a_client_that_disconnects_with_two_runs_going_leaves_nothing_behind(raw, tmp_path, fake_openai):
    """stdin closed while two runs wait on the model (and the client had work-done progress): the server
    exits 0 at once, both jobs are cancelled and no process it started is left running a second later."""
    fake_openai.script(*({"delay": 60.0, "content": coder(FAST, "slow")} for _ in range(2)))
    c = raw()
    c.initialize(tmp_path, {"window": {"workDoneProgress": True}}, scripted_settings(fake_openai.base_url, workers=2))
    jobs = []
    for name in ("first.py", "second.py"):
        (tmp_path / name).write_text(TASK)
        uri = c.open(tmp_path / name)
        started = c.call("workspace/executeCommand", {"command": "forge.optimize", "arguments": [uri, "Model"]})
        jobs.append(started["result"]["job"])
    deadline = time.monotonic() + 120
    while len(fake_openai.chat_requests) < 2 or len(workers_of(c.proc.pid)) < 2:
        if time.monotonic() > deadline:  # the whole log: pytest would cut an assert's message
            pytest.fail(f"{len(fake_openai.chat_requests)} model requests, workers {workers_of(c.proc.pid)}\n{c.log()}")
        time.sleep(0.2)
    children = descendants(c.proc.pid)
    assert len(workers_of(c.proc.pid)) >= 2 and all(c.progress(f"forge/{j}") for j in jobs)
    closed = time.monotonic()
    c.proc.stdin.close()  # the editor is gone
    assert c.proc.wait(timeout=10) == 0
    exited = time.monotonic() - closed
    while running(children) and time.monotonic() - closed < 1.5:
        time.sleep(0.05)
    left = running(children)
    assert not left, [(p, cmdline(p)) for p in left]
    assert exited < 1.5, exited
    log, stderr = c.log(), c.stderr_text()
    assert "Traceback" not in stderr and "Event loop is closed" not in log + stderr, (stderr[-3000:], log[-3000:])
    for job in jobs:
        assert f"job {job} cancelled" in log, log[-3000:]


# ------------------------------------------------ 4: cancel during the probe; 6: the user's own crash


@pytest.mark.slow
def test_cancelling_an_optimize_during_the_graph_probe_ends_the_probe_and_its_children(raw, tmp_path):
    """The offline run's FX-graph probe hangs in the user's forward: `forge.cancel` ends it (and the child it
    started) within a second, and the job ends as cancelled."""
    from test_process_tree import TASK_HANGS_UNDER_TRACING

    mark = tmp_path / "probe-child"
    (tmp_path / "hangs.py").write_text(TASK_HANGS_UNDER_TRACING.format(mark=str(mark)))
    (tmp_path / "pyproject.toml").write_text("[tool.forge]\noffline_library = true\n")  # the probe runs on the CPU too
    c = raw()
    c.initialize(tmp_path, PROGRESS, {"device": "cpu", "profile": False})
    uri = c.open(tmp_path / "hangs.py")
    job = start_optimize(c, uri)

    def probe_tree() -> list[int]:
        probes = [p for p in descendants(c.proc.pid) if "forge_lsp.agent.offline.probe" in cmdline(p)]
        return [probes[0], *descendants(probes[0])] if probes else []

    tree = c.wait(lambda: mark.exists() and (t := probe_tree()) and len(t) >= 2 and t, 180, "the probe and its child")
    cancel_kills(c, job, tree)


def test_on_a_gpu_machine_a_spare_profiled_process_waits_from_the_start_and_ends_with_the_server(raw, tmp_path):
    """A machine whose `nvidia-smi -L` lists a GPU: the server starts one spare profiled process when the workspace
    opens (the first Explain finds torch and CUDA up), and it is gone when the editor goes. With
    FORGE_PROFILE_SPARE=0 there is none."""
    if Path("/proc/driver/nvidia/gpus").exists():
        pytest.skip("a real GPU here: the count does not come from the stand-in nvidia-smi")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(f"#!{sys.executable}\nprint('GPU 0: NVIDIA H200 (UUID: GPU-0)')\n")
    smi.chmod(0o755)
    path = f"{bin_dir}:/usr/local/bin:/usr/bin:/bin"

    def spares(c: RawClient) -> list[int]:
        return [p for p in descendants(c.proc.pid) if "forge_lsp.profiler.target --spare cuda:0" in cmdline(p)]

    c = raw(env={"PATH": path})
    c.initialize(tmp_path, PROGRESS, {"device": "cuda:0"})
    waiting = c.wait(lambda: spares(c), 60, "a spare profiled process")
    assert len(waiting) == 1
    c.proc.stdin.close()  # the editor is gone
    assert c.proc.wait(timeout=30) == 0
    deadline = time.monotonic() + 5
    while running(waiting) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not running(waiting)
    off = raw(env={"PATH": path, "FORGE_PROFILE_SPARE": "0"})
    off.initialize(tmp_path, PROGRESS, {"device": "cuda:0"})
    time.sleep(3)
    assert spares(off) == []


def test_cancelling_an_explain_kills_its_profiled_process(raw, tmp_path):
    """An Explain whose module hangs in its forward: `forge.cancel` kills the profiled process within a second and
    the job ends as cancelled, with no finding published."""
    source = TASK.replace(
        "    def forward(self, x):\n", "    def forward(self, x):\n        import time\n        time.sleep(600)\n", 1
    )
    (tmp_path / "hangs.py").write_text(source)
    c = raw()
    c.initialize(tmp_path, PROGRESS, {"device": "cpu"})
    uri = c.open(tmp_path / "hangs.py")
    started = c.call("workspace/executeCommand", {"command": "forge.explain", "arguments": [uri, "Model"]})
    job = started["result"]["job"]

    def profiled() -> list[int]:
        return [p for p in descendants(c.proc.pid) if "forge_lsp.profiler.target" in cmdline(p)]

    tree = c.wait(lambda: profiled(), 120, "the profiled process")
    time.sleep(1.0)  # starting, or already in its hanging warm-up call: either way it must go
    cancel_kills(c, job, tree)


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["os._exit(3)", "__import__('ctypes').string_at(0)"], ids=["exit", "segfault"])
def test_a_reference_that_exits_or_segfaults_is_the_users_and_no_candidate_is_asked_for(
    raw, tmp_path, fake_openai, fault
):
    """The user's own forward dies in the worker: a `reference-failed` diagnostic on the class, not a candidate
    crash; the model is never asked for a candidate."""
    source = TASK.replace(
        "    def forward(self, x):\n", f"    def forward(self, x):\n        import os\n        {fault}\n", 1
    )
    assert fault in source
    (tmp_path / "dies.py").write_text(source)
    c = raw()
    c.initialize(tmp_path, PROGRESS, scripted_settings(fake_openai.base_url))
    uri = c.open(tmp_path / "dies.py")
    job = start_optimize(c, uri)
    end = ended(c, job, 120)
    diag = c.wait(
        lambda: next((d for d in c.diagnostics(uri) if d.get("code") == "reference-failed"), None),
        30,
        "the reference-failed diagnostic",
    )
    fault_line = next(i for i, line in enumerate(source.splitlines()) if fault in line)
    assert diag["range"]["start"]["line"] == fault_line, (diag, fault_line)  # the line that died, not the class
    assert "reference model failed" in diag["message"] and "candidate" not in diag["message"], diag
    assert not fake_openai.chat_requests, "a candidate was asked for although the reference cannot run"
    assert "failed" in end["message"] or "reference" in end["message"], end
    c.alive_and_answering()


# ------------------------------------------------------------- 7: stale answers, honest progress
PROGRESS = {"window": {"workDoneProgress": True}, "workspace": {"codeLens": {"refreshSupport": True}}}


def cancel_kills(c: RawClient, job: str, tree: list[int]) -> None:
    """`forge.cancel` of `job` ends the processes of `tree` within 1.5 s, the job ends as cancelled, and the server
    goes on answering."""
    t0 = time.monotonic()
    reply = c.call("workspace/executeCommand", {"command": "forge.cancel", "arguments": [job]})
    assert "result" in reply, reply
    while running(tree) and time.monotonic() - t0 < 1.5:
        time.sleep(0.05)
    assert not running(tree), [(p, cmdline(p)) for p in running(tree)]
    end = ended(c, job, 30)
    assert "cancel" in end["message"], end
    assert job_of(c, job)["status"] == "cancelled"
    c.alive_and_answering()


def start_optimize(c: RawClient, uri: str) -> str:
    started = c.call("workspace/executeCommand", {"command": "forge.optimize", "arguments": [uri, "Model"]})
    assert "job" in started["result"], started
    return started["result"]["job"]


def ended(c: RawClient, job: str, timeout: float = 180.0) -> dict[str, Any]:
    return c.wait(
        lambda: next((v for v in c.progress(f"forge/{job}") if v["kind"] == "end"), None), timeout, f"{job}'s end"
    )


def job_of(c: RawClient, job: str) -> dict[str, Any]:
    return next(j for j in c.call("forge/runs", None)["result"]["runs"] if j["id"] == job)


def lenses(c: RawClient, uri: str) -> list[dict[str, Any]]:
    return c.call("textDocument/codeLens", {"textDocument": {"uri": uri}})["result"]


@pytest.mark.slow
def test_an_edit_during_a_run_makes_its_answer_stale_and_nothing_is_offered(raw, tmp_path, fake_openai):
    (tmp_path / "softmax_mod.py").write_text(TASK)
    c = raw()
    c.initialize(tmp_path, PROGRESS, scripted_settings(fake_openai.base_url))
    uri = c.open(tmp_path / "softmax_mod.py")
    fake_openai.script({"delay": 2.0, "content": coder(FAST, "vectorized")})
    job = start_optimize(c, uri)
    c.wait(lambda: fake_openai.chat_requests, 60, "the model call")
    c.edit(uri, c.docs[uri]["text"].replace("dim = 32", "dim = 48"))  # while the run goes on
    end = ended(c, job)
    assert "not offered" in end["message"] and "changed" in end["message"], end
    assert "faster candidate found" not in end["message"]
    time.sleep(0.5)
    assert not any(d.get("code") == "faster-candidate" for d in c.diagnostics(uri)), c.diagnostics(uri)
    published = [
        p for p in (m["params"] for m in c.notifications("textDocument/publishDiagnostics")) if p["uri"] == uri
    ]
    assert not any(d.get("code") == "faster-candidate" for p in published for d in p["diagnostics"])
    commands = [(lens["command"]["title"], lens["command"]["command"]) for lens in lenses(c, uri)]
    assert not any(cmd in ("forge.accept", "forge.showDiff", "forge.reject") for _, cmd in commands), commands
    assert any("re-run" in title and cmd == "forge.optimize" for title, cmd in commands), commands
    info = job_of(c, job)
    assert info["decision"] == "stale" and "proposal" not in info, info
    shown = [m["params"] for m in c.notifications("window/showMessage")]
    assert any(s["type"] == 3 and "changed" in s["message"] for s in shown), shown
    # a new run on the current code takes the re-run lens away
    fake_openai.script(coder(FAST + "\n# again\n", "vectorized"))
    start_optimize(c, uri)
    commands = [lens["command"]["title"] for lens in lenses(c, uri)]
    assert not any("re-run" in title for title in commands), commands


@pytest.mark.slow
def test_progress_begins_reports_rising_percentages_and_ends(raw, tmp_path, fake_openai):
    (tmp_path / "softmax_mod.py").write_text(TASK)
    c = raw()
    c.initialize(tmp_path, PROGRESS, scripted_settings(fake_openai.base_url))
    uri = c.open(tmp_path / "softmax_mod.py")
    fake_openai.script({"delay": 1.0, "content": coder(FAST, "vectorized")})
    job = start_optimize(c, uri)
    ended(c, job)
    values = c.progress(f"forge/{job}")
    kinds = [v["kind"] for v in values]
    assert kinds[0] == "begin" and kinds[-1] == "end" and kinds.count("begin") == kinds.count("end") == 1, kinds
    reports = [v for v in values if v["kind"] == "report"]
    percentages = [r["percentage"] for r in reports]
    assert reports and all(isinstance(p, int) and 0 <= p <= 100 for p in percentages), reports
    assert percentages == sorted(percentages), percentages  # never goes back
    # it moves during the round, before the final re-timing, not only at the end
    before_final = [r["percentage"] for r in reports if not r["message"].startswith("final")]
    assert len({p for p in before_final}) >= 3 and max(before_final) > 0, reports


@pytest.mark.slow
def test_a_rerun_that_offers_nothing_does_not_say_it_found_a_candidate(raw, tmp_path, fake_openai):
    (tmp_path / "softmax_mod.py").write_text(TASK)
    c = raw()
    c.initialize(tmp_path, PROGRESS, scripted_settings(fake_openai.base_url))
    uri = c.open(tmp_path / "softmax_mod.py")
    source = FAST + "\n# rejected\n"
    fake_openai.script(coder(source, "vectorized"))
    first = start_optimize(c, uri)
    assert "found" in ended(c, first)["message"]
    accept = next(lens["command"] for lens in lenses(c, uri) if lens["command"]["command"] == "forge.reject")
    assert c.call("workspace/executeCommand", {"command": "forge.reject", "arguments": accept["arguments"]})["result"][
        "rejected"
    ]
    fake_openai.script(coder(source, "vectorized"))  # the same candidate again, on the same code
    second = start_optimize(c, uri)
    end = ended(c, second)
    assert "faster candidate found" not in end["message"] and "not offered" in end["message"], end
    assert not any(lens["command"]["command"] == "forge.accept" for lens in lenses(c, uri))


def test_a_failed_kernel_explain_has_its_progress_begin_and_end(raw, tmp_path):
    ws = tmp_path / "kernels"
    ws.mkdir()
    cu = ws / "lonely.cu"  # no Python file launches it: the job fails
    cu.write_text('extern "C" __global__ void lonely(float* y, int n) {\n    y[0] = 1.0f;\n}\n')
    c = raw()
    c.initialize(ws, PROGRESS, {"device": "cpu"})
    c.notify(
        "textDocument/didOpen",
        {"textDocument": {"uri": cu.as_uri(), "languageId": "cuda", "version": 1, "text": cu.read_text()}},
    )
    for kind in ("explain", "profile"):
        started = c.call("workspace/executeCommand", {"command": f"forge.{kind}", "arguments": [cu.as_uri(), "lonely"]})
        job = started["result"]["job"]
        end = ended(c, job, 60)
        kinds = [v["kind"] for v in c.progress(f"forge/{job}")]
        assert kinds[0] == "begin" and kinds[-1] == "end", kinds
        assert end["message"].startswith("failed") and job_of(c, job)["status"] == "failed", end


# ------------------------------------------------------------------------- the decoder on its own
def test_the_decoder_recovers_every_good_frame_however_the_bytes_are_split():
    """Good frames between every kind of bad one, fed whole, byte by byte and in random chunks: each good
    frame comes out, the same events in the same order every time."""
    import random

    from forge_lsp.server.transport import FrameDecoder, Message, Unframed

    rng = random.Random(7)

    def body(i: int) -> bytes:
        return json.dumps(
            {"jsonrpc": "2.0", "id": i, "method": "forge/runs", "params": {"pad": "é" * (i % 50)}}
        ).encode()

    faults = [
        lambda b: b"Content-Length: %d\r\n\r\n" % (len(b) // 2) + b,  # too short
        lambda b: b"Content-Length: %d\r\n\r\n" % (len(b) + 9) + b,  # too long
        lambda b: b"Content-Length: twelve\r\n\r\n" + b,  # not a number
        lambda b: b"Content-Type: x\r\n\r\n" + b,  # no length
        lambda b: b,  # no header at all
        lambda b: b"Content-Length: 99999999999\r\n\r\n" + b,  # over the limit
        lambda b: b"junk junk\r\n",
        lambda b: b"\x00\xff\xfe",
        lambda b: b'{"unterminated": ',
    ]
    stream, good = b"", []
    for i in range(300):
        if rng.random() < 0.4:
            stream += rng.choice(faults)(body(10_000 + i))
        good.append(body(i))
        stream += frame(json.loads(good[-1]))

    def events(chunks: list[bytes]) -> list[tuple[str, Any]]:
        d = FrameDecoder(limit=1024 * 1024)
        out = []
        for chunk in chunks:
            for e in d.feed(chunk):
                assert isinstance(e, (Message, Unframed))
                out.append(("message", e.body) if isinstance(e, Message) else ("unframed", repr(e.value)))
        return out

    whole = events([stream])
    bodies = [b for kind, b in whole if kind == "message"]
    assert all(g in bodies for g in good), [g for g in good if g not in bodies][:3]
    assert events([stream[i : i + 1] for i in range(len(stream))]) == whole
    for _ in range(5):
        cuts = sorted(rng.sample(range(1, len(stream)), 400))
        assert events([stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]) == whole
