"""The worker process's main: `python -m forge_lsp.engine.worker [--judge]` announces itself (`Hello`) and serves
requests on its pipes, each under the device's gate, until its pipe closes."""

from __future__ import annotations

import argparse
import faulthandler
import gc
import os
import sys
import time
from typing import Any, NoReturn

from ...sandbox import adopt_orphans, children_die_with_this_process
from .. import pipe
from ..pipe import (
    BuildRequest,
    BuildResult,
    CompareRequest,
    EvaluateResult,
    Hello,
    HoldRequest,
    JudgedSets,
    JudgeRequest,
    PrepareRequest,
    ShutdownRequest,
    StageStarted,
    TimeReferenceRequest,
)
from .evaluation import Evaluation
from .judge import Judge
from .memory import DeviceMemory
from .state import WorkerState, exception_line, traceback_text


def _build(req: BuildRequest) -> BuildResult:
    from ..harness.loading import BUILD_ATTEMPTS, cached_load_inline, exec_module, forget_module, is_compile_error

    BUILD_ATTEMPTS.clear()
    if req.arch and req.arch_list:  # read by load_inline, NVRTC and the build cache's key when the build runs
        os.environ["FORGE_CUDA_ARCH"] = req.arch
        os.environ["TORCH_CUDA_ARCH_LIST"] = req.arch_list
    t0 = time.perf_counter()
    try:
        with cached_load_inline():
            mod = exec_module(req.candidate.source, req.candidate.name, "candidate")
        forget_module(mod)
        return BuildResult(ok=True, seconds=time.perf_counter() - t0, attempts=list(BUILD_ATTEMPTS))
    except Exception as exc:  # noqa: BLE001
        return BuildResult(
            ok=False,
            compile_error=is_compile_error(exc),
            reason=exception_line(exc),
            traceback=traceback_text(exc),
            seconds=time.perf_counter() - t0,
            attempts=list(BUILD_ATTEMPTS),
        )


#: the stage the parent's deadline starts in, by request (`WorkerClient._exchange`'s `first_stage`)
_FIRST_STAGE = {"CompareRequest": "compare", "HoldRequest": "hold", "TimeReferenceRequest": "time_reference"}


