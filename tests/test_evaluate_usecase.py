"""forge eval's use case (`usecases.evaluate`) on the CPU: each candidate's result comes once, with its repair, in
the work's order or as each completes; the summary counts what happened."""

from __future__ import annotations

import pytest
from conftest import FIXTURES

from forge_lsp.engine import Candidate, load_task
from forge_lsp.engine.executors import make_executor
from forge_lsp.usecases.evaluate import evaluate_batch, summarize

pytestmark = pytest.mark.integration  # real processes end to end: left out of the fast loop (./dev test --fast)

CONTIGUOUS_ONLY = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        rows, cols = x.shape
        return torch.softmax(x.as_strided((rows, cols), (cols, 1)), dim=1)
"""
PLAIN = "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return torch.softmax(x, dim=1)\n"


@pytest.mark.parametrize("ordered", [True, False])
def test_each_result_comes_once_with_its_repair_and_the_summary_counts_them(cache_dir, fast_options, ordered):
    task = load_task(FIXTURES / "softmax_small.py")
    work = [(task, Candidate.from_source(CONTIGUOUS_ONLY, "flat")), (task, Candidate.from_source(PLAIN, "plain"))]
    seen = []
    options = fast_options.model_copy(update={"timing": False})
    with make_executor("local", "cpu", options=options, cache_dir=cache_dir) as ex:
        results = evaluate_batch(ex, work, on_result=seen.append, ordered=ordered)
    assert sorted(r.candidate.name for r in seen) == ["flat", "plain"] and len(seen) == 2
    assert all(r.repair is not None or r.candidate.name == "plain" for r in seen)  # complete when said
    flat, plain = results
    assert flat.verdict.correct and flat.verdict.domain.layouts == "contiguous"
    assert flat.repair is not None and flat.repair.kinds == ["contiguous_inputs"] and flat.repair.verdict.domain.full
    assert plain.repair is None and plain.verdict.domain.full
    s = summarize(results, 10.0)
    assert s.by_status == {"correct": 2} and s.repaired == 1 and s.repaired_full_domain == 1
    assert s.by_domain == {"contiguous inputs only": 1, "any layout": 1} and s.narrowed_by == [
        ("noncontiguous_inputs", 1)
    ]
    assert s.per_minute == 12.0 and s.device_busy is None
    assert summarize(results, 10.0, {"cuda:0": 4.0, "cuda:1": 2.0}).device_busy == 0.3
