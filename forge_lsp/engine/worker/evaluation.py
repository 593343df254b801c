"""`Evaluation`: one candidate against one task in the worker process, stage by stage (`run`), and the task loaded
with its inputs drawn ahead for its candidates (`prepare`)."""

from __future__ import annotations

import threading
import time

from ..pipe import (
    Prepared,
)
from ..verdict import Check, Status, Verdict
from .state import STICKY_ERRORS, InputCase, StageFailed, exception_line, input_specs_of, traceback_text
from .timed import Timed


class Evaluation(Timed):
    """One candidate against one task, stage by stage."""

    def prepare(self, reference: bool) -> Prepared:
        """The task loaded and its inputs drawn, kept in the worker state for its candidates; with
        `reference`, the task's model also built and called once on the first input set (stage
        `reference`), before any candidate code is loaded, so that a failure here is the user's own."""
        t0 = time.perf_counter()
        try:
            mod = self.load_task()
            cases = self.make_cases(mod)
            if reference:
                from ..harness.checks import clone_inputs

                self.stage("reference")
                ref = self.build_reference(mod, cases[0].init_inputs).to(self.device)
                self.call(ref, clone_inputs(cases[0].inputs), "reference")
                self.sync()
                self.stage_done()
        except StageFailed as sf:
            tb = traceback_text(sf.exc) if sf.exc is not None else ""
            return Prepared(ok=False, reason=sf.reason, traceback=tb, seconds=time.perf_counter() - t0)
        except Exception as exc:  # noqa: BLE001 - the task's own failure: its evaluations report it
            return Prepared(
                ok=False, reason=exception_line(exc), traceback=traceback_text(exc), seconds=time.perf_counter() - t0
            )
        return Prepared(ok=True, seconds=time.perf_counter() - t0)

    def run(self) -> Verdict:
        from ..harness.checks import PatchGuard
        from ..harness.loading import cached_load_inline, exec_module, forget_module, is_compile_error

        torch = self.torch
        status, reason, failed, exc_tb, mismatch = Status.correct, "", None, "", None
        cand_mod = None
        cases: list[InputCase] = []
        try:
            mod = self.load_task()
            if not self.is_cuda and self.opt.timing:  # before any call it times, the task's or the candidate's
                self.cpu_share = self.state.fit_threads(torch)
            t0 = time.perf_counter()
            cases = self.make_cases(mod)
            self.stages["inputs"] = round(time.perf_counter() - t0, 4)
            self.input_specs = input_specs_of(cases, torch)
            if "torch.compile" in self.cand_src.source or "torch._dynamo" in self.cand_src.source:
                import torch._dynamo  # noqa: F401 - it rebinds torch.manual_seed on import: not the candidate's doing
            with cached_load_inline():
                self.guard = PatchGuard(
                    {"task module": mod, "reference class": getattr(mod, self.task.model_class)},
                    values=self.tolerance_values,
                )
                self.stage("compile")
                self.rebase_state()
                self.harness_threads = {t.ident for t in threading.enumerate() if t.ident is not None}
                try:
                    cand_mod = exec_module(self.cand_src.source, self.cand_src.name, "candidate")
                except Exception as exc:  # noqa: BLE001
                    status = Status.compile_error if is_compile_error(exc) else Status.runtime_error
                    raise StageFailed(status, exception_line(exc), exc=exc) from exc
                self.watch_state("when its module was loaded")
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
                self.where = self.describe_set(cases[0])
                self.call(
                    models.cand, [x.clone() if isinstance(x, torch.Tensor) else x for x in cases[0].inputs], "candidate"
                )
                self.sync()
                self.stage_done()
                self.check_patches()
                self.stage("verify")
                from ..harness.checks import ThreadWatch

                self.threads = ThreadWatch(self.harness_threads)
                waited = self.state.gate.waited_s
                self.verify(mod, cand_mod, cases, models)
                judged = self.judged_sets()
                first = judged[: max(1, len(judged) // 2)] if self.opt.timing else judged
                self.judged_calls(models, first)
                self.watch_threads(self.threads, "verified")
                self.threads = None
                self.check_patches(stage_end=True)
                self.stage_done()
                if self.state.gate.waited_s > waited:  # verification waits for the device while others time on it
                    self.stages["verify_device_wait"] = round(self.state.gate.waited_s - waited, 4)
                if self.opt.timing:
                    self.stage("time")
                    threads = ThreadWatch(self.harness_threads)
                    waited = self.state.gate.waited_s
                    self.threads = threads  # each timed pair looks for threads its candidate call left running
                    try:
                        with self.state.gate.exclusive():  # the device to this process alone while it times
                            self.time_both(mod, models, cases[0])
                    finally:
                        self.threads = None
                    if self.state.gate.waited_s > waited:
                        self.stages["device_wait"] = round(self.state.gate.waited_s - waited, 4)
                    self.check_held(" while it was timed")
                    self.watch_state("while it was timed", kernels=True)
                    threads.sample()
                    # timed calls are not wrapped (that would be timed too): its threads may use, inside its calls,
                    # at most their number times the candidate's timed seconds
                    own = 0.0
                    if self.timing is not None:
                        timed = self.timing.candidate
                        alive = threads.alive()
                        own = alive * timed.mean_ms / 1e3 * (timed.n + self.opt.warmup) * 1.5
                    self.watch_threads(threads, "timed", own)
                    self.check_patches()
                    self.eager_calls(models, cases[0])
                    self.judged_calls(models, judged[len(first) :])
                    self.check_patches(stage_end=True)
                    self.stage_done()
        except StageFailed as sf:
            status, reason, failed, mismatch = sf.status, sf.reason, sf.failed_check, sf.mismatch
            if sf.exc is not None:
                exc_tb = traceback_text(sf.exc)
            if failed == "no_monkeypatch":
                self.state.unusable = True
                if not reason:
                    reason = "the candidate replaced torch or harness functions"
        except Exception as exc:  # noqa: BLE001 - a harness-level failure is still a verdict
            # an asynchronous CUDA error surfaces at the next synchronization: name the input set being run
            where = f" [on {self.where}]" if self.where else ""
            status, reason, exc_tb = Status.runtime_error, exception_line(exc) + where, traceback_text(exc)
        left = self.kernels_left()
        if left and status is Status.correct:
            status, reason, failed = Status.incorrect, left, "global_hooks"
        if status in (Status.runtime_error, Status.compile_error) and self.is_cuda:
            text = reason + exc_tb
            try:
                torch.cuda.synchronize(self.device)
            except Exception:  # noqa: BLE001
                self.state.unusable = True
            if any(s in text for s in STICKY_ERRORS):
                self.state.unusable = True
        if cand_mod is not None:
            forget_module(cand_mod)
        if status is Status.correct:
            limits = self.domain(cases)
            reason = "all checks passed" + (f"; verified for {limits.describe()}" if limits and not limits.full else "")
            sizes = next((c for c in self.checks if c.name == "other_sizes"), None)
            if sizes is not None and sizes.detail.startswith("not varied"):
                reason += "; at the task's own sizes only (" + sizes.detail.removeprefix("not varied: ") + ")"
        for c in self.checks:
            if c.name in self.costs:
                c.seconds = round(self.costs[c.name], 4)
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
            inputs=self.input_specs,
            domain=self.domain(cases),
        )
