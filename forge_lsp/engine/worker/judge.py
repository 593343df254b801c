"""The judge's side, in a worker started with ``--judge``: the reference's outputs on input sets it drew itself, a
candidate's outputs compared with them, the reference timed alone. No candidate code ever runs in this process."""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from typing import Any

from ..options import EvalOptions
from ..pipe import (
    Compared,
    CompareRequest,
    Held,
    HoldRequest,
    JudgeReady,
    JudgeRequest,
    ReferenceTimes,
    Sealed,
    TimeReferenceRequest,
)
from .evaluation import Evaluation
from .memory import DeviceMemory
from .state import StageFailed, WorkerState, exception_line, seed_all


@dataclass
class Judged:
    """What a judge keeps of a task: the reference's outputs on its sets (on the host), and for timing it alone again,
    the model (on the host between requests) and the first set's inputs."""

    task: Any
    outs: list[Any]
    ref: Any
    inputs: list[Any]
    sealed: Any = None  # `engine.sealed.SealedFile`: the packed input sets the workers map, while kept


class Judge:
    """A judge's side (``--judge``): for the tasks its parent still holds input sets of, the reference's outputs on
    input sets it drew itself, from seeds of the OS's randomness that never leave it; a candidate's outputs on those
    sets arrive as tensors and are compared here, and the reference is timed here alone. No candidate code ever runs
    in this process: what a candidate does to its own process (hooks on the reference, its weights, forge's compare
    functions, what slows the reference's calls) cannot reach these outputs and times."""

    def __init__(self, state: WorkerState, memory: DeviceMemory | None) -> None:
        self.state, self.memory = state, memory
        self.kept: dict[str, Judged] = {}
        #: a candidate's outputs on judged sets, as they arrived during its evaluation (`hold`), until compared
        self.held: dict[tuple[str, int], bytes | bytearray] = {}

    def ready(self, req: JudgeRequest, out_fd: int) -> JudgeReady:
        from ..harness.wire import WireError

        t0 = time.perf_counter()
        ev = Evaluation(req, self.state, out_fd)
        stages: dict[str, float] = {}
        try:
            judged, data, size, ref_ms = self._draw_and_run(req, ev, stages)
        except StageFailed as sf:
            return JudgeReady(ok=False, reason=sf.reason, seconds=time.perf_counter() - t0)
        except WireError as exc:
            return JudgeReady(ok=False, reason=f"the task's inputs or outputs cannot be sent: {exc}")
        except Exception as exc:  # noqa: BLE001 - the task's own failure: its evaluations report it
            return JudgeReady(ok=False, reason=exception_line(exc), seconds=time.perf_counter() - t0)
        finally:
            if self.memory is not None:  # the device's memory as the judge found it: its worker measures it
                self.memory.release()
        if judged is None:
            return JudgeReady(
                ok=False,
                reason=f"an input set of the task is {size >> 20} MiB, over the {req.max_bytes >> 20} MiB the judge "
                "sends",
                seconds=time.perf_counter() - t0,
            )
        for sha, kept in list(self.kept.items()):
            if sha not in req.keep or sha == req.task.sha:
                if kept.sealed is not None:
                    kept.sealed.close()  # (a worker that mapped it keeps its mapping)
                del self.kept[sha]
        self.kept[req.task.sha] = judged
        sealed = None
        if req.sealed:
            from ..sealed import seal

            t1 = time.perf_counter()
            try:
                with self.state.gate.paused():  # host work (see `_draw_and_run`)
                    judged.sealed = seal(data, name=f"forge-judged-{req.task.sha[:12]}")
                sealed = Sealed(path=judged.sealed.path, nbytes=judged.sealed.nbytes)
            except OSError:  # no sealed file here: the sets go on the pipe
                pass
            stages["seal"] = time.perf_counter() - t1
        t1 = time.perf_counter()
        bandwidth = self.state.bandwidth(ev.torch)  # once per judge: no candidate ran here to slow or fake it
        if self.memory is not None:
            self.memory.release()
        stages["bandwidth"] = time.perf_counter() - t1
        return JudgeReady(
            ok=True,
            sets=len(judged.outs),
            bandwidth=bandwidth,
            ref_ms=ref_ms,
            seconds=time.perf_counter() - t0,
            stages={k: round(v, 4) for k, v in stages.items()},
            sealed=sealed,
        ).with_data(b"" if sealed is not None else b"".join(data))

    @staticmethod
    def _draw_and_run(
        req: JudgeRequest, ev: Evaluation, stages: dict[str, float]
    ) -> tuple[Judged | None, list[Any], int, list[float]]:
        """(what the judge keeps, the packed input sets in their parts (`wire.pack_parts`), their bytes, the
        reference's times alone); nothing kept when the first set is over `req.max_bytes`. Each part's seconds go in
        `stages`."""
        from ..harness.checks import clone_inputs
        from ..harness.probes import tensor_bytes
        from ..harness.wire import host_copy, pack_parts

        torch = ev.torch
        gate = ev.state.gate
        t0 = time.perf_counter()
        # host work: the device's gate is given up meanwhile, so that a worker's timing or stream probe waiting for
        # the device does not wait for it too, only for the reference's calls
        with gate.paused():
            mod = ev.load_task()
            ev.stage("reference")
            torch.manual_seed(req.task.seed + 1)  # the constructor inputs every evaluation builds with (`draw_inputs`)
            init = list(getattr(mod, req.task.init_inputs_fn)())
            ref = ev.build_reference(mod, init)
        ref = ref.to(ev.device)
        t1 = time.perf_counter()
        stages["load"] = t1 - t0
        sets: list[list[Any]] = []
        outs: list[Any] = []
        size = 0
        for _ in range(req.sets):
            with gate.paused():  # drawn on the host (see above)
                seed_all(torch, secrets.randbits(62))
                inputs = list(getattr(mod, req.task.inputs_fn)())
            size += tensor_bytes(inputs)
            if size > req.max_bytes:
                break
            out = ev.call(ref, ev.to_device(clone_inputs(inputs)), "reference")
            ev.sync()
            outs.append(host_copy(out))  # as the wire would carry it, without the bytes between
            sets.append(inputs)
        t2 = time.perf_counter()
        stages["sets"] = t2 - t1
        if not sets:
            return None, [], size, []
        ref_ms = Judge.time_reference(ev, ref, sets[0], req.options.l2_flush) if req.options.timing else []
        ev.stage_done()
        t3 = time.perf_counter()
        stages["time_reference"] = t3 - t2
        with gate.paused():
            data = pack_parts(sets)
        stages["pack"] = time.perf_counter() - t3
        return Judged(req.task, outs, ref.to("cpu"), sets[0]), data, size, ref_ms

    @staticmethod
    def time_reference(ev: Evaluation, ref: Any, inputs: list[Any], l2_flush: bool) -> list[float]:
        """The reference alone on `inputs`, with the timer the worker's interleaved timing uses (ms per call), and on
        the CPU with torch's threads fitted to the cores the judge gets, as the worker fits its own."""
        from ..harness.checks import clone_inputs
        from ..harness.loading import call_model
        from ..harness.timing import time_alone

        on_device = ev.to_device(clone_inputs(inputs))
        if not ev.is_cuda:  # the threads the worker times it with beside the candidate: those this process gets now
            ev.state.fit_threads(ev.torch)
        with ev.state.gate.exclusive():  # the device to this process alone while it times
            return time_alone(lambda: call_model(ref, on_device), ev.device, l2_flush)

    def retime(self, req: TimeReferenceRequest, out_fd: int) -> ReferenceTimes:
        judged = self.kept.get(req.task_sha)
        if judged is None:
            return ReferenceTimes()
        ev = Evaluation(JudgeRequest(task=judged.task, options=EvalOptions()), self.state, out_fd)
        ref = judged.ref.to(ev.device)
        try:
            return ReferenceTimes(ms=self.time_reference(ev, ref, judged.inputs, req.l2_flush))
        finally:
            judged.ref = ref.to("cpu")
            del ref
            if self.memory is not None:
                self.memory.release()

    def hold(self, req: HoldRequest) -> Held:
        """Keep a candidate's outputs on a judged set for the comparison after its evaluation (only the evaluation in
        flight's: a first set starts another)."""
        if req.index == 0:
            self.held.clear()
        self.held[(req.task_sha, req.index)] = req.data
        return Held(index=req.index)

    def compare(self, req: CompareRequest) -> Compared:
        from ..harness.compare import compare_outputs
        from ..harness.wire import WireError, unpack

        t0 = time.perf_counter()
        judged = self.kept.get(req.task_sha)
        if judged is None or not 0 <= req.index < len(judged.outs):
            return Compared(
                passed=False, unheld=True, detail=f"the judge holds no input set #{req.index + 1} of this task"
            )
        where = f"judged input set #{req.index + 1}"
        data = self.held.pop((req.task_sha, req.index), None) if req.held else req.data
        if data is None:
            return Compared(passed=False, detail=f"[{where}] the candidate's outputs did not reach the judge")
        try:
            actual = unpack(data)
        except WireError as exc:
            return Compared(passed=False, detail=f"[{where}] its outputs did not arrive as tensors: {exc}")
        expected = judged.outs[req.index]
        device = self.state.device
        if getattr(device, "type", "cpu") == "cuda":  # a GPU compares in milliseconds what the host takes seconds for
            import torch

            def on(x: Any) -> Any:
                return torch.utils._pytree.tree_map_only(torch.Tensor, lambda t: t.to(device), x)

            expected, actual = on(expected), on(actual)
        try:
            mismatch, _ = compare_outputs(expected, actual, judged.task.tolerance_for, where)
        finally:
            del expected, actual
            if self.memory is not None:
                self.memory.release()
        return Compared(
            passed=mismatch is None,
            detail=(
                f"[{where}] {mismatch.output}: {mismatch.detail} — on input sets drawn, and the reference run, in a "
                "process where no candidate code ever ran"
                if mismatch is not None
                else ""
            ),
            mismatch=mismatch,
            seconds=time.perf_counter() - t0,
        )
