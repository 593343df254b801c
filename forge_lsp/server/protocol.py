"""The forge-lsp extensions to LSP: typed params and results of the `forge/...` requests and the
`forge.*` commands. Documented in docs/lsp-extensions.md (a test keeps the two in step).

Every type is a pydantic model whose JSON names are camelCase, like LSP's own. Handlers return
``wire(model)``; params are read with ``read(Model, params)``, which accepts what pygls hands over
for a method lsprotocol does not know (a dict, or its namedtuple-like objects).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.alias_generators import to_camel
from pygls.exceptions import JsonRpcInvalidParams

if TYPE_CHECKING:
    from ..agent.store import CandidateRecord
    from ..engine.verdict import Verdict
    from ..usecases.runs import RunDetails
    from .state import BackgroundJob, Proposal

REQUESTS = ("forge/runs", "forge/run")
COMMANDS = (
    "forge.optimize",
    "forge.profile",
    "forge.explain",
    "forge.cancel",
    "forge.accept",
    "forge.reject",
    "forge.showDiff",
    "forge.insertInputs",
    "forge.hotspots",
    "forge.optimizeCaptured",
    "forge.openReport",
    "forge.optimizeModelWide",
    "forge.acceptModelWide",
    "forge.rejectModelWide",
    "forge.undoModelWide",
)
PROGRESS_TOKEN_PREFIX = "forge/"  # `$/progress` tokens are "forge/<jobId>"


class Message(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")


M = TypeVar("M", bound=Message)


class ProtocolError(JsonRpcInvalidParams, ValueError):
    """Params or command arguments that do not match their type: raised from a handler, the client gets a
    JSON-RPC ``-32602`` Invalid params error whose message names the argument."""

    def __init__(self, message: str) -> None:
        super().__init__(f"Invalid params: {message}")


def _plain(value: Any) -> Any:
    if hasattr(value, "_asdict"):  # pygls' objects for unknown methods are namedtuples
        value = value._asdict()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def read(model: type[M], params: Any) -> M:
    try:
        return model.model_validate(_plain(params) if params is not None else {})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "params"
        raise ProtocolError(f"{where}: {first['msg']}") from None


def wire(model: Message) -> dict[str, Any]:
    """JSON for the client: camelCase names; fields that are None are left out."""
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


# ------------------------------------------------------------------------------ forge/runs
JobKind = Literal["optimize", "profile", "explain", "hotspots", "model-wide"]
JobStatus = Literal["queued", "running", "done", "failed", "cancelled"]


class JobProposal(Message):
    """The verified faster candidate a finished optimize job offers (until it is accepted, rejected or
    becomes stale): the arguments of forge.showDiff/accept/reject, and its speedups."""

    uri: str
    class_name: str
    run_id: str
    candidate_id: str
    speedup: float  # the final re-timing against the reference
    search_speedup: float | None  # what the search measured for the same candidate
    summary: str


class Job(Message):
    """A background job of this server (an optimize run, a profile, an explanation, a hot-spot run)."""

    id: str
    kind: JobKind
    uri: str
    target: str  # the module or kernel name (hotspots: the entry function)
    title: str
    status: JobStatus
    message: str
    started: float  # Unix time
    finished: float | None
    run_id: str | None  # the run in the run store (optimize jobs)
    percentage: int  # 0-100
    proposal: JobProposal | None = None  # the job's open proposal, if any (also when its file is closed)
    decision: Literal["accepted", "rejected", "stale"] | None = None  # what became of the job's proposal

    @classmethod
    def of(cls, job: BackgroundJob, proposal: Proposal | None) -> Job:
        return cls.model_validate(
            {
                "id": job.id,
                "kind": job.kind,
                "uri": job.uri,
                "target": job.target,
                "title": job.title,
                "status": job.status,
                "message": job.message,
                "started": job.started,
                "finished": job.finished,
                "run_id": job.run_id,
                "percentage": job.percentage,
                "decision": job.decision,
                "proposal": JobProposal(
                    uri=proposal.uri,
                    class_name=proposal.target,
                    run_id=proposal.run_id,
                    candidate_id=proposal.candidate_id,
                    speedup=proposal.speedup,
                    search_speedup=proposal.search_speedup,
                    summary=proposal.summary,
                )
                if proposal is not None
                else None,
            }
        )


class RunsParams(Message):
    pass


class RunsResult(Message):
    runs: list[Job]


# ------------------------------------------------------------------------------- forge/run
class RunParams(Message):
    run_id: str


class Check(Message):
    name: str | None
    passed: bool | None
    detail: str


class VerdictSummary(Message):
    status: str | None  # correct | compile_error | runtime_error | incorrect | timeout | ...
    reason: str
    failed_check: str | None
    backend: str | None
    device: str | None
    reference_ms: float | None
    candidate_ms: float | None
    speedup: float | None
    ci95: list[float] | None
    timing_mode: str | None
    checks: list[Check]
    stages: dict[str, float]  # seconds per stage

    @classmethod
    def of(cls, v: Verdict) -> VerdictSummary:
        t = v.timing
        return cls(
            status=v.status.value,
            reason=v.reason[:2000],
            failed_check=v.failed_check,
            backend=v.backend,
            device=v.device_name or v.device,
            reference_ms=t.reference.median_ms if t else None,
            candidate_ms=t.candidate.median_ms if t else None,
            speedup=t.speedup if t else None,
            ci95=list(t.speedup_ci95) if t else None,
            timing_mode=t.mode if t else None,
            checks=[Check(name=c.name, passed=c.passed, detail=c.detail[:300]) for c in v.checks],
            stages=v.stages,
        )


class Finding(Message):
    title: str | None
    rule: str | None
    suggestion: str | None


class CandidateSummary(Message):
    id: str
    parent: str | None
    origin: str  # offline:<name> | coder | repair
    summary: str
    status: str  # queued | evaluated
    speedup: float | None
    correct: bool | None
    verdict: VerdictSummary | None
    findings: list[Finding]
    source: str
    created: float
    evaluated: float | None

    @classmethod
    def of(cls, c: CandidateRecord, source_limit: int = 200_000) -> CandidateSummary:
        return cls(
            id=c.id,
            parent=c.parent_id,
            origin=c.origin,
            summary=c.summary,
            status=c.status,
            speedup=c.speedup,
            correct=c.correct,
            verdict=VerdictSummary.of(c.verdict) if c.verdict else None,
            findings=[
                Finding(title=f.get("title"), rule=f.get("rule"), suggestion=f.get("suggestion"))
                for f in (c.findings or [])[:8]
            ],
            source=c.source[:source_limit],
            created=c.created,
            evaluated=c.evaluated,
        )


class FinalTiming(Message):
    """The run's answer: its best candidate re-timed against the reference after the search."""

    candidate: str
    speedup: float
    ci95: list[float] | None
    reference_ms: float | None
    candidate_ms: float | None


