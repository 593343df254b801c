"""A new user's first hour, finding by finding: each test is one thing a person met on a fresh clone (CPU machine,
no GPU, no model endpoint) that said the wrong thing, and what it says now. Every test runs the real `forge` (or the
use case a front end calls) on inputs written the way users write them."""

from __future__ import annotations

import sqlite3
import time

import pytest
from conftest import FIXTURES
from test_cli_front_door import forge, lines

RAISES = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return helper(x)


def helper(x):
    raise RuntimeError("candidate blew up")
"""


# ------------------------------------------------------------------------------------ 1. --vary without values
@pytest.mark.integration
@pytest.mark.parametrize("spec", ["batch_size", "batch_size=", "batch_size=a,b", "=4"])
def test_vary_without_values_is_a_usage_error_not_a_silent_pass(spec, tmp_path):
    cand = tmp_path / "cand.py"
    cand.write_text(RAISES)
    r = forge("eval", FIXTURES / "softmax_small.py", cand, "--device", "cpu", "--vary", spec)
    assert r.returncode == 2, r.stdout + r.stderr
    assert lines(r.stderr)[-1] == (
        f"forge eval: error: argument --vary: expected NAME=INT[,INT...] (a module constant and the values to "
        f"verify it at), got {spec!r}"
    )
    assert r.stdout == "" and "checks passed" not in r.stderr


def test_vary_with_values_is_read():
    from forge_lsp.cli.main import build_parser

    args = build_parser().parse_args(["eval", "t.py", "c.py", "--vary", "batch_size=2,5", "--vary", "dim=3"])
    from forge_lsp.cli.eval_cmd import _vary

    assert _vary(args.vary) == {"batch_size": [2, 5], "dim": [3]}


# ------------------------------------------------------------------------ 2. a CUDA kernel without a GPU
@pytest.mark.integration
def test_explain_of_a_cuda_kernel_without_a_gpu_is_one_line_and_exit_2_before_any_work(tmp_path):
    (tmp_path / "k.cu").write_text("__global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }\n")
    (tmp_path / "run_k.py").write_text("import time\ntime.sleep(30)  # would run for 30 s if it were started\n")
    t0 = time.monotonic()
    r = forge("explain", tmp_path / "k.cu", "--entry", tmp_path / "run_k.py", "--device", "auto")
    assert r.returncode == 2, r.stdout + r.stderr
    assert lines(r.stderr) == [
        "forge explain: k.cu: a CUDA kernel is profiled on an NVIDIA GPU (under Nsight Compute), and this machine "
        "has none"
    ], r.stderr
    assert time.monotonic() - t0 < 20 and "Traceback" not in r.stderr


# ------------------------------------------------------------------------------ 3. a failing hot-spot entry
ENTRY = """
import torch
import torch.nn as nn


def helper():
    raise ValueError("my model is broken")


def build(n=2):
    helper()
    return nn.Linear(4, 4), (torch.randn(2, 4),)
