"""Profiler runner: command line, degradation with a reason, isolation. (Real ncu runs are `gpu` tests.)"""

from __future__ import annotations

import stat

import pytest
from conftest import FIXTURES

from forge_lsp.engine import Candidate, load_task
from forge_lsp.profiler.ncu import PERMISSION_HELP, ncu_command, profile
from forge_lsp.profiler.report import from_raw_csv
from forge_lsp.profiler.target import NVTX_RANGE

pytestmark = pytest.mark.integration  # real processes end to end: left out of the fast loop (./dev test --fast)


def test_ncu_command_profiles_only_the_measured_range_and_never_touches_clocks(tmp_path):
    cmd = ncu_command("/x/ncu", tmp_path / "r.ncu-rep", ["python3", "-m", "t"], kernel="softmax")
    joined = " ".join(cmd)
    assert "--clock-control none" in joined
    assert f"--nvtx-include {NVTX_RANGE}/" in joined and "--nvtx" in cmd
    assert "-k regex:softmax" in joined and "--section SourceCounters" in joined
    assert cmd[-3:] == ["python3", "-m", "t"]
    assert "--set full" in " ".join(ncu_command("/x/ncu", tmp_path / "r", [], full=True))


@pytest.mark.slow
def test_cpu_profile_degrades_to_timing_and_torch_profiler_with_the_reason(cache_dir):
    task = load_task(FIXTURES / "softmax_small.py")
    result = profile(task, device="cpu", cache_dir=cache_dir)
    assert result.mode == "degraded" and "CPU" in result.reason
    assert result.wall_ms is not None and result.wall_ms > 0
    assert any("softmax" in op.name for op in result.ops)


@pytest.mark.slow
def test_candidate_profile_runs_the_candidate_not_the_reference(cache_dir):
    task = load_task(FIXTURES / "softmax_small.py")
    cand = Candidate.from_source(
        "import torch, torch.nn as nn\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
        "        return torch.exp(x) / torch.exp(x).sum(dim=1, keepdim=True)\n",
        "cand",
    )
    result = profile(task, cand, device="cpu", cache_dir=cache_dir)
    names = {op.name for op in result.ops}
    assert "aten::exp" in names and "aten::softmax" not in names


def _fake_ncu(tmp_path, body: str) -> str:
    path = tmp_path / "ncu"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


@pytest.mark.slow
def test_missing_ncu_says_how_to_get_it(monkeypatch, tmp_path, cache_dir):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.delenv("NCU", raising=False)
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    import forge_lsp.profiler.ncu as ncu_mod

    monkeypatch.setattr(ncu_mod.glob, "glob", lambda pattern: [])
    result = profile(load_task(FIXTURES / "softmax_small.py"), device="cuda:0", cache_dir=cache_dir)
    assert result.mode == "degraded" and "Nsight Compute (ncu) was not found" in result.reason


@pytest.mark.slow
def test_counter_permission_error_explains_how_to_enable_counters(monkeypatch, tmp_path, cache_dir):
    monkeypatch.setenv(
        "NCU",
        _fake_ncu(
            tmp_path,
            'echo "==ERROR== ERR_NVGPUCTRPERM - The user does not have '
            'permission to access NVIDIA GPU Performance Counters"\nexit 1\n',
        ),
    )
    result = profile(load_task(FIXTURES / "softmax_small.py"), device="cuda:0", cache_dir=cache_dir)
    assert result.mode == "degraded" and PERMISSION_HELP in result.reason
    assert "ERR_NVGPUCTRPERM" in result.log_excerpt


def test_hanging_profiler_is_killed_at_the_timeout(monkeypatch, tmp_path, cache_dir):
    monkeypatch.setenv("NCU", _fake_ncu(tmp_path, "sleep 60\n"))
    result = profile(load_task(FIXTURES / "softmax_small.py"), device="cuda:0", timeout=1.0, cache_dir=cache_dir)
    assert result.mode == "degraded" and "did not finish within 1 s" in result.reason
    assert result.seconds < 10


