"""A run's typed events: every kind through the run store and back, a store written by another version still
read (a missing field, a field of the wrong type, a kind this version does not know), and what the readers of
the store (`forge show`, the cost per round, the report) make of such a store."""

from __future__ import annotations

import sqlite3

import pytest

from forge_lsp.agent.events import EventBus
from forge_lsp.agent.run_events import (
    MODELS,
    Budget,
    CandidateFailed,
    CandidateQueued,
    CandidateStage,
    CandidateTimed,
    CandidateVerified,
    Decision,
    FinalRetime,
    FinalTiming,
    ModelCall,
    ModelWaiting,
    NewBest,
    Outcome,
    Profiled,
    Round,
    RunFinished,
    RunStarted,
    UnknownEvent,
    Written,
    parse_event,
)
from forge_lsp.agent.store import RunStore, costs_by_round

#: One event of every kind, each field away from its default.
EVERY_KIND = [
    RunStarted(resumed=False, task="t.py", model_configured=True),
    RunStarted(resumed=True, candidates=4, rounds=2),
    Round(round=2, of=5, targets=["r/c1", "r/c2"], best_speedup=1.4, phase="rounds"),
    Budget(reason="round budget reached (5)"),
    RunFinished(status="done", reason="rounds", best="r/c2", best_speedup=1.4, spent_usd=0.25),
    ModelWaiting(role="judge", seconds=6.2, pieces=3),
    ModelCall(
        role="coder",
        ok=True,
        model="m",
        attempts=2,
        prompt_tokens=10,
        completion_tokens=5,
        cost_usd=0.01,
        latency_s=1.5,
    ),
    ModelCall(role="judge", ok=False, error="timeout", message="no answer in 60 s"),
    CandidateQueued(candidate="r/c1", parent="r/c0", origin="coder", summary="fused"),
    CandidateStage(kind="candidate_stage", candidate="r/c1", stage="compile"),
    CandidateStage(kind="candidate_compiled", candidate="r/c1", stage="verify"),
    CandidateVerified(candidate="r/c1", reused="r/c0"),
    CandidateTimed(candidate="r/c1", speedup=1.3, final=True),
    CandidateFailed(candidate="r/c2", status="incorrect", check="outputs", reason="wrong", reused="r/c0"),
    NewBest(candidate="r/c1", speedup=1.3, summary="fused"),
    Profiled(
        candidate="r/c1",
        phase="done",
        mode="ncu",
        kernel="k",
        pct_of_roof=55.0,
        roofline={"bound": "memory", "pct_of_roof": 55.0},
    ),
    FinalRetime(candidate="r/c1", search_speedup=1.3),
    FinalTiming(
        candidate="r/c1",
        speedup=1.25,
        timing={"speedup_ci95": [1.2, 1.3], "reference": {"median_ms": 2.0}, "candidate": {"median_ms": 1.6}},
    ),
    Outcome(message="1.25× faster", withheld="not_faster", speedup=1.25),
    Written(path="/w/t_forge_best.py"),
    Decision(kind="accepted", candidate="r/c1", uri="file:///w/t.py", target="Model"),
    Decision(kind="rejected", candidate="r/c1", uri="file:///w/t.py", target="Model"),
    Decision(kind="stale", candidate="r/c1", uri="file:///w/t.py", target="Model"),
]


@pytest.fixture()
def store(tmp_path):
    s = RunStore.for_workspace(tmp_path)
    yield s
    s.close()


def raw_event(store: RunStore, run_id: str, kind: str, data_json: str) -> None:
    """An event row as another version of forge may have written it."""
    db = sqlite3.connect(str(store.path))
    with db:
        db.execute("INSERT INTO events (run_id, ts, kind, data_json) VALUES (?, 1.0, ?, ?)", (run_id, kind, data_json))
    db.close()


def test_the_samples_cover_every_kind():
    assert {e.kind for e in EVERY_KIND} == set(MODELS)


def test_every_kind_goes_through_the_store_and_comes_back_the_same(store):
    run = store.create_run("t.py", "Model", "src", {})
    for event in EVERY_KIND:
        store.add_event(run, event)
    back = store.events(run)
    assert [r.event for r in back] == EVERY_KIND
    assert [type(r.event) for r in back] == [type(e) for e in EVERY_KIND]  # typed again, not dicts
    assert [r.kind for r in back] == [e.kind for e in EVERY_KIND]
    assert [r.event for r in store.events(run, after=back[-3].id)] == EVERY_KIND[-2:]


