"""The language server's profiler jobs on a real GPU (run with ``pytest -m gpu`` on the GPU machine):
Explain NCU bottleneck on a kernel of a .cu file puts the findings on the kernel's lines."""

from __future__ import annotations

import asyncio
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types as t
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from conftest import FIXTURES
from forge_lsp.profiler.ncu import find_ncu

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU visible to torch"),
    pytest.mark.skipif(find_ncu() is None, reason="needs Nsight Compute (ncu)"),
]
CACHE = tempfile.mkdtemp(prefix="forge-lsp-gpu-cache-")


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[sys.executable, "-m", "forge_lsp.server"],
                                              server_env={"FORGE_CACHE_DIR": CACHE}))
async def client(lsp_client: LanguageClient, tmp_path: Path):
    for name in ("strided_copy.cu", "run_strided_copy.py"):
        shutil.copy(FIXTURES / "explain_cu" / name, tmp_path / name)

    @lsp_client.feature(t.CLIENT_REGISTER_CAPABILITY)
    def register_capability(params: t.RegistrationParams) -> None:
        return None

    await lsp_client.initialize_session(t.InitializeParams(
        capabilities=client_capabilities("visual-studio-code"), root_uri=tmp_path.as_uri(),
        workspace_folders=[t.WorkspaceFolder(uri=tmp_path.as_uri(), name="ws")],
        initialization_options={"forge": {"device": "cuda:0"}}))
    yield
    await lsp_client.shutdown_session()


@pytest.mark.asyncio
async def test_explain_kernel_puts_findings_on_its_lines_and_hover(client: LanguageClient, tmp_path):
    cu = tmp_path / "strided_copy.cu"
    text = cu.read_text()
    flaw = next(i for i, line in enumerate(text.splitlines()) if "FLAW" in line)
    kernel_line = next(i for i, line in enumerate(text.splitlines()) if "void strided_copy" in line)
    uri = cu.as_uri()
    client.text_document_did_open(t.DidOpenTextDocumentParams(
        text_document=t.TextDocumentItem(uri=uri, language_id="cuda", version=1, text=text)))
    started = await client.workspace_execute_command_async(t.ExecuteCommandParams(
        command="forge.explain", arguments=[uri, "strided_copy"]))
    assert "job" in started, started
    async with asyncio.timeout(300):
        while not any(d.code == "uncoalesced_global_access" for d in client.diagnostics.get(uri, [])):
            await asyncio.sleep(0.5)
    diag = next(d for d in client.diagnostics[uri] if d.code == "uncoalesced_global_access")
    assert diag.range.start.line == flaw and diag.source == "forge"
    hover = await client.text_document_hover_async(t.HoverParams(
        text_document=t.TextDocumentIdentifier(uri=uri), position=t.Position(line=kernel_line, character=30)))
    assert "roofline" in hover.contents.value and "Uncoalesced" in hover.contents.value
