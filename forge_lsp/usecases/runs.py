"""The run store, read for people: the runs of a workspace, and one run with its candidates.

`forge runs`, `forge show` and the editor's run details (`forge/run`) read runs through here, as
typed records; each front end renders them its own way (rich tables, the LSP wire types).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..agent.progress import outcome_words
from ..agent.run_events import FinalTiming as FinalTimingEvent
from ..agent.run_events import Outcome, Written
from ..agent.store import CandidateRecord, RunRecord, RunStore
from .common import UseCaseError


@dataclass
class FinalTiming:
    """The run's answer: its best candidate re-timed against the reference after the search."""

    candidate: str
    speedup: float
    ci95: tuple[float, float] | None
    reference_ms: float | None
    candidate_ms: float | None


@dataclass
class RunDetails:
    run: RunRecord
    candidates: list[CandidateRecord]  # in creation order
    spent_usd: float  # known model cost
    tokens_in: int
    tokens_out: int
    final: FinalTiming | None  # None: not re-timed (yet), or the best candidate failed its re-check
    outcome: str = ""  # what the run found, in words: `outcome_words`
    written: str | None = None  # where a front end wrote the answer (a file, or the class it rewrote)

    @property
    def best(self) -> CandidateRecord | None:
        return next((c for c in self.candidates if c.id == self.run.best_candidate), None)


LATEST = "latest"


def resolve_run(store: RunStore, run: str) -> str:
    """A run's id from an id, a unique prefix of one, or "latest"."""
    if run == LATEST:
        runs = store.list_runs(limit=1)
        if not runs:
            raise UseCaseError("the run store has no run yet")
        return runs[0].id
    try:
        return store.get_run(run).id
    except KeyError as exc:
        raise UseCaseError(str(exc.args[0])) from exc


def run_details(store: RunStore, run_id: str) -> RunDetails:
    """One run (an id, a unique prefix of one, or "latest") with its candidates, its final re-timing and its
    outcome."""
    run = store.get_run(resolve_run(store, run_id))
    final = None
    said: Outcome | None = None
    written = None
    for record in store.events(run.id):
        event = record.event
        if isinstance(event, Outcome):
            said = event
        elif isinstance(event, Written):
            written = event.path or None
        elif isinstance(event, FinalTimingEvent) and event.speedup is not None:
            final = FinalTiming(
                candidate=str(event.candidate),
                speedup=event.speedup,
                ci95=event.ci95,
                reference_ms=event.reference_ms,
                candidate_ms=event.candidate_ms,
            )
    spent, tokens_in, tokens_out = store.spent(run.id)
    speedup = said.speedup if said is not None else (final.speedup if final is not None else None)
    outcome = outcome_words(run.status, (said.message if said else "") or run.message or "", speedup, written)
    return RunDetails(run, store.candidates(run.id), spent, tokens_in, tokens_out, final, outcome, written)


def list_runs(store: RunStore, limit: int = 50) -> list[RunDetails]:
    """The workspace's latest runs, newest first."""
    return [run_details(store, run.id) for run in store.list_runs(limit)]


def workspace_store(workspace: Path) -> RunStore | None:
    """The workspace's run store, or None when it has none yet: reading runs never creates `.forge/`."""
    path = Path(workspace) / ".forge" / "runs.sqlite"
    return RunStore(path) if path.is_file() else None
