"""A run's events, typed: one pydantic model per kind, `RunEvent` their union on `kind`.

The optimizer publishes them as a run goes (`events.EventBus`), the use cases and front ends add the
few that come after it (the outcome, where the answer was written, the editor's decision), and the run
store keeps each one as its kind and its fields in JSON (`RunStore.add_event`, `RunStore.events`).

`parse_event` reads a stored (kind, fields) back into its model. A store written by another version
still reads: every field has a default (a field it lacks takes it), a field of the wrong type is
dropped to its default, and a kind this version does not know is an `UnknownEvent` keeping its fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal, Union, get_args

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError


class Event(BaseModel):
    """What every event model shares: its `kind`, and its fields as the store keeps them."""

    model_config = ConfigDict(protected_namespaces=())

    kind: str

    def fields(self) -> dict[str, Any]:
        """The event's fields as JSON data, without its kind (the store's ``data_json``)."""
        return self.model_dump(mode="json", exclude={"kind"})


# ------------------------------------------------------------------------------------------- the run
class RunStarted(Event):
    kind: Literal["run_started"] = "run_started"
    resumed: bool = False
    task: str | None = None  # a new run: its task file
    model_configured: bool | None = None  # a new run: whether a model is configured
    candidates: int | None = None  # a resumed run: the candidates it had
    rounds: int | None = None  # a resumed run: the rounds it had


class Round(Event):
    """A phase begins: round 0 is the offline seeds, rounds 1.. ask the model."""

    kind: Literal["round"] = "round"
    round: int = 0
    of: int | None = None  # the round budget
    targets: list[str] = []  # the candidates this round expands
    best_speedup: float | None = None  # the search's best so far
    phase: str | None = None  # round 0: "offline seeds"


class Budget(Event):
    """A budget stopped the rounds."""

    kind: Literal["budget"] = "budget"
    reason: str = ""


class RunFinished(Event):
    kind: Literal["run_finished"] = "run_finished"
    status: str = ""  # done | cancelled | failed
    reason: str = ""
    best: str | None = None
    best_speedup: float | None = None
    spent_usd: float = 0.0


# ------------------------------------------------------------------------------------------ the model
class ModelWaiting(Event):
    """A model call has been waiting this long (every 2 s after the first 2 s). Never stored."""

    kind: Literal["model_waiting"] = "model_waiting"
    role: str = ""
    seconds: float = 0.0
    pieces: int = 0  # pieces of the reply received so far


class ModelCall(Event):
    """A model call ended: its usage when it answered, its error when it did not."""

    kind: Literal["model_call"] = "model_call"
    role: str = ""
    ok: bool = False
    model: str | None = None
    attempts: int | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    latency_s: float | None = None
    error: str | None = None  # the provider's error kind
    message: str | None = None


# ------------------------------------------------------------------------------------- the candidates
class CandidateQueued(Event):
    kind: Literal["candidate_queued"] = "candidate_queued"
    candidate: str | None = None
    parent: str | None = None
    origin: str = ""
    summary: str = ""


class CandidateStage(Event):
    """A candidate's evaluation reached a stage: ``candidate_compiled`` once it runs (first call,
    verification), ``candidate_stage`` before."""

    kind: Literal["candidate_stage", "candidate_compiled"] = "candidate_stage"
    candidate: str | None = None
    stage: str = ""


class CandidateVerified(Event):
    kind: Literal["candidate_verified"] = "candidate_verified"
    candidate: str | None = None
    reused: str | None = None  # the candidate of the same source whose verdict it took


class CandidateTimed(Event):
    kind: Literal["candidate_timed"] = "candidate_timed"
    candidate: str | None = None
    speedup: float | None = None
    final: bool = False  # the final re-timing of the best candidate


class CandidateFailed(Event):
    """A candidate was rejected (its verdict, or its final re-check); with no candidate, the offline seeds
    could not be made."""

    kind: Literal["candidate_failed"] = "candidate_failed"
    candidate: str | None = None
    status: str | None = None
    check: str | None = None
    reason: str = ""
    reused: str | None = None


class NewBest(Event):
    kind: Literal["new_best"] = "new_best"
    candidate: str | None = None
    speedup: float | None = None
    summary: str = ""


class Profiled(Event):
    """A candidate's profile: ``start``, then ``done`` with its place on the roofline."""

    kind: Literal["profiled"] = "profiled"
    candidate: str | None = None
    phase: str = ""  # start | done
    mode: str | None = None
    kernel: str | None = None
    pct_of_roof: float | None = None
    roofline: dict[str, Any] | None = None


