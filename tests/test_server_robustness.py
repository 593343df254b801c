"""Bad input never takes the server down; a client that disappears mid-run leaves no worker behind."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import pytest_lsp
from conftest import FIXTURES
from lsp_session import open_session
from lsprotocol import types as t
from proctree import descendants
from pytest_lsp import ClientServerConfig, LanguageClient

pytestmark = pytest.mark.integration  # real processes end to end: left out of the fast loop (./dev test --fast)

pytest_plugins = ["fake_openai"]
CACHE = tempfile.mkdtemp(prefix="forge-lsp-robust-cache-")
atexit.register(shutil.rmtree, CACHE, True)  # the servers' compile cache, shared by the module's tests


@pytest_lsp.fixture(
    config=ClientServerConfig(
        server_command=[sys.executable, "-m", "forge_lsp.server"],
        server_env={"FORGE_CACHE_DIR": CACHE, "PATH": "/usr/local/bin:/usr/bin:/bin", "OMP_NUM_THREADS": "1"},
    )
)
async def client(lsp_client: LanguageClient, tmp_path: Path):
    (tmp_path / "broken.py").write_text("import torch.nn as nn\n\nclass Broken(nn.Module):\n    def forward(self, x:\n")
    (tmp_path / "latin1.py").write_bytes("# caf\xe9\nclass A: pass\n".encode("latin-1"))
    (tmp_path / "blob.py").write_bytes(b"\x00\x01\x02binary\x00" * 100)
    (tmp_path / "huge.py").write_text("x = 1\n" * 400_000)

    await open_session(lsp_client, tmp_path, {"rounds": "many", "colour": "blue"})
    yield
    await lsp_client.shutdown_session()


def _open(client: LanguageClient, uri: str, text: str) -> None:
    client.text_document_did_open(
        t.DidOpenTextDocumentParams(
            text_document=t.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)
        )
    )


async def _requests_work(client: LanguageClient, uri: str) -> None:
    doc = t.TextDocumentIdentifier(uri=uri)
    zero = t.Range(start=t.Position(line=0, character=0), end=t.Position(line=0, character=0))
    await client.text_document_code_action_async(
        t.CodeActionParams(text_document=doc, range=zero, context=t.CodeActionContext(diagnostics=[]))
    )
    await client.text_document_code_lens_async(t.CodeLensParams(text_document=doc))
    await client.text_document_hover_async(t.HoverParams(text_document=doc, position=t.Position(line=2, character=7)))


@pytest.mark.asyncio
async def test_bad_documents_and_uris_get_answers_not_crashes(client: LanguageClient, tmp_path):
    broken = (tmp_path / "broken.py").as_uri()
    _open(client, broken, (tmp_path / "broken.py").read_text())
    await _requests_work(client, broken)
    lenses = await client.text_document_code_lens_async(
        t.CodeLensParams(text_document=t.TextDocumentIdentifier(uri=broken))
    )
    assert any(lens.command.title.startswith("Optimize Broken") for lens in lenses)  # indexed despite the error
    for name in ("latin1.py", "blob.py", "huge.py"):
        await _requests_work(client, (tmp_path / name).as_uri())
    _open(client, "untitled:Untitled-1", "class M: pass\n")
    await _requests_work(client, "untitled:Untitled-1")
    await _requests_work(client, "file:///does/not/exist.py")
    # invalid settings were reported, not fatal
    assert any("forge.rounds" in m.message for m in client.messages)
    assert any("forge.colour" in m.message for m in client.messages)


@pytest.mark.asyncio
async def test_malformed_commands_get_errors_and_the_server_goes_on(client: LanguageClient, tmp_path):
    for args in ([], [42], ["file:///nope.py", "Nope"], [{"a": 1}, None]):
        try:
            reply = await client.workspace_execute_command_async(
                t.ExecuteCommandParams(command="forge.optimize", arguments=args)
            )
            assert "error" in reply
        except Exception as exc:  # noqa: BLE001 - a JSON-RPC error response is fine too
            assert "Invalid" in str(exc) or "expected" in str(exc) or "error" in str(exc).lower()
    await _requests_work(client, (tmp_path / "broken.py").as_uri())


def _lsp_send(proc: subprocess.Popen, payload: dict) -> None:
    body = json.dumps(payload).encode()
    proc.stdin.write(f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    proc.stdin.flush()


def _worker_pids(server: int) -> list[int]:
    """The evaluation workers below the server: started by it, or forked by its zygote."""
    return [p for p, cmd in descendants(server).items() if "forge_lsp.engine.worker" in cmd]


@pytest.mark.slow
def test_client_that_disappears_mid_run_leaves_no_workers(tmp_path, fake_openai):
    cache = str(tmp_path / "cache")
    (tmp_path / "softmax_mod.py").write_text((FIXTURES / "slow_softmax.py").read_text())
    fake_openai.script({"delay": 60.0, "content": "{}"})
    env = {"FORGE_CACHE_DIR": cache, "PATH": "/usr/local/bin:/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
    server_log = tmp_path / "server.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "forge_lsp.server"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=server_log.open("wb"),
        env=env,
    )
    uri = (tmp_path / "softmax_mod.py").as_uri()
    _lsp_send(
        proc,
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "processId": os.getpid(),
                "rootUri": tmp_path.as_uri(),
                "capabilities": {},
                "initializationOptions": {
                    "forge": {
                        "model": "scripted",
                        "baseUrl": fake_openai.base_url,
                        "device": "cpu",
                        "offline": False,
                        "profile": False,
                        "search": "linear",
                    }
                },
            },
        },
    )
    _lsp_send(proc, {"jsonrpc": "2.0", "method": "initialized", "params": {}})
    _lsp_send(
        proc,
        {
            "jsonrpc": "2.0",
            "method": "textDocument/didOpen",
            "params": {
                "textDocument": {
                    "uri": uri,
                    "languageId": "python",
                    "version": 1,
                    "text": (tmp_path / "softmax_mod.py").read_text(),
                }
            },
        },
    )
    _lsp_send(
        proc,
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "workspace/executeCommand",
            "params": {"command": "forge.optimize", "arguments": [uri, "Model"]},
        },
    )
    deadline = time.monotonic() + 180  # the reference's evaluation comes first: slow beside a loaded suite
    while not (fake_openai.chat_requests and _worker_pids(proc.pid)) and time.monotonic() < deadline:
        time.sleep(0.2)
    workers = _worker_pids(proc.pid)
    assert fake_openai.chat_requests and workers, (
        "the run did not get to its model call with a worker up; the server said:\n"
        + server_log.read_text(errors="replace")[-3000:]
    )
    proc.stdin.close()  # the editor is gone
    proc.wait(timeout=20)
    deadline = time.monotonic() + 10
    while any(Path(f"/proc/{p}").exists() for p in workers) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [p for p in workers if Path(f"/proc/{p}").exists()], "worker processes outlived the server"
