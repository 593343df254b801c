"""Model-wide runs in the editor, end to end: a real LSP client (pytest-lsp), the real server, a scripted model on
127.0.0.1, and the CPU. "Optimize model-wide" on the entry function runs the whole use case as a job (hot spots,
the hot class optimized on its captured inputs, the model checked end to end) with its progress; the kept
replacement is offered on the entry and accepted into the user's own class as one versioned edit (the file then
runs the answer, guarded, and its outputs match the original's); Undo puts the file back in one action; a stale
accept changes nothing; a cancel mid-run saves what finished, says so, and the Resume lens finishes it."""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
import pytest_lsp
from lsp_session import open_session, scripted_settings
from lsprotocol import types as t
from pytest_lsp import ClientServerConfig, LanguageClient
from test_model_wide import SUBCLASS  # the answer a model writes: the extracted task's source plus a subclass
from test_server_e2e import apply_text_edits, edit_doc, job_of, open_doc, until

pytest_plugins = ["fake_openai"]
pytestmark = pytest.mark.slow

CACHE = tempfile.mkdtemp(prefix="forge-lsp-model-wide-cache-")
atexit.register(shutil.rmtree, CACHE, True)

BLOCKS = textwrap.dedent(
    '''
    import torch
    import torch.nn as nn


    class SlowBlock(nn.Module):
        """A projection, then a softmax over each row in a Python loop: slow on purpose."""

        def __init__(self, dim):
            super().__init__()
            self.proj = nn.Linear(dim, dim)

        def forward(self, x):
            h = self.proj(x)
            rows = h.reshape(-1, h.shape[-1])
            return torch.stack([torch.softmax(r, dim=0) for r in rows]).reshape(h.shape)
    '''
)

NET = textwrap.dedent(
    """
    import torch
    import torch.nn as nn

    from blocks import SlowBlock


    class Net(nn.Module):
        def __init__(self, dim=32):
            super().__init__()
            self.embed = nn.Linear(8, dim)
            self.blocks = nn.ModuleList([SlowBlock(dim) for _ in range(2)])
            self.head = nn.Linear(dim, 4)

        def forward(self, x):
            h = self.embed(x)
            for b in self.blocks:
                h = b(h)
            return self.head(h)


    def build(batch=32):
        torch.manual_seed(0)
        return Net().eval(), (torch.randn(batch, 128, 8),)
    """
)

# runs the workspace's model: its outputs, and whether each block ran forge's answer
PROBE = """
import sys, torch
sys.path.insert(0, sys.argv[2])
import slownet
model, (x,) = slownet.build()
with torch.no_grad():
    y = model(x)
torch.save(y, sys.argv[1])
print("ran", ["_forge_runtime" in b.__dict__ for b in model.blocks])
"""


@pytest_lsp.fixture(
    config=ClientServerConfig(
        server_command=[sys.executable, "-m", "forge_lsp.server"],
        server_env={
            "FORGE_CACHE_DIR": CACHE,
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "OMP_NUM_THREADS": "1",
            "FORGE_LSP_LOG": str(Path(CACHE) / "server.log"),
        },
    )
)
async def client(lsp_client: LanguageClient, tmp_path: Path, fake_openai):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (tmp_path / "blocks.py").write_text(BLOCKS)
    (tmp_path / "slownet.py").write_text(NET)
    lsp_client.docs = {}
    lsp_client.edits = []  # every workspace/applyEdit the server sent

    @lsp_client.feature(t.WORKSPACE_APPLY_EDIT)
    def apply_edit(params: t.ApplyWorkspaceEditParams) -> t.ApplyWorkspaceEditResult:
        """As an editor does: a document it holds must be at the edit's version; a file it does not hold (version
        null) is edited on disk."""
        lsp_client.edits.append(params)
        changes = params.edit.document_changes or []
        for change in changes:
            doc = lsp_client.docs.get(change.text_document.uri)
            if doc is not None and change.text_document.version != doc["version"]:
                return t.ApplyWorkspaceEditResult(applied=False, failure_reason="stale version")
        for change in changes:
            uri = change.text_document.uri
            path = Path(uri.removeprefix("file://"))
            doc = lsp_client.docs.get(uri)
            text = apply_text_edits(doc["text"] if doc else path.read_text(), change.edits)
            path.write_text(text)  # the editor saves
            if doc is not None:
                doc["text"], doc["version"] = text, doc["version"] + 1
                lsp_client.text_document_did_change(
                    t.DidChangeTextDocumentParams(
                        text_document=t.VersionedTextDocumentIdentifier(uri=uri, version=doc["version"]),
                        content_changes=[t.TextDocumentContentChangeWholeDocument(text=text)],
                    )
                )
        return t.ApplyWorkspaceEditResult(applied=True)

    await open_session(lsp_client, tmp_path, scripted_settings(fake_openai.base_url))
    yield
    await lsp_client.shutdown_session()


