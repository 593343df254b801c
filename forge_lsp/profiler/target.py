"""The process a profiler runs: load task (and candidate), warm up, then one measured call.

    python -m forge_lsp.profiler.target REQUEST.json

Started by `forge_lsp.profiler.ncu.profile` under ``ncu`` (or alone for the degraded path).
Only the call inside the NVTX range ``forge_profile`` is profiled, so harness and warm-up
kernels never pollute the numbers. Writes its results (degraded path: torch.profiler kernel
breakdown and event timing) as JSON next to the request. The request is a `ProfileCall` or a
`ProfileScript` (`ProfileRequest`), which `forge_lsp.profiler.ncu` writes.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field

from ..child import ChildRequest, StageClock, read_request, run_script_as_main
from ..engine.candidate import Candidate
from ..engine.task import Task

NVTX_RANGE = "forge_profile"


class ProfileCall(ChildRequest):
    """One call of the task's reference, or of `candidate`, after `warmup` calls: inside the NVTX range (under
    ncu); with `mode="cupti"`, profiled here, in this process, by CUPTI (`inprocess`), the kernels whose names match
    `kernel` kept; with `mode="degraded"`, timed `reps` times and then once under torch.profiler."""

    kind: Literal["call"] = "call"
    device: str
    mode: Literal["ncu", "degraded", "cupti"] = "ncu"
    kernel: str = ""
    task: Task
    candidate: Candidate | None = None
    warmup: int = 3
    reps: int = 20


class ProfileScript(ChildRequest):
    """A user's script run as ``__main__`` with `args` (ncu picks the launches); with `mode="degraded"`, under
    torch.profiler, keeping the kernels whose names match `kernel` (a regex; empty: all)."""

    kind: Literal["script"] = "script"
    device: str
    mode: Literal["ncu", "degraded"] = "ncu"
    script: Path
    args: list[str]
    kernel: str


ProfileRequest = Annotated[ProfileCall | ProfileScript, Field(discriminator="kind")]


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    if args and args[0] == SPARE_FLAG:
        return serve_spare(args[1])
    request = read_request(ProfileRequest, args[0])
    if isinstance(request, ProfileScript):
        return run_script(request, Path(args[0]))
    return run_call(request, Path(args[0]), start(request.device, cupti=request.mode == "cupti"))


SPARE_FLAG = "--spare"


@dataclass
class Started:
    """What the process did before its request: torch imported, CUDA started on the device and, for a profile in
    the process, CUPTI catching every module loaded from then on. `error` says what failed (the machine's doing,
    not the user's code)."""

    stages: dict[str, float] = field(default_factory=dict)
    modules: object = None
    error: str = ""


def start(device: str, *, cupti: bool, spare: bool = False) -> Started:
    started = Started()
    mark = StageClock(started.stages, "spare_" if spare else "").mark

    import torch

    from ..engine.harness import loading  # noqa: F401 - imported ahead: a spare's request finds it loaded

    mark("import")
    where = torch.device(device)
    try:
        if where.type == "cuda":
            torch.cuda.set_device(where)
            torch.cuda.init()
    except Exception as exc:  # noqa: BLE001 - the machine, not the user's code: the in-process path says so
        started.error = f"CUDA did not start here: {exc}"
        return started
    mark("cuda_init")
    if cupti:  # before anything is built: the modules load at their first launch, and are caught
        from . import cupti as cupti_api

        try:
            started.modules = cupti_api.ModuleCubins().start()
        except cupti_api.CuptiError as exc:
            started.error = str(exc)
        mark("cupti_init")
        # Nothing of the counters is prepared here: once CUPTI's profiler is initialized in a process, PC sampling
        # there collects no sample (seen on an H100, CUDA 13.0), so the counters pass stays the call's last.
    return started


def serve_spare(device: str) -> int:
    """A spare profiled process: started (torch, CUDA, CUPTI) before anyone asks, it says ``ready`` and waits for
    one request's path on stdin, profiles that call in the process and exits. Nothing arriving (the parent closed
    the pipe) ends it."""
    started = start(device, cupti=True, spare=True)
    print("ready", flush=True)
    line = sys.stdin.readline().strip()
    if not line:
        return 0
    request = read_request(ProfileRequest, line)
    if not isinstance(request, ProfileCall) or request.mode != "cupti" or request.device != device:
        raise SystemExit(f"a spare for {device} profiles calls in the process only, not {request!r}")
    code = run_call(request, Path(line), started)
    # The result is written and closed, and the parent waits for this process to end: end it now, without the
    # interpreter's teardown (torch's and CUPTI's exit handlers, every module's finalizers), which is no part of the
    # profile. The driver releases the CUDA context as the process goes; what it started is killed after it.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def run_call(request: ProfileCall, request_file: Path, started: Started) -> int:
    """Build the task's model (or the candidate's), make its inputs, warm up, then profile one call as
    `request.mode` says; the result goes beside `request_file`."""
    stages = dict(started.stages)
    mark = StageClock(stages).mark

    import torch

    from ..engine.harness.loading import cached_load_inline, call_model, exec_module

    result_file = request_file.with_suffix(".result.json")
    if started.error:
        if request.mode != "cupti":
            raise RuntimeError(started.error)
        result_file.write_text(json.dumps({"cupti_error": started.error}))
        return 3
    modules = started.modules
    device = torch.device(request.device)
    task, candidate = request.task, request.candidate
    # the module's own load_inline kernels too (a user's module built at import): forge's build, with line info
    with cached_load_inline():
        task_mod = exec_module(task.source, "task", "task")
        torch.manual_seed(task.seed)
        init = list(task_mod.get_init_inputs())
        torch.manual_seed(task.seed)
        if candidate is not None and candidate.source:
            cand_mod = exec_module(candidate.source, "candidate", "candidate")
            model = getattr(cand_mod, candidate.class_name)(*init)
        else:
            model = getattr(task_mod, task.model_class)(*init)
    model = model.to(device)
    mark("build")
    inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in _drawn(torch, device, task, task_mod)]
    mark("inputs")

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    for _ in range(request.warmup):
        call_model(model, inputs)
    sync()
    mark("warmup")
    result: dict = {
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "stages_s": stages,
    }
    if request.mode == "degraded":
        from torch.profiler import ProfilerActivity, profile

        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
        times = []
        for _ in range(request.reps):
            t0 = time.perf_counter_ns()
            call_model(model, inputs)
            sync()
            times.append((time.perf_counter_ns() - t0) / 1e6)
        with profile(activities=activities) as prof:
            call_model(model, inputs)
            sync()
        rows = []
        for evt in prof.key_averages():
            dev_us = getattr(evt, "device_time_total", 0.0) or getattr(evt, "cuda_time_total", 0.0) or 0.0
            rows.append({"name": evt.key, "calls": evt.count, "device_us": dev_us, "cpu_us": evt.self_cpu_time_total})
        rows.sort(key=lambda r: -(r["device_us"] or r["cpu_us"]))
        result.update(times_ms=sorted(times), ops=rows[:30])
    elif request.mode == "cupti":
        result.update(_in_process(request, model, inputs, sync, modules, stages))
    else:
        with torch.cuda.nvtx.range(NVTX_RANGE):
            call_model(model, inputs)
        sync()
        mark("profiled_call")
    result["sources"] = _compiled_programs()
    result_file.write_text(json.dumps(result))
    return 0


