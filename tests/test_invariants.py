"""Architecture invariants that a test can hold."""

import subprocess
import sys

import pytest


@pytest.mark.integration
def test_engine_front_door_imports_neither_torch_nor_editor_libraries():
    code = (
        "import sys, forge_lsp.engine, forge_lsp.cli.eval_cmd; "
        "bad = [m for m in ('torch', 'pygls', 'lsprotocol', 'triton') if m in sys.modules]; "
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


@pytest.mark.integration
def test_agent_and_profiler_front_doors_import_neither_torch_nor_editor_libraries():
    """The language server imports these: they must not pull torch, Triton or editor libraries."""
    code = (
        "import sys, forge_lsp.agent.optimize, forge_lsp.agent.store, forge_lsp.agent.provider, "
        "forge_lsp.agent.narrative, forge_lsp.usecases.explain, forge_lsp.usecases.optimize, forge_lsp.profiler.ncu, forge_lsp.profiler.analyze, "
        "forge_lsp.cli.optimize_cmd, forge_lsp.cli.profile_cmd, forge_lsp.workspace.cuda_source; "
        "bad = [m for m in ('torch', 'pygls', 'lsprotocol', 'triton') if m in sys.modules]; "
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_only_the_provider_talks_to_models():
    """Model calls go through forge_lsp/agent/provider.py only (retries, key handling, cost)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "forge_lsp"
    users = sorted(
        str(p.relative_to(root))
        for p in root.rglob("*.py")
        if "import openai" in p.read_text() or "from openai" in p.read_text()
    )
    assert users == ["agent/provider.py"]
