"""A run's progress line and percentage (what the editor shows while a run goes): from synthetic events,
and from a real offline-only run on the CPU (real worker processes, a real run store)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from conftest import FIXTURES

from forge_lsp.agent.events import EventBus
from forge_lsp.agent.optimize import OptimizeOptions, Optimizer
from forge_lsp.agent.progress import RunProgress, speedup_label
from forge_lsp.agent.store import RunStore
from forge_lsp.engine import Evaluator, load_task

SLOW_CORRECT = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.stack([torch.softmax(row, dim=0) for row in x])
"""
WRONG = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=0)
"""


def test_a_run_with_a_model_counts_seeds_rounds_and_the_final_retiming():
    p = RunProgress(rounds=2, model=True, offline=True)
    seen = []
    for kind, data in [
        ("round", {"round": 0}),
        ("candidate_queued", {"candidate": "r/c1"}),
        ("candidate_queued", {"candidate": "r/c2"}),
        ("candidate_timed", {"candidate": "r/c1"}),
        ("new_best", {"candidate": "r/c1", "speedup": 1.25}),
        ("candidate_failed", {"candidate": "r/c2"}),
        ("round", {"round": 1}),
        ("model_call", {}),
        ("candidate_queued", {"candidate": "r/c3"}),
        ("candidate_compiled", {"candidate": "r/c3"}),
        ("candidate_timed", {"candidate": "r/c3"}),
        ("round", {"round": 2}),
        ("final_retime", {"candidate": "r/c3"}),
    ]:
        assert p.update(kind, data)
        seen.append((p.message(), p.percentage()))
    messages = [m for m, _ in seen]
    assert messages[0] == "offline candidates · preparing"
    assert messages[3] == "offline candidates 1/2 · verified"
    assert messages[5] == "offline candidates 2/2 · best 1.25× (search) · a candidate was rejected"
    assert messages[6] == "round 1/2 · best 1.25× (search) · asking the model"
    assert messages[-1] == "final re-timing of the best candidate · best 1.25× (search)"
    pcts = [pct for _, pct in seen]
    assert pcts == sorted(pcts) and 0 <= pcts[0] and pcts[-1] <= 99  # 100 only when the job ends
    assert pcts[5] == 25 and pcts[6] == 25 and pcts[-1] == 75  # 4 equal parts: seeds, 2 rounds, final


def test_a_speedup_is_said_one_way_the_final_retiming_then_the_searchs():
    assert speedup_label(14.34, 14.27) == "14.34× (final re-timing; search 14.27×)"
    assert speedup_label(1.5, 1.499) == "1.50× (final re-timing)"  # the same at the shown precision
    assert speedup_label(2.0) == "2.00× (final re-timing)"


def test_events_that_change_nothing_are_ignored():
    p = RunProgress(rounds=3, model=True)
    assert not p.update("run_started", {})
    assert not p.update("budget", {"reason": "round budget reached"})


@pytest.fixture()
def evaluator(cache_dir, fast_options):
    ev = Evaluator("cpu", options=fast_options, cache_dir=cache_dir, build_workers=0)
    yield ev
    ev.close()


@pytest.mark.slow
def test_an_offline_only_run_never_speaks_of_rounds(tmp_path, evaluator):
    """No model configured: the run is the offline seeds and the final re-timing; "round 0/10" would be a lie."""
    store = RunStore.for_workspace(tmp_path)
    bus = EventBus(store)
    progress = RunProgress(rounds=10, model=False, offline=True)
    lines: list[tuple[str, int]] = []

    def on_event(ev):
        if progress.update(ev.kind, ev.data):
            lines.append((progress.message(), progress.percentage()))

    bus.subscribe(on_event)
    seeds = [
        SimpleNamespace(name="slow", source=SLOW_CORRECT, summary="row by row"),
        SimpleNamespace(name="wrong", source=WRONG, summary="wrong axis"),
    ]
    result = Optimizer(
        load_task(FIXTURES / "softmax_small.py"),
        store=store,
        evaluator=evaluator,
        bus=bus,
        options=OptimizeOptions(rounds=10, offline=True),
        offline=lambda task: seeds,
    ).run()
    assert result.status == "done" and not result.model_configured
    messages = [m for m, _ in lines]
    assert not any("round" in m for m in messages), messages
    assert "offline candidates 0/2 · candidates queued" in messages
    assert any(m.startswith("offline candidates 2/2") for m in messages), messages
    assert messages[-1].startswith("final re-timing of the best candidate"), messages
    pcts = [p for _, p in lines]
    assert pcts == sorted(pcts) and pcts[-1] == 50, pcts  # two parts: the seeds, then the final re-timing
