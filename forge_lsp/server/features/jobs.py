"""Background jobs: optimize a module, profile or explain a module or kernel; `forge/runs` lists them.

Each job is the use case of the same name (`forge_lsp.usecases`) run on a job thread; this module
turns the editor's document into its request, its events into `$/progress`, and its typed result
into proposals, diagnostics and hover numbers."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from lsprotocol import types as t

from ...agent.run_events import RunStarted
from ...agent.store import EventRecord
from ...profiler.model import HotLine
from ..feature import Unit
from ..protocol import CancelResult, Job, JobStarted, ProtocolError, RunParams, RunResult, RunsResult, read, wire
from ..server import SOURCE, ForgeServer
from ..state import BackgroundJob, Proposal, Result, text_sha

log = logging.getLogger("forge_lsp.server")


class JobError(Exception):
    pass


def register(ls: ForgeServer) -> None:
    @ls.feature("forge/runs")
    def runs(ls: ForgeServer, params: Any = None) -> dict[str, Any]:
        with ls.state.lock:
            offers = {p.job_id: p for p in ls.state.proposals.values() if p.job_id}
            return wire(RunsResult(runs=[Job.of(j, offers.get(j.id)) for j in ls.state.jobs.values()]))

    @ls.feature("forge/run")
    def run(ls: ForgeServer, params: Any = None) -> dict[str, Any]:
        """One run and its candidates from the run store."""
        from ...usecases import UseCaseError
        from ...usecases.runs import run_details

        try:
            run_id = read(RunParams, params).run_id
        except ProtocolError as exc:
            return wire(RunResult(error=f"forge/run: {exc}"))
        if ls.store is None:
            return wire(RunResult(error="this workspace has no run store"))
        try:
            return wire(RunResult.of(run_details(ls.store, run_id)))
        except UseCaseError as exc:
            return wire(RunResult(error=str(exc)))

    @ls.command("forge.cancel")
    def cancel(ls: ForgeServer, *args: Any) -> dict[str, Any]:
        """``[]``: every job; ``[jobId]``: that one."""
        values = list(args[0]) if len(args) == 1 and isinstance(args[0], list) else list(args)
        job_id = values[0] if values else None  # null too: a client's `undefined`
        if len(values) > 1 or not (job_id is None or isinstance(job_id, str)):
            raise ProtocolError("expected no argument (every job) or one job id (a string)")
        return wire(CancelResult(cancelled=ls.cancel_job(job_id)))


def workspace_opened(ls: ForgeServer) -> None:
    """On a GPU, a spare profiled process is started now, so that the first Profile or Explain finds torch and CUDA
    up (`FORGE_PROFILE_SPARE=0`: none)."""
    from ...usecases.explain import warm_spare

    try:
        warm_spare(ls.settings.device)
    except Exception:  # noqa: BLE001 - the editor's features do not depend on it; a profile starts its own process
        log.exception("starting a spare profiled process")


def close(ls: ForgeServer) -> None:
    """The spare profiled processes the session's profiles kept waiting end with it."""
    from ...usecases.explain import close_spares

    close_spares()


FEATURE = Unit(
    "jobs", register, workspace_opened=workspace_opened, close=close
)  # the jobs' lenses and actions are `targets`'s, `hotspots`'s and model_wide's


def start(ls: ForgeServer, kind: str, uri: str, target: str) -> JobStarted:
    if ls.closing:
        return JobStarted(error="the server is shutting down")
    try:
        work, title = _plan(ls, kind, uri, target)
    except JobError as exc:
        return refused(ls, exc)
    return launch(ls, kind, uri, target, title, work)


def refused(ls: ForgeServer, exc: JobError) -> JobStarted:
    """No job: the reason, said in a message and in the command's result."""
    ls.message(f"forge: {exc}", t.MessageType.Warning)
    return JobStarted(error=str(exc))


