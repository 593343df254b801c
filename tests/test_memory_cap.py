"""The workers' host-memory cap on the CPU: a candidate that allocates far more than the cap is killed fast
with an `out_of_memory` verdict naming the limit and what was held, and the next candidate in the same
Evaluator is evaluated as usual. Real workers, real allocations."""

from __future__ import annotations

import time

import candidates as C
import pytest
from conftest import FIXTURES

from forge_lsp.engine import Candidate, EvalOptions, Evaluator, StageTimeouts, Status, load_task
from forge_lsp.engine.options import default_host_memory_limit

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
    with Evaluator("cpu", options=opts, cache_dir=cache_dir, build_workers=0) as ev:
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
    with Evaluator("cpu", options=opts, cache_dir=cache_dir, build_workers=1) as ev:
        greedy, ok = ev.evaluate_many(task, cands)
        builder = ev._builders[0]
        assert builder.peak_rss > GIB and builder.proc is None  # the build worker was killed over the cap
    assert greedy.status is Status.out_of_memory, (greedy.status, greedy.reason)  # and the device worker too
    assert ok.correct