def _drawn(torch, device, task: Task, task_mod) -> list:
    """The task's inputs, seeded, its factory calls made on the GPU (far faster than on the host and copied over, as
    the engine draws its timed inputs); on the host where its code cannot run so."""
    if device.type == "cuda":
        try:
            torch.manual_seed(task.seed + 1)
            with torch.device(device):
                return list(task_mod.get_inputs())
        except Exception:  # noqa: BLE001 - code that needs host tensors (numpy, a CPU-only call): drawn there
            pass
    torch.manual_seed(task.seed + 1)
    return list(task_mod.get_inputs())


def _in_process(request: ProfileCall, model, inputs, sync, modules, stages: dict[str, float]) -> dict:
    """The call profiled here by CUPTI: ``kernels`` (`KernelProfile`s as JSON), or ``cupti_error`` saying why not."""
    import re

    import torch

    from ..engine.harness.loading import call_model
    from . import cupti
    from .inprocess import collect, demangler, kernels_of, sm_limits

    device = torch.device(request.device)
    try:
        collected = collect(
            lambda: call_model(model, inputs),
            sync,
            ctx=cupti.current_context(),
            device_index=device.index or 0,
            modules=modules,
            stages=stages,
        )
    except cupti.CuptiError as exc:
        return {"cupti_error": str(exc)}
    kernels = kernels_of(collected, sm_limits(device), demangle=demangler())
    if request.kernel:
        pattern = re.compile(request.kernel)
        kernels = [k for k in kernels if pattern.search(k.name)]
    return {
        "kernels": [k.model_dump(mode="json") for k in kernels],
        "cupti_notes": collected.notes,
        "cupti_passes": collected.passes,
        "cupti_unsupported": collected.unsupported,
    }


def _compiled_programs() -> dict[str, str]:
    """What NVRTC compiled here, by the file name its line info names (its programs are no files, so the hot lines in
    them are found in these texts)."""
    if "forge_lsp.runtime.compiler" not in sys.modules:
        return {}
    from ..runtime.compiler import compiled_programs

    return compiled_programs()


def run_script(request: ProfileScript, request_file: Path) -> int:
    """Run a user's entry script as ``__main__`` (`run_script_as_main`: its own folder on sys.path, its own argv).

    Under ncu the kernel-name filter picks the launches. Degraded mode wraps the run in
    torch.profiler and keeps the device times of kernels matching ``request.kernel``.
    """
    import re

    import torch

    device = torch.device(request.device)
    result: dict = {"device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"}
    exit_code = 0

    def run() -> None:
        nonlocal exit_code
        try:
            run_script_as_main(request.script, request.args)
        except SystemExit as exc:  # the script's own exit status is the target's
            exit_code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)

    if request.mode == "degraded":
        from torch.profiler import ProfilerActivity, profile

        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
        with profile(activities=activities) as prof:
            run()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
        pattern = re.compile(request.kernel or ".")
        rows = []
        for evt in prof.key_averages():
            dev_us = getattr(evt, "device_time_total", 0.0) or getattr(evt, "cuda_time_total", 0.0) or 0.0
            if pattern.search(evt.key):
                rows.append(
                    {"name": evt.key, "calls": evt.count, "device_us": dev_us, "cpu_us": evt.self_cpu_time_total}
                )
        rows.sort(key=lambda r: -(r["device_us"] or r["cpu_us"]))
        result.update(
            ops=rows[:30],
            times_ms=sorted(r["device_us"] / max(r["calls"], 1) / 1000 for r in rows if r["device_us"])[:1],
        )
    else:
        run()
    result["sources"] = _compiled_programs()
    request_file.with_suffix(".result.json").write_text(json.dumps(result))
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
