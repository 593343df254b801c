"""A run's progress as one line and a percentage, from its events. Pure: no I/O, no editor types.

The language server shows it in ``$/progress``; any other front end can feed it the same events.
A run has an offline phase (the seeds: torch.compile variants, library kernels), then model
rounds when a model is configured, then the final re-timing of the best candidate. Each phase
says what it is ("offline candidates 2/6", "round 3/10", "final re-timing"), so a run without a
model never shows "round 0/10". The best speedup while searching is labelled "(search)": the
final re-timing, which decides, comes last.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..words import speedup_words


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


@dataclass
class RunProgress:
    rounds: int  # the round budget
    model: bool  # a model is configured (otherwise: offline candidates only)
    offline: bool = True  # the offline seeds are evaluated first
    round: int = 0
    best: float | None = None
    final: bool = False
    phase: str = "starting"
    _queued: set[str] = field(default_factory=set)  # candidates of the current phase
    _done: set[str] = field(default_factory=set)

    def update(self, kind: str, data: dict) -> bool:
        """Take one event; True when the line or the percentage may have changed."""
        cand = data.get("candidate")
        if kind == "model_waiting":
            pieces = int(data.get("pieces") or 0)
            got = f"{pieces} pieces of the reply" if pieces else "no reply yet"
            self.phase = f"asking the {data.get('role', '')} model · {float(data.get('seconds') or 0):.0f} s, {got}"
            return True
        if kind == "round":
            self.round = int(data.get("round") or 0)
            self._queued, self._done = set(), set()
            self.phase = "asking the model" if self.round > 0 else "preparing"
            return True
        elif kind == "final_retime":
            self.final = True
        elif kind == "new_best" and data.get("speedup") is not None:
            self.best = float(data["speedup"])
        elif kind == "candidate_queued" and cand:
            self._queued.add(cand)
        elif kind in ("candidate_timed", "candidate_failed") and cand and not data.get("final"):
            self._done.add(cand)
        if kind not in PHASES and kind not in ("final_retime", "new_best"):
            return False
        if kind in PHASES:
            self.phase = PHASES[kind]
        return True

    @property
    def _units(self) -> int:
        """Phases that count towards the percentage: the seeds, each round, the final re-timing."""
        return int(self.offline) + (self.rounds if self.model else 0) + 1

    def percentage(self) -> int:
        if self.final:
            done = self._units - 1
            return min(99, int(100 * done / self._units))
        in_phase = len(self._done) / len(self._queued) if self._queued else 0.0
        before = (self.round - 1 + int(self.offline)) if self.round > 0 else 0
        return max(0, min(99, int(100 * (before + in_phase) / self._units)))

    def message(self) -> str:
        best = f" · best {self.best:.2f}× (search)" if self.best is not None else ""
        if self.final:
            return f"final re-timing of the best candidate{best}"
        if self.round == 0:
            count = f" {len(self._done)}/{len(self._queued)}" if self._queued else ""
            return f"offline candidates{count}{best} · {self.phase}"
        return f"round {self.round}/{self.rounds}{best} · {self.phase}"
