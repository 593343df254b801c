"""How editors launch the server (vscode-languageclient appends `--stdio`; node clients add
`--clientProcessId=N`), what a bad argument does, and which folders the server watches itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration  # real processes end to end: left out of the fast loop (./dev test --fast)

SERVER = [sys.executable, "-m", "forge_lsp.server"]


def frame(obj: dict) -> bytes:
    body = json.dumps(obj).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def read_frame(stream) -> dict:
    length = None
    while True:
        line = stream.readline()
        assert line, "the server closed stdout"
        if line in (b"\r\n", b"\n"):
            break
        name, _, value = line.decode().partition(":")
        if name.lower() == "content-length":
            length = int(value)
    return json.loads(stream.read(length))


@pytest.mark.parametrize("extra", [["--stdio"], ["--stdio", "--clientProcessId=4242"], []])
def test_the_server_speaks_lsp_on_stdio_with_the_arguments_editors_pass(tmp_path, extra):
    proc = subprocess.Popen(
        [*SERVER, *extra],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "FORGE_LSP_LOG": str(tmp_path / "server.log")},
    )
    try:
        proc.stdin.write(
            frame(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {"processId": None, "rootUri": None, "capabilities": {}},
                }
            )
        )
        proc.stdin.flush()
        reply = read_frame(proc.stdout)
        assert reply["id"] == 1 and reply["result"]["serverInfo"]["name"] == "forge-lsp"
        for message in ({"jsonrpc": "2.0", "id": 2, "method": "shutdown"}, {"jsonrpc": "2.0", "method": "exit"}):
            proc.stdin.write(frame(message))
            proc.stdin.flush()
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--bogus"], "unrecognized arguments: --bogus"),
        (["--port", "9000"], "--host and --port go with --tcp"),
        (["--stdio", "--tcp"], "not allowed with argument"),
    ],
)
def test_a_bad_argument_exits_non_zero_with_the_reason(args, message):
    out = subprocess.run([*SERVER, *args], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert out.returncode == 2 and message in out.stderr and "usage: forge-lsp" in out.stderr, out
    assert out.stdout == ""  # stdout is the protocol stream: nothing else ever goes there


def test_tcp_listens_on_the_given_port(tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [*SERVER, "--tcp", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "FORGE_LSP_LOG": str(tmp_path / "server.log")},
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                conn = socket.create_connection(("127.0.0.1", port), timeout=5)
                break
            except OSError:
                assert time.monotonic() < deadline, "the server did not listen"
                time.sleep(0.2)
        with conn:
            conn.sendall(
                frame(
                    {
                        "jsonrpc": "2.0",
                        "id": 1,
                        "method": "initialize",
                        "params": {"processId": None, "rootUri": None, "capabilities": {}},
                    }
                )
            )
            reply = read_frame(conn.makefile("rb"))
        assert reply["result"]["serverInfo"]["name"] == "forge-lsp"
    finally:
        proc.kill()
        proc.wait(timeout=10)


# --------------------------------------------------------------------------------- file watching
def test_indexed_files_exclude_forges_own_folder_and_skipped_folders(tmp_path):
    from forge_lsp.server.server import indexed

    for rel in ("m.py", "pkg/m.py", "pkg/k.cu", "kernels/k.cuh"):
        assert indexed(tmp_path, str(tmp_path / rel)), rel
    for rel in (
        ".forge/proposals/r1/c1/m.py",
        ".git/x.py",
        "pkg/__pycache__/m.py",
        "node_modules/a/b.py",
        ".venv/lib/x.py",
        "pkg/.hidden/m.py",
        "notes.txt",
    ):
        assert not indexed(tmp_path, str(tmp_path / rel)), rel
    assert not indexed(tmp_path, "/elsewhere/m.py")


def test_the_server_watches_only_what_it_indexes_and_never_its_own_forge_folder(tmp_path, monkeypatch):
    """Without a client-side watcher the server watches itself: the root, and each top-level folder it indexes
    (recursively); `.forge/`, where it writes proposals, never, so its own writes raise no events or warnings."""
    from forge_lsp.server.app import create_server
    from forge_lsp.server.features import lifecycle

    for folder in ("pkg/sub", ".forge/proposals", ".git", "node_modules/x", "__pycache__"):
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "pkg" / "sub" / "m.py").write_text("class A: pass\n")
    from pygls.workspace import Workspace

    ls = create_server()
    ls.root = tmp_path
    ls.protocol._workspace = Workspace(tmp_path.as_uri())  # as `initialize` leaves it: no open documents
    changed: list[str] = []
    monkeypatch.setattr(lifecycle, "file_changed_outside", lambda ls_, uri, path: changed.append(path))
    ls.call_soon = lambda fn, *args: fn(*args)
    try:
        lifecycle._watch(ls)
        watched = {(Path(w.path).relative_to(tmp_path).as_posix(), w.is_recursive) for w in ls._observer._watches}
        assert watched == {(".", False), ("pkg", True)}, watched
        (tmp_path / ".forge" / "proposals" / "c1.py").write_text("x = 1\n")
        (tmp_path / "pkg" / "sub" / "m.py").write_text("class B: pass\n")
        (tmp_path / "newpkg").mkdir()  # a new top-level folder is watched from then on
        deadline = time.monotonic() + 10
        while not any(p.endswith("m.py") for p in changed) or ("newpkg", True) not in {
            (Path(w.path).relative_to(tmp_path).as_posix(), w.is_recursive) for w in ls._observer._watches
        }:
            assert time.monotonic() < deadline, (changed, ls._observer._watches)
            time.sleep(0.05)
        (tmp_path / "newpkg" / "n.py").write_text("class C: pass\n")
        while not any(p.endswith("n.py") for p in changed):
            assert time.monotonic() < deadline, changed
            time.sleep(0.05)
        assert not any("/.forge/" in p for p in changed), changed
    finally:
        ls._observer.stop()
