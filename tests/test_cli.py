"""`forge eval` as a user runs it: a real subprocess, exit codes, JSON, directories."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import candidates as C
import pytest
from conftest import FIXTURES

pytestmark = pytest.mark.integration  # real processes end to end: left out of the fast loop (./dev test --fast)


def forge(*args: str, cache: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "forge_lsp.cli.main", "eval", *args, "--device", "cpu", "--cache-dir", str(cache)],
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow
def test_correct_candidate_exits_zero_and_prints_a_verdict_table(tmp_path, cache_dir):
    cand = tmp_path / "softmax_small_torch.py"
    cand.write_text(C.TORCH_CORRECT)
    r = forge(str(FIXTURES / "softmax_small.py"), str(cand), cache=cache_dir)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "correct" in r.stdout and "outputs_match" in r.stdout and "speedup" in r.stdout


def test_incorrect_candidate_exits_one_and_json_names_the_check(tmp_path, cache_dir):
    cand = tmp_path / "bad.py"
    cand.write_text(C.TORCH_CORRECT.replace("torch.softmax(x, dim=1)", "torch.softmax(x, dim=1) * 1.01"))
    r = forge(str(FIXTURES / "softmax_small.py"), str(cand), "--json", "--no-timing", cache=cache_dir)
    assert r.returncode == 1
    out = json.loads(r.stdout)
    assert out["verdict"]["status"] == "incorrect" and out["verdict"]["failed_check"] == "outputs_match"


def test_bad_task_is_a_usage_error(tmp_path, cache_dir):
    task = tmp_path / "task.py"
    task.write_text("import torch\n")
    cand = tmp_path / "cand.py"
    cand.write_text(C.TORCH_CORRECT)
    r = forge(str(task), str(cand), cache=cache_dir)
    assert r.returncode == 2 and "no class 'Model'" in r.stderr


@pytest.mark.slow
def test_directory_of_pairs(tmp_path, cache_dir):
    (tmp_path / "softmax_small.py").write_text((FIXTURES / "softmax_small.py").read_text())
    (tmp_path / "softmax_small_good.py").write_text(C.TORCH_CORRECT)
    (tmp_path / "softmax_small_dtype.py").write_text(C.TORCH_CORRECT.replace("dim=1)", "dim=1).double()"))
    r = forge(str(tmp_path), "--json", "--no-timing", "--vary", "batch_size=5", cache=cache_dir)
    assert r.returncode == 1, r.stderr
    out = json.loads(r.stdout)
    verdicts = {Path(x["candidate"]).stem: x["verdict"] for x in out["results"]}
    assert verdicts["softmax_small_good"]["status"] == "correct"
    assert verdicts["softmax_small_dtype"]["failed_check"] == "outputs_match"
    lines = [line for line in r.stderr.splitlines() if line.startswith("forge eval: ")]  # not a terminal: plain lines
    assert [line.split(" done")[0] for line in lines] == ["forge eval: 1/2", "forge eval: 2/2"], r.stderr
    assert "a minute" in lines[-1] and "correct 1" in lines[-1] and "incorrect 1" in lines[-1]
    summary = out["summary"]
    assert summary["candidates"] == 2 and summary["by_status"] == {"correct": 1, "incorrect": 1}
    assert summary["failed_checks"] == [["outputs_match", 1]] and summary["per_minute"] > 0
    assert summary["by_domain"] == {"any layout": 1}
    assert 0 < summary["device_busy"] <= 1 and "the device busy" not in r.stdout  # (JSON: only in the summary)
    assert "batch_size=5" in next(
        c["detail"] for c in verdicts["softmax_small_good"]["checks"] if c["name"] == "outputs_match"
    )


CONTIGUOUS_ONLY = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        rows, cols = x.shape
        return torch.softmax(x.as_strided((rows, cols), (cols, 1)), dim=1)  # reads x as row-major memory
"""


def test_a_contiguous_only_candidate_is_correct_on_its_domain_and_its_repair_is_verified_and_written(
    tmp_path, cache_dir
):
    """As the user sees it: correct, with the domain it holds on; the automatic repair next to it, verified on the
    full domain, its source written with --repair; --strict asks for the full domain and rejects the original."""
    cand = tmp_path / "flat.py"
    cand.write_text(CONTIGUOUS_ONLY)
    r = forge(str(FIXTURES / "softmax_small.py"), str(cand), "--no-timing", "--repair", cache=cache_dir)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "correct — all checks passed; verified for contiguous inputs only" in r.stdout
    assert "noncontiguous_inputs   narrows" in r.stdout
    assert "repaired (contiguous_inputs): correct" in r.stdout and "domain: any layout" in r.stdout
    written = tmp_path / "flat.repaired.py"
    assert f"wrote {written}" in r.stdout
    assert ".contiguous()" in written.read_text() and written.read_text() != CONTIGUOUS_ONLY

    r = forge(str(FIXTURES / "softmax_small.py"), str(cand), "--no-timing", "--strict", "--json", cache=cache_dir)
    assert r.returncode == 1, r.stdout + r.stderr
    out = json.loads(r.stdout)
    assert out["verdict"]["status"] == "incorrect" and out["verdict"]["failed_check"] == "noncontiguous_inputs"
    repair = out["repair"]  # strict too: the repair lifts the limit, and is verified under the same rule
    assert [f["kind"] for f in repair["fixes"]] == ["contiguous_inputs"]
    assert repair["verdict"]["status"] == "correct" and repair["verdict"]["domain"]["layouts"] == "any"


def test_a_batch_on_a_terminal_shows_a_bar_with_the_rate_the_time_left_and_the_counts():
    import io

    from rich.console import Console

    from forge_lsp.cli.eval_cmd import BatchProgress
    from forge_lsp.engine import Status, Verdict

    screen = io.StringIO()
    term = Console(file=screen, force_terminal=True, width=160, color_system=None)
    with BatchProgress(3, term) as bar:
        bar.result(Verdict(status=Status.correct))
        bar.result(Verdict(status=Status.compile_error))
    text = screen.getvalue()
    assert "2/3" in text and "/min" in text and "ETA" in text and "correct 1, compile_error 1" in text
    assert "forge eval: 2/3 done" not in text  # the bar, not the plain lines
