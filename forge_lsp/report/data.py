"""What a run report shows, gathered from the run store as plain data (no HTML here).

`gather(store, run_id)` reads one run — its candidates, verdicts, findings, model calls and events —
and returns a `ReportData`: the candidate tree, the series of the charts (best speedup over rounds and
over wall time, cost over time), the roofline points, and per candidate everything the page shows.
Texts (sources, prompts, replies) are kept once in `ReportData.texts` and referred to by index, so a
500-candidate run whose prompts repeat the task source stays small.

It only reads: a run that is still being written (the store is SQLite in WAL mode) is reported as it
stands, its unevaluated candidates as pending.
"""

from __future__ import annotations

import time
from typing import Any

from pydantic import BaseModel

from ..agent.progress import outcome_words
from ..agent.run_events import (
    CandidateFailed,
    CandidateQueued,
    CandidateVerified,
    FinalTiming,
    Outcome,
    Profiled,
    Round,
    Written,
)
from ..agent.store import CallRecord, CandidateRecord, RunStore
from ..engine.verdict import Verdict
from ..profiler.model import DevicePeaks


class Texts:
    """A table of distinct strings; `add` returns a string's index."""

    def __init__(self) -> None:
        self.items: list[str] = []
        self._index: dict[str, int] = {}

    def add(self, text: str) -> int:
        index = self._index.get(text)
        if index is None:
            index = self._index[text] = len(self.items)
            self.items.append(text)
        return index


class CheckRow(BaseModel):
    name: str
    passed: bool
    detail: str = ""
    seconds: float | None = None


class TimingRow(BaseModel):
    mode: str
    reference_ms: float
    candidate_ms: float
    reference_p10_p90: tuple[float, float]
    candidate_p10_p90: tuple[float, float]
    n: int
    speedup: float
    ci95: tuple[float, float]
    notes: list[str] = []
    timed_s: float = 0.0  # the measured time of every timed call, reference and candidate (samples x mean)


class FindingLine(BaseModel):
    file: str
    line: int
    source: str = ""
    stall_pct: float = 0.0
    dominant_stall: str = ""


class FindingRow(BaseModel):
    title: str
    rule: str = ""
    severity: float | None = None
    suggestion: str = ""
    evidence: dict[str, Any] = {}
    lines: list[FindingLine] = []


class MessageRow(BaseModel):
    role: str
    content: int  # index in ReportData.texts


class CallRow(BaseModel):
    role: str
    model: str
    candidate: str | None  # the candidate it was about (a Judge call) or made (a Coder call), short id
    messages: list[MessageRow]
    reply: int  # index in texts
    error: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    latency_s: float = 0.0
    t: float = 0.0  # seconds since the run started


class CandidateRow(BaseModel):
    id: str  # short: "c3"
    full_id: str
    parent: str | None  # short id; None: a child of the reference
    seq: int
    origin: str
    summary: str
    instruction: int | None = None  # index in texts: the Judge's advice the Coder was given
    source: int  # index in texts
    state: str  # a verdict status, or "pending" (run going on) or "cancelled" (run over, never evaluated)
    correct: bool = False
    speedup: float | None = None
    round: int = 0
    t_created: float = 0.0
    t_evaluated: float | None = None
    reason: str = ""
    failed_check: str | None = None
    checks: list[CheckRow] = []
    mismatch: dict[str, Any] | None = None
    timing: TimingRow | None = None
    stages: dict[str, float] = {}
    backend: str = ""
    device: str = ""
    log_excerpt: str = ""
    traceback: str = ""
    reused: str | None = None  # evaluated before under another id (same source)
    findings: list[FindingRow] = []
    profiled: bool = False
    pct_of_roof: float | None = None
    roofline: dict[str, Any] | None = None  # arithmetic_intensity, achieved_flops_per_s, ... when recorded
    calls: list[int] = []  # indexes in ReportData.calls
    best: bool = False


class Point(BaseModel):
    x: float
    y: float | None


class CostPoint(BaseModel):
    t: float
    tokens: int  # cumulative, prompt + completion
    usd: float | None  # cumulative known dollars; None while no call had a known price
    eval_s: float  # cumulative seconds of evaluation in the workers (all stages)
    timed_s: float = 0.0  # cumulative measured time of the timed calls (device time on a GPU: CUDA events)


