"""Profile and explain: what a module, a candidate or a `.cu` kernel spends its time on, and why.

`profile_target` profiles one call of a task's module (or a candidate's `ModelNew`), or the
launches of one `__global__` kernel of a `.cu` file by the script that runs it, under Nsight
Compute (degraded to wall-clock timing where counters are unavailable, with the reason).
`explain` goes on: the device's peaks, each kernel on the roofline, ranked findings, and — when
asked and a model is configured — the Judge's narrative. `judge_feedback` is the same
explanation as the optimizer's Judge reads it. `forge profile`, `forge explain`, the editor's
Profile / Explain and the Judge all go through here.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..engine import Candidate, Task, TaskError, load_candidate, load_task, resolve_device
from ..engine.candidate import gpu_requirement
from ..profiler.model import DevicePeaks, Explanation, KernelProfile, ProfileResult
from ..profiler.source_map import map_hot_lines

if TYPE_CHECKING:
    from ..profiler.spare import Spares
from .common import UseCaseError, check_device, find_workspace, task_paths, worker_copies

CUDA_SUFFIXES = (".cu", ".cuh")


@dataclass(frozen=True)
class ProfileRequest:
    target: Path  # a KernelBench-style task file, or a CUDA source file (.cu/.cuh)
    candidate: Path | None = None  # with a task: profile this candidate's ModelNew instead of the module
    model_class: str | None = None  # with a task: the module class (default: the task's Model)
    kernel: str | None = None  # a task: a kernel-name regex; a .cu file: the kernel (needed when it has several)
    entry: Path | None = None  # a .cu file: the script that launches it (default: the Python file beside it naming it)
    launch_skip: int = 0  # a .cu file: launches to skip (warm-up)
    device: str = "auto"
    full: bool = False  # ncu's full set, and keep the report
    in_process: bool = True  # a task on a GPU: CUPTI in the profiled process; ncu only where that is unavailable
    timeout: float = 300.0
    cache_dir: Path | None = None
    #: a .cu file on a machine without a GPU: run its script anyway, for the compiler's errors (the editor marks them
    #: on their lines); a kernel that compiles is then refused all the same. Off: refused before anything runs.
    compile_check: bool = False

    @property
    def is_cuda_source(self) -> bool:
        return self.target.suffix in CUDA_SUFFIXES


@dataclass
class Profiled:
    """One profile, with what it is of."""

    result: ProfileResult
    device: str  # the device it ran on (resolved)
    source_file: Path  # the user's file hot lines point into (the .cu file, or the task/candidate file)
    kernel: str | None = None  # a .cu file: the kernel profiled
    entry: Path | None = None  # a .cu file: the script that launched it


@dataclass
class ExplainResult:
    profiled: Profiled
    peaks: DevicePeaks | None
    peaks_note: str  # where the peaks come from, or why there are none
    explanations: list[Explanation] = field(default_factory=list)  # one per profiled kernel, in profile order
    narrative_note: str = ""  # what became of the narrative (by which model, or why there is none)
    findings_note: str = ""  # why there are no findings, when there are none

    @property
    def result(self) -> ProfileResult:
        return self.profiled.result

    @property
    def top(self) -> Explanation | None:
        """The explanation of the kernel that took longest."""
        return max(self.explanations, key=lambda e: e.kernel.duration_ns) if self.explanations else None


def cuda_target(req: ProfileRequest) -> tuple[str, Path]:
    """(kernel, entry script) of a `.cu` request, or a `UseCaseError` saying what to pass."""
    from ..workspace.cuda_source import global_kernels, python_files_loading

    try:
        text = req.target.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise UseCaseError(str(exc)) from exc
    names = list(dict.fromkeys(k.name for k in global_kernels(text)))
    if req.kernel:
        if names and req.kernel not in names:
            raise UseCaseError(f"{req.target} has no __global__ kernel {req.kernel!r} (it has: {', '.join(names)})")
        kernel = req.kernel
    elif len(names) == 1:
        kernel = names[0]
    elif not names:
        raise UseCaseError(f"{req.target} defines no __global__ kernel")
    else:
        raise UseCaseError(f"{req.target} defines several kernels; pick one with --kernel ({', '.join(names)})")
    if req.entry:
        return kernel, req.entry
    loaders = python_files_loading(req.target)
    if not loaders:
        raise UseCaseError(
            f"no Python file beside {req.target} names it; pass the script that launches {kernel!r} with --entry SCRIPT.py"
        )
    return kernel, loaders[0]


def profile_target(
    req: ProfileRequest,
    on_start: Callable[[str], None] | None = None,
    *,
    keep_spare: bool = False,
    cancel: threading.Event | None = None,
) -> Profiled:
    """Profile what `req` names; `on_start` hears what is about to be profiled (it takes seconds). `keep_spare`: a
    caller that will profile again (the language server, the optimizer's Judge) profiles in a spare process
    started ahead when one waits, and keeps one waiting for its next profile (`profiler.spare`). Setting `cancel`
    kills the profiled process (a task's profile): the result is degraded, its reason "cancelled"."""
    from ..profiler.ncu import profile, profile_cu_kernel

    device = resolve_device(check_device(req.device))
    if req.is_cuda_source:
        no_gpu = f"{req.target.name}: a CUDA kernel is profiled on an NVIDIA GPU (under Nsight Compute), and " + (
            "this machine has none" if req.device.strip().lower() == "auto" else "the device is cpu"
        )
        kernel, entry = cuda_target(req)  # what to profile is said first (it reads files only)
        if device == "cpu" and not req.compile_check:
            raise UseCaseError(no_gpu)
        if on_start:
            on_start(f"profiling {kernel} as launched by {entry.name}")
        result = profile_cu_kernel(
            req.target,
            kernel,
            entry,
            device=device,
            launch_skip=req.launch_skip,
            timeout=req.timeout,
            cache_dir=req.cache_dir,
            cancel=cancel,
        )
        if device == "cpu" and "CudaCompileError" not in (result.log_excerpt or ""):
            raise UseCaseError(no_gpu + " (it compiles)")
        return Profiled(result, device, req.target, kernel, entry)
    try:
        task = load_task(req.target, model_class=req.model_class)
        cand = load_candidate(req.candidate) if req.candidate else None
    except (TaskError, OSError) as exc:
        raise UseCaseError(str(exc)) from exc
    needs_gpu = gpu_requirement(cand.backend, device) if cand is not None else None
    if needs_gpu:
        raise UseCaseError(needs_gpu.replace("evaluate it with", "profile it with"))
    if on_start:
        on_start(
            "profiling on the CPU (wall-clock timing and torch.profiler)"
            if device == "cpu"
            else "profiling in the candidate's process (CUPTI), or under Nsight Compute where that is unavailable"
        )
    result = profile(
        task,
        cand,
        device=device,
        kernel=req.kernel,
        full=req.full,
        timeout=req.timeout,
        cache_dir=req.cache_dir,
        in_process=req.in_process,
        spares=_spares() if keep_spare else None,
        cancel=cancel,
    )
    # the profiled process ran the worker's copies of the files: tracebacks name the user's files instead
    result.log_excerpt = task_paths(result.log_excerpt or "", task, cand)
    # hot lines in load_inline's generated sources: the lines of the string literals they came from
    source_file = req.candidate or req.target
    map_hot_lines(result, cand.source if cand is not None else task.source, str(source_file), worker_copies(task, cand))
    return Profiled(result, device, source_file)


def _spares() -> Spares:
    from ..profiler.spare import shared

    return shared()


def warm_spare(device: str, cache_dir: Path | None = None) -> None:
    """Start a spare profiled process for `device` now, so that the next profile kept with `keep_spare` finds it
    started (the editor's first Explain, the Judge's first round); nothing where `device` is the CPU or is not here."""
    from ..sandbox import default_cache_dir

    try:
        resolved = resolve_device(check_device(device))
    except UseCaseError:
        return
    if resolved != "cpu":
        _spares().warm(resolved, Path(cache_dir or default_cache_dir()))


def close_spares() -> None:
    """End the spare profiled processes this process keeps."""
    from ..profiler.spare import close_shared

    close_shared()


def failure_excerpt(result: ProfileResult, lines: int = 15) -> str:
    """When nothing could be measured: the end of the profiled process's last traceback (the user's code that
    failed, with its exception), else the end of its log; "" when something was measured."""
    if result.kernels or result.wall_ms is not None or not result.log_excerpt:
        return ""
    log = result.log_excerpt
    start = log.rfind("Traceback (most recent call last)")
    text = log[start:] if start >= 0 else log
    return "\n".join(text.strip().splitlines()[-lines:])


def explain(
    req: ProfileRequest,
    *,
    narrative: bool = False,
    workspace: Path | None = None,
    on_start: Callable[[str], None] | None = None,
    keep_spare: bool = False,
    cancel: threading.Event | None = None,
) -> ExplainResult:
    """Profile, then place each kernel on the roofline and rank its bottlenecks; with `narrative`, the
    Judge's narrative when the workspace configures a model. `keep_spare` as for `profile_target`."""
    profiled = profile_target(req, on_start, keep_spare=keep_spare, cancel=cancel)
    peaks, note, explanations = _explanations(profiled, req.cache_dir)
    out = ExplainResult(profiled, peaks, note, explanations)
    if not explanations:
        out.findings_note = _no_findings(profiled, note)
    if narrative and explanations:
        out.narrative_note = _narrate(out, workspace or find_workspace(req.target))
    return out


def _no_findings(profiled: Profiled, peaks_note: str) -> str:
    """Why an explanation has no findings."""
    result = profiled.result
    if profiled.device == "cpu":
        return (
            "no findings: on the CPU there are no hardware counters to explain kernels with (the findings come from "
            "Nsight Compute on an NVIDIA GPU); the figures above are wall-clock times"
        )
    if result.kernels:
        return f"no findings: no peak figures for {result.device_name or profiled.device} ({peaks_note})"
    if result.wall_ms is None:
        return f"no findings: nothing could be profiled ({result.reason or 'no kernel ran'})"
    return f"no findings: no kernel was profiled with hardware counters ({result.reason or 'no kernel ran'})"


def _explanations(profiled: Profiled, cache_dir: Path | None) -> tuple[DevicePeaks | None, str, list[Explanation]]:
    from ..profiler.ncu import device_peaks

    result = profiled.result
    if not result.kernels:
        return None, "", []
    peaks, note = device_peaks(profiled.device, result.device_name, cache_dir=cache_dir)
    if peaks is None:
        return None, note, []
    return peaks, note, [explain_kernel(k, peaks) for k in result.kernels]


def explain_kernel(kernel: KernelProfile, peaks: DevicePeaks) -> Explanation:
    """One kernel on the device's roofline, with its ranked findings."""
    from ..profiler.analyze import analyze
    from ..profiler.roofline import place

    return Explanation(kernel=kernel, peaks=peaks, roofline=place(kernel, peaks), findings=analyze(kernel, peaks))


def _narrate(result: ExplainResult, workspace: Path) -> str:
    """The Judge's narrative on each explanation (in place); a note saying what happened."""
    from ..agent.config import ConfigError, api_key, load_config
    from ..agent.narrative import narrate
    from ..agent.provider import ChatModel
    from ..agent.roles import Prompts

    try:
        config = load_config(workspace)
    except ConfigError as exc:
        return f"no narrative: {exc}"
    settings = config.judge or config.coder
    if settings is None:
        return "no narrative: no model configured (the findings are rule-based)"
    model = ChatModel(settings, api_key=api_key(settings), prices=config.prices)
    source = result.profiled.source_file.read_text(errors="replace")[:12000]
    note = ""
    prompts = Prompts(workspace)
    for e in result.explanations:
        e.narrative, note = narrate(model, e, prompts=prompts, source=source)
    return note


def roofline_placement(explanation: Explanation) -> dict[str, Any] | None:
    """The kernel's place on the roofline as plain data: its arithmetic intensity, achieved FLOP/s and DRAM
    bytes/s, bound and % of the roof, with the ceilings it was placed under (the compute roof and its pipe, the
    DRAM bandwidth, where the peaks come from); None when it could not be placed."""
    from ..profiler.roofline import compute_roof, finite_metrics

    if explanation.roofline is None:
        return None
    peaks = explanation.peaks
    roof = compute_roof(finite_metrics(explanation.kernel.metrics), peaks)
    return explanation.roofline.model_dump() | {
        "compute_roof_flops_per_s": roof.flops_per_s,
        "compute_pipe": roof.pipe,
        "dram_bytes_per_s": peaks.dram_bytes_per_s,
        "peaks_device": peaks.name,
        "peaks_source": peaks.source,
    }


ProfileFn = Callable[[Task, Candidate], "dict[str, Any] | None"]


def judge_feedback(device: str, cache_dir: Path | None = None, timeout: float = 300.0) -> ProfileFn | None:
    """The optimizer's hardware feedback for the Judge: a candidate explained under Nsight Compute (its
    longest kernel), as plain data; None on the CPU, where there are no counters."""
    if device == "cpu":
        return None
    warm_spare(device, cache_dir)  # the first round's profile finds its process started

    def feedback(task: Task, candidate: Candidate) -> dict[str, Any] | None:
        from ..profiler.ncu import device_peaks, profile

        result = profile(task, candidate, device=device, cache_dir=cache_dir, timeout=timeout, spares=_spares())
        from ..engine.logparse import worker_module_name

        copies = worker_copies(task, candidate)  # a candidate the model wrote has no file: its lines name it
        copies.setdefault(worker_module_name(candidate.source, "candidate"), candidate.name)
        map_hot_lines(result, candidate.source, candidate.name, copies)
        if not result.kernels:
            return {"mode": result.mode, "reason": result.reason, "findings": [], "roofline": None}
        peaks, _ = device_peaks(device, result.device_name, cache_dir=cache_dir)
        kernel = max(result.kernels, key=lambda k: k.duration_ns)
        top = explain_kernel(kernel, peaks) if peaks else None
        return {
            "mode": result.mode,
            "kernel": kernel.name,
            "kernels": len(result.kernels),
            "roofline": roofline_placement(top) if top else None,
            "findings": [f.model_dump(mode="json") for f in top.findings] if top else [],
        }

    return feedback