class RunSummary(Message):
    id: str
    status: str
    message: str
    task: str
    model_class: str
    best: str | None
    created: float
    updated: float
    spent_usd: float | None
    tokens_in: int
    tokens_out: int
    final: FinalTiming | None = None  # None: not re-timed (yet), or the best candidate failed its re-check


class RunResult(Message):
    run: RunSummary | None = None
    candidates: list[CandidateSummary] = []
    error: str | None = None  # set instead of run/candidates

    @classmethod
    def of(cls, d: RunDetails) -> RunResult:
        run, final = d.run, d.final
        return cls(
            run=RunSummary(
                id=run.id,
                status=run.status,
                message=run.message,
                task=run.task_path,
                model_class=run.model_class,
                best=run.best_candidate,
                created=run.created,
                updated=run.updated,
                spent_usd=d.spent_usd,
                tokens_in=d.tokens_in,
                tokens_out=d.tokens_out,
                final=FinalTiming(
                    candidate=final.candidate,
                    speedup=final.speedup,
                    ci95=list(final.ci95) if final.ci95 else None,
                    reference_ms=final.reference_ms,
                    candidate_ms=final.candidate_ms,
                )
                if final
                else None,
            ),
            candidates=[CandidateSummary.of(c) for c in d.candidates],
        )