def launch(
    ls: ForgeServer, kind: str, uri: str, target: str, title: str, work, *, reruns: bool | None = None
) -> JobStarted:
    """Start a planned job on a job thread, unless the session is ending or forge.workers jobs already run.
    `reruns` (default: an optimize job) means it is the re-run a stale run's lens asks for."""
    if ls.closing:
        return JobStarted(error="the server is shutting down")
    running = [j for j in ls.state.jobs.values() if j.status in ("queued", "running")]
    if len(running) >= ls.settings.workers:
        msg = f"{len(running)} forge runs are already going (forge.workers = {ls.settings.workers}); cancel one first"
        ls.message(f"forge: {msg}", t.MessageType.Warning)
        return JobStarted(error=msg)
    with ls.state.lock:
        rerun = kind == "optimize" if reruns is None else reruns
        dropped = ls.state.stale_runs.pop((uri, target), None) if rerun else None
    if dropped is not None:
        ls.refresh_lenses()
    job = ls.start_job(kind, uri, target, title, work)
    return JobStarted(job=job.id)


def _plan(ls: ForgeServer, kind: str, uri: str, target: str):
    text = ls.doc_text(uri)
    path = ls.path_of(uri)
    if text is None or path is None:
        raise JobError(f"cannot read {uri}")
    entry = ls.index.update(path, text, ls.doc_version(uri)) if ls.index is not None else None
    module = next((m for m in entry.modules if m.name == target), None) if entry else None
    kernel = next((k for k in entry.kernels if k.name == target), None) if entry else None
    if module is None and kernel is None:
        raise JobError(f"no nn.Module or __global__ kernel named {target!r} in {Path(path).name}")
    doc_sha, version = text_sha(text), ls.doc_version(uri)
    if kernel is not None:
        return (lambda job: _kernel_job(ls, job, Path(path), kernel, doc_sha)), f"forge: {kind} kernel {target}"
    assert module is not None
    if module.inputs is None:
        raise JobError(
            f"{target} has no example inputs: add get_inputs()/get_init_inputs() (quick fix available) "
            "or a [tool.forge.modules] entry in pyproject.toml"
        )
    own = {Path(path)}  # the files whose lines are the document's (hot lines in them are marked on it)
    if module.inputs.kind == "kernelbench" or module.inputs.task_file is None:
        task_file, model_class = ls.snapshot(uri, text), module.name
        own.add(task_file)  # the document's text as the job started: its lines are the document's
    else:  # a [tool.forge.modules] entry names the task file and its class
        task_file, model_class = Path(module.inputs.task_file), module.inputs.model_class or "Model"
    if kind == "optimize":
        return (
            lambda job: _optimize(ls, job, task_file, module, model_class, doc_sha, version)
        ), f"forge: optimize {target}"
    return (
        lambda job: _module_profile(ls, job, kind, task_file, module, model_class, doc_sha, frozenset(own))
    ), f"forge: {kind} {target}"


# ----------------------------------------------------------------------------------- optimize
def run_optimization(
    ls: ForgeServer, job: BackgroundJob, task_file: Path, model_class: str, workspace: Path | None = None
) -> Any:
    """Run the optimize use case on a task file for a job: its events as `$/progress`, cancellable through the
    job. The use case's `OptimizeResult`, or None when the job was cancelled (the job says so)."""
    from ...usecases.optimize import ModuleOptimization, OptimizeRequest

    s = ls.settings
    # the workspace's store, or, with no workspace folder (or one whose .forge/ could not be opened), beside the file
    store = ls.run_store(Path(ls.path_of(job.uri) or task_file).parent)
    request = OptimizeRequest(
        task_file=task_file,
        model_class=model_class,
        workspace=workspace or ls.root or task_file.parent,
        overrides=s.agent_overrides(),
        device=s.device,
        offline=s.offline,
        profile=s.profile,
    )

    def on_event(ev: EventRecord) -> None:
        if isinstance(ev.event, RunStarted):
            job.run_id = ev.run_id
        if progress.update(ev.event):
            ls.job_progress(job, progress.message(), progress.percentage())

    optimization = ModuleOptimization(request, store=store, on_event=on_event)
    progress = optimization.progress()
    if not optimization.model_configured:
        ls.message(
            "forge: no model configured, so only the offline candidates (torch.compile and built-in "
            "Triton kernels) are tried. Set forge.model (and forge.baseUrl) and the API key.",
            once=True,
        )
    ls.on_cancel(job, optimization.cancel)  # a cancel that came first stops the run before it starts
    result = optimization.run()
    job.run_id = result.run_id
    if job.status == "cancelled" or result.outcome.status == "cancelled":
        job.status, job.message = "cancelled", "cancelled"
        return None
    return result


