"""The run store: round trips, WAL mode, and secrets never written."""

from __future__ import annotations

import sqlite3
import threading

import pytest

from forge_lsp.agent.run_events import ModelCall, NewBest
from forge_lsp.agent.store import REDACTED, RunStore, scrub
from forge_lsp.engine import Status, Timing, TimingStats, Verdict


def timing(speedup: float, ref_ms: float, cand_ms: float) -> Timing:
    def stats(ms: float) -> TimingStats:
        return TimingStats(median_ms=ms, mean_ms=ms, min_ms=ms, p10_ms=ms, p90_ms=ms, n=10)

    return Timing(
        mode="cpu",
        reference=stats(ref_ms),
        candidate=stats(cand_ms),
        speedup=speedup,
        speedup_ci95=(speedup * 0.9, speedup * 1.1),
        l2_flush=False,
    )


def test_runs_candidates_calls_and_events_round_trip(tmp_path):
    store = RunStore.for_workspace(tmp_path)
    run = store.create_run(tmp_path / "t.py", "Model", "class Model: ...", {"search": "mcts"})
    a = store.add_candidate(run, "class ModelNew: pass", parent_id=None, origin="coder", summary="first")
    b = store.add_candidate(run, "class ModelNew: pass  # 2", parent_id=a.id, origin="repair", summary="fix")
    store.set_verdict(a.id, Verdict(status=Status.correct, timing=timing(1.7, 1.7, 1.0)), correct=True, speedup=1.7)
    store.add_call(
        run,
        role="coder",
        model="m",
        messages=[{"role": "user", "content": "hi"}],
        reply_text="{}",
        parsed={"summary": "first"},
        prompt_tokens=10,
        completion_tokens=5,
        cost_usd=0.25,
    )
    store.add_call(run, role="judge", model="m", messages=[], reply_text="", parsed=None, error="timeout: slow")
    store.add_event(run, NewBest(candidate=a.id))
    assert [c.id for c in store.candidates(run)] == [a.id, b.id] and store.get_candidate(b.id).parent_id == a.id
    got = store.get_candidate(a.id)
    assert got.correct is True and got.speedup == 1.7 and got.status == "evaluated"
    assert isinstance(got.verdict, Verdict) and got.verdict.timing.speedup == 1.7  # typed again, not a dict
    assert store.get_candidate(b.id).status == "queued"
    assert store.evaluated_by_source(run, "class ModelNew: pass").id == a.id
    assert store.evaluated_by_source(run, "class ModelNew: pass  # 2") is None
    assert store.spent(run) == (0.25, 10, 5)
    assert [e.kind for e in store.events(run)] == ["new_best"]
    assert store.get_run(run[:15]).id == run  # unique prefix
    assert store.list_runs()[0].config == {"search": "mcts"}
    with pytest.raises(KeyError):
        store.get_run("nope")


def test_database_is_in_wal_mode_and_readable_while_open(tmp_path):
    store = RunStore.for_workspace(tmp_path)
    store.create_run("t.py", "Model", "src", {})
    other = sqlite3.connect(str(tmp_path / ".forge" / "runs.sqlite"))
    assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert other.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 1


def test_stores_opened_at_the_same_moment_on_a_new_database_all_open(tmp_path):
    """The server's `initialized` and a job that came first, or the server and a `forge` command, may create
    the workspace's database at the same moment: SQLite then answers "database is locked" to one of them at
    once, which must not fail the job."""
    failures: list[BaseException] = []
    for n in range(40):
        path = tmp_path / f"w{n}" / "runs.sqlite"
        start = threading.Barrier(4)
        opened: list[RunStore] = []

        def open_store(path=path, start=start, opened=opened):
            start.wait()
            try:
                opened.append(RunStore(path))
            except BaseException as exc:  # noqa: BLE001 - collected, asserted below
                failures.append(exc)

        threads = [threading.Thread(target=open_store) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for store in opened:
            assert store.list_runs() == []
            store.close()
    assert failures == []


def test_secret_values_never_reach_the_database(tmp_path, monkeypatch):
    key = "sk-test-abcdefghijklmnop123456"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    store = RunStore.for_workspace(tmp_path)
    run = store.create_run("t.py", "Model", f"# {key}", {"note": key})
    store.add_candidate(run, f"KEY = '{key}'", parent_id=None, origin="coder", summary=key)
    store.add_call(
        run,
        role="coder",
        model="m",
        messages=[{"role": "user", "content": key}],
        reply_text=key,
        parsed={"k": key},
        error=f"401 for {key}",
    )
    store.add_event(run, ModelCall(message=key))
    store.close()
    raw = (tmp_path / ".forge" / "runs.sqlite").read_bytes()
    for extra in (tmp_path / ".forge").glob("runs.sqlite-*"):
        raw += extra.read_bytes()
    assert key.encode() not in raw
    assert REDACTED.encode() in raw


def test_scrub_replaces_only_secret_looking_variables():
    assert scrub("a sk-12345678 b", ["sk-12345678"]) == f"a {REDACTED} b"
    assert scrub("nothing here", []) == "nothing here"


def test_run_details_carries_the_candidates_a_details_view_shows(tmp_path):
    from forge_lsp.server.protocol import RunResult, wire
    from forge_lsp.usecases import UseCaseError
    from forge_lsp.usecases.runs import run_details

    store = RunStore.for_workspace(tmp_path)
    run = store.create_run("t.py", "Model", "src", {})
    c = store.add_candidate(run, "class ModelNew: ...", parent_id=None, origin="coder", summary="first")
    store.set_verdict(c.id, Verdict(status=Status.correct, timing=timing(2.0, 2.0, 1.0)), correct=True, speedup=2.0)
    store.set_findings(c.id, [{"title": "Memory bound", "rule": "memory_bound", "suggestion": "fuse"}])
    d = run_details(store, run[:12])
    assert d.run.id == run and d.run.model_class == "Model" and d.final is None
    (cand,) = d.candidates
    assert cand.verdict.timing.candidate.median_ms == 1.0 and cand.speedup == 2.0
    # the wire casing is the protocol's alone
    w = wire(RunResult.of(d))
    assert w["run"]["modelClass"] == "Model" and w["candidates"][0]["verdict"]["candidateMs"] == 1.0
    assert w["candidates"][0]["findings"][0]["rule"] == "memory_bound"
    with pytest.raises(UseCaseError, match="no run 'nope'"):
        run_details(store, "nope")


def test_a_verdict_this_version_cannot_read_leaves_the_candidate_without_one(tmp_path):
    store = RunStore.for_workspace(tmp_path)
    run = store.create_run("t.py", "Model", "src", {})
    c = store.add_candidate(run, "class ModelNew: ...", parent_id=None, origin="coder", summary="first")
    store._db.execute(
        "UPDATE candidates SET verdict_json = ?, status = 'evaluated' WHERE id = ?",
        ('{"status": "from-the-future"}', c.id),
    )
    assert store.get_candidate(c.id).verdict is None and store.get_candidate(c.id).status == "evaluated"