# -------------------------------------------------------------------------------- commands
class TargetArgs(Message):
    """forge.optimize / forge.profile / forge.explain / forge.insertInputs / forge.optimizeCaptured: ``[uri, name]``."""

    uri: str
    name: str


class EntryArgs(Message):
    """forge.hotspots: ``[uri, function]``, a function of the file that returns ``(model, args)``."""

    uri: str
    function: str


class ModelWideArgs(Message):
    """forge.optimizeModelWide: ``[uri, function, resume?]``; forge.acceptModelWide / forge.rejectModelWide /
    forge.undoModelWide: ``[uri, function]``."""

    uri: str
    function: str
    resume: str | None = None  # an interrupted run's folder name under .forge/model_wide/, or "latest"


class ModelWideEditResult(Message):
    applied: bool  # accept / undo: the edit is in every file; reject: the offer is dropped
    files: list[str] = []  # the documents edited (URIs)
    classes: list[str] = []  # the classes rewritten (accept) or restored (undo)
    message: str | None = None


class CandidateArgs(Message):
    """forge.accept / forge.reject / forge.showDiff: ``[uri, className, runId, candidateId, options?]``."""

    uri: str
    class_name: str
    run_id: str
    candidate_id: str
    options: ShowDiffOptions | None = None


class ShowDiffOptions(Message):
    show: bool = True  # false: only return the texts (a client with its own diff view)


CandidateArgs.model_rebuild()


class ReportOptions(Message):
    show: bool = True  # false: only write the report and return where it is (a client with its own view)


class ReportArgs(Message):
    """forge.openReport: ``[runId, options?]``."""

    run_id: str
    options: ReportOptions | None = None


class ReportResult(Message):
    run_id: str | None = None
    url: str | None = None  # the page on 127.0.0.1, with this session's token
    file: str | None = None  # the written report, a file:// URI
    path: str | None = None  # the same, as a path
    in_progress: bool | None = None
    shown: bool | None = None  # the client's answer to window/showDocument, when one was sent
    error: str | None = None


class JobStarted(Message):
    job: str | None = None
    error: str | None = None


class CancelResult(Message):
    cancelled: list[str]


class AcceptResult(Message):
    applied: bool
    uri: str | None = None
    candidate: str | None = None
    message: str | None = None


class RejectResult(Message):
    rejected: bool
    message: str | None = None


class DiffResult(Message):
    original: str | None = None
    proposed: str | None = None
    diff: str | None = None
    speedup: float | None = None  # the final re-timing
    search_speedup: float | None = None  # the search's measurement of the same candidate
    summary: str | None = None
    stale: bool | None = None
    proposed_uri: str | None = None  # the rewritten file, written under .forge/proposals/
    diff_uri: str | None = None  # the unified diff beside it (what window/showDocument opens)
    error: str | None = None


class InsertInputsResult(Message):
    applied: bool
    message: str | None = None


def positional(model: type[M], args: tuple[Any, ...]) -> M:
    """A command's positional arguments (as sent, or wrapped in one list) as `model`."""
    values = list(args[0]) if len(args) == 1 and isinstance(args[0], list) else list(args)
    names = list(model.model_fields)
    required = [n for n, f in model.model_fields.items() if f.is_required()]
    if len(values) < len(required):
        raise ProtocolError(
            f"expected {len(required)} arguments ({', '.join(to_camel(n) for n in required)}), got {len(values)}"
        )
    return read(model, {to_camel(n): _plain(v) for n, v in zip(names, values, strict=False)})