class FinalRow(BaseModel):
    candidate: str
    speedup: float
    ci95: tuple[float, float] | None = None
    reference_ms: float | None = None
    candidate_ms: float | None = None


class ModelWideModule(BaseModel):
    name: str
    cls: str
    total_pct: float
    run_id: str | None = None
    speedup: float | None = None
    status: str = ""
    reason: str = ""
    instances: list[str] = []
    carried: list[str] = []  # the class's other instances the answer was carried over to and kept
    not_carried: list[str] = []
    run_status: str | None = None  # the module's run in the store, when there is one
    run_candidates: int | None = None
    run_best: float | None = None


class ModelWideSection(BaseModel):
    """A whole model's result: its hot-spot table and the end-to-end check (`forge optimize --model-wide`)."""

    stamp: str
    entry: str
    model: str
    device: str
    timer: str = ""
    model_ms: float = 0.0
    eager_ms: float | None = None
    iterations: int = 0
    hot_classes: list[dict[str, Any]] = []  # name, file, line, library, instances, calls, total/self ms and %
    modules: list[ModelWideModule] = []
    #: kept, reverted, outputs, before_ms, after_ms, speedup, ci, reps, modules_speedup, model_modes, model_mode,
    #: outcome (kept, nothing_kept, inconclusive) and decision (`hotspots.decide.Decision`, with `says`)
    check: dict[str, Any] | None = None
    notes: list[str] = []
    patch_file: str | None = None
    created: float = 0.0
    #: "finished" or "interrupted"; and what came of it: kept, nothing_kept, inconclusive, interrupted
    state: str = "finished"
    outcome: str = "nothing_kept"


class ReportData(BaseModel):
    generated: float
    forge_version: str
    run_id: str
    status: str
    message: str
    in_progress: bool
    task_path: str
    model_class: str
    created: float
    updated: float
    config: dict[str, Any] = {}
    reference: int  # index in texts: the task's source
    texts: list[str]
    candidates: list[CandidateRow]
    calls: list[CallRow]
    rounds: list[Point]  # x: round, y: best speedup so far at its end (None: no correct candidate yet)
    over_time: list[Point]  # x: seconds since start, y: best speedup so far, at each evaluation
    cost: list[CostPoint]
    cost_notes: list[str] = []
    cost_timed_label: str = "timed s"  # what `timed_s` is: GPU seconds (CUDA events) or CPU seconds of timed calls
    best: str | None = None
    final: FinalRow | None = None
    #: what the run found, in words, first on the page (`agent.progress.outcome_words`), and its kind: "faster",
    #: "none" (no faster candidate), "running", "stopped" (cancelled, interrupted) or "failed"
    outcome: str = ""
    outcome_kind: str = ""
    device: str = ""  # the device's name, as the verdicts give it
    device_type: str = ""  # "cpu", "cuda:0"
    backend: str = ""
    peaks: DevicePeaks | None = None
    peaks_note: str = ""
    tokens_in: int = 0
    tokens_out: int = 0
    spent_usd: float | None = None
    model_wide: ModelWideSection | None = None
    events: int = 0
    loose_calls: list[int] = []  # model calls that made no candidate and judged none


def short(candidate_id: str | None) -> str | None:
    return candidate_id.split("/")[-1] if candidate_id else None


def _state(cand: CandidateRecord, run_over: bool) -> str:
    if cand.verdict is not None:
        return cand.verdict.status.value
    if cand.status == "evaluated":
        return "unreadable"
    return "cancelled" if run_over else "pending"


def _timing(verdict: Verdict) -> TimingRow | None:
    t = verdict.timing
    if t is None:
        return None
    return TimingRow(
        mode=t.mode,
        reference_ms=t.reference.median_ms,
        candidate_ms=t.candidate.median_ms,
        reference_p10_p90=(t.reference.p10_ms, t.reference.p90_ms),
        candidate_p10_p90=(t.candidate.p10_ms, t.candidate.p90_ms),
        n=min(t.reference.n, t.candidate.n),
        speedup=t.speedup,
        ci95=t.speedup_ci95,
        notes=list(t.notes),
        timed_s=timed_seconds(t.model_dump(mode="json")),
    )


