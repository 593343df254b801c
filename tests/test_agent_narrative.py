"""The Judge's narrative on top of the rule-based explanation, against the scripted chat server."""

from __future__ import annotations

import gzip
import json
import shutil

import pytest
from conftest import FIXTURES

from forge_lsp.agent.config import ModelSettings
from forge_lsp.agent.narrative import narrate
from forge_lsp.agent.provider import ChatModel
from forge_lsp.profiler.analyze import analyze
from forge_lsp.profiler.model import DevicePeaks, Explanation
from forge_lsp.profiler.roofline import place

pytest.importorskip("ncu_report")
pytest_plugins = ["fake_openai"]


@pytest.fixture()
def explanation(tmp_path) -> Explanation:
    from forge_lsp.profiler.report import read_report

    report = tmp_path / "r.ncu-rep"
    with gzip.open(FIXTURES / "ncu" / "bank_conflict_transpose.ncu-rep.gz") as src, open(report, "wb") as dst:
        shutil.copyfileobj(src, dst)
    (kernel,) = read_report(report)
    peaks = DevicePeaks.model_validate_json((FIXTURES / "ncu" / "peaks.json").read_text())
    return Explanation(kernel=kernel, peaks=peaks, roofline=place(kernel, peaks), findings=analyze(kernel, peaks))


def model(server) -> ChatModel:
    return ChatModel(
        ModelSettings(model="judge", base_url=server.base_url, timeout_s=5, max_retries=1),
        api_key="sk-unused-key-123456",
        sleep=lambda s: None,
    )


@pytest.mark.integration
def test_judge_reads_the_findings_and_its_narrative_is_returned(explanation, fake_openai):
    fake_openai.script(
        json.dumps(
            {
                "summary": "The transpose is held up by shared-memory bank conflicts.",
                "bottleneck": "32-way bank conflicts on the tile read",
                "next_steps": ["pad the tile to [32][33]"],
            }
        )
    )
    text, note = narrate(model(fake_openai), explanation, source="__global__ void transpose_smem() {}")
    assert "bank conflicts" in text and "1. pad the tile" in text and note == "narrative by judge"
    prompt = fake_openai.chat_requests[0].messages[1]["content"]
    assert "Shared-memory bank conflicts" in prompt  # the rule-based finding, not a raw metric dump
    assert ":7" in prompt and "transpose_smem" in prompt  # its source line and the kernel
    assert "smsp__pcsamp" not in prompt


def test_model_failure_leaves_the_rule_based_explanation_and_says_why(explanation, fake_openai):
    fake_openai.script({"status": 404})
    text, note = narrate(model(fake_openai), explanation)
    assert text is None and note.startswith("no narrative:") and "404" in note