def _optimize(
    ls: ForgeServer,
    job: BackgroundJob,
    task_file: Path,
    module: Any,
    model_class: str,
    doc_sha: str,
    version: int | None,
) -> None:
    result = run_optimization(ls, job, task_file, model_class)
    if result is None:
        return
    outcome = result.outcome
    # the run measured the text it started from: an edit since makes its lines and its answer stale
    stale = ls.changed_since(job.uri, doc_sha)
    _reference_failure(ls, job, module.name, None if stale else result.reference_failure)
    ls.record_result(optimize_result(job, module.name, doc_sha, outcome))
    job.message = result.words
    if result.answer is not None and stale:
        stale_answer(ls, job, module.name, result.answer.label)
    elif result.answer is not None:
        answer = result.answer
        offered = ls.offer(proposal_of(job, module.name, result, doc_sha, version, module.line))
        if not offered:
            job.decision = "rejected"
            job.message = f"not offered again: this {answer.label} candidate was rejected for this code before"
    elif result.withheld == "failed":
        job.status = "failed"
        ls.message(f"forge: optimizing {module.name} failed: {outcome.stop_reason}", t.MessageType.Error)
    elif not outcome.model_configured and result.withheld in ("not_faster", "no_candidate"):
        job.message = f"{result.words}; set forge.model (and forge.baseUrl) for Coder/Judge rounds"


def proposal_of(
    job: BackgroundJob,
    target: str,
    result: Any,
    doc_sha: str,
    version: int | None,
    line: int,
    source: str | None = None,
) -> Proposal:
    """The offer of a run's answer (`OptimizeResult.answer`) for `target` in the job's file; `source`: the
    candidate as it goes into the rewrite, when it is not the answer's own source."""
    answer = result.answer
    return Proposal(
        uri=job.uri,
        target=target,
        run_id=result.run_id,
        candidate_id=answer.candidate.id,
        speedup=answer.speedup,
        search_speedup=answer.search_speedup,
        summary=answer.candidate.summary,
        doc_sha=doc_sha,
        version=version,
        source=answer.candidate.source if source is None else source,
        domain=answer.domain.model_dump(),
        line=line,
        job_id=job.id,
    )


def stale_answer(ls: ForgeServer, job: BackgroundJob, target: str, label: str) -> None:
    """The run's answer was measured on text the user has edited since: not offered (its diff and its
    speedup belong to the old code); the job, a message and a lens say so instead."""
    name = Path(ls.path_of(job.uri) or job.uri).name
    job.decision = "stale"
    job.message = (
        f"not offered: {name} changed while the run went on (its best candidate, {label}, was measured on the "
        "code as it was); run Optimize again"
    )
    with ls.state.lock:
        ls.state.stale_runs[(job.uri, target)] = job.message
    ls.message(f"forge: {target}: {job.message}", t.MessageType.Info)
    ls.refresh_lenses()


def _reference_failure(ls: ForgeServer, job: BackgroundJob, target: str, failure: Any) -> None:
    """When the user's own module failed in the workers (not a candidate), point at its line."""
    diags = []
    if failure is not None and failure.line is not None:
        diags.append(
            t.Diagnostic(
                range=ls.line_range(job.uri, max(failure.line - 1, 0)),
                message=f"forge: {failure.reason}",
                source=SOURCE,
                code="reference-failed",
                severity=t.DiagnosticSeverity.Error,
            )
        )
    ls.set_diagnostics(job.uri, f"reference:{target}", diags)


_TIMING_MODES = {"cpu": "wall clock on the CPU", "events": "CUDA events", "graph": "CUDA-graph replays"}


