"""A run's progress line and percentage (what the editor shows while a run goes): from synthetic events,
and from a real offline-only run on the CPU (real worker processes, a real run store)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from conftest import FIXTURES

from forge_lsp.agent.events import EventBus
from forge_lsp.agent.optimize import OptimizeOptions, Optimizer
from forge_lsp.agent.progress import RunProgress, speedup_label
from forge_lsp.agent.run_events import (
    Budget,
    CandidateFailed,
    CandidateQueued,
    CandidateStage,
    CandidateTimed,
    FinalRetime,
    ModelCall,
    ModelWaiting,
    NewBest,
    Round,
    RunStarted,
    UnknownEvent,
)
from forge_lsp.agent.store import RunStore
from forge_lsp.engine import load_task
from forge_lsp.engine.local_pool import LocalPool

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
    for event in [
        Round(round=0),
        CandidateQueued(candidate="r/c1"),
        CandidateQueued(candidate="r/c2"),
        CandidateTimed(candidate="r/c1"),
        NewBest(candidate="r/c1", speedup=1.25),
        CandidateFailed(candidate="r/c2"),
        Round(round=1),
        ModelCall(),
        CandidateQueued(candidate="r/c3"),
        CandidateStage(kind="candidate_compiled", candidate="r/c3"),
        CandidateTimed(candidate="r/c3"),
        Round(round=2),
        FinalRetime(candidate="r/c3"),
    ]:
        assert p.update(event)
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
    assert not p.update(RunStarted())
    assert not p.update(Budget(reason="round budget reached"))
    assert not p.update(UnknownEvent(kind="a_newer_kind", data={"candidate": "r/c9"}))


@pytest.fixture()
def evaluator(cache_dir, fast_options):
    ev = LocalPool("cpu", options=fast_options, cache_dir=cache_dir, build_workers=0)
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
        if progress.update(ev.event):
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


def test_the_percentage_is_the_larger_of_candidates_done_and_budget_steps_and_the_clock():
    """One scripted run, every step's percentage: the candidates done of those queued in the phase, or the budget's
    steps within it (the model replied, candidates queued, each one done), whichever says more; the wall clock when
    a wall-time budget is set. Four phases: the seeds, two rounds, the final re-timing."""
    p = RunProgress(rounds=2, model=True, offline=True, started=0.0)
    script = [
        (Round(round=0), 0, "offline candidates · preparing"),
        (CandidateQueued(candidate="r/c1"), 10, "offline candidates 0/1 · candidates queued"),
        (CandidateQueued(candidate="r/c2"), 10, "offline candidates 0/2 · candidates queued"),
        (CandidateTimed(candidate="r/c1", speedup=0.9), 16, "offline candidates 1/2 · verified"),
        (CandidateFailed(candidate="r/c2", reason="wrong"), 25, "offline candidates 2/2 · a candidate was rejected"),
        (Round(round=1, of=2), 25, "round 1/2 · asking the model"),
        (
            ModelWaiting(role="coder", seconds=4.4, pieces=3),
            25,
            "round 1/2 · asking the coder model · 4 s, 3 pieces of the reply",
        ),
        (ModelCall(role="coder", ok=True), 31, "round 1/2 · model replied"),
        (CandidateQueued(candidate="r/c3"), 35, "round 1/2 · candidates queued"),
        (CandidateStage(kind="candidate_stage", candidate="r/c3", stage="compile"), 35, "round 1/2 · building"),
        (CandidateTimed(candidate="r/c3", speedup=1.5), 50, "round 1/2 · verified"),
        (NewBest(candidate="r/c3", speedup=1.5), 50, "round 1/2 · best 1.50× (search) · verified"),
        (FinalRetime(candidate="r/c3"), 75, "final re-timing of the best candidate · best 1.50× (search)"),
        (
            CandidateTimed(candidate="r/c3", speedup=1.6, final=True),
            75,
            "final re-timing of the best candidate · best 1.50× (search)",
        ),
    ]
    for event, pct, message in script:
        assert p.update(event), event
        assert (p.percentage(now=0.0), p.message()) == (pct, message), event
    assert (p.done, p.queued) == (1, 1)  # the final re-timing is not a candidate of the round

    clocked = RunProgress(rounds=3, model=True, wall_s=100.0, started=0.0)
    clocked.update(Round(round=1, of=3))
    assert clocked.percentage(now=0.0) == 20  # one phase of five done: the seeds
    assert clocked.percentage(now=60.0) == 60  # the wall clock says more
    assert clocked.percentage(now=1000.0) == 99  # 100 only when the job ends