def test_the_store_keeps_the_kind_and_the_fields_as_json(store):
    """The events table is as it was: the kind in its column, the fields (no kind) as a JSON object."""
    run = store.create_run("t.py", "Model", "src", {})
    store.add_event(run, CandidateTimed(candidate="r/c1", speedup=1.5))
    db = sqlite3.connect(str(store.path))
    kind, data = db.execute("SELECT kind, data_json FROM events").fetchone()
    db.close()
    assert kind == "candidate_timed"
    assert data == '{"candidate": "r/c1", "speedup": 1.5, "final": false}'


def test_an_old_or_newer_record_still_reads(store):
    run = store.create_run("t.py", "Model", "src", {})
    raw_event(store, run, "round", '{"round": 3}')  # an older version: no targets, no of
    raw_event(store, run, "candidate_timed", '{"candidate": "r/c1", "speedup": "fast", "extra": 1}')  # wrong type
    raw_event(store, run, "model_call", '{"round": 3, "ok": null, "prompt_tokens": null}')  # nulls where numbers go
    raw_event(store, run, "a_newer_kind", '{"candidate": "r/c1", "n": 2}')
    raw_event(store, run, "written", "not json")
    raw_event(store, run, "outcome", "[1, 2]")  # not an object
    events = [r.event for r in store.events(run)]
    assert events == [
        Round(round=3),
        CandidateTimed(candidate="r/c1"),
        ModelCall(),
        UnknownEvent(kind="a_newer_kind", data={"candidate": "r/c1", "n": 2}),
        Written(),
        Outcome(),
    ]
    assert events[0].targets == [] and events[0].of is None  # a missing field takes its default
    # an unknown kind keeps its fields, and is stored back as it came
    store.add_event(run, events[3])
    assert store.events(run)[-1].event == events[3]


def test_parse_event_never_fails():
    assert parse_event("profiled", {"phase": "done", "roofline": [1, 2]}) == Profiled(phase="done")
    assert parse_event("accepted", {"candidate": "r/c1"}) == Decision(kind="accepted", candidate="r/c1")
    assert parse_event("round", {"kind": "budget", "round": 2}) == Round(round=2)  # the row's kind decides
    assert parse_event("round", None) == Round()


def test_readers_of_a_store_with_old_records_say_what_they_can(store):
    """`forge show`'s details, the cost per round and the report read a store with missing fields and unknown
    kinds without failing, taking the defaults."""
    from forge_lsp.report.data import gather
    from forge_lsp.usecases.runs import run_details

    run = store.create_run("t.py", "Model", "class Model: ...", {})
    raw_event(store, run, "round", "{}")
    raw_event(store, run, "model_call", '{"ok": true, "prompt_tokens": 7}')
    raw_event(store, run, "round", '{"round": 1}')
    raw_event(store, run, "model_call", '{"cost_usd": "lots"}')
    raw_event(store, run, "final_timing", '{"candidate": "r/c1", "speedup": 1.5}')  # no timing
    raw_event(store, run, "outcome", '{"message": "1.50× faster"}')  # no speedup
    raw_event(store, run, "a_newer_kind", '{"x": 1}')
    store.set_run_status(run, "done", "rounds")
    assert [(r["round"], r["calls"], r["failed"], r["prompt_tokens"]) for r in costs_by_round(store, run)] == [
        (0, 1, 0, 7),
        (1, 1, 1, 0),
    ]
    details = run_details(store, run)
    assert details.final is not None and details.final.speedup == 1.5 and details.final.ci95 is None
    assert details.outcome == "no faster candidate, nothing written: 1.50× faster"  # the outcome said no speedup
    data = gather(store, run)
    assert data.final is not None and data.final.speedup == 1.5


def test_the_bus_stores_what_replays_need_and_hands_every_event_to_subscribers(store):
    run = store.create_run("t.py", "Model", "src", {})
    bus = EventBus(store)
    seen = []
    bus.subscribe(seen.append)
    waiting = bus.publish(run, ModelWaiting(role="coder", seconds=2.0))
    queued = bus.publish(run, CandidateQueued(candidate=f"{run}/c1", origin="coder"))
    assert [r.event for r in seen] == [ModelWaiting(role="coder", seconds=2.0), queued.event]
    assert waiting.id == 0 and queued.id > 0  # a transient event is not stored
    assert [(r.id, r.event) for r in store.events(run)] == [(queued.id, queued.event)]
