"""The language server end to end: a real LSP client over stdio (pytest-lsp), the real server in a
subprocess, a scripted chat-completions server on 127.0.0.1, and CPU candidates evaluated by real
worker processes (Triton under its interpreter)."""

from __future__ import annotations

import ast
import asyncio
import atexit
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import pytest_lsp
from conftest import FIXTURES
from lsp_session import open_session, scripted_settings
from lsprotocol import types as t
from pytest_lsp import ClientServerConfig, LanguageClient
from test_model_wide import MODEL as SLOW_NET  # a model whose hot class loops in Python

pytestmark = pytest.mark.integration  # real processes end to end: left out of the fast loop (./dev test --fast)

pytest_plugins = ["fake_openai"]

CACHE = tempfile.mkdtemp(prefix="forge-lsp-e2e-cache-")
atexit.register(shutil.rmtree, CACHE, True)  # the servers' compile cache, shared by the module's tests
TASK = (FIXTURES / "slow_softmax.py").read_text()
# vectorized: faster than the row-at-a-time reference on the CPU, so the run ends with a proposal
FAST = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)
"""


def coder(source: str, summary: str) -> str:
    return json.dumps({"summary": summary, "source": source})


def apply_text_edits(text: str, edits: list[t.TextEdit]) -> str:
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))

    def offset(pos: t.Position) -> int:
        return offsets[min(pos.line, len(lines))] + pos.character

    for e in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        text = text[: offset(e.range.start)] + e.new_text + text[offset(e.range.end) :]
    return text


@pytest_lsp.fixture(
    config=ClientServerConfig(
        server_command=[sys.executable, "-m", "forge_lsp.server"],
        # one intra-op thread: a loaded 2-core CI box wakes a thread pool slowly, which would swamp µs timings
        server_env={
            "FORGE_CACHE_DIR": CACHE,
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "OMP_NUM_THREADS": "1",
            "FORGE_LSP_LOG": str(Path(CACHE) / "server.log"),
        },
    )
)
async def client(lsp_client: LanguageClient, tmp_path: Path, fake_openai):
    (tmp_path / "softmax_mod.py").write_text(TASK)
    lsp_client.docs = {}

    @lsp_client.feature(t.WORKSPACE_APPLY_EDIT)
    def apply_edit(params: t.ApplyWorkspaceEditParams) -> t.ApplyWorkspaceEditResult:
        for change in params.edit.document_changes or []:
            uri = change.text_document.uri
            doc = lsp_client.docs[uri]
            if change.text_document.version != doc["version"]:
                return t.ApplyWorkspaceEditResult(applied=False, failure_reason="stale version")
            doc["text"] = apply_text_edits(doc["text"], change.edits)
            doc["version"] += 1
            Path(uri.removeprefix("file://")).write_text(doc["text"])  # the editor saves
            lsp_client.text_document_did_change(
                t.DidChangeTextDocumentParams(
                    text_document=t.VersionedTextDocumentIdentifier(uri=uri, version=doc["version"]),
                    content_changes=[t.TextDocumentContentChangeWholeDocument(text=doc["text"])],
                )
            )
        return t.ApplyWorkspaceEditResult(applied=True)

    await open_session(lsp_client, tmp_path, scripted_settings(fake_openai.base_url))
    yield
    await lsp_client.shutdown_session()


def open_doc(client: LanguageClient, path: Path) -> str:
    uri = path.as_uri()
    text = path.read_text()
    client.docs[uri] = {"text": text, "version": 1}
    client.text_document_did_open(
        t.DidOpenTextDocumentParams(
            text_document=t.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)
        )
    )
    return uri


def edit_doc(client: LanguageClient, uri: str, text: str) -> None:
    doc = client.docs[uri]
    doc["text"], doc["version"] = text, doc["version"] + 1
    client.text_document_did_change(
        t.DidChangeTextDocumentParams(
            text_document=t.VersionedTextDocumentIdentifier(uri=uri, version=doc["version"]),
            content_changes=[t.TextDocumentContentChangeWholeDocument(text=text)],
        )
    )


async def until(predicate, timeout: float = 120.0, what: str = "condition"):
    async with asyncio.timeout(timeout):
        while True:
            value = predicate()
            if value:
                return value
            await asyncio.sleep(0.1)


def model_line(text: str) -> int:
    return next(i for i, line in enumerate(text.splitlines()) if line.startswith("class Model"))


async def optimize(client: LanguageClient, uri: str, fake, source: str, summary: str) -> dict:
    fake.script(coder(source, summary))
    line = model_line(client.docs[uri]["text"])
    actions = await client.text_document_code_action_async(
        t.CodeActionParams(
            text_document=t.TextDocumentIdentifier(uri=uri),
            range=t.Range(start=t.Position(line=line, character=0), end=t.Position(line=line, character=0)),
            context=t.CodeActionContext(diagnostics=[]),
        )
    )
    titles = [a.title for a in actions]
    assert "Optimize `Model`" in titles, titles
    opt = next(a for a in actions if a.title == "Optimize `Model`")
    # lsprotocol structures a CodeAction that carries a command as a Command: read the raw fields
    # (the nested command object arrives as its Python repr string)
    inner = opt.command
    if isinstance(inner, str) and inner.startswith("{"):
        inner = ast.literal_eval(inner)
    name, arguments = (
        (inner["command"], inner["arguments"]) if isinstance(inner, dict) else (inner.command, inner.arguments)
    )
    started = await client.workspace_execute_command_async(t.ExecuteCommandParams(command=name, arguments=arguments))
    assert "job" in started, started
    return started


def plain(value):
    """A reply to a forge/ request as JSON data (pygls hands unknown methods' results over as namedtuples)."""
    if hasattr(value, "_asdict"):
        return {k: plain(v) for k, v in value._asdict().items()}
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def proposal_diag(client: LanguageClient, uri: str):
    return next((d for d in client.diagnostics.get(uri, []) if d.code == "faster-candidate"), None)


async def job_of(client: LanguageClient, job_id: str) -> dict:
    """One job as `forge/runs` reports it."""
    runs = plain(await client.protocol.send_request_async("forge/runs", None))
    return next(j for j in runs["runs"] if j["id"] == job_id)


def job_ended(client: LanguageClient, job_id: str) -> bool:
    return any(r.kind == "end" for r in client.progress_reports.get(f"forge/{job_id}", []))


async def proposal_for(client: LanguageClient, uri: str, job_id: str, timeout: float = 240.0):
    """The proposal diagnostic the job `job_id` leaves on `uri`. A job that ends without one, or does not end in
    `timeout` seconds, fails the test with the job as `forge/runs` reports it (its state and its message say why)."""
    try:
        await until(lambda: proposal_diag(client, uri) or job_ended(client, job_id), timeout, "proposal or job end")
    except TimeoutError:
        raise AssertionError(f"no proposal in {timeout:g} s: {await job_of(client, job_id)}\n{server_log()}") from None
    diag = proposal_diag(client, uri)
    if diag is None:  # the end can arrive just before the diagnostics: give them a moment
        await asyncio.sleep(1.0)
        diag = proposal_diag(client, uri)
    assert diag is not None, f"the job ended without a proposal: {await job_of(client, job_id)}\n{server_log()}"
    return diag


def server_log(chars: int = 4000) -> str:
    """The end of the servers' log (FORGE_LSP_LOG), for a failure's message."""
    log = Path(CACHE) / "server.log"
    return "server log: " + (log.read_text(errors="replace")[-chars:] if log.is_file() else "(none)")


@pytest.mark.asyncio
@pytest.mark.slow
async def test_optimize_progress_diagnostic_lens_accept(client: LanguageClient, tmp_path, fake_openai):
    uri = open_doc(client, tmp_path / "softmax_mod.py")
    original = client.docs[uri]["text"]
    started = await optimize(client, uri, fake_openai, FAST + "\n# e2e accept\n", "Triton row softmax")
    diag = await proposal_for(client, uri, started["job"])
    assert "faster candidate" in diag.message and diag.source == "forge"
    token = f"forge/{started['job']}"
    await until(lambda: client.progress_reports[token][-1].kind == "end", 20, "progress end")
    kinds = [r.kind for r in client.progress_reports[token]]
    assert kinds[0] == "begin" and kinds[-1] == "end" and "report" in kinds
    reports = [r for r in client.progress_reports[token] if r.kind == "report"]
    assert all(0 <= r.percentage <= 100 for r in reports) and reports[-1].percentage > 0
    assert any(r.message.startswith("round 1/1") for r in reports), [r.message for r in reports]
    lenses = await client.text_document_code_lens_async(
        t.CodeLensParams(text_document=t.TextDocumentIdentifier(uri=uri))
    )
    accept = next(lens.command for lens in lenses if lens.command and lens.command.command == "forge.accept")
    show = next(lens.command for lens in lenses if lens.command and lens.command.command == "forge.showDiff")
    # the final re-timing is the answer, said the same way in the lens, the diagnostic and the job
    assert "× (final re-timing" in show.title and "× (final re-timing" in diag.message, (show.title, diag.message)
    job = await job_of(client, started["job"])
    assert job["status"] == "done" and "× (final re-timing" in job["message"] and "found" in job["message"]
    assert job["proposal"]["candidateId"] == accept.arguments[3] and job["proposal"]["className"] == "Model"
    assert f"{job['proposal']['speedup']:.2f}× (final re-timing" in show.title
    hover = await client.text_document_hover_async(
        t.HoverParams(
            text_document=t.TextDocumentIdentifier(uri=uri), position=t.Position(line=model_line(original), character=6)
        )
    )
    value = hover.contents.value
    assert "best verified candidate" in value and "stale" not in value and "(final re-timing" in value
    assert "reference" in value and "best candidate" in value and "interleaved calls, wall clock on the CPU" in value
    result = await client.workspace_execute_command_async(
        t.ExecuteCommandParams(command="forge.accept", arguments=accept.arguments)
    )
    assert result["applied"] is True, result
    job = await job_of(client, started["job"])
    assert job["decision"] == "accepted" and "proposal" not in job and "accepted" in job["message"]
    new_text = client.docs[uri]["text"]
    assert new_text != original and (tmp_path / "softmax_mod.py").read_text() == new_text
    # the rewritten module imports and matches the reference (in a fresh process, under the Triton interpreter)
    check = (
        f"import sys, torch; sys.path.insert(0, {str(tmp_path)!r}); sys.path.insert(0, {str(FIXTURES)!r})\n"
        "import softmax_mod as m, slow_softmax as ref\n"
        "x = ref.get_inputs()[0]\n"
        "print(torch.allclose(m.Model()(x), ref.Model()(x), atol=1e-5))"
    )
    out = subprocess.run(
        [sys.executable, "-c", check],
        capture_output=True,
        text=True,
        timeout=120,
        env={"TRITON_INTERPRET": "1", "PATH": "/usr/bin:/bin"},
    )
    assert out.stdout.strip() == "True", out.stderr[-2000:]
    await until(lambda: proposal_diag(client, uri) is None, 10, "proposal cleared")


@pytest.mark.asyncio
@pytest.mark.slow
async def test_reject_removes_the_proposal_and_does_not_offer_it_again(client: LanguageClient, tmp_path, fake_openai):
    uri = open_doc(client, tmp_path / "softmax_mod.py")
    source = FAST + "\n# e2e reject\n"
    started = await optimize(client, uri, fake_openai, source, "rejected one")
    await proposal_for(client, uri, started["job"])
    lenses = await client.text_document_code_lens_async(
        t.CodeLensParams(text_document=t.TextDocumentIdentifier(uri=uri))
    )
    reject = next(lens.command for lens in lenses if lens.command and lens.command.command == "forge.reject")
    assert (
        await client.workspace_execute_command_async(
            t.ExecuteCommandParams(command="forge.reject", arguments=reject.arguments)
        )
    )["rejected"] is True
    await until(lambda: proposal_diag(client, uri) is None, 10)
    runs = plain(await client.protocol.send_request_async("forge/runs", None))
    job = next(j for j in runs["runs"] if j.get("runId") == reject.arguments[2])
    # the runs view must not go on saying "faster candidate found" for a rejected candidate
    assert job["decision"] == "rejected" and "proposal" not in job, job
    assert "rejected" in job["message"] and "found" not in job["message"], job["message"]
    # the same candidate for the same source version is not offered again
    started = await optimize(client, uri, fake_openai, source, "rejected one")
    await until(lambda: any(r.kind == "end" for r in client.progress_reports.get(f"forge/{started['job']}", [])))
    assert proposal_diag(client, uri) is None
    lenses = await client.text_document_code_lens_async(
        t.CodeLensParams(text_document=t.TextDocumentIdentifier(uri=uri))
    )
    assert not any(lens.command and lens.command.command == "forge.accept" for lens in lenses)


@pytest.mark.asyncio
@pytest.mark.slow
async def test_show_diff_writes_the_candidate_under_forge_and_shows_it(client: LanguageClient, tmp_path, fake_openai):
    uri = open_doc(client, tmp_path / "softmax_mod.py")
    original = client.docs[uri]["text"]
    started = await optimize(client, uri, fake_openai, FAST + "\n# e2e show diff\n", "vectorized")
    await proposal_for(client, uri, started["job"])
    lenses = await client.text_document_code_lens_async(
        t.CodeLensParams(text_document=t.TextDocumentIdentifier(uri=uri))
    )
    show = next(lens.command for lens in lenses if lens.command and lens.command.command == "forge.showDiff")
    result = await client.workspace_execute_command_async(
        t.ExecuteCommandParams(command="forge.showDiff", arguments=show.arguments)
    )
    proposed = Path(result["proposedUri"].removeprefix("file://"))
    patch = Path(result["diffUri"].removeprefix("file://"))
    assert proposed.parent.is_relative_to(tmp_path / ".forge" / "proposals")
    assert proposed.read_text() == result["proposed"] != original and "class Model" in result["proposed"]
    assert "+" in patch.read_text() and result["diff"] in patch.read_text() and result["stale"] is False
    assert [p.uri for p in client.shown_documents] == [result["diffUri"]]  # window/showDocument opened the diff
    # a client with its own diff view asks for the texts only
    again = await client.workspace_execute_command_async(
        t.ExecuteCommandParams(command="forge.showDiff", arguments=[*show.arguments, {"show": False}])
    )
    assert again["proposed"] == result["proposed"] and len(client.shown_documents) == 1
    assert client.docs[uri]["text"] == original and (tmp_path / "softmax_mod.py").read_text() == original


@pytest.mark.asyncio
@pytest.mark.slow
async def test_forge_run_returns_the_typed_run_details(client: LanguageClient, tmp_path, fake_openai):
    uri = open_doc(client, tmp_path / "softmax_mod.py")
    started = await optimize(client, uri, fake_openai, FAST + "\n# e2e run details\n", "vectorized")
    await until(lambda: any(r.kind == "end" for r in client.progress_reports.get(f"forge/{started['job']}", [])))
    runs = await client.protocol.send_request_async("forge/runs", None)
    jobs = [j._asdict() if hasattr(j, "_asdict") else j for j in (runs.runs if hasattr(runs, "runs") else runs["runs"])]
    run_id = next(j["runId"] for j in jobs if j["id"] == started["job"])
    details = await client.protocol.send_request_async("forge/run", {"runId": run_id})
    d = plain(details)
    assert d["run"]["id"] == run_id and d["run"]["modelClass"] == "Model" and "error" not in d
    (cand,) = d["candidates"]
    assert cand["verdict"]["status"] == "correct" and cand["verdict"]["referenceMs"] > 0
    assert cand["verdict"]["candidateMs"] > 0 and "failed_check" not in json.dumps(d)  # camelCase on the wire
    bad = plain(await client.protocol.send_request_async("forge/run", {"run": 3}))
    assert "run" not in bad and bad["candidates"] == [] and "runId: Field required" in bad["error"], bad


@pytest.mark.asyncio
@pytest.mark.slow
async def test_stale_accept_is_refused_and_nothing_is_lost(client: LanguageClient, tmp_path, fake_openai):
    uri = open_doc(client, tmp_path / "softmax_mod.py")
    started = await optimize(client, uri, fake_openai, FAST + "\n# e2e stale\n", "stale one")
    await proposal_for(client, uri, started["job"])
    lenses = await client.text_document_code_lens_async(
        t.CodeLensParams(text_document=t.TextDocumentIdentifier(uri=uri))
    )
    accept = next(lens.command for lens in lenses if lens.command and lens.command.command == "forge.accept")
    edited = client.docs[uri]["text"].replace("torch.softmax(row, dim=0)", "torch.softmax(row, dim=-1)")
    assert edited != client.docs[uri]["text"]
    edit_doc(client, uri, edited)
    result = await client.workspace_execute_command_async(
        t.ExecuteCommandParams(command="forge.accept", arguments=accept.arguments)
    )
    assert result["applied"] is False and ("changed" in result["message"] or "stale" in result["message"])
    assert client.docs[uri]["version"] == 2  # no edit reached the client
    assert client.docs[uri]["text"] == edited  # the user's edit is intact
    await until(lambda: proposal_diag(client, uri) is None, 10)


@pytest.mark.asyncio
async def test_cancel_mid_run_stops_the_job(client: LanguageClient, tmp_path, fake_openai):
    uri = open_doc(client, tmp_path / "softmax_mod.py")
    fake_openai.script({"delay": 30.0, "content": coder(FAST, "slow")})
    line = model_line(client.docs[uri]["text"])
    started = await client.workspace_execute_command_async(
        t.ExecuteCommandParams(command="forge.optimize", arguments=[uri, "Model"])
    )
    token = f"forge/{started['job']}"
    await until(lambda: client.progress_reports.get(token))
    client.window_work_done_progress_cancel(t.WorkDoneProgressCancelParams(token=token))
    await until(lambda: any(r.kind == "end" for r in client.progress_reports[token]), 20)
    runs = await client.protocol.send_request_async("forge/runs", None)
    jobs = [j._asdict() if hasattr(j, "_asdict") else j for j in (runs.runs if hasattr(runs, "runs") else runs["runs"])]
    job = next(j for j in jobs if j["id"] == started["job"])
    assert job["status"] == "cancelled" and job["kind"] == "optimize"
    assert line >= 0


@pytest.mark.asyncio
@pytest.mark.slow
async def test_change_outside_the_editor_marks_results_stale(client: LanguageClient, tmp_path, fake_openai):
    other = tmp_path / "softmax_closed.py"
    other.write_text(TASK)
    uri = other.as_uri()
    fake_openai.script(coder(FAST + "\n# e2e outside\n", "outside"))
    started = await client.workspace_execute_command_async(
        t.ExecuteCommandParams(command="forge.optimize", arguments=[uri, "Model"])
    )
    assert "job" in started, started
    await proposal_for(client, uri, started["job"])
    # a proposal for a file that is not open is still reported with its job (the editor announces it from there)
    assert (await job_of(client, started["job"]))["proposal"]["uri"] == uri
    line = model_line(TASK)
    before = await client.text_document_hover_async(
        t.HoverParams(text_document=t.TextDocumentIdentifier(uri=uri), position=t.Position(line=line, character=6))
    )
    assert "stale" not in before.contents.value
    other.write_text(TASK.replace("dim = 32", "dim = 48"))  # not open in the editor
    # VS Code's file watcher reports it (the server registered for it instead of watching files itself)
    client.workspace_did_change_watched_files(
        t.DidChangeWatchedFilesParams(changes=[t.FileEvent(uri=uri, type=t.FileChangeType.Changed)])
    )
    await until(lambda: proposal_diag(client, uri) is None, 20, "proposal cleared after the outside change")
    after = await client.text_document_hover_async(
        t.HoverParams(text_document=t.TextDocumentIdentifier(uri=uri), position=t.Position(line=line, character=6))
    )
    assert "stale" in after.contents.value


@pytest.mark.asyncio
@pytest.mark.slow
async def test_kernel_compile_error_becomes_a_diagnostic_on_its_line(client: LanguageClient, tmp_path):
    cu = tmp_path / "bad_kernel.cu"
    cu.write_text(
        'extern "C" __global__ void bad_kernel(float* y, int n) {\n'
        "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    if (i < n) y[i] = undefined_name;  // 温度 😀\n"
        "}\n"
    )
    (tmp_path / "run_bad_kernel.py").write_text(
        "from pathlib import Path\nfrom forge_lsp.runtime import cuda as fcuda\n"
        "src = Path(__file__).with_name('bad_kernel.cu')\n"
        "fcuda.compile_kernel(src.read_text(), 'bad_kernel', arch='sm_90', filename=str(src))\n"
    )
    uri = cu.as_uri()
    client.text_document_did_open(
        t.DidOpenTextDocumentParams(
            text_document=t.TextDocumentItem(uri=uri, language_id="cuda", version=1, text=cu.read_text())
        )
    )
    lenses = await client.text_document_code_lens_async(
        t.CodeLensParams(text_document=t.TextDocumentIdentifier(uri=uri))
    )
    assert {lens.command.title for lens in lenses} >= {"Explain NCU bottleneck", "Profile kernel"}
    started = await client.workspace_execute_command_async(
        t.ExecuteCommandParams(command="forge.profile", arguments=[uri, "bad_kernel"])
    )
    assert "job" in started, started
    diag = await until(lambda: next((d for d in client.diagnostics.get(uri, []) if d.code == "compile"), None), 120)
    assert diag.range.start.line == 2 and "undefined_name" in diag.message
    line = cu.read_text().splitlines()[2]
    assert diag.range.end.character == len(line.encode("utf-16-le")) // 2 != len(line)  # VS Code counts UTF-16 units
    assert diag.severity == t.DiagnosticSeverity.Error and diag.source == "forge"


@pytest.mark.asyncio
async def test_module_without_inputs_gets_a_quick_fix_resolved_on_demand(client: LanguageClient, tmp_path):
    path = tmp_path / "layer.py"
    path.write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Block(nn.Module):\n"
        "    def __init__(self, d_model: int = 64):\n        super().__init__()\n"
        "        self.proj = nn.Linear(d_model, d_model)\n\n    def forward(self, x):\n"
        "        return torch.relu(self.proj(x))\n"
    )
    uri = open_doc(client, path)
    actions = await client.text_document_code_action_async(
        t.CodeActionParams(
            text_document=t.TextDocumentIdentifier(uri=uri),
            range=t.Range(start=t.Position(line=4, character=0), end=t.Position(line=4, character=0)),
            context=t.CodeActionContext(diagnostics=[]),
        )
    )
    fix = next(a for a in actions if isinstance(a, t.CodeAction) and a.title.startswith("Add get_inputs"))
    assert fix.edit is None and fix.kind == t.CodeActionKind.QuickFix  # cheap: the edit comes on resolve
    resolved = await client.code_action_resolve_async(fix)
    (change,) = resolved.edit.document_changes
    new_text = apply_text_edits(client.docs[uri]["text"], change.edits)
    ns: dict = {}
    exec(compile(new_text, str(path), "exec"), ns)  # noqa: S102 - our own fixture, in the test process
    model = ns["Block"](*ns["get_init_inputs"]())
    assert model(*ns["get_inputs"]()).shape[-1] == 64