def _say_where_os_exit_is_called() -> None:
    """User or candidate code that calls ``os._exit`` ends this worker with no traceback: print the Python stack
    first, as faulthandler does for a crash, so that the line that called it is found in the log."""
    real_exit = os._exit

    def _exit(status: int) -> NoReturn:
        try:
            sys.stderr.write(f"Fatal Python error: os._exit({status}) was called\n")
            sys.stderr.flush()
            faulthandler.dump_traceback(sys.stderr, all_threads=False)
            sys.stderr.flush()
        finally:
            real_exit(status)

    os._exit = _exit


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="forge-worker")
    ap.add_argument("--device", required=True)
    ap.add_argument("--in-fd", type=int, required=True)
    ap.add_argument("--out-fd", type=int, required=True)
    ap.add_argument("--judge", action="store_true", help="serve only judge requests: no candidate code, ever")
    args = ap.parse_args(argv)
    faulthandler.enable()  # a segfault or abort prints the Python stack to the log: the crash's line is found
    _say_where_os_exit_is_called()
    # what this worker starts (compilers, ninja, a candidate's own processes) dies with it, as it dies with forge
    children_die_with_this_process()
    if not args.judge:  # the processes a candidate starts stay its descendants; stops by one of them are counted
        from ..harness.checks import count_continues, snapshot_kernels

        adopt_orphans()
        count_continues()
        snapshot_kernels()  # the dispatcher as torch left it (inherited from the zygote where forked from one)
    nice = os.environ.get("FORGE_WORKER_NICE", "").strip()
    if nice.isdigit():  # a build worker: its compilers yield the CPU to the devices' workers while they time
        os.nice(int(nice))

    import torch

    device = torch.device(args.device)
    arch = None
    capability = None
    name = "cpu"
    if device.type == "cuda":
        if device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        torch.cuda.set_device(device)
        major, minor = capability = torch.cuda.get_device_capability(device)
        # the 'a' targets unlock Hopper+ instructions (wgmma); a cubin only runs on this device anyway
        arch = f"sm_{major}{minor}" + ("a" if major >= 9 else "")
        os.environ["TORCH_CUDA_ARCH_LIST"] = f"{major}.{minor}"
        os.environ["FORGE_CUDA_ARCH"] = arch
        name = torch.cuda.get_device_name(device)
        torch.empty(1, device=device)  # create the context now, not in the first candidate
        memory: DeviceMemory | None = DeviceMemory(torch, device)
    else:
        memory = None
    if device.type != "cuda" and os.environ.get("FORGE_CUDA_ARCH"):
        arch = os.environ["FORGE_CUDA_ARCH"]
    pipe.send(
        args.out_fd,
        Hello(
            pid=os.getpid(),
            device=str(device),
            device_name=name,
            arch=arch,
            capability=capability,
            torch_version=torch.__version__,
            cuda_version=torch.version.cuda,
            own_memory=memory is not None and memory.outside0 is not None,
        ),
    )
    from ..harness.checks import process_changes, process_state

    state = WorkerState(device=device)
    if device.type == "cuda":
        from ..harness.gate import DeviceGate

        state.gate = DeviceGate(str(torch.cuda.get_device_properties(device).uuid))
        state.gate.notify = lambda stage: pipe.send(args.out_fd, StageStarted(stage=stage))
        state.gate.drain = lambda: torch.cuda.synchronize(device)
    receiver = pipe.Receiver(args.in_fd, pipe.REQUEST)
    state.receiver = receiver  # an evaluation reads the judge's sets that follow its request (`JudgedSets`)
    judge = Judge(state, memory) if args.judge else None

    def serve(req: Any) -> int | None:
        """One request answered; the worker's exit code when it must end after it."""
        if judge is not None:
            if isinstance(req, JudgeRequest):
                pipe.send(args.out_fd, judge.ready(req, args.out_fd))
            elif isinstance(req, TimeReferenceRequest):
                pipe.send(args.out_fd, judge.retime(req, args.out_fd))
            elif isinstance(req, HoldRequest):
                pipe.send(args.out_fd, judge.hold(req))
            else:
                pipe.send(args.out_fd, judge.compare(req))
            return None
        if isinstance(req, BuildRequest):
            pipe.send(args.out_fd, _build(req))
            return None
        if isinstance(req, PrepareRequest):
            pipe.send(args.out_fd, Evaluation(req, state, args.out_fd).prepare(req.reference))
            return None
        state.judged_unmapped = ""
        if req.judged_key:  # the judge's sets: kept for the next request of the same draw, which comes without them
            if req.judged_bytes:
                data = state.take_judged(req.judged_key, req.data, req.judged_sealed)
                if data is not None:
                    req.with_data(data)
            elif state.judged is not None and state.judged[0] == req.judged_key:
                req.with_data(state.judged[1])
        if memory is not None and req.device_shared:
            memory.rebase()
        if req.options.expandable_segments and device.type == "cuda":
            # new segments from here on grow in place; the worker is replaced after this evaluation
            torch.cuda.memory._set_allocator_settings("expandable_segments:True")
        free_before, kept_before = (memory.free() if memory is not None else 0), state.drawn_bytes
        clean = process_state()
        verdict = Evaluation(req, state, args.out_fd).run()  # the evaluation and what it held are dropped here
        left = process_changes(clean, process_state())
        if left:  # proven clean, or not kept: what it left would meet the next candidate
            print(
                f"forge worker: the candidate left {', '.join(left)} changed; this worker is replaced", file=sys.stderr
            )
            state.unusable = True
        verdict.device_name = name
        if memory is not None and not state.unusable:
            t0 = time.perf_counter()
            verdict.memory = memory.after(state, req.options.gpu_memory_slack_bytes, free_before, kept_before)
            verdict.stages["release"] = round(time.perf_counter() - t0, 4)
            if not verdict.memory.recovered:
                state.unusable = True
        if req.options.expandable_segments:
            state.unusable = True  # the next candidate gets the allocator's usual settings, in a fresh worker
        result = EvaluateResult(verdict=verdict, worker_unusable=state.unusable, judged_unmapped=state.judged_unmapped)
        state.judged_unmapped = ""
        pipe.send(args.out_fd, result)
        sys.stdout.flush()
        sys.stderr.flush()
        if state.unusable:
            return 3
        if memory is None:
            gc.collect()
        return None

    while True:
        try:
            req = receiver.recv()
        except pipe.ChannelClosed:
            return 0
        if isinstance(req, ShutdownRequest):
            return 0
        if isinstance(req, JudgedSets):  # sets that followed an evaluation which ended before it needed them
            state.take_judged(req.key, req.data if req.ok else b"", req.sealed if req.ok else None)
            continue
        if (judge is not None) != isinstance(req, JudgeRequest | CompareRequest | HoldRequest | TimeReferenceRequest):
            print(f"forge worker: a {req.kind} request to a {'judge' if judge else 'worker'}: refused", file=sys.stderr)
            return 2
        # the stage the parent's deadline is in as the request begins: it restarts after a wait for the gate
        state.gate.stage = _FIRST_STAGE.get(type(req).__name__, "load_task")
        if isinstance(req, HoldRequest):  # the host's work only: no wait for another process's timing
            code = serve(req)
            continue
        with state.gate.shared():  # work on the device, beside other processes' but never beside a timing
            code = serve(req)
        if code is not None:
            return code