def timed_seconds(timing: dict[str, Any] | None) -> float:
    """Seconds of measured time in one verdict's timing: every sample of the reference and of the candidate
    (n samples x their mean, each sample one call). On a GPU the samples are CUDA-event device time."""
    total = 0.0
    for side in ("reference", "candidate"):
        stats = (timing or {}).get(side) or {}
        total += float(stats.get("mean_ms") or 0.0) * int(stats.get("n") or 0) / 1000
    return total


def _findings(raw: list[dict[str, Any]] | None) -> list[FindingRow]:
    out = []
    for f in raw or []:
        lines = [
            FindingLine(
                file=str(ln.get("file", "")),
                line=int(ln.get("line") or 0),
                source=str(ln.get("source", "")),
                stall_pct=float(ln.get("stall_pct") or 0.0),
                dominant_stall=str(ln.get("dominant_stall", "")),
            )
            for ln in f.get("lines") or []
            if isinstance(ln, dict)
        ]
        out.append(
            FindingRow(
                title=str(f.get("title") or f.get("rule") or "finding"),
                rule=str(f.get("rule") or ""),
                severity=f.get("severity") if isinstance(f.get("severity"), int | float) else None,
                suggestion=str(f.get("suggestion") or ""),
                evidence=dict(f.get("evidence") or {}),
                lines=lines,
            )
        )
    return out