def optimize_result(job: BackgroundJob, target: str, doc_sha: str, outcome: Any) -> Result:
    """What hover shows for an optimize run: the reference and the best candidate as the final re-timing
    (else the search) timed them, and how."""
    res = Result(
        uri=job.uri,
        target=target,
        kind="optimize",
        doc_sha=doc_sha,
        when=time.time(),
        run_id=outcome.run_id,
        speedup=outcome.answer_speedup,
        search_speedup=outcome.best_speedup if outcome.answer_speedup is not None else None,
        note=outcome.stop_reason,
    )
    best_verdict = outcome.best.verdict if outcome.best is not None else None
    timing = outcome.final_timing or (best_verdict.timing if best_verdict else None)
    if timing and outcome.answer_speedup is not None:
        res.reference_ms, res.candidate_ms = timing.reference.median_ms, timing.candidate.median_ms
        which = "final re-timing" if outcome.final_timing else "search"
        mode = _TIMING_MODES.get(timing.mode, timing.mode)
        res.timing = f"{which}: medians of {timing.reference.n} and {timing.candidate.n} interleaved calls, {mode}"
    return res


# ---------------------------------------------------------------------------- profile / explain
def _module_profile(
    ls: ForgeServer,
    job: BackgroundJob,
    kind: str,
    task_file: Path,
    module: Any,
    model_class: str,
    doc_sha: str,
    own: frozenset[Path],
) -> None:
    from ...usecases.explain import ProfileRequest

    request = ProfileRequest(target=task_file, model_class=model_class, device=ls.settings.device)
    _explain_job(ls, job, kind, request, module.name, module.line, doc_sha, own)


def _kernel_job(ls: ForgeServer, job: BackgroundJob, cu: Path, kernel: Any, doc_sha: str) -> None:
    from ...usecases.explain import ProfileRequest

    # without a GPU the kernel's script still runs, for its compile errors (marked on their lines)
    request = ProfileRequest(target=cu, kernel=kernel.name, device=ls.settings.device, compile_check=True)
    _explain_job(ls, job, job.kind, request, kernel.name, kernel.line, doc_sha, frozenset({cu}))


def _explain_job(
    ls: ForgeServer,
    job: BackgroundJob,
    kind: str,
    request: Any,
    target: str,
    line: int,
    doc_sha: str,
    own: frozenset[Path],
) -> None:
    """Profile and Explain: the explain use case (no narrative in the editor); its numbers to hover, its
    compiler errors and (Explain) its findings to diagnostics. `own`: the files whose lines are the document's (the
    .cu file; a module's file and the copy of its text the job profiled): hot lines mapped into them (a load_inline
    kernel's lines inside the `.py` string included) are marked on the document."""
    from ...usecases.explain import explain

    stop = threading.Event()
    ls.on_cancel(job, stop.set)  # kills the profiled process: an explanation nobody waits for takes no device time
    explained = explain(request, on_start=lambda what: ls.job_progress(job, what, 10), keep_spare=True, cancel=stop)
    if stop.is_set():
        return
    source = explained.profiled.source_file
    # lines found in the text the job started from are not marked on a text edited since
    stale = ls.changed_since(job.uri, doc_sha)
    _compile_diagnostics(ls, job, target, explained.result, source, publish=not stale)
    _record_profile(ls, job, kind, target, line, explained, doc_sha, own, publish=not stale)
    if stale:
        job.message += " (the file changed while it ran: its lines are not marked; run it again)"


def _compile_diagnostics(
    ls: ForgeServer, job: BackgroundJob, target: str, result: Any, source_file: Path, publish: bool = True
) -> None:
    """nvcc/NVRTC/gcc messages and traceback frames of the profiled run that point into the user's file."""
    from ...engine.logparse import errors_for

    errors = errors_for(result.log_excerpt or "", source_file) if publish and not result.kernels else []
    ls.set_diagnostics(
        job.uri,
        f"compile:{target}",
        [
            t.Diagnostic(
                range=ls.line_range(job.uri, max(e.line - 1, 0)),
                message=e.message,
                source=SOURCE,
                code="compile",
                severity=t.DiagnosticSeverity.Error if e.severity == "error" else t.DiagnosticSeverity.Warning,
            )
            for e in errors
        ],
    )


