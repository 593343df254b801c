"""Worker process: the only place where task and candidate code is executed.

Started by `forge_lsp.engine.worker_client.Worker` as ``python -m forge_lsp.engine.worker``. It imports
torch once, announces itself (`Hello`), then serves `EvaluateRequest` / `BuildRequest`
messages on its pipes, announcing each stage so the parent can apply per-stage timeouts.
Its stdout/stderr are the parent's log file for it, never the message pipes.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

from . import pipe
from .pipe import BuildRequest, BuildResult, EvaluateRequest, EvaluateResult, Hello, ShutdownRequest, StageStarted
from .verdict import Check, InputSpec, Mismatch, Status, Timing, Verdict

_TB_LIMIT = 8000


def _tb(exc: BaseException) -> str:
    text = "".join(traceback.format_exception(exc))
    return text if len(text) <= _TB_LIMIT else "...\n" + text[-_TB_LIMIT:]


def _exc_line(exc: BaseException) -> str:
    msg = str(exc).strip().splitlines()
    first = msg[0] if msg else ""
    return f"{type(exc).__name__}: {first}"[:500]


_STICKY = (
    "illegal memory access",
    "device-side assert",
    "unspecified launch failure",
    "an illegal instruction",
    "misaligned address",
    "CUDA error",
    "cudaErrorLaunchFailure",
    "CUDA_ERROR",
)


class StageFailed(Exception):
    def __init__(
        self,
        status: Status,
        reason: str,
        failed_check: str | None = None,
        exc: BaseException | None = None,
        mismatch: Mismatch | None = None,
    ) -> None:
        super().__init__(reason)
        self.status, self.reason, self.failed_check, self.exc, self.mismatch = (
            status,
            reason,
            failed_check,
            exc,
            mismatch,
        )


@dataclass
class InputCase:
    name: str
    inputs: list[Any]
    init_inputs: list[Any]


@dataclass
class Models:
    ref: Any
    cand: Any
    compatible: bool
    note: str = ""


@dataclass
class WorkerState:
    device: Any
    task_modules: dict[str, Any] = field(default_factory=dict)
    unusable: bool = False


class Evaluation:
    """One candidate against one task, stage by stage."""

    def __init__(self, req: EvaluateRequest, state: WorkerState, out_fd: int) -> None:
        import torch

        self.torch = torch
        self.req, self.state, self.out_fd = req, state, out_fd
        self.task, self.cand_src, self.opt = req.task, req.candidate, req.options
        self.device = state.device
        self.is_cuda = self.device.type == "cuda"
        self.checks: list[Check] = []
        self.stages: dict[str, float] = {}
        self.compatible: bool | None = None
        self.timing: Timing | None = None

    # ------------------------------------------------------------------ helpers
    def stage(self, name: str) -> None:
        self._stage_name, self._stage_t0 = name, time.perf_counter()
        pipe.send(self.out_fd, StageStarted(stage=name))

    def stage_done(self) -> None:
        self.stages[self._stage_name] = round(time.perf_counter() - self._stage_t0, 4)

    def check(self, name: str, passed: bool, detail: str = "", mismatch: Mismatch | None = None) -> None:
        """Record a check (one entry per name, the latest word wins); a failure ends the evaluation."""
        entry = Check(name=name, passed=passed, detail=detail if not passed or detail else "")
        for i, c in enumerate(self.checks):
            if c.name == name:
                if passed and c.detail and not entry.detail:
                    entry = c
                self.checks[i] = entry
                break
        else:
            self.checks.append(entry)
        if not passed:
            raise StageFailed(Status.incorrect, detail, failed_check=name, mismatch=mismatch)

    def sync(self) -> None:
        if self.is_cuda:
            self.torch.cuda.synchronize(self.device)

    def to_device(self, xs: list[Any]) -> list[Any]:
        return [x.to(self.device) if isinstance(x, self.torch.Tensor) else x for x in xs]

    def call(self, model: Any, inputs: list[Any], who: str) -> Any:
        from .harness.loading import call_model, is_compile_error

        try:
            return call_model(model, inputs)
        except Exception as exc:  # noqa: BLE001 - any failure of user code becomes a verdict
            if who == "reference":
                raise StageFailed(
                    Status.runtime_error, f"the reference model failed: {_exc_line(exc)}", exc=exc
                ) from exc
            status = Status.compile_error if is_compile_error(exc) else Status.runtime_error
            raise StageFailed(status, _exc_line(exc), exc=exc) from exc

    def poison(self) -> None:
        if not self.opt.poison:
            return
        from .harness.checks import poison_free_cpu_memory, poison_free_cuda_memory

        if self.is_cuda:
            self._poisoned = max(getattr(self, "_poisoned", 0), poison_free_cuda_memory(self.device))
        else:
            poison_free_cpu_memory(1 << 20)

    # ------------------------------------------------------------------ stages
    def load_task(self) -> Any:
        from .harness.loading import exec_module

        self.stage("load_task")
        mod = self.state.task_modules.get(self.task.sha)
        if mod is None:
            try:
                mod = exec_module(self.task.source, self.task.name, "task")
            except Exception as exc:  # noqa: BLE001
                raise StageFailed(
                    Status.runtime_error, f"the task file failed to load: {_exc_line(exc)}", exc=exc
                ) from exc
            self.state.task_modules[self.task.sha] = mod
        self.stage_done()
        return mod

    def make_cases(self, mod: Any) -> list[InputCase]:
        torch = self.torch
        cases: list[InputCase] = []

        def gen(seed: int, overrides: dict[str, int]) -> tuple[list[Any], list[Any]]:
            saved = {k: getattr(mod, k) for k in overrides}
            try:
                for k, v in overrides.items():
                    setattr(mod, k, v)
                torch.manual_seed(seed)
                init = list(getattr(mod, self.task.init_inputs_fn)())
                torch.manual_seed(seed)
                inputs = list(getattr(mod, self.task.inputs_fn)())
            finally:
                for k, v in saved.items():
                    setattr(mod, k, v)
            return self.to_device(inputs), init

        trials = self.opt.trials or self.task.trials
        base_init: list[Any] = []
        for t in range(trials):
            inputs, init = gen(self.task.seed + 1 + t, {})
            base_init = init
            cases.append(InputCase(f"random#{t + 1}", inputs, init))
        for s in self.task.input_sets:
            loaded = torch.load(s.path, map_location=self.device, weights_only=True)
            loaded = list(loaded) if isinstance(loaded, (list, tuple)) else [loaded]
            cases.append(InputCase(f"captured:{s.name}", self.to_device(loaded), base_init))
        for name, values in self.task.vary.items():
            for v in values:
                inputs, init = gen(self.task.seed + 1000 + v, {name: v})
                cases.append(InputCase(f"{name}={v}", inputs, init))
        return cases

    def build_models(self, mod: Any, cand_mod: Any, init: list[Any]) -> Models:
        torch = self.torch
        ref_cls = getattr(mod, self.task.model_class)
        cand_cls = getattr(cand_mod, self.cand_src.class_name, None)
        if cand_cls is None:
            raise StageFailed(Status.compile_error, f"the candidate defines no class {self.cand_src.class_name!r}")
        seed = self.task.seed
        try:
            torch.manual_seed(seed)
            ref = ref_cls(*init)
        except Exception as exc:  # noqa: BLE001
            raise StageFailed(
                Status.runtime_error, f"the reference constructor failed: {_exc_line(exc)}", exc=exc
            ) from exc
        try:
            torch.manual_seed(seed)  # KernelBench's same-seed construction, the fallback
            cand = cand_cls(*init)
        except Exception as exc:  # noqa: BLE001
            from .harness.loading import is_compile_error

            status = Status.compile_error if is_compile_error(exc) else Status.runtime_error
            raise StageFailed(status, f"ModelNew constructor failed: {_exc_line(exc)}", exc=exc) from exc
        compatible, note = True, ""
        try:
            cand.load_state_dict(ref.state_dict(), strict=True)
        except Exception as exc:  # noqa: BLE001
            compatible, note = False, str(exc).strip().replace("\n", " ")[:600]
        return Models(ref.to(self.device), cand.to(self.device), compatible, note)

    def verify(self, mod: Any, cand_mod: Any, cases: list[InputCase], models: Models) -> None:
        from .harness.checks import aliased_outputs, changed_inputs, clone_inputs, same_bits
        from .harness.compare import compare_outputs, tensors_of

        tol = self.task.tolerance_for
        per_init: dict[str, Models] = {repr(cases[0].init_inputs): models}
        history: list[tuple[list[Any], Any, Any]] = []  # (inputs, ref_out, cand_out)

        for i, case in enumerate(cases):
            key = repr(case.init_inputs)
            if key not in per_init:
                per_init[key] = self.build_models(mod, cand_mod, case.init_inputs)
            m = per_init[key]
            pristine = clone_inputs(case.inputs)
            ref_in, cand_in = clone_inputs(case.inputs), clone_inputs(case.inputs)

            def run_candidate(m: Any = m, cand_in: Any = cand_in, case: Any = case) -> Any:  # this iteration's
                self.poison()
                out = self.call(m.cand, cand_in, "candidate")
                if self.is_cuda:  # stream-ordered copy before the device-wide sync
                    early = [t.clone() for t in tensors_of(out)]
                    self.sync()
                    late = tensors_of(out)
                    if not all(same_bits(a, b) for a, b in zip(early, late, strict=False)):
                        self.check(
                            "stream_ordered",
                            False,
                            f"[{case.name}] outputs were still being written after the call returned on "
                            "the current stream: work on another stream is not joined to it",
                        )
                return out

            if i % 2 == 0:
                ref_out = self.call(m.ref, ref_in, "reference")
                self.sync()
                cand_out = run_candidate()
            else:
                cand_out = run_candidate()
                ref_out = self.call(m.ref, ref_in, "reference")
                self.sync()

            changed = changed_inputs(pristine, cand_in)
            self.check(
                "inputs_unchanged",
                not changed,
                f"[{case.name}] the candidate modified input(s) {changed}" if changed else "",
            )
            aliased = aliased_outputs(cand_out, cand_in)
            self.check(
                "no_output_aliasing",
                not aliased,
                f"[{case.name}] {', '.join(aliased)} share memory with an input" if aliased else "",
            )
            mismatch, _ = compare_outputs(ref_out, cand_out, tol, case.name)
            if mismatch is not None:
                for _prev_in, _prev_ref, prev_cand in history:
                    prev_t, now_t = tensors_of(prev_cand), tensors_of(cand_out)
                    if (
                        prev_t
                        and len(prev_t) == len(now_t)
                        and all(
                            a.shape == b.shape and a.dtype == b.dtype and same_bits(a, b)
                            for a, b in zip(prev_t, now_t, strict=False)
                        )
                    ):
                        self.check(
                            "no_result_reuse",
                            False,
                            f"[{case.name}] returned the same result as for an earlier, different input",
                        )
                self.check("outputs_match", False, f"[{case.name}] {mismatch.output}: {mismatch.detail}", mismatch)
            history.append((cand_in, ref_out, cand_out))

        self.check("outputs_match", True, f"{len(cases)} input sets: " + ", ".join(c.name for c in cases))
        if self.is_cuda:
            self.check("stream_ordered", True, "outputs complete when the call returns on the current stream")

        # outputs of earlier calls must survive later calls (no shared output buffers / caches)
        for idx, (_, prev_ref, prev_cand) in enumerate(history[:-1]):
            mismatch, _ = compare_outputs(prev_ref, prev_cand, tol, cases[idx].name)
            self.check(
                "no_result_reuse",
                mismatch is None,
                f"[{cases[idx].name}] its output changed after later calls: the candidate reuses "
                "output memory or cached results across calls"
                if mismatch
                else "",
            )
        if len(history) < 2:
            self.check("no_result_reuse", True, "only one input set")

        # repeated runs on the same input must agree (races, uninitialized reads)
        m = per_init[repr(cases[0].init_inputs)]
        outs = []
        for _ in range(2):
            self.poison()
            outs.append(self.call(m.cand, clone_inputs(cases[0].inputs), "candidate"))
            self.sync()
        mismatch, _ = compare_outputs(outs[0], outs[1], tol, f"{cases[0].name} (repeat)")
        bitwise = mismatch is None and all(
            same_bits(a, b) for a, b in zip(tensors_of(outs[0]), tensors_of(outs[1]), strict=False)
        )
        self.check(
            "repeatable",
            mismatch is None,
            f"two runs on the same input disagree at {mismatch.output}: {mismatch.detail} (race or "
            "read of uninitialized memory?)"
            if mismatch
            else ("bitwise identical" if bitwise else "equal within tolerance, not bitwise"),
        )
        if self.opt.poison:
            self.check(
                "poisoned_memory",
                True,
                (
                    f"freed device memory filled with NaN before each candidate run "
                    f"(up to {getattr(self, '_poisoned', 0) / 2**20:.1f} MiB)"
                )
                if self.is_cuda
                else "best effort on CPU: NaN-filled chunks left in the allocator before each run",
            )

    def time_both(self, models: Models, case: InputCase) -> None:
        from .harness import timing as T
        from .harness.checks import clone_inputs
        from .harness.loading import call_model

        torch = self.torch
        ref_in, cand_in = clone_inputs(case.inputs), clone_inputs(case.inputs)

        def ref_fn() -> Any:
            return call_model(models.ref, ref_in)

        def cand_fn() -> Any:
            return call_model(models.cand, cand_in)

        opt, notes = self.opt, list[str]()
        kw: dict[str, Any] = dict(
            warmup=opt.warmup, min_reps=opt.min_reps, max_reps=opt.max_reps, budget_s=opt.timing_budget_s
        )
        if not self.is_cuda:
            ref, cand = T.run_interleaved(T.cpu_sampler(ref_fn), T.cpu_sampler(cand_fn), **kw)
            self.timing = T.summarize("cpu", ref, cand, False, notes)
            return
        timer = T.CudaTimer(self.device, opt.l2_flush)
        gap = timer.idle_start_gap(cand_fn) - timer.idle_start_gap(ref_fn)
        cand_host = timer.hide_host_overhead(ref_fn, cand_fn)
        self.check(
            "all_streams_timed",
            gap <= max(0.05, 0.5 * cand_host),
            f"the device stays busy {gap:.3f} ms after the candidate's stream finished: work on "
            "another stream escapes the timed region; join it to the current stream",
        )
        mode = opt.timing_mode
        if mode == "auto":
            probe = T.Samples()
            for _ in range(5):
                timer.sample(ref_fn, probe)
            mode = "graph" if min(probe.device_ms) < opt.graph_below_ms else "events"
        if mode == "graph":
            try:
                ref_t, cand_t = (
                    T.GraphTimer(self.device, opt.l2_flush, ref_fn),
                    T.GraphTimer(self.device, opt.l2_flush, cand_fn),
                )
                ref_t.delay_cycles = cand_t.delay_cycles = timer.delay_cycles  # replays enqueue faster still
                ref, cand = T.run_interleaved(
                    lambda s: ref_t.sample(ref_fn, s), lambda s: cand_t.sample(cand_fn, s), **kw
                )
                self.timing = T.summarize("graph", ref, cand, opt.l2_flush, notes)
                return
            except Exception as exc:  # noqa: BLE001 - capture is optional; fall back to events
                notes.append(f"CUDA graph capture failed, timed with events instead: {_exc_line(exc)}")
                torch.cuda.synchronize(self.device)
        ref, cand = T.run_interleaved(lambda s: timer.sample(ref_fn, s), lambda s: timer.sample(cand_fn, s), **kw)
        self.timing = T.summarize("events", ref, cand, opt.l2_flush, notes)

    # ------------------------------------------------------------------ driver
    def run(self) -> Verdict:
        from .harness.checks import PatchGuard
        from .harness.loading import cached_load_inline, exec_module, forget_module, is_compile_error

        torch = self.torch
        status, reason, failed, exc_tb, mismatch = Status.correct, "", None, "", None
        cand_mod = None
        try:
            mod = self.load_task()
            cases = self.make_cases(mod)
            self.input_specs = _input_specs(cases, torch)
            if "torch.compile" in self.cand_src.source or "torch._dynamo" in self.cand_src.source:
                import torch._dynamo  # noqa: F401 - it rebinds torch.manual_seed on import: not the candidate's doing
            with cached_load_inline():
                guard = PatchGuard({"task module": mod, "reference class": getattr(mod, self.task.model_class)})
                self.stage("compile")
                try:
                    cand_mod = exec_module(self.cand_src.source, self.cand_src.name, "candidate")
                except Exception as exc:  # noqa: BLE001
                    status = Status.compile_error if is_compile_error(exc) else Status.runtime_error
                    raise StageFailed(status, _exc_line(exc), exc=exc) from exc
                models = self.build_models(mod, cand_mod, cases[0].init_inputs)
                self.compatible = models.compatible
                self.checks.append(
                    Check(
                        name="checkpoint_compatible",
                        passed=models.compatible,
                        detail="reference state_dict loaded with strict=True"
                        if models.compatible
                        else f"load_state_dict(strict=True) failed, fell back to same-seed construction: {models.note}",
                    )
                )
                # not a failure: reported, and such a candidate cannot be reintegrated
                self.stage_done()
                self.stage("first_call")  # Triton JIT-compiles here; a hang here is a timeout, not a compile
                self.call(
                    models.cand, [x.clone() if isinstance(x, torch.Tensor) else x for x in cases[0].inputs], "candidate"
                )
                self.sync()
                self.stage_done()
                changes = guard.changes()
                self.check(
                    "no_monkeypatch", not changes, f"the candidate replaced {', '.join(changes[:8])}" if changes else ""
                )
                self.stage("verify")
                self.verify(mod, cand_mod, cases, models)
                changes = guard.changes()
                self.check(
                    "no_monkeypatch", not changes, f"the candidate replaced {', '.join(changes[:8])}" if changes else ""
                )
                self.stage_done()
                if self.opt.timing:
                    self.stage("time")
                    self.time_both(models, cases[0])
                    changes = guard.changes()
                    self.check(
                        "no_monkeypatch",
                        not changes,
                        f"the candidate replaced {', '.join(changes[:8])}" if changes else "",
                    )
                    self.stage_done()
        except StageFailed as sf:
            status, reason, failed, mismatch = sf.status, sf.reason, sf.failed_check, sf.mismatch
            if sf.exc is not None:
                exc_tb = _tb(sf.exc)
            if failed == "no_monkeypatch":
                self.state.unusable = True
                if not reason:
                    reason = "the candidate replaced torch or harness functions"
        except Exception as exc:  # noqa: BLE001 - a harness-level failure is still a verdict
            status, reason, exc_tb = Status.runtime_error, _exc_line(exc), _tb(exc)
        if status in (Status.runtime_error, Status.compile_error) and self.is_cuda:
            text = reason + exc_tb
            try:
                torch.cuda.synchronize(self.device)
            except Exception:  # noqa: BLE001
                self.state.unusable = True
            if any(s in text for s in _STICKY):
                self.state.unusable = True
        if cand_mod is not None:
            forget_module(cand_mod)
        if status is Status.correct:
            reason = "all checks passed"
        return Verdict(
            status=status,
            reason=reason,
            failed_check=failed,
            checks=self.checks,
            mismatch=mismatch,
            checkpoint_compatible=self.compatible,
            timing=self.timing,
            stages=self.stages,
            traceback=exc_tb,
            device=str(self.device),
            backend=self.cand_src.backend.value,
            task_sha=self.task.sha,
            candidate_sha=self.cand_src.sha,
            inputs=getattr(self, "input_specs", []),
        )


def _input_specs(cases: list[Any], torch: Any) -> list[InputSpec]:
    specs = []
    for case in cases:
        for i, x in enumerate(case.inputs):
            if isinstance(x, torch.Tensor):
                specs.append(
                    InputSpec(
                        case=case.name,
                        index=i,
                        dtype=str(x.dtype).removeprefix("torch."),
                        shape=list(x.shape),
                        contiguous=x.is_contiguous(),
                    )
                )
            else:
                specs.append(InputSpec(case=case.name, index=i, python_type=type(x).__name__))
    return specs


def _build(req: BuildRequest) -> BuildResult:
    from .harness.loading import cached_load_inline, exec_module, forget_module, is_compile_error

    t0 = time.perf_counter()
    try:
        with cached_load_inline():
            mod = exec_module(req.candidate.source, req.candidate.name, "candidate")
        forget_module(mod)
        return BuildResult(ok=True, seconds=time.perf_counter() - t0)
    except Exception as exc:  # noqa: BLE001
        return BuildResult(
            ok=False,
            compile_error=is_compile_error(exc),
            reason=_exc_line(exc),
            traceback=_tb(exc),
            seconds=time.perf_counter() - t0,
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="forge-worker")
    ap.add_argument("--device", required=True)
    ap.add_argument("--in-fd", type=int, required=True)
    ap.add_argument("--out-fd", type=int, required=True)
    args = ap.parse_args(argv)

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
    elif os.environ.get("FORGE_CUDA_ARCH"):
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
        ),
    )
    state = WorkerState(device=device)
    receiver = pipe.Receiver(args.in_fd, pipe.REQUEST)
    while True:
        try:
            req = receiver.recv()
        except pipe.ChannelClosed:
            return 0
        if isinstance(req, ShutdownRequest):
            return 0
        if isinstance(req, BuildRequest):
            pipe.send(args.out_fd, _build(req))
            continue
        verdict = Evaluation(req, state, args.out_fd).run()
        verdict.device_name = name
        pipe.send(args.out_fd, EvaluateResult(verdict=verdict, worker_unusable=state.unusable))
        sys.stdout.flush()
        sys.stderr.flush()
        if state.unusable:
            return 3
        gc.collect()


if __name__ == "__main__":
    sys.exit(main())