def gather(
    store: RunStore,
    run_id: str,
    *,
    peaks: DevicePeaks | None = None,
    peaks_note: str = "",
    model_wide: ModelWideSection | None = None,
    forge_version: str = "",
) -> ReportData:
    """One run of `store` (an id or a unique prefix; KeyError when there is none) as report data."""
    run = store.get_run(run_id)
    records = store.candidates(run.id)
    calls = store.calls(run.id)
    events = store.events(run.id)
    run_over = run.status != "running"
    start = run.created
    texts = Texts()
    reference = texts.add(run.task_source)

    # ---- what the events say: each candidate's round, reuse, profile; the rounds; the final re-timing
    round_of: dict[str, int] = {}
    reused: dict[str, str] = {}
    profiled: dict[str, Profiled] = {}
    round_ts: list[tuple[int, float]] = []
    final: FinalRow | None = None
    final_timed: tuple[float, float, str] | None = None  # (t, timed seconds, timing mode) of the final re-timing
    current = 0
    for record in events:
        ev = record.event
        if isinstance(ev, Round):
            current = ev.round
            round_ts.append((current, record.ts))
        elif isinstance(ev, CandidateQueued) and ev.candidate:
            round_of.setdefault(ev.candidate, current)
        elif isinstance(ev, CandidateVerified | CandidateFailed) and ev.reused and ev.candidate:
            reused[ev.candidate] = ev.reused
        elif isinstance(ev, Profiled) and ev.phase == "done" and ev.candidate:
            profiled[ev.candidate] = ev
        elif isinstance(ev, FinalTiming) and ev.speedup is not None:
            timing = ev.timing or {}
            final = FinalRow(
                candidate=str(short(str(ev.candidate))),
                speedup=ev.speedup,
                ci95=ev.ci95,
                reference_ms=ev.reference_ms,
                candidate_ms=ev.candidate_ms,
            )
            final_timed = (max(0.0, record.ts - start), timed_seconds(timing), str(timing.get("mode") or ""))

    # ---- candidates
    rows: list[CandidateRow] = []
    device = backend = device_type = ""
    for c in records:
        v = c.verdict
        prof = profiled.get(c.id)
        row = CandidateRow(
            id=str(short(c.id)),
            full_id=c.id,
            parent=short(c.parent_id),
            seq=c.seq,
            origin=c.origin,
            summary=c.summary,
            instruction=texts.add(c.instruction) if c.instruction else None,
            source=texts.add(c.source),
            state=_state(c, run_over),
            correct=bool(c.correct),
            speedup=c.speedup,
            round=round_of.get(c.id, 0),
            t_created=max(0.0, c.created - start),
            t_evaluated=max(0.0, c.evaluated - start) if c.evaluated else None,
            reused=short(reused.get(c.id)),
            findings=_findings(c.findings),
            profiled=prof is not None or bool(c.findings),
            pct_of_roof=prof.pct_of_roof if prof else None,
            roofline=prof.roofline if prof else None,
            best=c.id == run.best_candidate and (c.speedup or 0.0) > 1.0,  # "best" is never a slowdown
        )
        if v is not None:
            row.reason = v.reason
            row.failed_check = v.failed_check
            row.checks = [CheckRow(name=k.name, passed=k.passed, detail=k.detail, seconds=k.seconds) for k in v.checks]
            row.mismatch = v.mismatch.model_dump(mode="json", exclude_none=True) if v.mismatch else None
            row.timing = _timing(v)
            row.stages = dict(v.stages)
            row.backend, row.device = v.backend, v.device_name or v.device
            row.log_excerpt, row.traceback = v.log_excerpt[-20_000:], v.traceback[-20_000:]
            device, backend = device or row.device, backend or row.backend
            device_type = device_type or v.device
        rows.append(row)

    # ---- model calls: each candidate a model made gets the calls that made it (the Judge's advice, the
    # Coder's reply, failed attempts between); calls that made nothing stay with the candidate they expanded
    call_rows = _calls(calls, texts, start)
    loose_calls = _attach_calls(call_rows, rows)

    # ---- series
    evaluated = sorted((r for r in rows if r.t_evaluated is not None), key=lambda r: r.t_evaluated or 0.0)
    over_time: list[Point] = []
    best_so_far: float | None = None
    for r in evaluated:
        if r.correct and r.speedup is not None and (best_so_far is None or r.speedup > best_so_far):
            best_so_far = r.speedup
        over_time.append(Point(x=r.t_evaluated or 0.0, y=best_so_far))
    last_round = max([n for n, _ in round_ts] + [r.round for r in rows] + [0])
    rounds: list[Point] = []
    best_r: float | None = None
    for n in range(0, last_round + 1):
        for r in rows:
            if r.round == n and r.correct and r.speedup is not None and (best_r is None or r.speedup > best_r):
                best_r = r.speedup
        rounds.append(Point(x=n, y=best_r))

    cost, cost_notes, timed_label = _cost(call_rows, evaluated, final_timed)
    tokens_in = sum(c.prompt_tokens for c in calls)
    tokens_out = sum(c.completion_tokens for c in calls)
    known = [c.cost_usd for c in calls if c.cost_usd is not None]
    said = next((e.event for e in reversed(events) if isinstance(e.event, Outcome)), None)
    written = next((e.event.path for e in reversed(events) if isinstance(e.event, Written)), None)
    speedup = said.speedup if said is not None else (final.speedup if final is not None else None)
    outcome = outcome_words(run.status, (said.message if said else "") or run.message or "", speedup, written)
    kind = (
        "running"
        if run.status in ("running", "queued")
        else "stopped"
        if run.status in ("cancelled", "interrupted")
        else "failed"
        if run.status == "failed"
        else "faster"
        if speedup is not None and speedup > 1
        else "none"
    )
    return ReportData(
        outcome=outcome,
        outcome_kind=kind,
        generated=time.time(),
        forge_version=forge_version,
        run_id=run.id,
        status=run.status,
        message=run.message,
        in_progress=not run_over,
        task_path=run.task_path,
        model_class=run.model_class,
        created=run.created,
        updated=run.updated,
        config=_config(run.config),
        reference=reference,
        texts=texts.items,
        candidates=rows,
        calls=call_rows,
        rounds=rounds,
        over_time=over_time,
        cost=cost,
        cost_notes=cost_notes,
        cost_timed_label=timed_label,
        best=short(run.best_candidate),
        final=final,
        device=device,
        device_type=device_type,
        backend=backend,
        peaks=peaks,
        peaks_note=peaks_note,
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        spent_usd=sum(known) if known else None,
        model_wide=model_wide,
        events=len(events),
        loose_calls=loose_calls,
    )


def _attach_calls(call_rows: list[CallRow], rows: list[CandidateRow]) -> list[int]:
    """Fill each candidate's `calls`; returns the calls that belong to no candidate (about the reference)."""
    by_id = {r.id: r for r in rows}
    children: dict[str | None, list[CandidateRow]] = {}
    for r in sorted(rows, key=lambda r: r.t_created):
        if r.origin in ("coder", "repair"):
            children.setdefault(r.parent, []).append(r)
    calls_of: dict[str | None, list[int]] = {}
    for i, call in enumerate(call_rows):
        calls_of.setdefault(call.candidate, []).append(i)
    loose: list[int] = []
    for parent, indexes in calls_of.items():
        queue = list(children.get(parent, []))
        pending: list[int] = []
        for i in indexes:
            pending.append(i)
            call = call_rows[i]
            if call.role == "coder" and not call.error:
                child = next((c for c in queue if c.t_created >= call.t - 1e-3), None)
                if child is not None:
                    queue.remove(child)
                    child.calls.extend(pending)
                    pending = []
        if pending:
            owner = by_id.get(parent) if parent else None
            if owner is not None:
                owner.calls.extend(pending)
            else:
                loose.extend(pending)
    return sorted(loose)