def own_hot_lines(lines: Iterable[HotLine], own: Iterable[Path]) -> list[HotLine]:
    """The hot lines that are lines of the document: those whose file (after `profiler.source_map` moved them from the
    build's generated sources to the `.py` string they came from) is one of `own`, in the order given."""
    files = {Path(f).resolve() for f in own}
    return [h for h in lines if Path(h.file).resolve() in files]


def _record_profile(
    ls: ForgeServer,
    job: BackgroundJob,
    kind: str,
    target: str,
    line: int,
    explained: Any,
    doc_sha: str,
    own: frozenset[Path],
    publish: bool = True,
) -> None:
    result = explained.result
    res = Result(uri=job.uri, target=target, kind=kind, doc_sha=doc_sha, when=time.time(), note=result.reason)
    if not result.kernels:
        res.latency_ms = result.wall_ms
        res.measured = (
            "the reference alone: median wall time per call, no profiler counters "
            f"({result.device_name or 'this device'})"
        )
        job.message = result.reason or "no kernels profiled"
        ls.record_result(res)
        ls.message(f"forge: {target}: {job.message}", t.MessageType.Warning)
        return
    res.latency_ms = sum(k.duration_ns for k in result.kernels) / 1e6
    on = f" on {result.device_name}" if result.device_name else ""
    res.measured = (
        f"{len(result.kernels)} kernel{'s' if len(result.kernels) != 1 else ''} of one call "
        f"{result.measured_by}{on}, summed"
    )
    top = explained.top
    findings = top.findings if top else []
    if top is not None and top.roofline is not None:
        res.roofline_pct, res.bound = top.roofline.pct_of_roof, top.roofline.bound
        res.peaks = f"{top.peaks.source} peaks of the {top.peaks.name}"
    res.findings = [{"title": f.title, "rule": f.rule, "suggestion": f.suggestion} for f in findings[:3]]
    kernel = max(result.kernels, key=lambda k: k.duration_ns)
    res.stalls = sorted({h.dominant_stall for h in kernel.hot_lines if h.dominant_stall})[:4]
    sampled = sorted((h for h in kernel.hot_lines if h.stall_pct > 0), key=lambda h: -h.stall_pct)
    res.hot_lines = [
        {"line": h.line, "stall_pct": h.stall_pct, "stall": h.dominant_stall} for h in own_hot_lines(sampled, own)[:3]
    ]
    ls.record_result(res)
    job.message = findings[0].title if findings else "profiled"
    if kind == "explain":
        diags: list[t.Diagnostic] = []
        for f in findings[:5] if publish else []:
            for h in own_hot_lines(f.lines[:3], own):
                diags.append(
                    t.Diagnostic(
                        range=ls.line_range(job.uri, max(h.line - 1, 0)),
                        message=f"{f.title} ({_line_numbers(h)}) — {f.suggestion}",
                        severity=t.DiagnosticSeverity.Information,
                        source=SOURCE,
                        code=f.rule,
                    )
                )
        if findings and publish:
            diags.append(
                t.Diagnostic(
                    range=ls.line_range(job.uri, line),
                    message="forge: " + "; ".join(f.title for f in findings[:3]),
                    severity=t.DiagnosticSeverity.Hint,
                    source=SOURCE,
                    code="explanation",
                )
            )
        ls.set_diagnostics(job.uri, f"explain:{target}", diags)


def _line_numbers(h: HotLine) -> str:
    """What was measured on a hot line, in words: its share of the sampled stalls and their main reason, its excess
    memory traffic."""
    parts = [f"{h.stall_pct:.0f}% of stalls here" + (f", {h.dominant_stall}" if h.dominant_stall else "")]
    if h.global_sectors > h.global_sectors_ideal > 0:
        parts.append(f"{h.global_sectors / h.global_sectors_ideal:.1f}× the ideal L2 sectors")
    return "; ".join(parts)
