"""Where an explanation's hot lines are marked (`server/features/jobs.py`), and what the hover says of them: a hot line of
a load_inline kernel, compiled from a build file this machine does not have (the report's copy of it is what there is),
is mapped to its line inside the module's `.py` string and marked on the document; a line of any other file is not.
In-process, no client and no child process."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import FIXTURES
from lsprotocol import types as t
from pygls.workspace import Workspace

from forge_lsp.profiler.model import Explanation, Finding, HotLine, KernelProfile, ProfileResult, Roofline
from forge_lsp.profiler.peaks import datasheet_peaks
from forge_lsp.profiler.source_map import map_hot_lines
from forge_lsp.server.app import create_server
from forge_lsp.server.features import jobs
from forge_lsp.server.state import BackgroundJob, text_sha
from forge_lsp.usecases.explain import ExplainResult, Profiled

MODULE = (FIXTURES / "explain_replay" / "gather_half.py").read_text()
CUDA_SRC = MODULE.split('CUDA_SRC = r"""', 1)[1].split('"""', 1)[0]
#: where the GPU machine's build kept the string as written (the line info names it); not a file here
BUILT = "/gpu/cache/cuda_sources/gather_half_ext_0123456789abcdef.cu"


def line_of(text: str, marker: str) -> int:
    """1-based."""
    return 1 + next(i for i, line in enumerate(text.splitlines()) if marker in line)


def explained(snapshot: Path) -> ExplainResult:
    """An explanation as the explain use case leaves it: the profile's hot lines in the build's file, read through the
    report's copy of it (`ProfileResult.sources`) and mapped to the profiled copy of the module's text."""
    hot, other, header = (
        HotLine(file=BUILT, line=line_of(CUDA_SRC, "// HOT"), stall_pct=81.0, dominant_stall="long_scoreboard"),
        HotLine(file=BUILT, line=line_of(CUDA_SRC, "int i ="), stall_pct=11.0, dominant_stall="wait"),
        HotLine(file="/usr/local/cuda/include/cuda_fp16.hpp", line=40, stall_pct=8.0, dominant_stall="drain"),
    )
    kernel = KernelProfile(name="gather_half_kernel", duration_ns=412_500.0, hot_lines=[hot, other, header])
    result = ProfileResult(mode="ncu", device_name="NVIDIA H100 80GB HBM3", kernels=[kernel], sources={BUILT: CUDA_SRC})
    assert map_hot_lines(result, MODULE, str(snapshot)) == 2  # the header's line comes from no string of the module
    peaks = datasheet_peaks("NVIDIA H100 80GB HBM3")
    assert peaks is not None
    finding = Finding(
        rule="stall_long_scoreboard",
        title="Warps wait on global memory",
        severity=0.9,
        lines=[hot, header],
        suggestion="load idx ahead",
    )
    roof = Roofline(
        arithmetic_intensity=0.04,
        achieved_flops_per_s=1e10,
        achieved_bytes_per_s=1e12,
        bound="memory",
        pct_of_roof=31.0,
    )
    explanation = Explanation(kernel=kernel, peaks=peaks, roofline=roof, findings=[finding])
    return ExplainResult(Profiled(result, "cuda:0", snapshot), peaks, "datasheet", [explanation])


@pytest.fixture
def server(tmp_path: Path):
    from forge_lsp.workspace.index import WorkspaceIndex

    (tmp_path / "gather_half.py").write_text(MODULE)
    ls = create_server()
    ls.root = tmp_path
    ls.protocol._workspace = Workspace(tmp_path.as_uri())
    ls.protocol.client_capabilities = t.ClientCapabilities()
    ls.index = WorkspaceIndex(tmp_path)
    ls.index.scan()
    return ls, tmp_path


def test_a_hot_line_of_the_modules_cuda_string_is_marked_on_its_line_and_the_hover_says_how_it_was_measured(server):
    ls, root = server
    doc = root / "gather_half.py"
    uri = doc.as_uri()
    snapshot = root / ".forge" / "snapshots" / "gather_half_0123456789.py"  # the document's text, as the job started
    class_line = line_of(MODULE, "class GatherHalf") - 1
    job = BackgroundJob(id="explain-1", kind="explain", uri=uri, target="GatherHalf", title="forge: explain GatherHalf")
    jobs._record_profile(
        ls, job, "explain", "GatherHalf", class_line, explained(snapshot), text_sha(MODULE), frozenset({doc, snapshot})
    )
    diagnostics = ls.state.diagnostics[uri]["explain:GatherHalf"]
    marked = [(d.range.start.line, d.code) for d in diagnostics if d.severity == t.DiagnosticSeverity.Information]
    assert marked == [(line_of(MODULE, "// HOT") - 1, "stall_long_scoreboard")]  # the header's line is not
    assert "81% of stalls here, long_scoreboard" in diagnostics[0].message
    assert [(d.range.start.line, d.code) for d in diagnostics if d.code == "explanation"] == [
        (class_line, "explanation")
    ]

    hover = ls.protocol.fm.features[t.TEXT_DOCUMENT_HOVER](
        t.HoverParams(
            text_document=t.TextDocumentIdentifier(uri=uri), position=t.Position(line=class_line, character=8)
        )
    )
    value = hover.contents.value
    assert "- 412.5 µs per call (1 kernel of one call under Nsight Compute on NVIDIA H100 80GB HBM3, summed)" in value
    assert "- roofline: 31% of the roof (memory-bound, against the datasheet peaks of the H100 SXM5 80GB)" in value
    hot = line_of(MODULE, "// HOT")
    assert f"- hottest line here: line {hot}, 81% of the sampled stalls, mostly long_scoreboard" in value


def test_hot_lines_of_a_file_that_is_not_the_documents_text_are_not_marked_on_it(server):
    """A module whose inputs come from a task file elsewhere ([tool.forge.modules]): the profiled file is that task
    file, whose lines are not the document's, so nothing of it is marked on the document."""
    ls, root = server
    doc = root / "gather_half.py"
    task_file = root / "tasks" / "gather_task.py"
    job = BackgroundJob(id="explain-2", kind="explain", uri=doc.as_uri(), target="GatherHalf", title="explain")
    jobs._record_profile(ls, job, "explain", "GatherHalf", 0, explained(task_file), text_sha(MODULE), frozenset({doc}))
    diagnostics = ls.state.diagnostics[doc.as_uri()]["explain:GatherHalf"]
    assert [d.code for d in diagnostics] == ["explanation"]
    assert ls.state.results[(doc.as_uri(), "GatherHalf", "explain")].hot_lines == []


def test_own_hot_lines_compares_files_as_paths(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    lines = [HotLine(file=str(tmp_path / "link" / "m.py"), line=3), HotLine(file=str(tmp_path / "m.py"), line=4)]
    assert jobs.own_hot_lines(lines, [tmp_path / "real" / "m.py"]) == lines[:1]