def _calls(calls: list[CallRecord], texts: Texts, start: float) -> list[CallRow]:
    out = []
    for c in calls:
        messages = [
            MessageRow(role=str(m.get("role", "")), content=texts.add(str(m.get("content", ""))))
            for m in c.messages
            if isinstance(m, dict)
        ]
        out.append(
            CallRow(
                role=c.role,
                model=c.model,
                candidate=short(c.candidate_id),
                messages=messages,
                reply=texts.add(c.reply_text),
                error=c.error,
                prompt_tokens=c.prompt_tokens,
                completion_tokens=c.completion_tokens,
                cost_usd=c.cost_usd,
                latency_s=c.latency_s,
                t=max(0.0, c.created - start),
            )
        )
    return out


def _cost(
    calls: list[CallRow], evaluated: list[CandidateRow], final_timed: tuple[float, float, str] | None = None
) -> tuple[list[CostPoint], list[str], str]:
    """Cumulative tokens, known dollars, the measured time of the timed calls (GPU seconds on a GPU) and the
    evaluation workers' seconds, at each model call and each evaluation; the notes; what the timed line is."""
    moments: list[tuple[float, int, float | None, float, float]] = []
    for c in calls:
        moments.append((c.t, c.prompt_tokens + c.completion_tokens, c.cost_usd, 0.0, 0.0))
    modes: set[str] = set()
    for r in evaluated:
        timed = r.timing.timed_s if r.timing else 0.0
        if r.timing:
            modes.add(r.timing.mode)
        moments.append((r.t_evaluated or 0.0, 0, None, sum(r.stages.values()), timed))
    if final_timed is not None:
        moments.append((final_timed[0], 0, None, 0.0, final_timed[1]))
        modes.add(final_timed[2])
    moments.sort(key=lambda m: m[0])
    tokens, usd, eval_s, timed_s = 0, None, 0.0, 0.0
    points = [CostPoint(t=0.0, tokens=0, usd=None, eval_s=0.0, timed_s=0.0)]
    for t, tok, dollars, seconds, timed in moments:
        tokens += tok
        if dollars is not None:
            usd = (usd or 0.0) + dollars
        eval_s += seconds
        timed_s += timed
        points.append(CostPoint(t=t, tokens=tokens, usd=usd, eval_s=eval_s, timed_s=timed_s))
    notes = []
    if not calls:
        notes.append("no model calls in this run (offline candidates only): no tokens and no dollars")
    elif all(c.cost_usd is None for c in calls):
        notes.append(
            "dollars not recorded: no price is known for the model(s) " + ", ".join(sorted({c.model for c in calls}))
        )
    gpu = bool(modes & {"events", "graph"})
    final = " and of the final re-timing" if final_timed is not None else ""
    if gpu:
        label = "GPU s (timed calls)"
        notes.append(
            f"GPU seconds: the device time of the timed calls of the reference and each candidate{final}, measured "
            "with CUDA events (each verdict's samples x their mean). The device time of compiling, verifying and "
            "warming up is not measured: the dashed line is the seconds candidates spent in the evaluation "
            "workers (all stages, wall clock), which the GPU was held for"
        )
    else:
        label = "timed CPU s"
        notes.append(
            f"no GPU seconds: a CPU run. The line is the CPU time of the timed calls of the reference and each "
            f"candidate{final} (wall clock, each verdict's samples x their mean); the dashed line the seconds "
            "candidates spent in the evaluation workers (all stages)"
        )
    return points, notes, label


def _config(config: dict[str, Any]) -> dict[str, Any]:
    """The parts of a run's configuration a reader wants at the top of the page."""
    raw = config.get("options")
    options: dict[str, Any] = raw if isinstance(raw, dict) else {}
    keep: dict[str, Any] = {k: config[k] for k in ("device", "coder", "judge", "model", "base_url") if k in config}
    for k in ("search", "rounds", "concurrency", "budget_usd", "wall_s", "offline"):
        if k in options:
            keep[k] = options[k]
    return keep