def answer_for(workspace: Path):
    def answer(_request: dict) -> str:  # read when the request comes: the task is extracted by then
        task = (workspace / ".forge" / "tasks" / "SlowBlock.py").read_text().rstrip()
        return json.dumps({"summary": "one softmax per call, as a subclass", "source": task + SUBCLASS})

    return answer


async def entry_lenses(client: LanguageClient, uri: str) -> list[tuple[str, str, list]]:
    found = await client.text_document_code_lens_async(
        t.CodeLensParams(text_document=t.TextDocumentIdentifier(uri=uri))
    )
    line = next(i for i, x in enumerate(client_text(client, uri).splitlines()) if x.startswith("def build"))
    return [
        (x.command.title, x.command.command, list(x.command.arguments or []))
        for x in found
        if x.range.start.line == line
    ]


def client_text(client: LanguageClient, uri: str) -> str:
    doc = client.docs.get(uri)
    return doc["text"] if doc else Path(uri.removeprefix("file://")).read_text()


def lens(found: list[tuple[str, str, list]], command: str) -> tuple[str, str, list]:
    hit = [x for x in found if x[1] == command]
    assert len(hit) == 1, (command, found)
    return hit[0]


async def run(client: LanguageClient, lens_: tuple[str, str, list]):
    return await client.workspace_execute_command_async(t.ExecuteCommandParams(command=lens_[1], arguments=lens_[2]))


async def finished(client: LanguageClient, job_id: str, timeout: float = 400) -> dict:
    token = f"forge/{job_id}"
    await until(lambda: any(r.kind == "end" for r in client.progress_reports.get(token, [])), timeout, "the job's end")
    return await job_of(client, job_id)


def probe(workspace: Path, env: dict[str, str] | None = None):
    import torch

    out = workspace / f"probe-{len(list(workspace.glob('probe-*')))}.pt"
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, str(out), str(workspace)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip(), torch.load(out)


@pytest.mark.asyncio
async def test_model_wide_run_accepted_into_the_users_class_then_undone(client: LanguageClient, tmp_path, fake_openai):
    import torch

    net_uri, blocks_uri = open_doc(client, tmp_path / "slownet.py"), open_doc(client, tmp_path / "blocks.py")
    before = client_text(client, blocks_uri)
    found = await entry_lenses(client, net_uri)
    start = lens(found, "forge.optimizeModelWide")
    assert start[0] == "forge: Optimize model-wide" and start[2] == [net_uri, "build"], found
    fake_openai.script(answer_for(tmp_path))
    started = await run(client, start)
    assert started["job"].startswith("model-wide-"), started
    job = await finished(client, started["job"])
    reports = client.progress_reports[f"forge/{started['job']}"]
    assert reports[0].title == "forge: model-wide build" and reports[0].cancellable is True
    said = [(r.message, r.percentage) for r in reports if r.kind == "report"]
    percentages = [p for _, p in said]
    assert percentages == sorted(percentages) and percentages[-1] >= 85, said
    assert any(m.startswith("hot spots: ") for m, _ in said), said
    assert any("optimizing SlowBlock" in m for m, _ in said), said
    assert any(m.startswith("checking the whole model") for m, _ in said), said
    assert job["kind"] == "model-wide" and job["status"] == "done", job
    assert "× end to end (99% CI" in job["message"] and "Accept into SlowBlock" in job["message"], job
    assert client_text(client, blocks_uri) == before  # nothing is edited before Accept

    found = await entry_lenses(client, net_uri)
    offer = lens(found, "forge.acceptModelWide")
    assert offer[0].startswith("forge: model-wide ") and offer[0].endswith("— Accept into SlowBlock"), found
    assert offer[2] == [net_uri, "build"] and lens(found, "forge.rejectModelWide")[0] == "Reject"
    version = client.docs[blocks_uri]["version"]
    result = await run(client, offer)
    assert result["applied"] is True and result["files"] == [blocks_uri] and result["classes"] == ["SlowBlock"]
    (sent,) = client.edits
    (change,) = sent.edit.document_changes
    assert change.text_document.uri == blocks_uri and change.text_document.version == version  # versioned
    after = client_text(client, blocks_uri)
    assert "forge: begin optimized SlowBlock" in after and "class SlowBlock(" in after
    assert (tmp_path / "blocks.py").read_text() == after
    job = await job_of(client, started["job"])
    assert job["decision"] == "accepted", job

    # the file on disk runs the answer in both blocks; FORGE_DISABLE=1 runs the original; the outputs match
    said_forge, y_forge = probe(tmp_path)
    said_orig, y_orig = probe(tmp_path, {"FORGE_DISABLE": "1"})
    assert said_forge == "ran [True, True]" and said_orig == "ran [False, False]", (said_forge, said_orig)
    torch.testing.assert_close(y_forge, y_orig, atol=1e-5, rtol=1e-5)

    # Undo: one action puts the file back
    found = await entry_lenses(client, net_uri)
    assert not any(x[1] == "forge.acceptModelWide" for x in found), found
    undo = lens(found, "forge.undoModelWide")
    assert undo[0] == "forge: Undo model-wide accept (SlowBlock)", found
    result = await run(client, undo)
    assert result["applied"] is True and result["files"] == [blocks_uri], result
    assert client_text(client, blocks_uri) == before and (tmp_path / "blocks.py").read_text() == before
    assert len(client.edits) == 2 and client.edits[1].edit.document_changes[0].text_document.version == version + 1
    assert not any(x[1] == "forge.undoModelWide" for x in await entry_lenses(client, net_uri))
    again = await run(client, undo)
    assert again["applied"] is False and "no accepted model-wide edit" in again["message"], again


