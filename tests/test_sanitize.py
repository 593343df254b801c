"""compute-sanitizer's report, read from a real process: a stand-in `compute-sanitizer` on PATH prints what the
tool prints (its findings, its summary) and exits as it does; the report must say what it found, where, and
when a tool did not get to the end."""

from pathlib import Path

import pytest
from conftest import tool_on_path

from forge_lsp.engine.candidate import load_candidate
from forge_lsp.engine.sanitize import sanitize
from forge_lsp.engine.task import load_task

pytestmark = pytest.mark.integration  # real processes end to end: left out of the fast loop (./dev test --fast)

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
    (tmp_path / "race.txt").write_text(text)
    tool_on_path(
        tmp_path,
        monkeypatch,
        "compute-sanitizer",
        "import sys\n"
        "if sys.argv[2] == 'racecheck':\n"
        f"    sys.stdout.write(open({str(tmp_path / 'race.txt')!r}).read()); sys.exit({code})\n"
        "print('========= COMPUTE-SANITIZER'); print('========= ERROR SUMMARY: 0 errors')",
    )


def run(tmp_path: Path):
    task = load_task(ROOT / "corpus/ops/tasks/softmax.py")
    cand = load_candidate(ROOT / "corpus/ops/candidates/softmax_triton.py")
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


TORCH_ONLY = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)
"""

#: candidates that launch a kernel of their own without a kernel backend forge recognises, or could
HIDDEN = {
    "cupy": "import cupy\nk = cupy.RawKernel(SRC, 'k')\n",
    "ctypes": "import ctypes\nlib = ctypes.CDLL('./k.so')\n",
    "exec": "exec(open('k.py').read())\n",
    "importlib": "import importlib\ntl = importlib.import_module('tri' + 'ton')\n",
    "builtin compile": "code = compile(src, 'k', 'exec')\n",
    "builtin eval": "k = eval(src)\n",
    "jiterator": "f = torch.cuda.jiterator._create_jit_fn(CODE)\n",
    "cubin": "m = load('kernel.cubin')\n",
}


def test_a_candidate_of_pytorch_calls_only_is_not_run_and_says_why(tmp_path, monkeypatch):
    """A candidate of PyTorch calls alone (an offline torch.compile candidate, a rewrite in torch ops) has no kernel
    of its own: the tool is not started for it (a tool that would fail says nothing), and the check says why."""
    from forge_lsp.agent.offline import compile_candidates
    from forge_lsp.engine.candidate import Candidate

    fake_tool(tmp_path, monkeypatch, RACE, 0)  # would report a race in the candidate's kernel if it were run
    task = load_task(ROOT / "corpus/ops/tasks/softmax.py")
    # as a module extracted from a model is built: in its captured mode and dtype (`self.eval()` is not eval())
    extracted = TORCH_ONLY.replace(
        "    def forward", "    def __init__(self):\n        super().__init__()\n        self.eval()\n\n    def forward"
    )
    sources = [TORCH_ONLY, extracted] + [c.source for c in compile_candidates(task, "cuda")]
    for source in sources:
        report = sanitize(task, Candidate.from_source(source, "torch_only"), "cuda:0", cache_dir=tmp_path / "c")
        check = report.check()
        assert check.passed and report.seconds == {} and not report.findings, check
        assert check.detail.startswith("not run: the candidate is PyTorch calls only"), check.detail


@pytest.mark.parametrize("how", sorted(HIDDEN))
def test_a_candidate_that_could_bring_a_kernel_of_its_own_is_run(tmp_path, monkeypatch, how):
    """Kernel source, a kernel loader, or code built at run time: the tool runs (here its race is reported)."""
    from forge_lsp.engine.candidate import Candidate

    fake_tool(tmp_path, monkeypatch, RACE, 0)
    task = load_task(ROOT / "corpus/ops/tasks/softmax.py")
    source = TORCH_ONLY.replace("class ModelNew", HIDDEN[how] + "\n\nclass ModelNew")
    report = sanitize(task, Candidate.from_source(source, "hidden"), "cuda:0", cache_dir=tmp_path / "c", timeout=60)
    assert set(report.seconds) == {"racecheck", "memcheck", "initcheck"}, (how, report)
    assert not report.check().passed and "row_reduce" in report.check().detail


def hung_tool(tmp_path: Path, monkeypatch) -> None:
    """A `compute-sanitizer` on PATH that would take a minute for each tool."""
    tool_on_path(tmp_path, monkeypatch, "compute-sanitizer", "import time\ntime.sleep(60)")


def test_a_cancel_kills_the_tool_in_flight(tmp_path, monkeypatch):
    """The run's cancel reaches compute-sanitizer: a tool that would run for a minute is killed at once, the
    report says cancelled, and no later tool starts."""
    import threading
    import time

    hung_tool(tmp_path, monkeypatch)
    cancel = threading.Event()
    threading.Timer(1.0, cancel.set).start()
    t0 = time.monotonic()
    task = load_task(ROOT / "corpus/ops/tasks/softmax.py")
    cand = load_candidate(ROOT / "corpus/ops/candidates/softmax_triton.py")
    report = sanitize(task, cand, "cuda:0", cache_dir=tmp_path / "cache", timeout=60, cancel=cancel)
    assert report.cancelled and list(report.seconds) == ["racecheck"], report
    assert time.monotonic() - t0 < 10


def test_the_evaluators_cancel_reaches_its_sanitizer_run(tmp_path, monkeypatch):
    """`Evaluator.cancel` (what a run's cancel calls) kills the final re-check's compute-sanitizer run in flight: the
    evaluation raises `EvaluationCancelled` at once instead of waiting for the tool."""
    import threading
    import time

    from forge_lsp.engine import EvaluationCancelled, Evaluator
    from forge_lsp.engine.verdict import Status, Verdict

    hung_tool(tmp_path, monkeypatch)
    task = load_task(ROOT / "corpus/ops/tasks/softmax.py")
    cand = load_candidate(ROOT / "corpus/ops/candidates/softmax_triton.py")
    ev = Evaluator("cpu", cache_dir=tmp_path / "cache")
    try:
        verdict = Verdict(status=Status.correct, reason="", device="cuda:0", stages={})
        threading.Timer(1.0, ev.cancel).start()
        t0 = time.monotonic()
        with pytest.raises(EvaluationCancelled):
            ev.sanitize_into(verdict, task, cand)
        assert time.monotonic() - t0 < 10
    finally:
        ev.close()
