"""Background jobs: optimize a module, profile or explain a module or kernel; `forge/runs` lists them."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from lsprotocol import types as t

from ...agent.progress import RunProgress, speedup_label
from ..protocol import Job, JobProposal, JobStarted, ProtocolError, RunParams, RunResult, RunsResult, read, wire
from ..server import SOURCE, ForgeServer
from ..state import BackgroundJob, Proposal, Result, text_sha


class JobError(Exception):
    pass


def register(ls: ForgeServer) -> None:
    @ls.feature("forge/runs")
    def runs(ls: ForgeServer, params: Any = None) -> dict[str, Any]:
        with ls.state.lock:
            offers = {p.job_id: p for p in ls.state.proposals.values() if p.job_id}
            return wire(RunsResult(runs=[job_info(j, offers.get(j.id)) for j in ls.state.jobs.values()]))

    @ls.feature("forge/run")
    def run(ls: ForgeServer, params: Any = None) -> dict[str, Any]:
        """One run and its candidates from the run store."""
        from ...agent.store import run_details

        try:
            run_id = read(RunParams, params).run_id
        except ProtocolError as exc:
            return wire(RunResult(error=f"forge/run: {exc}"))
        if ls.store is None:
            return wire(RunResult(error="this workspace has no run store"))
        return wire(RunResult.model_validate(run_details(ls.store, run_id)))


def job_info(job: BackgroundJob, proposal: Proposal | None) -> Job:
    return Job(
        id=job.id,
        kind=job.kind,
        uri=job.uri,
        target=job.target,
        title=job.title,
        status=job.status,
        message=job.message,
        started=job.started,
        finished=job.finished,
        run_id=job.run_id,
        percentage=job.percentage,
        decision=job.decision,
        proposal=JobProposal(
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
    )


def start(ls: ForgeServer, kind: str, uri: str, target: str) -> JobStarted:
    try:
        work, title = _plan(ls, kind, uri, target)
    except JobError as exc:
        ls.message(f"forge: {exc}", t.MessageType.Warning)
        return JobStarted(error=str(exc))
    running = [j for j in ls.state.jobs.values() if j.status in ("queued", "running")]
    if len(running) >= ls.settings.workers:
        msg = f"{len(running)} forge runs are already going (forge.workers = {ls.settings.workers}); cancel one first"
        ls.message(f"forge: {msg}", t.MessageType.Warning)
        return JobStarted(error=msg)
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
    if module.inputs is None:
        raise JobError(
            f"{target} has no example inputs: add get_inputs()/get_init_inputs() (quick fix available) "
            "or a [tool.forge.modules] entry in pyproject.toml"
        )
    if module.inputs.kind == "kernelbench":
        task_file, model_class = ls.snapshot(uri, text), module.name
    else:  # a [tool.forge.modules] entry names the task file and its class
        task_file, model_class = Path(module.inputs.task_file), module.inputs.model_class or "Model"
    if kind == "optimize":
        return (
            lambda job: _optimize(ls, job, task_file, module, model_class, doc_sha, version)
        ), f"forge: optimize {target}"
    return (
        lambda job: _module_profile(ls, job, kind, task_file, module, model_class, doc_sha)
    ), f"forge: {kind} {target}"


# ----------------------------------------------------------------------------------- optimize
def _optimize(
    ls: ForgeServer,
    job: BackgroundJob,
    task_file: Path,
    module: Any,
    model_class: str,
    doc_sha: str,
    version: int | None,
) -> None:
    from ...agent.config import load_config
    from ...agent.events import EventBus
    from ...agent.optimize import OptimizeOptions, Optimizer, models_from_config
    from ...agent.profiling import make_profile_fn
    from ...agent.roles import Prompts
    from ...engine import Evaluator, load_task

    s = ls.settings
    config = load_config(ls.root or task_file.parent, s.agent_overrides())
    coder, judge = models_from_config(config)
    if coder is None:
        ls.message(
            "forge: no model configured, so only the offline candidates (torch.compile and built-in "
            "Triton kernels) are tried. Set forge.model (and forge.baseUrl) and the API key.",
            once=True,
        )
    task = load_task(task_file, model_class=model_class)
    if ls.store is None:  # no workspace folder, or its .forge/ could not be opened: keep runs beside the file
        from ...agent.store import RunStore

        ls.store = RunStore.for_workspace(Path(ls.path_of(job.uri) or task_file).parent)
    evaluator = Evaluator(s.device, cache_dir=None)
    bus = EventBus(ls.store)
    options = OptimizeOptions.from_config(config, offline=s.offline)

    def offline(task_):
        from ...agent.offline import offline_candidates

        return offline_candidates(task_, device=evaluator.device)

    optimizer = Optimizer(
        task,
        store=ls.store,
        evaluator=evaluator,
        options=options,
        coder=coder,
        judge=judge,
        bus=bus,
        offline=offline if s.offline else None,
        profile=make_profile_fn(evaluator.device) if s.profile else None,
        config_record=config.redacted(),
        prompts=Prompts(ls.root),
    )
    job.cancel = optimizer.cancel
    tracker = RunProgress(rounds=options.rounds, model=coder is not None, offline=s.offline)

    def on_event(ev) -> None:
        if ev.kind == "run_started":
            job.run_id = ev.run_id
        if tracker.update(ev.kind, ev.data):
            ls.progress(job, tracker.message(), tracker.percentage())

    bus.subscribe(on_event)
    ls.progress_begin(job)
    try:
        result = optimizer.run()
    finally:
        evaluator.close()
    job.run_id = result.run_id
    if job.status == "cancelled" or result.status == "cancelled":
        job.status, job.message = "cancelled", "cancelled"
        return
    _reference_failures(ls, job, module.name, result.run_id, task_file)
    job.message = result.stop_reason
    best = result.best
    ls.record_result(_optimize_result(job, module.name, doc_sha, result))
    if best is not None and result.improves and (best.verdict or {}).get("checkpoint_compatible"):
        proposal = Proposal(
            uri=job.uri,
            target=module.name,
            run_id=result.run_id,
            candidate_id=best.id,
            speedup=result.answer_speedup,
            search_speedup=result.best_speedup,
            summary=best.summary,
            doc_sha=doc_sha,
            version=version,
            source=best.source,
            domain=domain_of(best.verdict),
            line=module.line,
            job_id=job.id,
        )
        job.message = f"{proposal.label} faster candidate found"
        ls.offer(proposal)
    elif result.status == "failed":
        job.status = "failed"
        ls.message(f"forge: optimizing {module.name} failed: {result.stop_reason}", t.MessageType.Error)
    elif result.final_failure is not None:
        job.message = f"the best candidate failed its final re-check: {result.final_failure[:200]}"
    elif best is not None and result.improves:
        job.message = (
            f"{speedup_label(result.answer_speedup, result.best_speedup)} faster, but not offered: its "
            "state_dict does not load into the module, so it cannot replace it in place"
        )
    elif not result.model_configured:
        job.message = (
            "no offline candidate beat the reference; set forge.model (and forge.baseUrl) for Coder/Judge rounds"
        )
    else:
        job.message = f"no verified candidate faster than the reference ({result.stop_reason})"


_REFERENCE_FAILED = ("the reference model failed", "the reference constructor failed", "the task file failed to load")


def _reference_failures(ls: ForgeServer, job: BackgroundJob, target: str, run_id: str, task_file: Path) -> None:
    """When the user's own module fails in the workers (not a candidate), point at its line."""
    from ...engine.logparse import traceback_error, worker_module_name

    names = [task_file, worker_module_name(task_file.read_text(encoding="utf-8"), "task")]
    diags = []
    for rec in ls.store.candidates(run_id):
        v = rec.verdict or {}
        if str(v.get("reason", "")).startswith(_REFERENCE_FAILED):
            e = traceback_error((v.get("traceback") or "") + "\n" + (v.get("log_excerpt") or ""), names)
            if e is not None:
                diags.append(
                    t.Diagnostic(
                        range=ls.line_range(job.uri, max(e.line - 1, 0)),
                        message=f"forge: {v['reason']}",
                        source=SOURCE,
                        code="reference-failed",
                        severity=t.DiagnosticSeverity.Error,
                    )
                )
            break
    ls.set_diagnostics(job.uri, f"reference:{target}", diags)