@pytest.mark.slow
def test_profiled_process_gets_no_secrets(monkeypatch, cache_dir, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak")
    out = tmp_path / "env.txt"
    cand = Candidate.from_source(
        "import os, torch.nn as nn\n"
        f"open({str(out)!r}, 'w').write('\\n'.join(os.environ))\n"
        "class ModelNew(nn.Module):\n    def forward(self, x):\n        return x.softmax(1)\n",
        "env",
    )
    profile(load_task(FIXTURES / "softmax_small.py"), cand, device="cpu", cache_dir=cache_dir)
    assert out.exists() and "OPENAI_API_KEY" not in out.read_text().split("\n")


def test_raw_csv_reader_skips_the_units_row():
    """Format of `ncu --csv --page raw --print-units base` (to be replaced by a capture from the GPU machine)."""
    text = (
        '"ID","Kernel Name","gpu__time_duration.sum","dram__bytes_read.sum","launch__grid_dim_x",'
        '"launch__grid_dim_y","launch__grid_dim_z","launch__block_dim_x","launch__block_dim_y","launch__block_dim_z"\n'
        '"","","nsecond","byte","","","","","",""\n'
        '"0","softmax_kernel","69312","134217728","4096","1","1","256","1","1"\n'
    )
    (k,) = from_raw_csv(text)
    assert k.name == "softmax_kernel" and k.duration_ns == 69312
    assert k.metrics["dram__bytes_read.sum"] == 134217728
    assert k.launch.grid == (4096, 1, 1) and k.launch.block == (256, 1, 1)


@pytest.mark.slow
def test_forge_explain_on_cpu_reports_the_degraded_profile(cache_dir):
    import json
    import subprocess
    import sys

    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "forge_lsp.cli.main",
            "explain",
            str(FIXTURES / "softmax_small.py"),
            "--device",
            "cpu",
            "--json",
            "--cache-dir",
            str(cache_dir),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = json.loads(r.stdout)
    assert out["profile"]["mode"] == "degraded" and "CPU" in out["profile"]["reason"]
    assert out["explanations"] == [] and r.returncode == 1  # nothing to explain without kernels


def test_register_spans_follow_values_from_definition_to_last_read():
    from forge_lsp.profiler.report import register_spans

    sass = [
        "LDG.E R4, desc[UR4][R2.64]",  # R4 read at 3
        "@P0 LDG.E R5, desc[UR4][R2.64+0x4]",  # predicated; R5 read at 5
        "LDG.E.64 R8, desc[UR4][R2.64+0x8]",  # defines R8 and R9; R9 read at 4
        "FMUL R6, R4, 2",  # R6 read at 6
        "FADD R10, R9, 1",  # R10 never read
        "FMUL R5, R5, 3",  # reads R5 (span 4), redefines it; never read again
        "STG.E desc[UR4][R2.64], R6",
        "EXIT",
    ]
    assert register_spans(sass) == [3, 4, 2, 3, 0, 0, 0, 0]


SLOW_TASK = """import time
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        time.sleep(30)
        return x * 2


def get_inputs():
    return [torch.randn(4)]


def get_init_inputs():
    return []
"""


def test_a_cancelled_profile_kills_its_process_and_says_cancelled(tmp_path, cache_dir):
    import threading
    import time

    from forge_lsp.sandbox import live_children

    (tmp_path / "slow.py").write_text(SLOW_TASK)
    cancel = threading.Event()
    threading.Timer(3.0, cancel.set).start()
    t0 = time.monotonic()
    result = profile(load_task(tmp_path / "slow.py"), device="cpu", cache_dir=cache_dir, cancel=cancel)
    assert result.mode == "degraded" and result.reason == "cancelled"
    assert time.monotonic() - t0 < 20  # not the 90 s its warm-up calls would take
    profiled = [c for c in live_children() if "forge_lsp.profiler.target" in " ".join(map(str, getattr(c, "args", [])))]
    assert not profiled  # other tests' workers may live on in this process: only the profiled one must be gone


def test_a_profiles_inputs_are_drawn_on_the_gpu_and_on_the_host_where_the_task_cannot_draw_there(tmp_path):
    """The profiled process draws the task's inputs under the GPU as the default device (`target._drawn`); where the
    task's code cannot run so, they are drawn on the host, seeded alike. Here no CUDA is built into torch, so every
    factory call under a CUDA device fails, and the host's draw is what comes back, equal to a seeded host draw."""
    import torch

    from forge_lsp.engine.harness.loading import exec_module
    from forge_lsp.profiler.target import _drawn

    task = load_task(FIXTURES / "softmax_small.py")
    mod = exec_module(task.source, "task", "task")
    drawn = _drawn(torch, torch.device("cuda:0"), task, mod)
    torch.manual_seed(task.seed + 1)
    host = list(mod.get_inputs())
    assert len(drawn) == len(host) and all(torch.equal(a, b) for a, b in zip(drawn, host, strict=True))
    assert _drawn(torch, torch.device("cpu"), task, mod)[0].device.type == "cpu"