@pytest.mark.asyncio
@pytest.mark.slow
async def test_a_failing_reference_module_is_pointed_at_in_the_users_file(
    client: LanguageClient, tmp_path, fake_openai
):
    path = tmp_path / "broken_ref.py"
    path.write_text(
        TASK.replace(
            "        return torch.stack([torch.softmax(row, dim=0) for row in x])",
            "        scale = x.shape[1] // 0  # bug\n        return torch.stack([torch.softmax(row, dim=0) for row in x])",
        )
    )
    uri = open_doc(client, path)
    bug_line = next(i for i, line in enumerate(client.docs[uri]["text"].splitlines()) if "# bug" in line)
    fake_openai.script(coder(FAST + "\n# e2e broken reference\n", "vectorized"))
    started = await client.workspace_execute_command_async(
        t.ExecuteCommandParams(command="forge.optimize", arguments=[uri, "Model"])
    )
    assert "job" in started, started
    diag = await until(lambda: next((d for d in client.diagnostics.get(uri, []) if d.code == "reference-failed"), None))
    assert diag.range.start.line == bug_line and "ZeroDivisionError" in diag.message
    assert proposal_diag(client, uri) is None


@pytest.mark.asyncio
@pytest.mark.slow
async def test_explain_on_the_cpu_labels_its_numbers_next_to_an_optimize_runs(
    client: LanguageClient, tmp_path, fake_openai
):
    """Explain without hardware counters times the reference alone by wall clock; optimize times the reference
    and its candidate together. Hover shows both, each saying what it measured."""
    uri = open_doc(client, tmp_path / "softmax_mod.py")
    started = await optimize(client, uri, fake_openai, FAST + "\n# e2e explain\n", "vectorized")
    await proposal_for(client, uri, started["job"])
    explained = await client.workspace_execute_command_async(
        t.ExecuteCommandParams(command="forge.explain", arguments=[uri, "Model"])
    )
    await until(lambda: any(r.kind == "end" for r in client.progress_reports.get(f"forge/{explained['job']}", [])), 180)
    assert (await job_of(client, explained["job"]))["status"] == "done"
    hover = await client.text_document_hover_async(
        t.HoverParams(
            text_document=t.TextDocumentIdentifier(uri=uri), position=t.Position(line=model_line(TASK), character=6)
        )
    )
    value = hover.contents.value
    assert "*explain*" in value and "*optimize*" in value and started["job"]
    assert "per call (the reference alone: median wall time per call, no profiler counters" in value, value
    assert "→ best candidate" in value and "interleaved calls" in value, value