class FinalRetime(Event):
    """The best candidate's final re-check and re-timing begins."""

    kind: Literal["final_retime"] = "final_retime"
    candidate: str | None = None
    search_speedup: float | None = None


class FinalTiming(Event):
    """The best candidate re-timed against the reference: the run's answer."""

    kind: Literal["final_timing"] = "final_timing"
    candidate: str | None = None
    speedup: float | None = None
    timing: dict[str, Any] | None = None  # the engine's `Timing`, as JSON

    @property
    def ci95(self) -> tuple[float, float] | None:
        ci = (self.timing or {}).get("speedup_ci95")
        return (float(ci[0]), float(ci[1])) if ci else None

    @property
    def reference_ms(self) -> float | None:
        return ((self.timing or {}).get("reference") or {}).get("median_ms")

    @property
    def candidate_ms(self) -> float | None:
        return ((self.timing or {}).get("candidate") or {}).get("median_ms")


# ------------------------------------------------------------------------------------ after the run
class Outcome(Event):
    """What the run found, in the words every front end says it."""

    kind: Literal["outcome"] = "outcome"
    message: str = ""
    withheld: str | None = None
    speedup: float | None = None


class Written(Event):
    """Where a front end wrote the answer (a file, or the class it rewrote)."""

    kind: Literal["written"] = "written"
    path: str = ""


DecisionKind = Literal["accepted", "rejected", "stale"]


class Decision(Event):
    """What became of the answer offered in the editor."""

    kind: DecisionKind = "accepted"
    candidate: str | None = None
    uri: str = ""
    target: str = ""


class UnknownEvent(Event):
    """An event of a kind this version does not know (a newer store's), its fields kept as they were."""

    data: dict[str, Any] = {}

    def fields(self) -> dict[str, Any]:
        return dict(self.data)


RunEvent = Annotated[
    Union[  # noqa: UP007 - the discriminated union, spelled as pydantic documents it
        RunStarted,
        Round,
        Budget,
        RunFinished,
        ModelWaiting,
        ModelCall,
        CandidateQueued,
        CandidateStage,
        CandidateVerified,
        CandidateTimed,
        CandidateFailed,
        NewBest,
        Profiled,
        FinalRetime,
        FinalTiming,
        Outcome,
        Written,
        Decision,
    ],
    Field(discriminator="kind"),
]

#: What a reader of the store gets: a typed event, or the fields of a kind it does not know.
AnyEvent = Union[RunEvent, UnknownEvent]  # noqa: UP007 - a union with an Annotated member

EVENTS: TypeAdapter[RunEvent] = TypeAdapter(RunEvent)

#: Every kind of `RunEvent`, each with its model.
MODELS: dict[str, type[Event]] = {
    kind: model for model in get_args(get_args(RunEvent)[0]) for kind in get_args(model.model_fields["kind"].annotation)
}

#: Kinds that are not stored: moment-to-moment state that only a live consumer needs (a model call that
#: has been waiting N s, how much of its reply arrived). Replays do not see them.
TRANSIENT_KINDS = frozenset({"model_waiting"})


def parse_event(kind: str, data: Mapping[str, Any] | Any) -> AnyEvent:
    """A stored event typed again. A missing field takes its default, a field of the wrong type is dropped to its
    default, and an unknown kind (or fields that are not an object) is an `UnknownEvent`: a reader never fails."""
    fields = dict(data) if isinstance(data, Mapping) else {}
    if kind not in MODELS:
        return UnknownEvent(kind=kind, data=fields)
    body = {k: v for k, v in fields.items() if k != "kind"}
    while True:
        try:
            return EVENTS.validate_python(body | {"kind": kind})
        except ValidationError as exc:
            bad = {e["loc"][1] for e in exc.errors() if len(e["loc"]) > 1} & body.keys()
            if not bad:  # not a field's fault: nothing left to drop
                return UnknownEvent(kind=kind, data=fields)
            body = {k: v for k, v in body.items() if k not in bad}