def _optimize_result(job: BackgroundJob, target: str, doc_sha: str, result: Any) -> Result:
    """What hover shows for an optimize run: the reference and the best candidate as the final re-timing
    (else the search) timed them, and how."""
    res = Result(
        uri=job.uri,
        target=target,
        kind="optimize",
        doc_sha=doc_sha,
        when=time.time(),
        run_id=result.run_id,
        speedup=result.answer_speedup,
        search_speedup=result.best_speedup if result.answer_speedup is not None else None,
        note=result.stop_reason,
    )
    timing = result.final_timing or ((result.best.verdict or {}).get("timing") if result.best is not None else None)
    if timing and result.answer_speedup is not None:
        res.reference_ms, res.candidate_ms = timing["reference"]["median_ms"], timing["candidate"]["median_ms"]
        which = "final re-timing" if result.final_timing else "search"
        mode = {"cpu": "wall clock on the CPU", "events": "CUDA events", "graph": "CUDA-graph replays"}.get(
            timing.get("mode"), timing.get("mode") or ""
        )
        res.timing = (
            f"{which}: medians of {timing['reference']['n']} and {timing['candidate']['n']} interleaved calls, {mode}"
        )
    return res


def domain_of(verdict: dict[str, Any]) -> dict[str, Any]:
    """What the candidate was verified on (device type, input dtypes and ranks, contiguity), as plain data."""
    from ...reintegrate import domain_from_verdict

    return domain_from_verdict(verdict).model_dump()