@pytest.mark.asyncio
async def test_cancel_saves_the_model_wide_run_and_resume_finishes_it_then_a_stale_accept_changes_nothing(
    client: LanguageClient, tmp_path, fake_openai
):
    from forge_lsp.agent.store import RunStore

    net_uri = open_doc(client, tmp_path / "slownet.py")  # blocks.py stays closed: its edit goes to the disk
    fake_openai.script({"delay": 60, "content": "{}"})  # the module run waits on its model: cancel it there
    started = await run(client, lens(await entry_lenses(client, net_uri), "forge.optimizeModelWide"))
    token = f"forge/{started['job']}"
    await until(
        lambda: any("optimizing SlowBlock" in (r.message or "") for r in client.progress_reports.get(token, [])),
        300,
        "the module run",
    )
    await until(lambda: fake_openai.chat_requests, 60, "the model call")
    cancelled = await client.workspace_execute_command_async(
        t.ExecuteCommandParams(command="forge.cancel", arguments=[started["job"]])
    )
    assert cancelled["cancelled"] == [started["job"]], cancelled
    job = await finished(client, started["job"], 60)  # the progress ends at the cancel; the job says what was saved
    assert job["status"] == "cancelled", job
    for _ in range(300):
        job = await job_of(client, started["job"])
        if job["message"] != "cancelled":
            break
        await asyncio.sleep(0.1)
    assert job["message"] == "interrupted: 0 of 1 hot module(s) finished and saved; Resume from the lens on build"
    (folder,) = (tmp_path / ".forge" / "model_wide").iterdir()
    saved = json.loads((folder / "result.json").read_text())
    assert saved["state"] == "interrupted" and saved["modules"][0]["status"] == "interrupted", saved["modules"]
    store = RunStore.for_workspace(tmp_path)
    assert [r.status for r in store.list_runs()] == ["interrupted"]

    found = await entry_lenses(client, net_uri)
    resume = next(x for x in found if len(x[2]) == 3)
    assert resume[0] == "forge: Resume model-wide run (0 of 1 hot modules done)", found
    assert resume[2] == [net_uri, "build", folder.name]
    fake_openai.script(answer_for(tmp_path))
    resumed = await run(client, resume)
    job = await finished(client, resumed["job"])
    assert job["status"] == "done" and "Accept into SlowBlock" in job["message"], job
    assert json.loads((folder / "result.json").read_text())["state"] == "finished"  # the same run, finished
    found = await entry_lenses(client, net_uri)
    assert not any(len(x[2]) == 3 for x in found), found  # nothing left to resume

    # blocks.py changed (on disk, where the editor does not hold it) after the run: Accept changes nothing
    blocks = tmp_path / "blocks.py"
    edited = blocks.read_text().replace("slow on purpose", "slow on purpose (edited)")
    blocks.write_text(edited)
    result = await run(client, lens(found, "forge.acceptModelWide"))
    assert result["applied"] is False and "blocks.py changed since the model-wide run" in result["message"], result
    assert blocks.read_text() == edited and client.edits == []
    assert not any(x[1] == "forge.acceptModelWide" for x in await entry_lenses(client, net_uri))


@pytest.mark.asyncio
async def test_model_wide_refuses_what_is_not_an_entry_and_an_edited_document_is_not_offered(
    client: LanguageClient, tmp_path, fake_openai
):
    net_uri = open_doc(client, tmp_path / "slownet.py")
    refused = await client.workspace_execute_command_async(
        t.ExecuteCommandParams(command="forge.optimizeModelWide", arguments=[net_uri, "Net"])
    )
    assert "no entry function 'Net'" in refused["error"], refused
    for command in ("forge.acceptModelWide", "forge.undoModelWide"):
        reply = await client.workspace_execute_command_async(
            t.ExecuteCommandParams(command=command, arguments=[net_uri, "build"])
        )
        assert reply["applied"] is False and reply["message"], reply

    # blocks.py edited in the editor while the run goes: the run measured the disk's text, so nothing is offered
    blocks_uri = open_doc(client, tmp_path / "blocks.py")
    fake_openai.script(answer_for(tmp_path))
    started = await run(client, lens(await entry_lenses(client, net_uri), "forge.optimizeModelWide"))
    edit_doc(client, blocks_uri, client_text(client, blocks_uri) + "\n# edited while the run went\n")
    job = await finished(client, started["job"])
    assert job["status"] == "done" and "SlowBlock not offered: blocks.py changed during the run" in job["message"]
    assert not any(x[1] == "forge.acceptModelWide" for x in await entry_lenses(client, net_uri))
