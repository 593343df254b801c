"""Explain on a module whose kernel is CUDA in a string of its own `.py` file (load_inline), in the real language server
driven by a real LSP client (pytest-lsp), on a machine without a GPU.

The GPU's part is a recording: `benchmarks/record_explain.py`, run on the GPU machine, explains
`tests/fixtures/explain_replay/gather_half.py` under Nsight Compute and keeps the report. Here the stand-in `ncu` and
`nvidia-smi` of `tests/fixtures/explain_replay/bin` stand for the hardware tools: the server takes the machine for a
GPU machine, its profiled process finds no CUDA, it falls back to ncu as it would anywhere, and the stand-in answers
with the recorded report. The server's own report reader, analysis, line mapping, diagnostics and hover do the rest."""

from __future__ import annotations

import asyncio
import atexit
import json
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

pytestmark = [
    pytest.mark.integration,  # the server, its profiled process and the stand-in tools are real processes
    pytest.mark.skipif(
        not (FIXTURES / "explain_replay" / "recording" / "recording.json").exists(),
        reason="no GPU recording yet: run `python benchmarks/record_explain.py` on the GPU machine "
        "(it writes tests/fixtures/explain_replay/recording/)",
    ),
    pytest.mark.skipif(
        Path("/proc/driver/nvidia/version").exists(),
        reason="a real GPU here: the server profiles in the process there, not under the stand-in ncu",
    ),
]
pytest.importorskip("ncu_report", reason="NVIDIA's ncu-report reader is a dev dependency")

REPLAY = FIXTURES / "explain_replay"
MODULE = REPLAY / "gather_half.py"
CACHE = tempfile.mkdtemp(prefix="forge-lsp-replay-")
atexit.register(shutil.rmtree, CACHE, True)
NCU_CALLS = Path(CACHE) / "ncu-calls.jsonl"


@pytest_lsp.fixture(
    config=ClientServerConfig(
        server_command=[sys.executable, "-m", "forge_lsp.server"],
        server_env={
            "PATH": f"{REPLAY / 'bin'}:/usr/local/bin:/usr/bin:/bin",
            "FORGE_CACHE_DIR": CACHE,
            "FORGE_NCU_STANDIN_LOG": str(NCU_CALLS),
            "OMP_NUM_THREADS": "1",
        },
    )
)
async def client(lsp_client: LanguageClient, tmp_path: Path):
    shutil.copy(MODULE, tmp_path / MODULE.name)
    await open_session(lsp_client, tmp_path, {"device": "cuda:0"})
    yield
    await lsp_client.shutdown_session()


def in_ms(number: str, unit: str) -> float:
    return float(number) / {"µs": 1000.0, "ms": 1.0}[unit]


@pytest.mark.asyncio
async def test_explain_marks_the_hot_line_inside_the_py_string_and_hovers_the_recorded_numbers(
    client: LanguageClient, tmp_path: Path
):
    recording = json.loads((REPLAY / "recording" / "recording.json").read_text())
    path = tmp_path / MODULE.name
    text = path.read_text()
    lines = text.splitlines()
    hot = next(i for i, line in enumerate(lines) if "// HOT" in line)  # 0-based, inside the CUDA string
    string_start = next(i for i, line in enumerate(lines) if line.endswith('= r"""'))
    string_end = next(i for i in range(string_start + 1, len(lines)) if lines[i].startswith('"""'))
    class_line = next(i for i, line in enumerate(lines) if line.startswith("class GatherHalf"))
    uri = path.as_uri()
    client.text_document_did_open(
        t.DidOpenTextDocumentParams(
            text_document=t.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)
        )
    )
    started = await client.workspace_execute_command_async(
        t.ExecuteCommandParams(command="forge.explain", arguments=[uri, "GatherHalf"])
    )
    job = await job_done(client, started["job"], 240)
    assert job["status"] == "done", job

    # the server asked ncu for forge's profile of the module (the stand-in answers only that), once
    calls = [json.loads(line) for line in NCU_CALLS.read_text().splitlines()]
    assert len(calls) == 1, calls
    (call,) = calls
    for option in (["--clock-control", "none"], ["--nvtx-include", "forge_profile/"], ["--import-source", "yes"]):
        assert any(call[i : i + 2] == option for i in range(len(call))), (option, call)
    assert "forge_lsp.profiler.target" in call

    # the findings' lines are lines of the `.py` file inside its CUDA string, the most stalled one the marked line
    async with asyncio.timeout(30):
        while not any(d.code == "explanation" for d in client.diagnostics.get(uri, [])):
            await asyncio.sleep(0.2)
    diagnostics = client.diagnostics[uri]
    on_lines = [d for d in diagnostics if d.severity == t.DiagnosticSeverity.Information]
    where = [(d.code, d.range.start.line, d.message[:120]) for d in diagnostics]
    assert on_lines and all(d.source == "forge" for d in on_lines), where
    assert all(string_start < d.range.start.line < string_end for d in on_lines), (string_start, string_end, where)
    stalls = {d.range.start.line: float(re.search(r"(\d+)% of stalls here", d.message).group(1)) for d in on_lines}
    assert max(stalls, key=lambda line: stalls[line]) == hot, (hot, where)
    summary = next(d for d in diagnostics if d.code == "explanation")
    assert summary.range.start.line == class_line

    # the hover on the class: the recorded kernel time, how and where it was measured, the roofline, the hot line
    hover = await client.text_document_hover_async(
        t.HoverParams(
            text_document=t.TextDocumentIdentifier(uri=uri), position=t.Position(line=class_line, character=8)
        )
    )
    value = hover.contents.value
    measured = re.search(
        r"([\d.]+) (µs|ms) per call \(1 kernel of one call under Nsight Compute on (.+?), summed\)", value
    )
    assert measured, value
    assert measured.group(3) == recording["device_name"], value
    assert in_ms(measured.group(1), measured.group(2)) == pytest.approx(recording["latency_ms"], abs=1e-4), value
    assert re.search(r"roofline: \d+% of the roof \(\w+-bound, against the datasheet peaks of the ", value), value
    assert f"hottest line here: line {hot + 1}, " in value, value