# ---------------------------------------------------------------------------- profile / explain
def _module_profile(
    ls: ForgeServer, job: BackgroundJob, kind: str, task_file: Path, module: Any, model_class: str, doc_sha: str
) -> None:
    from ...engine import load_task, resolve_device
    from ...profiler.ncu import profile

    ls.progress_begin(job)
    ls.progress(job, "profiling under Nsight Compute", 10)
    task = load_task(task_file, model_class=model_class)
    result = profile(task, None, device=resolve_device(ls.settings.device))
    _compile_diagnostics(ls, job, module.name, result, task_file)
    _record_profile(ls, job, kind, module.name, module.line, result, doc_sha, None)


def _kernel_job(ls: ForgeServer, job: BackgroundJob, cu: Path, kernel: Any, doc_sha: str) -> None:
    from ...engine import resolve_device
    from ...profiler.ncu import profile_cu_kernel
    from ...workspace.cuda_source import python_files_loading

    loaders = python_files_loading(cu)
    if not loaders:
        raise JobError(f"no Python file near {cu.name} loads it: forge needs a script that launches {kernel.name}")
    ls.progress_begin(job)
    ls.progress(job, f"profiling {kernel.name} as launched by {loaders[0].name}", 10)
    result = profile_cu_kernel(cu, kernel.name, loaders[0], device=resolve_device(ls.settings.device))
    _compile_diagnostics(ls, job, kernel.name, result, cu)
    _record_profile(ls, job, job.kind, kernel.name, kernel.line, result, doc_sha, cu)


def _compile_diagnostics(ls: ForgeServer, job: BackgroundJob, target: str, result: Any, source_file: Path) -> None:
    """nvcc/NVRTC/gcc messages and traceback frames of the profiled run that point into the user's file."""
    from ...engine.logparse import errors_for

    errors = errors_for(result.log_excerpt or "", source_file) if not result.kernels else []
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


def _record_profile(
    ls: ForgeServer,
    job: BackgroundJob,
    kind: str,
    target: str,
    line: int,
    result: Any,
    doc_sha: str,
    source_file: Path | None,
) -> None:
    from ...profiler.analyze import analyze
    from ...profiler.ncu import device_peaks
    from ...profiler.roofline import place

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
    kernel = max(result.kernels, key=lambda k: k.duration_ns)
    res.latency_ms = sum(k.duration_ns for k in result.kernels) / 1e6
    res.measured = (
        f"{len(result.kernels)} kernel{'s' if len(result.kernels) != 1 else ''} of one call under "
        "Nsight Compute, summed"
    )
    peaks, _ = device_peaks(resolve(ls), result.device_name)
    findings = analyze(kernel, peaks) if peaks else []
    roof = place(kernel, peaks) if peaks else None
    if roof is not None:
        res.roofline_pct, res.bound = roof.pct_of_roof, roof.bound
    res.findings = [{"title": f.title, "rule": f.rule, "suggestion": f.suggestion} for f in findings[:3]]
    res.stalls = sorted({h.dominant_stall for h in kernel.hot_lines if h.dominant_stall})[:4]
    ls.record_result(res)
    job.message = findings[0].title if findings else "profiled"
    if kind == "explain":
        diags = []
        for f in findings[:5]:
            for h in f.lines[:3]:
                if source_file is None or Path(h.file).resolve() != source_file.resolve():
                    continue
                diags.append(
                    t.Diagnostic(
                        range=ls.line_range(job.uri, max(h.line - 1, 0)),
                        message=f"{f.title} ({h.stall_pct:.0f}% of stalls here, {h.dominant_stall}) — {f.suggestion}",
                        severity=t.DiagnosticSeverity.Information,
                        source=SOURCE,
                        code=f.rule,
                    )
                )
        if findings:
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


def resolve(ls: ForgeServer) -> str:
    from ...engine import resolve_device

    return resolve_device(ls.settings.device)
