"""The user's own module is run alone, in the worker, before any candidate: when it raises, crashes or exits,
the run says so, points at the user's line, and no candidate is evaluated (or blamed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from forge_lsp.usecases.optimize import ModuleOptimization, OptimizeRequest

pytestmark = pytest.mark.integration  # real processes end to end: left out of the fast loop (./dev test --fast)

ROOT = Path(__file__).resolve().parent
SOFTMAX = (ROOT / "fixtures" / "softmax_small.py").read_text()
LINE = "        return torch.softmax(x, dim=1)"

FAULTS = {
    "raises": "        scale = x.shape[1] // 0  # the fault",
    "segfaults": "        __import__('ctypes').string_at(0)  # the fault",
    "exits": "        __import__('os')._exit(3)  # the fault",
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_failing_reference_is_the_users_and_no_candidate_is_evaluated(tmp_path, fault):
    task = tmp_path / "task.py"
    task.write_text(SOFTMAX.replace(LINE, f"{FAULTS[fault]}\n{LINE}"))
    fault_line = 1 + next(i for i, line in enumerate(task.read_text().splitlines()) if "# the fault" in line)
    run = ModuleOptimization(
        OptimizeRequest(task_file=task, workspace=tmp_path, device="cpu", profile=False, cache_dir=tmp_path / "cache")
    )
    result = run.run()
    outcome = result.outcome
    assert outcome.status == "failed" and outcome.candidates == 0
    assert outcome.stop_reason.startswith("the reference model failed"), outcome.stop_reason
    if fault != "raises":
        assert "worker process died" in outcome.stop_reason
    assert result.reference_failure is not None
    assert result.reference_failure.reason == outcome.stop_reason
    if fault != "exits":  # os._exit leaves no stack behind; a raise and a segfault do
        assert result.reference_failure.line == fault_line
    assert run.store.candidates(outcome.run_id) == []
