"""The language server's profiler jobs on a real GPU (run with ``pytest -m gpu`` on the GPU machine):
Explain NCU bottleneck on a kernel of a .cu file puts the findings on the kernel's lines."""

from __future__ import annotations

import asyncio
import atexit
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
import pytest_lsp
from conftest import FIXTURES
from lsp_session import job_done, open_session
from lsprotocol import types as t
from pytest_lsp import ClientServerConfig, LanguageClient

from forge_lsp.profiler.ncu import find_ncu

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU visible to torch"),
    pytest.mark.skipif(find_ncu() is None, reason="needs Nsight Compute (ncu)"),
]
CACHE = tempfile.mkdtemp(prefix="forge-lsp-gpu-cache-")
atexit.register(shutil.rmtree, CACHE, True)  # the servers' compile cache, shared by the module's tests


@pytest_lsp.fixture(
    config=ClientServerConfig(
        server_command=[sys.executable, "-m", "forge_lsp.server"],
        # the whole environment: the GPU machine finds CUDA, ncu and extra packages through it
        server_env={**os.environ, "FORGE_CACHE_DIR": CACHE},
    )
)
async def client(lsp_client: LanguageClient, tmp_path: Path):
    for name in ("strided_copy.cu", "run_strided_copy.py"):
        shutil.copy(FIXTURES / "explain_cu" / name, tmp_path / name)
    shutil.copy(FIXTURES / "softmax_small.py", tmp_path / "softmax_small.py")

    await open_session(lsp_client, tmp_path, {"device": "cuda:0"})
    yield
    await lsp_client.shutdown_session()


@pytest.mark.asyncio
async def test_explain_kernel_puts_findings_on_its_lines_and_hover(client: LanguageClient, tmp_path):
    cu = tmp_path / "strided_copy.cu"
    text = cu.read_text()
    flaw = next(i for i, line in enumerate(text.splitlines()) if "FLAW" in line)
    kernel_line = next(i for i, line in enumerate(text.splitlines()) if "void strided_copy" in line)
    uri = cu.as_uri()
    client.text_document_did_open(
        t.DidOpenTextDocumentParams(text_document=t.TextDocumentItem(uri=uri, language_id="cuda", version=1, text=text))
    )
    started = await client.workspace_execute_command_async(
        t.ExecuteCommandParams(command="forge.explain", arguments=[uri, "strided_copy"])
    )
    assert "job" in started, started
    async with asyncio.timeout(300):
        while not any(d.code == "uncoalesced_global_access" for d in client.diagnostics.get(uri, [])):
            await asyncio.sleep(0.5)
    diag = next(d for d in client.diagnostics[uri] if d.code == "uncoalesced_global_access")
    assert diag.range.start.line == flaw and diag.source == "forge"
    hover = await client.text_document_hover_async(
        t.HoverParams(
            text_document=t.TextDocumentIdentifier(uri=uri), position=t.Position(line=kernel_line, character=30)
        )
    )
    assert "roofline" in hover.contents.value and "Uncoalesced" in hover.contents.value


async def _run_to_end(client: LanguageClient, uri: str, language: str, text: str, command: str, target: str) -> dict:
    """Open the document, run `command` on `target`, and wait for the job to end."""
    client.text_document_did_open(
        t.DidOpenTextDocumentParams(
            text_document=t.TextDocumentItem(uri=uri, language_id=language, version=1, text=text)
        )
    )
    started = await client.workspace_execute_command_async(
        t.ExecuteCommandParams(command=command, arguments=[uri, target])
    )
    return await job_done(client, started["job"], 300)


@pytest.mark.asyncio
async def test_profile_kernel_shows_latency_and_roofline_on_hover_without_explain_diagnostics(
    client: LanguageClient, tmp_path
):
    cu = tmp_path / "strided_copy.cu"
    text = cu.read_text()
    kernel_line = next(i for i, line in enumerate(text.splitlines()) if "void strided_copy" in line)
    uri = cu.as_uri()
    job = await _run_to_end(client, uri, "cuda", text, "forge.profile", "strided_copy")
    assert job["status"] == "done", job
    hover = await client.text_document_hover_async(
        t.HoverParams(
            text_document=t.TextDocumentIdentifier(uri=uri), position=t.Position(line=kernel_line, character=30)
        )
    )
    value = hover.contents.value
    assert "*profile*" in value and "roofline" in value, value
    assert re.search(
        r"µs per call \(\d+ kernels? of one call (under Nsight Compute|in its process by CUPTI) on [^,)]+, summed\)",
        value,
    ), value
    assert not any(d.code == "uncoalesced_global_access" for d in client.diagnostics.get(uri, []))


@pytest.mark.asyncio
async def test_explain_bottleneck_of_a_python_module_on_the_gpu(client: LanguageClient, tmp_path):
    py = tmp_path / "softmax_small.py"
    text = py.read_text()
    model_line = next(i for i, line in enumerate(text.splitlines()) if line.startswith("class Model"))
    uri = py.as_uri()
    job = await _run_to_end(client, uri, "python", text, "forge.explain", "Model")
    assert job["status"] == "done", job
    hover = await client.text_document_hover_async(
        t.HoverParams(
            text_document=t.TextDocumentIdentifier(uri=uri), position=t.Position(line=model_line, character=8)
        )
    )
    value = hover.contents.value
    assert "*explain*" in value and "roofline" in value, value
    assert re.search(
        r"µs per call \(\d+ kernels? of one call (under Nsight Compute|in its process by CUPTI) on [^,)]+, summed\)",
        value,
    ), value
    # the summary diagnostic sits on the class line
    assert any(d.code == "explanation" and d.range.start.line == model_line for d in client.diagnostics.get(uri, []))


@pytest.mark.asyncio
async def test_explain_of_a_load_inline_module_marks_the_hot_line_inside_its_py_string(
    client: LanguageClient, tmp_path
):
    """The module's kernel is CUDA in a string of its own `.py` file: Explain's most stalled line is the string's line
    marked HOT, on the document, and the hover names it (what `test_server_explain_replay.py` replays on the CPU)."""
    py = tmp_path / "gather_half.py"
    shutil.copy(FIXTURES / "explain_replay" / "gather_half.py", py)
    text = py.read_text()
    hot = next(i for i, line in enumerate(text.splitlines()) if "// HOT" in line)
    uri = py.as_uri()
    job = await _run_to_end(client, uri, "python", text, "forge.explain", "GatherHalf")
    assert job["status"] == "done", job
    on_lines = [d for d in client.diagnostics.get(uri, []) if d.severity == t.DiagnosticSeverity.Information]
    stalls = {d.range.start.line: float(re.search(r"(\d+)% of stalls here", d.message).group(1)) for d in on_lines}
    assert stalls and max(stalls, key=lambda line: stalls[line]) == hot, (
        hot,
        [(d.code, d.range.start.line) for d in on_lines],
    )
    class_line = next(i for i, line in enumerate(text.splitlines()) if line.startswith("class GatherHalf"))
    hover = await client.text_document_hover_async(
        t.HoverParams(
            text_document=t.TextDocumentIdentifier(uri=uri), position=t.Position(line=class_line, character=8)
        )
    )
    assert f"hottest line here: line {hot + 1}," in hover.contents.value, hover.contents.value
