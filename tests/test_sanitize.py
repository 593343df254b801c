"""compute-sanitizer's report, read from a real process: a stand-in `compute-sanitizer` on PATH prints what the
tool prints (its findings, its summary) and exits as it does; the report must say what it found, where, and
when a tool did not get to the end."""

import os
import stat
import sys
from pathlib import Path

import pytest

from forge_lsp.engine.candidate import load_candidate
from forge_lsp.engine.sanitize import sanitize
from forge_lsp.engine.task import load_task

ROOT = Path(__file__).resolve().parents[1]

RACE = """========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at row_reduce(const float *, float *, int)+0x2b0 in softmax.cu:41
=========     and Read access at row_reduce(const float *, float *, int)+0x310 in softmax.cu:44 [128 hazards]
=========
========= Error: Race reported between Write access at void at::native::vectorized_elementwise_kernel<4>()+0x10
=========
========= RACECHECK SUMMARY: 2 hazards displayed (2 errors, 0 warnings)
"""


def fake_tool(tmp_path: Path, monkeypatch, text: str, code: int) -> None:
    """A `compute-sanitizer` that prints `text` for racecheck (a clean summary for the others) and exits `code`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "race.txt").write_text(text)
    exe = bin_dir / "compute-sanitizer"
    exe.write_text(
        f"#!{sys.executable}\n"
        "import sys\n"
        "if sys.argv[2] == 'racecheck':\n"
        f"    sys.stdout.write(open({str(tmp_path / 'race.txt')!r}).read()); sys.exit({code})\n"
        "print('========= COMPUTE-SANITIZER'); print('========= ERROR SUMMARY: 0 errors')\n"
    )
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")


def run(tmp_path: Path):
    task = load_task(ROOT / "benchmarks/tasks/softmax.py")
    cand = load_candidate(ROOT / "benchmarks/candidates/softmax_triton.py")
    return sanitize(task, cand, "cuda:0", cache_dir=tmp_path / "cache", timeout=60)


def test_findings_name_tool_kernel_and_line_and_leave_torch_kernels_out(tmp_path, monkeypatch):
    fake_tool(tmp_path, monkeypatch, RACE, 0)
    report = run(tmp_path)
    check = report.check()
    assert not check.passed
    assert [(f.tool, f.kernel, f.file, f.line) for f in report.findings] == [
        ("racecheck", "row_reduce", "softmax.cu", 41)
    ]
    assert "racecheck: Error: Race reported" in check.detail and "softmax.cu:41" in check.detail
    assert set(report.seconds) == {"racecheck", "memcheck", "initcheck"}


def test_a_tool_that_reached_its_summary_counts_whatever_the_exit_code(tmp_path, monkeypatch):
    fake_tool(tmp_path, monkeypatch, "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n", 11)
    report = run(tmp_path)
    assert report.check().passed and not report.notes


@pytest.mark.parametrize("output", ["", "Segmentation fault (core dumped)\n"])
def test_a_tool_that_died_is_said_with_its_last_words(tmp_path, monkeypatch, output):
    fake_tool(tmp_path, monkeypatch, output, 139)
    report = run(tmp_path)
    (note,) = report.notes
    assert note.startswith("racecheck could not run the candidate (exit code 139: ")
    assert (output.strip() or "no output") in note
    assert "racecheck could not run" in report.check().detail


def test_missing_tool_is_said_plainly(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr("forge_lsp.engine.sanitize.Path.glob", lambda self, pattern: iter(()))
    check = run(tmp_path).check()
    assert check.passed and "compute-sanitizer was not found" in check.detail
