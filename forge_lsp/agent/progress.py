"""A run's progress as one line and a percentage, from its typed events. Pure: no I/O, no editor types.

Computed here once: the language server shows it in ``$/progress``, a model-wide run says its line for
each module, and any other front end can feed it the same events.
A run has an offline phase (the seeds: torch.compile variants, library kernels), then model
rounds when a model is configured, then the final re-timing of the best candidate. Each phase
says what it is ("offline candidates 2/6", "round 3/10", "final re-timing"), so a run without a
model never shows "round 0/10". The best speedup while searching is labelled "(search)": the
final re-timing, which decides, comes last.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ..words import speedup_words
from .run_events import (
    AnyEvent,
    CandidateFailed,
    CandidateQueued,
    CandidateTimed,
    FinalRetime,
    ModelCall,
    ModelWaiting,
    NewBest,
    Round,
)


def speedup_label(final: float, search: float | None = None) -> str:
    """A best candidate's speedup, said one way everywhere (CLI, messages, lenses, diagnostics, hover): the
    final re-timing is the answer; the search's own measurement of the same candidate is named beside it."""
    text = f"{final:.2f}× (final re-timing"
    if search is not None and f"{search:.2f}" != f"{final:.2f}":
        text += f"; search {search:.2f}×"
    return text + ")"


def outcome_words(status: str, message: str, speedup: float | None, written: str | None) -> str:
    """The outcome first, in words: "1.42× faster (final re-timing), written to X", "no faster candidate, nothing
    written (...)", "running", "cancelled", "failed: ..."."""
    if status in ("running", "queued"):
        return "still running"
    if status in ("cancelled", "interrupted"):
        return f"{status}, nothing written" + (f": {message}" if message and message != status else "")
    if status == "failed":
        return f"failed: {message}" if message else "failed"
    if speedup is not None and speedup > 1:
        return f"{speedup_words(speedup)} (final re-timing), " + (f"written to {written}" if written else "offered")
    return "no faster candidate, nothing written" + (f": {message}" if message else "")


PHASES = {
    "candidate_queued": "candidates queued",
    "candidate_stage": "building",
    "candidate_compiled": "verifying and timing",
    "candidate_verified": "verified",
    "candidate_timed": "verified",
    "candidate_failed": "a candidate was rejected",
    "profiled": "profiling",
    "model_call": "model replied",
}


def waiting_words(event: ModelWaiting, so_far: str = "") -> str:
    """How long a model call has waited and what of its reply came: "6 s, no reply yet", "12 s, 31 pieces of the
    reply" (`so_far` appended to the latter)."""
    got = f"{event.pieces} pieces of the reply{so_far}" if event.pieces else "no reply yet"
    return f"{event.seconds:.0f} s, {got}"


@dataclass
class RunProgress:
    """A run in flight: which phase (the offline seeds, round N, the final re-timing), the candidates of the phase
    queued and done, the search's best, what is going on now; said as `message()` and `percentage()`.

    The percentage is the larger of two readings, and never over 99 (100 is the job's end): the candidates done of
    those queued in the phase, and how much of the run's budget is spent: its phases, within the current phase its
    steps (the model replied, candidates queued, each candidate verified or rejected), and the wall clock when
    `wall_s` is set."""

    rounds: int  # the round budget
    model: bool  # a model is configured (otherwise: offline candidates only)
    offline: bool = True  # the offline seeds are evaluated first
    wall_s: float | None = None  # the wall-time budget
    started: float = field(default_factory=time.monotonic)
    round: int = 0
    best: float | None = None
    final: bool = False
    phase: str = "starting"  # what is going on now, in words
    _queued: set[str] = field(default_factory=set)  # candidates of the current phase
    _done: set[str] = field(default_factory=set)
    _step: int = 0  # index of the current phase, for the budget's reading
    _within: float = 0.0  # how far the current phase is by its steps, 0..1

    @property
    def queued(self) -> int:
        """Candidates queued in the current phase."""
        return len(self._queued)

    @property
    def done(self) -> int:
        """Candidates of the current phase verified or rejected."""
        return len(self._done)

    @property
    def phases(self) -> int:
        """Phases that count towards the percentage: the seeds, each round, the final re-timing."""
        return int(self.offline) + (self.rounds if self.model else 0) + 1

    def update(self, event: AnyEvent) -> bool:
        """Take one event; True when the line or the percentage may have changed."""
        if isinstance(event, ModelWaiting):
            self.phase = f"asking the {event.role} model · {waiting_words(event)}"
            return True
        if isinstance(event, Round):
            self.round = event.round
            self._queued, self._done = set(), set()
            self._step = 0 if self.round == 0 else int(self.offline) + self.round - 1
            self._within = 0.0
            self.phase = "asking the model" if self.round > 0 else "preparing"
            return True
        if isinstance(event, FinalRetime):
            self.final = True
            self._step, self._within = self.phases - 1, 0.0
            return True
        if isinstance(event, NewBest):
            if event.speedup is not None:
                self.best = event.speedup
            return True
        if isinstance(event, ModelCall):
            self._within = max(self._within, 0.25)
        elif isinstance(event, CandidateQueued) and event.candidate:
            self._queued.add(event.candidate)
            self._within = max(self._within, 0.4)
        elif isinstance(event, CandidateTimed | CandidateFailed) and not (
            isinstance(event, CandidateTimed) and event.final
        ):
            if event.candidate:
                self._done.add(event.candidate)
            share = len(self._done) / max(len(self._queued), len(self._done), 1)
            self._within = max(self._within, 0.4 + 0.55 * share)
        if event.kind not in PHASES:
            return False
        self.phase = PHASES[event.kind]
        return True

    def percentage(self, now: float | None = None) -> int:
        if self.final:
            counted = 100 * (self.phases - 1) / self.phases
        else:
            in_phase = len(self._done) / len(self._queued) if self._queued else 0.0
            before = (self.round - 1 + int(self.offline)) if self.round > 0 else 0
            counted = 100 * (before + in_phase) / self.phases
        spent = 100 * (min(self._step, self.phases - 1) + min(self._within, 0.95)) / self.phases
        if self.wall_s:
            spent = max(spent, 100 * ((now if now is not None else time.monotonic()) - self.started) / self.wall_s)
        return max(0, min(99, max(int(counted), int(spent))))

    def message(self) -> str:
        best = f" · best {self.best:.2f}× (search)" if self.best is not None else ""
        if self.final:
            return f"final re-timing of the best candidate{best}"
        if self.round == 0:
            count = f" {len(self._done)}/{len(self._queued)}" if self._queued else ""
            return f"offline candidates{count}{best} · {self.phase}"
        return f"round {self.round}/{self.rounds}{best} · {self.phase}"
