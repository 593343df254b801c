"""`forge eval` as a user runs it: a real subprocess, exit codes, JSON, directories."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import candidates as C
import pytest
from conftest import FIXTURES


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
    verdicts = {Path(x["candidate"]).stem: x["verdict"] for x in json.loads(r.stdout)}
    assert verdicts["softmax_small_good"]["status"] == "correct"
    assert verdicts["softmax_small_dtype"]["failed_check"] == "outputs_match"
    assert "batch_size=5" in next(
        c["detail"] for c in verdicts["softmax_small_good"]["checks"] if c["name"] == "outputs_match"
    )