"""


@pytest.mark.integration
def test_a_failing_entry_shows_the_users_frames_only(tmp_path):
    (tmp_path / "entry.py").write_text(ENTRY)
    r = forge("hotspots", "entry.py:build", "--device", "cpu", cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "forge hotspots: the entry failed: ValueError: my model is broken" in r.stderr
    frames = [ln for ln in r.stderr.splitlines() if ln.strip().startswith('File "')]
    assert frames and all(str(tmp_path) in f for f in frames), r.stderr  # entry.py's build and helper, nothing else
    assert len(frames) == 2 and "forge_lsp" not in r.stderr, r.stderr


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        ("entry.py:build(nosuch=1)", "build() takes no argument 'nosuch' (its parameters: n)"),
        ("entry.py:bulid", "entry.py defines no function 'bulid' at module level"),
    ],
)
@pytest.mark.integration
def test_a_keyword_or_function_the_entry_does_not_have_is_a_usage_error_before_anything_runs(tmp_path, entry, said):
    (tmp_path / "entry.py").write_text(ENTRY)
    t0 = time.monotonic()
    r = forge("hotspots", entry, "--device", "cpu", cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert lines(r.stderr) == [f"forge hotspots: entry {entry!r}: {said}"], r.stderr
    assert time.monotonic() - t0 < 20


# --------------------------------------------------------------------- 4. candidate failures in the user's terms
@pytest.mark.integration
def test_a_raising_candidates_traceback_starts_in_the_users_code(tmp_path):
    cand = tmp_path / "raises.py"
    cand.write_text(RAISES)
    r = forge("eval", FIXTURES / "softmax_small.py", cand, "--device", "cpu", "--no-timing", "--json")
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
    import json

    result = json.loads(r.stdout)
    tb = result["verdict"]["traceback"]
    frames = [ln.strip() for ln in tb.splitlines() if ln.strip().startswith('File "')]
    assert frames == [f'File "{cand}", line 8, in forward', f'File "{cand}", line 12, in helper'], tb
    assert tb.startswith("Traceback (most recent call last):") and "RuntimeError: candidate blew up" in tb


@pytest.mark.integration
def test_a_syntax_error_names_the_users_file_and_a_binary_task_says_so(tmp_path):
    bad = tmp_path / "syntax.py"
    bad.write_text("import torch\nclass ModelNew(:\n    pass\n")
    r = forge("eval", FIXTURES / "softmax_small.py", bad, "--device", "cpu", "--no-timing")
    assert f"SyntaxError: invalid syntax ({bad}, line 2)" in r.stdout, r.stdout[-2000:]
    assert "candidate_" not in r.stdout and "forge_lsp" not in r.stdout, r.stdout[-2000:]

    binary = tmp_path / "binary.py"
    binary.write_bytes(b"import torch\n\x00\x01\x02")
    r = forge("eval", binary, bad, "--device", "cpu")
    assert r.returncode == 2
    assert lines(r.stderr) == [
        f"forge eval: {binary}:2: not a Python source file: it holds a NUL byte (a binary file?)"
    ]


# ---------------------------------------------------------------------------------- 5. forge show latest
@pytest.mark.integration
def test_show_latest_says_the_outcome_and_the_final_retiming_first(tmp_path):
    """A run whose best candidate is slower: `forge show latest` works like `forge report latest`, and its first
    lines are the outcome in words and the final re-timing."""
    from forge_lsp.agent.progress import outcome_words
    from forge_lsp.agent.run_events import FinalTiming, Outcome
    from forge_lsp.agent.store import RunStore

    store = RunStore.for_workspace(tmp_path)
    run_id = store.create_run(str(FIXTURES / "softmax_small.py"), "Model", "", {})
    store.add_event(run_id, FinalTiming(candidate=f"{run_id}/c1", speedup=0.73, timing={"speedup_ci95": [0.70, 0.76]}))
    store.add_event(run_id, Outcome(message="no offline candidate beat the reference", speedup=None))
    store.set_run_status(run_id, "done", "offline candidates only")
    store.close()
    r = forge("show", "latest", "--workspace", tmp_path)
    assert r.returncode == 0, r.stderr
    first = lines(r.stdout)[:2]
    assert first == [
        f"{run_id}: no faster candidate, nothing written: no offline candidate beat the reference",
        "final re-timing of c1: 0.73×, 95% CI 0.70-0.76",
    ], r.stdout
    assert outcome_words("done", "", 1.42, "/w/mod_forge_best.py") == (
        "1.42× faster (final re-timing), written to /w/mod_forge_best.py"
    )
    assert outcome_words("done", "", 0.0021, None).startswith("no faster candidate")
    with sqlite3.connect(tmp_path / ".forge" / "runs.sqlite") as db:  # reading never writes
        assert db.execute("select count(*) from runs").fetchone() == (1,)


def test_slowdowns_read_as_slowdowns_in_one_number_format():
    from forge_lsp.words import speedup_words, times

    assert speedup_words(0.0021) == "476× slower"
    assert speedup_words(0.44) == "2.27× slower"
    assert speedup_words(1.42) == "1.42× faster"
    assert speedup_words(1.002) == "as fast as the reference"
    assert times(0.73) == "0.73×" and times(12.3) == "12×"


# --------------------------------------------------------------------- 7. the CPU's offline default
@pytest.mark.integration
def test_the_cpu_offline_default_offers_no_interpreter_only_candidates(tmp_path):
    """On the CPU, forge's Triton kernels run under the interpreter, hundreds of times slower: the default offers
    the torch.compile variants only (and runs no graph probe); `offline_library = true` asks for them."""
    from forge_lsp.agent.offline import offline_candidates
    from forge_lsp.engine import load_task

    task = load_task(FIXTURES / "softmax_small.py")
    names = [c.name for c in offline_candidates(task, device="cpu", cache_dir=tmp_path)]
    assert names and all(n.startswith("torch.compile:") for n in names), names
    with_library = [c.name for c in offline_candidates(task, device="cpu", cache_dir=tmp_path, library=True)]
    assert any(n.startswith("library:") for n in with_library), with_library


@pytest.mark.integration
def test_a_failed_command_leaves_no_run_store_behind(tmp_path):
    r = forge("show", "latest", cwd=tmp_path, env={"PWD": str(tmp_path)})
    assert r.returncode == 2 and not (tmp_path / ".forge").exists(), r.stderr
    bad = tmp_path / "bad.py"
    bad.write_text("class Model(:\n")
    r = forge("optimize", bad, "--device", "cpu", cwd=tmp_path)
    assert r.returncode == 2 and not (tmp_path / ".forge").exists(), (r.stderr, list(tmp_path.iterdir()))


# ------------------------------------------------------------------------------ 9. no column of zeros
@pytest.mark.integration
def test_profile_on_the_cpu_shows_no_device_time_column():
    r = forge("profile", FIXTURES / "softmax_small.py", "--device", "cpu")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    header = next(ln for ln in r.stdout.splitlines() if "op / kernel" in ln)
    assert "device µs" not in header and "cpu µs" in header, r.stdout


# ------------------------------------------------------------------------------------ 8. set-up says nothing
@pytest.mark.integration
@pytest.mark.slow
def test_the_editable_install_of_dev_setup_prints_no_setuptools_notes(tmp_path):
    """`./dev setup`'s editable install of forge (the step that printed setuptools' notes) is quiet: the filter it
    sets silences the note, which the same install without it prints. A copy of the project, in a venv of its own,
    without dependencies (the step's own output is what is checked)."""
    import os
    import re
    import shutil
    import subprocess
    import sys

    from conftest import ROOT

    step = next(line for line in (ROOT / "dev").read_text().splitlines() if "pip install -q -e" in line)
    quiet = re.match(r'\s*PYTHONWARNINGS="([^"]+)"', step)
    assert quiet, f"./dev setup's editable install sets no warnings filter: {step.strip()}"
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    for name in ("forge_lsp", "prompts"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONWARNINGS", "VIRTUAL_ENV", "PYTHONPATH")}

    def install(**extra: str) -> str:
        r = subprocess.run(
            [sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "install", "-q", "--no-deps", "-e", src],
            cwd=tmp_path,
            env=env | extra,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert r.returncode == 0, r.stdout + r.stderr
        return "\n".join(line for line in (r.stdout + r.stderr).splitlines() if "Location 'file:" not in line)

    assert "Editable installation" in install()  # the note, without the filter
    said = install(PYTHONWARNINGS=quiet.group(1))
    assert "Editable installation" not in said and "Warning" not in said, said


def test_a_timed_speedup_is_said_with_what_its_interval_decides():
    """`forge eval`'s speedup line ends in words: faster or slower only when the whole interval says so, else "not
    decided"; the same two-decimal format as every other figure (never 0.920×, never 0.00x)."""
    from forge_lsp.words import interval_words, times

    assert interval_words(1.42, 1.20, 1.61) == "1.42× faster"
    assert interval_words(0.92, 0.80, 0.97) == "1.09× slower"
    assert interval_words(1.003, 0.974, 1.038) == "not decided: the 95% interval spans 1"
    assert interval_words(0.92, 0.77, 1.09, level="99%") == "not decided: the 99% interval spans 1"
    assert times(0.920) == "0.92×" and times(27.83) == "28×"
