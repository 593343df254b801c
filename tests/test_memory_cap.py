"""The workers' host-memory cap on the CPU: a candidate that allocates far more than the cap is killed fast
with an `out_of_memory` verdict naming the limit and what was held, and the next candidate in the same
Evaluator is evaluated as usual. Real workers, real allocations."""

from __future__ import annotations

import time

import candidates as C
import pytest
from conftest import FIXTURES

from forge_lsp.engine import Candidate, EvalOptions, Evaluator, StageTimeouts, Status, load_task
from forge_lsp.engine.local_pool import LocalPool
from forge_lsp.engine.options import default_host_memory_limit

pytestmark = pytest.mark.integration  # real processes end to end: left out of the fast loop (./dev test --fast)

GIB = 1 << 30

# Allocates 3 GiB, 64 MiB at a time, touching every page (torch.ones), then would return the right answer.
GREEDY = """
import torch
import torch.nn as nn

hoard = []


class ModelNew(nn.Module):
    def forward(self, x):
        for _ in range(48):
            hoard.append(torch.ones(16 << 20))  # 64 MiB of float32
        return torch.softmax(x, dim=1)
"""


def test_a_candidate_over_the_cap_is_out_of_memory_and_the_next_one_is_evaluated(cache_dir):
    task = load_task(FIXTURES / "softmax_small.py")
    opts = EvalOptions(timing=False, host_memory_limit_bytes=GIB, timeouts=StageTimeouts(first_call=120))
    with Evaluator("cpu", options=opts, cache_dir=cache_dir) as ev:
        first = ev.worker.ensure_started().pid
        t0 = time.monotonic()
        v = ev.evaluate(task, Candidate.from_source(GREEDY, "greedy"))
        seconds = time.monotonic() - t0
        print(f"\nout_of_memory after {seconds:.2f} s: {v.reason}")
        assert v.status is Status.out_of_memory, (v.status, v.reason)
        assert "1.00 GiB limit" in v.reason and "GiB resident" in v.reason and "first_call" in v.reason
        assert v.memory is not None and v.memory.host_limit_bytes == GIB
        assert v.memory.host_peak_bytes is not None and v.memory.host_peak_bytes > GIB
        assert v.memory.host_peak_bytes < 2 * GIB  # stopped on the way, far from the 3 GiB it wanted
        assert seconds < 20
        # the worker was killed; the next candidate gets a new one and its usual verdict
        ok = ev.evaluate(task, Candidate.from_source(C.TORCH_CORRECT, "ok"))
        assert ok.correct, ok.reason
        assert ev.worker.hello is not None and ev.worker.hello.pid != first
        assert ok.memory is not None and ok.memory.host_peak_bytes is not None and ok.memory.host_peak_bytes < GIB


def test_the_cap_defaults_to_the_smaller_of_16_gib_and_three_quarters_of_the_ram(monkeypatch):
    import os

    monkeypatch.delenv("FORGE_HOST_MEMORY_LIMIT_GIB", raising=False)
    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert EvalOptions().host_memory_limit() == default_host_memory_limit() == min(16 * GIB, int(ram * 0.75))
    assert EvalOptions(host_memory_limit_bytes=GIB).host_memory_limit() == GIB
    assert EvalOptions(host_memory_limit_bytes=0).host_memory_limit() is None  # 0: no cap
    monkeypatch.setenv("FORGE_HOST_MEMORY_LIMIT_GIB", "2.5")
    assert EvalOptions().host_memory_limit() == int(2.5 * GIB)
    assert EvalOptions(host_memory_limit_bytes=GIB).host_memory_limit() == GIB  # an explicit option wins
    monkeypatch.setenv("FORGE_HOST_MEMORY_LIMIT_GIB", "0")
    assert EvalOptions().host_memory_limit() is None


@pytest.mark.slow
def test_a_build_worker_over_the_cap_says_so(cache_dir):
    """The cap holds for the build workers too (here: a candidate module that hoards while it is executed)."""
    task = load_task(FIXTURES / "softmax_small.py")
    # routed to a build worker as a C++ candidate would be (it never gets as far as calling load_inline)
    greedy_module = GREEDY.replace(
        "hoard = []", "hoard = [torch.ones(16 << 20) for _ in range(48)]\nif not hoard:\n    load_inline()"
    ).replace("import torch.nn as nn", "import torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline")
    cands = [Candidate.from_source(greedy_module, "greedy_build"), Candidate.from_source(C.TORCH_CORRECT, "ok")]
    opts = EvalOptions(timing=False, host_memory_limit_bytes=GIB)
    with LocalPool("cpu", options=opts, cache_dir=cache_dir, build_workers=1) as ev:
        greedy, ok = ev.evaluate_many(task, cands)
        builder = ev._builders[0]
        assert builder.peak_rss > GIB and builder.proc is None  # the build worker was killed over the cap
    assert greedy.status is Status.out_of_memory, (greedy.status, greedy.reason)  # and the device worker too
    assert ok.correct


def test_forge_eval_memory_limit_flag_sets_the_cap(tmp_path):
    """`forge eval --memory-limit GIB`: the greedy candidate is out_of_memory at the limit given on the line."""
    import json
    import subprocess
    import sys

    cand = tmp_path / "greedy.py"
    cand.write_text(GREEDY)
    proc = subprocess.run(
        [sys.executable, "-m", "forge_lsp.cli.main", "eval", str(FIXTURES / "softmax_small.py"), str(cand)]
        + ["--device", "cpu", "--no-timing", "--json", "--memory-limit", "0.75"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    verdict = json.loads(proc.stdout)["verdict"]
    assert verdict["status"] == "out_of_memory", (proc.stdout[-2000:], proc.stderr[-2000:])
    assert "0.75 GiB limit" in verdict["reason"]


@pytest.mark.parametrize("value", ["-1", "lots", "inf"])
def test_forge_eval_memory_limit_must_be_a_number_of_at_least_0(tmp_path, value):
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "forge_lsp.cli.main", "eval", str(FIXTURES / "softmax_small.py"), str(tmp_path / "c.py")]
        + ["--memory-limit", value],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "--memory-limit" in proc.stderr, proc.stderr


def test_the_workspace_configuration_sets_the_cap_of_an_optimization(tmp_path, monkeypatch):
    from forge_lsp.agent.config import ConfigError, load_config
    from forge_lsp.usecases.optimize import eval_options

    monkeypatch.delenv("FORGE_HOST_MEMORY_LIMIT_GIB", raising=False)
    (tmp_path / "pyproject.toml").write_text("[tool.forge]\nmemory_limit_gib = 2.5\n")
    assert eval_options(load_config(tmp_path)).host_memory_limit() == int(2.5 * GIB)
    # the command line's --memory-limit is an override of the same key, and wins
    assert eval_options(load_config(tmp_path, {"memory_limit_gib": 0})).host_memory_limit() is None
    (tmp_path / "pyproject.toml").write_text("[tool.forge]\n")
    assert eval_options(load_config(tmp_path)).host_memory_limit() == default_host_memory_limit()
    (tmp_path / "pyproject.toml").write_text("[tool.forge]\nmemory_limit_gib = -1\n")
    with pytest.raises(ConfigError, match="memory_limit_gib"):
        load_config(tmp_path)