@pytest.mark.asyncio
@pytest.mark.slow
async def test_an_answer_from_captured_inputs_is_accepted_into_the_users_class(
    client: LanguageClient, tmp_path, fake_openai
):
    """Find hot spots, then Optimize (captured inputs) on the hot class: the model's answer to the extracted task
    (its source plus a ModelNew subclassing its Model) is offered on the user's own class, and Accept rewrites
    that class in place with one versioned edit; the rewritten file computes what the original does."""
    import torch

    path = tmp_path / "slow_net.py"
    path.write_text(SLOW_NET)
    uri = open_doc(client, path)
    started = await client.workspace_execute_command_async(
        t.ExecuteCommandParams(command="forge.hotspots", arguments=[uri, "build"])
    )
    token = f"forge/{started['job']}"
    await until(lambda: any(r.kind == "end" for r in client.progress_reports.get(token, [])), 120, "hot spots")
    task = tmp_path / ".forge" / "tasks" / "SlowBlock.py"
    assert task.is_file(), client.progress_reports[token][-1].message
    subclass = (
        "\n\nclass ModelNew(Model):\n    def forward(self, x):\n        return torch.softmax(self.proj(x), dim=-1)\n"
    )
    fake_openai.script(
        lambda _req: json.dumps({"summary": "one softmax", "source": task.read_text().rstrip() + subclass})
    )
    started = await client.workspace_execute_command_async(
        t.ExecuteCommandParams(command="forge.optimizeCaptured", arguments=[uri, "SlowBlock"])
    )
    token = f"forge/{started['job']}"
    await until(lambda: any(r.kind == "end" for r in client.progress_reports.get(token, [])), 300, "optimize")
    job = await job_of(client, started["job"])
    # a job with no proposal says why in itself (its verdicts, its timing): shown when this fails
    assert job["status"] == "done" and (job.get("proposal") or {}).get("className") == "SlowBlock", job
    lenses = await client.text_document_code_lens_async(
        t.CodeLensParams(text_document=t.TextDocumentIdentifier(uri=uri))
    )
    accept = next(lens for lens in lenses if lens.command and lens.command.command == "forge.accept")
    assert accept.range.start.line == SLOW_NET.splitlines().index("class SlowBlock(nn.Module):")
    result = await client.workspace_execute_command_async(
        t.ExecuteCommandParams(command="forge.accept", arguments=accept.command.arguments)
    )
    assert result["applied"] is True, result
    new_text = client.docs[uri]["text"]
    assert "forge: begin optimized SlowBlock" in new_text and path.read_text() == new_text
    probe = (
        f"import sys, torch; sys.path.insert(0, {str(tmp_path)!r})\n"
        "import slow_net\n"
        "model, (x,) = slow_net.build()\n"
        "with torch.no_grad():\n"
        "    y = model(x)\n"
        "torch.save(y, sys.argv[1]); print([('_forge_runtime' in b.__dict__) for b in model.blocks])"
    )
    outs = {}
    for label, env in (("forge", {}), ("original", {"FORGE_DISABLE": "1"})):
        out = subprocess.run(
            [sys.executable, "-c", probe, str(tmp_path / f"{label}.pt")],
            capture_output=True,
            text=True,
            timeout=120,
            env={"PATH": "/usr/bin:/bin", **env},
        )
        assert out.returncode == 0, out.stderr[-2000:]
        outs[label] = (out.stdout.strip(), torch.load(tmp_path / f"{label}.pt"))
    assert outs["forge"][0] == "[True, True]" and outs["original"][0] == "[False, False]", outs
    torch.testing.assert_close(outs["forge"][1], outs["original"][1], atol=1e-5, rtol=1e-5)
