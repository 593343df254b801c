"""The core of an evaluation in the worker process: its stages as the parent sees them, its checks and the domain
they cover, calling the reference and the candidate, the patch and state watches, loading the task and drawing its
input sets, building the two models. `probes`, `verify`, `timed` and `evaluation` build on it, in that order."""

from __future__ import annotations

import copy
import secrets
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ...child import CpuShare
from .. import pipe
from ..candidate import Candidate
from ..pipe import (
    EvaluateRequest,
    JudgeRequest,
    PrepareRequest,
    StageStarted,
)
from ..verdict import Check, Domain, InputSpec, Mismatch, Narrowing, RepairKind, Status, Timing
from .state import InputCase, Models, StageFailed, WorkerState, exception_line, task_constants


class EvaluationBase:
    """The core of one candidate's evaluation against one task (see the module's docstring)."""

    def __init__(self, req: EvaluateRequest | PrepareRequest | JudgeRequest, state: WorkerState, out_fd: int) -> None:
        import torch

        self.torch = torch
        self.req, self.state, self.out_fd = req, state, out_fd
        self.task, self.opt = req.task, req.options
        self._cand = req.candidate if isinstance(req, EvaluateRequest) else None
        self.device = state.device
        self.is_cuda = self.device.type == "cuda"
        self.checks: list[Check] = []
        self.kernel_reads = 0
        self.state0: dict[str, Any] | None = None  # process-wide state the candidate must leave as it was
        self.harness_threads: set[int] = set()  # the Python threads alive before candidate code ran
        self.threads: Any = None  # the stage's `ThreadWatch`, while one runs
        self.guard: Any = None  # the `PatchGuard` taken before the candidate's module loads
        self.references: list[Any] = []  # a `ModuleWatch` of each reference model built since then
        self.overridden: set[str] = set()  # what of the guard's the harness itself has changed for a while
        #: outputs the harness no longer keeps, watched through weak references where the candidate still holds them
        self.held: list[tuple[str, list[tuple[Any, Any]]]] = []
        self.stages: dict[str, float] = {}
        self.compatible: bool | None = None
        self.timing: Timing | None = None
        self.cpu_share: CpuShare | None = None  # on the CPU: the threads it times with (`WorkerState.fit_threads`)
        self.input_specs: list[InputSpec] = []
        self.ref_types: dict[str, type] | None = None  # the reference's output leaf types, once it has run
        self.costs: dict[str, float] = {}  # seconds spent on checks that are steps of their own
        # the domain verified so far (`Domain`): contiguous inputs and the default stream until a probe shows more
        self.layouts: str = "contiguous"
        self.streams: str | None = "default" if self.is_cuda else None
        self.narrowed: list[Narrowing] = []
        self.verifying = False  # verification has begun: the verdict states its domain
        self.domain_sizes: list[str] = []
        self.where = ""  # the input set the candidate is being run on, named in a crash's reason
        #: the judge's input sets (`harness.wire`), the candidate's outputs on which go to the judge (`judged_calls`)
        self.judged_data = req.data if isinstance(req, EvaluateRequest) else b""
        #: the device's bandwidth as the judge measured it (bytes per ms), None: measured here
        self.bandwidth_given = req.bandwidth if isinstance(req, EvaluateRequest) else None
        self._judged_sets: list[Any] | None = None

    @property
    def cand_src(self) -> Candidate:
        assert self._cand is not None, "a prepare request has no candidate"
        return self._cand

    # ------------------------------------------------------------------ helpers
    def stage(self, name: str) -> None:
        self._stage_name, self._stage_t0 = name, time.perf_counter()
        self.state.gate.stage = name
        pipe.send(self.out_fd, StageStarted(stage=name))
        self.state.gate.checkpoint()  # a timing that waits for the device goes first

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

    def narrow(
        self,
        name: str,
        axis: str,
        found: str,
        detail: str,
        repair: RepairKind | None,
        mismatch: Mismatch | None = None,
    ) -> None:
        """A check that failed only outside the task's own conditions (`axis`: a layout, a stream): the domain leaves
        those conditions out and the evaluation goes on; with `EvalOptions.strict`, the check fails as any other."""
        if self.opt.strict and found == "wrong_values":
            self.check(name, False, detail, mismatch)
        if axis == "layouts":
            self.layouts = "contiguous"
        else:
            self.streams = "default"
        self.narrowed.append(Narrowing(check=name, axis=axis, found=found, detail=detail, repair=repair))
        entry = Check(name=name, passed=True, detail=detail, narrows=axis)
        for i, c in enumerate(self.checks):
            if c.name == name:
                self.checks[i] = entry
                break
        else:
            self.checks.append(entry)

    def domain(self, cases: list[InputCase]) -> Domain | None:
        """What the checks so far covered (None before verification began)."""
        if not self.verifying:
            return None
        dtypes = sorted({s.dtype for s in self.input_specs if s.dtype})
        return Domain(
            sizes=self.domain_sizes,
            dtypes=dtypes,
            layouts=self.layouts,
            streams=self.streams,
            narrowed=self.narrowed,
        )

    def describe_set(self, case: InputCase, inputs: list[Any] | None = None, what: str = "") -> str:
        """An input set in words, for a reason: "batch_size=257, forge's size: float32[257, 16384]"."""
        torch = self.torch
        shown = []
        for x in (inputs if inputs is not None else case.inputs)[:4]:
            if isinstance(x, torch.Tensor):
                text = f"{str(x.dtype).removeprefix('torch.')}{list(x.shape)}"
                if not x.is_contiguous():
                    text += f" strides {list(x.stride())}"
                shown.append(text)
        own = {"random": "the task's own sizes", "captured": "captured inputs"}.get(case.kind, "forge's size")
        label = f"{case.name}{', ' + what if what else ''} ({own})"
        return f"{label}: {', '.join(shown)}" if shown else label

    @contextmanager
    def cost(self, name: str) -> Iterator[None]:
        """Count the time spent inside towards the check `name` (reported as its `seconds`)."""
        self.state.gate.checkpoint()  # between checks: a timing that waits for the device goes first
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.costs[name] = self.costs.get(name, 0.0) + time.perf_counter() - t0

    def sync(self) -> None:
        if self.is_cuda:
            self.torch.cuda.synchronize(self.device)

    def to_device(self, xs: list[Any]) -> list[Any]:
        return [x.to(self.device) if isinstance(x, self.torch.Tensor) else x for x in xs]

    def call(self, model: Any, inputs: list[Any], who: str, poisoned: bool = False) -> Any:
        """`model(*inputs)`, any failure a `StageFailed`. `poisoned`: memory the call may get uninitialized reads
        as NaN (see `poisoned_memory`)."""
        from ..harness.checks import kernels_snapshotted
        from ..harness.loading import call_model, is_compile_error

        watch = self.threads if who == "candidate" else None
        if watch is not None:
            watch.call_begins()
        try:
            if poisoned and self.opt.poison:
                with self.poisoned_memory():
                    out = call_model(model, inputs)
            elif who == "reference" and self.task.sha not in self.state.reference_ops and kernels_snapshotted():
                out = self.record_reference_ops(lambda: call_model(model, inputs))
            else:
                out = call_model(model, inputs)
        except Exception as exc:  # noqa: BLE001 - any failure of user code becomes a verdict
            if who == "reference":
                raise StageFailed(
                    Status.runtime_error, f"the reference model failed: {exception_line(exc)}", exc=exc
                ) from exc
            status = Status.compile_error if is_compile_error(exc) else Status.runtime_error
            where = f" [on {self.where}]" if self.where and status is Status.runtime_error else ""
            raise StageFailed(status, exception_line(exc) + where, exc=exc) from exc
        finally:
            if watch is not None:
                watch.call_ends()
                watch.returned()
        if who == "reference":
            from ..harness.probes import output_types

            self.ref_types = output_types(out)
            self.rebase_state()  # what the task's own code does to the process is the baseline
            for watch in self.references:
                watch.rebase()
            if self.threads is not None:
                self.threads.sample()
        else:
            self.watch_state(f"after a call of the candidate on {self.where}" if self.where else "after its call")
            self.check_patches()  # before anything of the harness reads the output
            if self.ref_types is not None:  # before anything reads the output: a subclass runs code on first touch
                self.check_plain_outputs(out, "candidate output")
        return out

    def tolerance_values(self) -> tuple:
        """The tolerances the harness judges with, as plain numbers (`PatchGuard`'s `values`)."""
        from ..task import DEFAULT_TOLERANCES

        return tuple(
            (which, k, float(t.atol), float(t.rtol))
            for which, tols in (("task", self.task.tolerances), ("default", DEFAULT_TOLERANCES))
            for k, t in sorted(tols.items())
        )

    def check_patches(self, stage_end: bool = False) -> None:
        """Fail `no_monkeypatch` where anything `PatchGuard` watches changed, and `reference_untouched` where the
        candidate changed the reference model object (`harness.checks.ModuleWatch`; its parameters' values with
        `stage_end`): checked after the candidate's construction, after every call of it that is verified (before
        the harness reads the output), and at the end of each stage; the worker is then replaced."""
        if self.guard is None:
            return
        changes = [c for c in self.guard.changes() if c not in self.overridden]
        if changes:  # said directly, not through `check`: that too is the harness's, and may be what was replaced
            detail = f"the candidate replaced {', '.join(changes[:8])}"
            self.checks = [c for c in self.checks if c.name != "no_monkeypatch"]
            self.checks.append(Check(name="no_monkeypatch", passed=False, detail=detail))
            raise StageFailed(Status.incorrect, detail, failed_check="no_monkeypatch")
        self.check("no_monkeypatch", True)
        touched = [c for w in self.references for c in (w.changes() + (w.value_changes() if stage_end else []))]
        if touched:  # said directly, as `no_monkeypatch` is
            self.state.unusable = True
            detail = (
                f"the candidate changed {', '.join(dict.fromkeys(touched[:8]))} — the reference it is compared with "
                "and timed against, reached from inside the candidate's own process"
            )
            self.checks = [c for c in self.checks if c.name != "reference_untouched"]
            self.checks.append(Check(name="reference_untouched", passed=False, detail=detail))
            raise StageFailed(Status.incorrect, detail, failed_check="reference_untouched")
        if self.references:
            self.check("reference_untouched", True)

    def watch_threads(self, watch: Any, stage: str, own: float | None = None) -> None:
        """Fail `background_threads` where threads or processes the candidate started used CPU, or stopped the
        worker, while the reference and the candidate were being {stage} (`harness.checks.ThreadWatch`); the worker
        is then replaced, threads, processes and all."""
        stolen = watch.too_much(own)
        if stolen:
            self.state.unusable = True
            self.check(
                "background_threads",
                False,
                f"threads or processes the candidate started kept running while it was {stage}: {stolen} — CPU or "
                "time taken from the reference's calls and timings, or writes after its call returned (what a "
                "candidate starts must be joined, or waited for, before its call returns)",
            )

    def rebase_state(self) -> None:
        """Take the process-wide state as it is now, after code of the task's own, as what the candidate must keep."""
        from ..harness.checks import DISPATCHER, SCHEDULING, global_state

        state = global_state()
        if self.state0 is not None and SCHEDULING in self.state0:  # never the task's to change: kept as first read
            state[SCHEDULING] = self.state0[SCHEDULING]
        state[DISPATCHER] = ("global_hooks", ())  # the dispatcher as torch left it, always
        self.state0 = state

    def record_reference_ops(self, run: Callable[[], Any]) -> Any:
        """`run()` (a call of the reference), recording, once per task in this worker, the operators it dispatches:
        the ones `global_hooks` then watches for kernels registered over them."""
        from ..harness.checks import watch_reference_ops

        out: list[Any] = []
        try:
            ops = watch_reference_ops(lambda: out.append(run()))
        except Exception:  # noqa: BLE001 - a reference the modes disturb runs as it is (its own failure then shows)
            ops, out[:] = [], [run()]
        self.state.reference_ops[self.task.sha] = ops
        return out[0]

    def kernels_left(self) -> str:
        """(At the end of an evaluation.) '' where every operator's kernels are as torch registered them, else what
        the candidate registered or removed, recorded as a failed `global_hooks`: a kernel left in the dispatcher
        would run inside the next candidate's reference too (~70 ms: every operator). The worker is then replaced."""
        from ..harness.checks import kernel_changes

        left = kernel_changes()
        if not left:
            return ""
        self.state.unusable = True
        detail = (
            f"the dispatcher's kernels were changed and left so: {'; '.join(left[:4])}"
            f"{f' (and {len(left) - 4} more)' if len(left) > 4 else ''} — a kernel registered over a torch "
            "operator runs inside every call of it, the reference's too"
        )
        self.checks = [c for c in self.checks if c.name != "global_hooks"]
        self.checks.append(Check(name="global_hooks", passed=False, detail=detail))
        return detail

    #: `watch_state` reads the dispatcher's kernels for the reference's operators the first times, then one time in
    #: `KERNELS_EVERY` (the OS's randomness): ~16 us an operator. A kernel registered between the candidate's calls,
    #: to run in the reference's, is there at whichever read comes after one (and at the end of the evaluation)
    KERNELS_FIRST, KERNELS_EVERY = 3, 4

    def watch_state(self, when: str, kernels: bool | None = None) -> None:
        """Fail `global_state` or `global_hooks` where the candidate's code changed what the whole process runs with
        (`harness.checks.global_state`): a thread count, a precision or backend flag, a module hook or mode. The
        worker is then replaced: the change would outlive the verdict."""
        from ..harness.checks import global_state, state_changes

        if self.state0 is None:
            return
        if kernels is None:
            self.kernel_reads += 1
            kernels = self.kernel_reads <= self.KERNELS_FIRST or secrets.randbelow(self.KERNELS_EVERY) == 0
        ops = self.state.reference_ops.get(self.task.sha, []) if kernels else None
        changes = state_changes(self.state0, global_state(ops))
        for check in ("global_hooks", "global_state"):
            if check in changes:
                self.state.unusable = True
                what = "process-wide hooks or modes" if check == "global_hooks" else "process-wide settings"
                self.check(
                    check,
                    False,
                    f"the candidate changed {what} {when}: {'; '.join(changes[check][:6])} — settings and hooks the "
                    "reference runs under too (a slower reference, a looser check, or the reference's own calls "
                    "reached into)",
                )

    @contextmanager
    def poisoned_memory(self) -> Iterator[None]:
        """Uninitialized memory reads as NaN (or an integer type's maximum) during the candidate's call: every
        `empty`/`empty_like` it makes, in Python or C++, is filled (torch's deterministic mode with
        `fill_uninitialized_memory`, warnings only, so no op is refused), and the allocator's free blocks are
        filled beforehand for memory that does not go through `empty`. An output left unwritten, hoping to
        hold the reference's result from recycled memory, cannot match."""
        from ..harness.checks import poison_free_cpu_memory, poison_free_cuda_memory

        torch = self.torch
        if self.is_cuda:
            self._poisoned = max(getattr(self, "_poisoned", 0), poison_free_cuda_memory(self.device))
        else:
            poison_free_cpu_memory(1 << 20)
        before = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
        fill = torch._C._get_deterministic_fill_uninitialized_memory()
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*determinis.*")
            # torch._C's setters: the public one also imports torch._inductor (seconds, and it rebinds torch's
            # functions, which the monkeypatch guard would then blame on the candidate)
            torch._C._set_deterministic_algorithms(True, warn_only=True)
            torch._C._set_deterministic_fill_uninitialized_memory(True)
            try:
                yield
            finally:
                torch._C._set_deterministic_algorithms(before[0], warn_only=before[1])
                torch._C._set_deterministic_fill_uninitialized_memory(fill)

    # ------------------------------------------------------------------ stages
    def load_task(self) -> Any:
        from ..harness.loading import exec_module

        self.stage("load_task")
        mod = self.state.task_modules.get(self.task.sha)
        if mod is None:
            try:
                mod = exec_module(self.task.source, self.task.name, "task")
                self.lift_inline_sizes(mod)
            except Exception as exc:  # noqa: BLE001
                raise StageFailed(
                    Status.runtime_error, f"the task file failed to load: {exception_line(exc)}", exc=exc
                ) from exc
            self.state.task_modules[self.task.sha] = mod
        self.stage_done()
        return mod

    def unvaried_why(self, skipped: list[str]) -> str:
        """Why `other_sizes` verified no other size."""
        if skipped:
            return "the reference itself fails at every other size tried"
        if not self.task.vary_default:
            return "the task asks for its own sizes only"
        return "get_inputs() has no size constant or literal size to vary"

    def lift_inline_sizes(self, mod: Any) -> None:
        """A task whose get_inputs() writes its sizes as literals gets them as module globals (`Task.inline_sizes`),
        read by a get_inputs() compiled from the task's own source with those literals replaced: `other_sizes` can
        then vary them as it varies constants. Same values, same line numbers."""
        from ..task import lift_inline_sizes

        lifted = lift_inline_sizes(self.task.source, self.task.inline_sizes)
        if lifted is None:
            return
        for name, value in self.task.inline_sizes.items():
            setattr(mod, name, value)
        exec(compile(lifted, getattr(mod, "__file__", None) or self.task.name, "exec"), vars(mod))  # noqa: S102

    def draw_inputs(self, mod: Any, seed: int, overrides: dict[str, int] | None = None) -> tuple[list[Any], list[Any]]:
        """(forward inputs on the device, constructor inputs) from the task's functions, seeded, with module
        constants overridden for the call."""
        from ..harness.probes import tensor_bytes

        torch = self.torch
        key = (self.task.sha, seed, tuple(sorted((overrides or {}).items())))
        kept = self.state.drawn.get(key)
        if kept is not None:  # never handed out: every call gets clones, so these stay as drawn
            self.state.use_task(self.task.sha)
            return list(kept[0]), copy.deepcopy(kept[1])
        with task_constants(mod, overrides or {}):
            torch.manual_seed(seed)
            init = list(getattr(mod, self.task.init_inputs_fn)())
            torch.manual_seed(seed)
            inputs = self.to_device(list(getattr(mod, self.task.inputs_fn)()))
        try:
            kept_init = copy.deepcopy(init)
        except Exception:  # noqa: BLE001 - constructor arguments that cannot be copied: draw again next time
            return inputs, init
        self.state.keep_drawn(key, list(inputs), kept_init, tensor_bytes(inputs), self.memory_budget())
        return inputs, init

    #: the share of the device's free memory (of the host-memory cap, on the CPU) that forge's own copies of a task's
    #: inputs and outputs may hold at once; beyond it, input sets are drawn one at a time and fewer outputs are kept
    OWN_MEMORY_SHARE = 0.125

    def memory_budget(self) -> float:
        """Bytes forge's own copies may hold (`OWN_MEMORY_SHARE`)."""
        if self.is_cuda:
            free = self.free_memory()
            return self.OWN_MEMORY_SHARE * free if free else float("inf")
        return self.OWN_MEMORY_SHARE * (self.opt.host_memory_limit() or (16 << 30))

    def make_cases(self, mod: Any) -> list[InputCase]:
        """The input sets to verify on. The first is drawn now; the others too when they all fit in
        `memory_budget`, else each is drawn when it is run and dropped after (`InputCase.loader`)."""
        from ..harness.probes import tensor_bytes

        torch = self.torch
        cases: list[InputCase] = []
        trials = self.opt.trials or self.task.trials
        first, base_init = self.draw_inputs(mod, self.task.seed + 1)
        cases.append(InputCase("random#1", first, base_init))
        count = trials + len(self.task.input_sets) + sum(len(v) for v in self.task.vary.values())
        lazy = tensor_bytes(first) * count > self.memory_budget()

        def drawn(seed: int, overrides: dict[str, int] | None = None) -> Callable[[], tuple[list[Any], list[Any]]]:
            return lambda: self.draw_inputs(mod, seed, overrides)

        def captured(path: Path, init: list[Any]) -> Callable[[], tuple[list[Any], list[Any]]]:
            def load() -> tuple[list[Any], list[Any]]:
                loaded = torch.load(path, map_location=self.device, weights_only=True)
                loaded = list(loaded) if isinstance(loaded, (list, tuple)) else [loaded]
                return self.to_device(loaded), init

            return load

        def case(name: str, load: Callable[[], tuple[list[Any], list[Any]]], kind: str, over: dict[str, int]) -> None:
            if lazy:
                cases.append(InputCase(name, [], [], kind, over, loader=load))
            else:
                inputs, init = load()
                cases.append(InputCase(name, inputs, init, kind, over))

        for t in range(1, trials):
            case(f"random#{t + 1}", drawn(self.task.seed + 1 + t), "random", {})
        for s in self.task.input_sets:
            case(f"captured:{s.name}", captured(s.path, base_init), "captured", {})
        for name, values in self.task.vary.items():
            for v in values:
                case(f"{name}={v}", drawn(self.task.seed + 1000 + v, {name: v}), "size", {name: v})
        return cases

    def build_reference(self, mod: Any, init: list[Any]) -> Any:
        """The task's model, constructed with the task's seed (on the host)."""
        try:
            self.torch.manual_seed(self.task.seed)
            return getattr(mod, self.task.model_class)(*init)
        except Exception as exc:  # noqa: BLE001
            raise StageFailed(
                Status.runtime_error, f"the reference constructor failed: {exception_line(exc)}", exc=exc
            ) from exc

    def build_models(self, mod: Any, cand_mod: Any, init: list[Any]) -> Models:
        torch = self.torch
        cand_cls = getattr(cand_mod, self.cand_src.class_name, None)
        if cand_cls is None:
            raise StageFailed(Status.compile_error, f"the candidate defines no class {self.cand_src.class_name!r}")
        from ..harness.checks import ModuleWatch

        seed = self.task.seed
        ref = self.build_reference(mod, init).to(self.device)
        if self.guard is not None:  # watched from before the candidate's constructor runs
            self.references.append(ModuleWatch(ref))
        if self.state0 is not None:
            self.rebase_state()
        try:
            torch.manual_seed(seed)  # KernelBench's same-seed construction, the fallback
            cand = cand_cls(*init)
        except Exception as exc:  # noqa: BLE001
            from ..harness.loading import is_compile_error

            status = Status.compile_error if is_compile_error(exc) else Status.runtime_error
            raise StageFailed(status, f"ModelNew constructor failed: {exception_line(exc)}", exc=exc) from exc
        self.watch_state("in its constructor")
        compatible, note = True, ""
        try:
            cand.load_state_dict(ref.state_dict(), strict=True)
        except Exception as exc:  # noqa: BLE001
            compatible, note = False, str(exc).strip().replace("\n", " ")[:600]
        return Models(ref, cand.to(self.device), compatible, note)

    # ------------------------------------------------------------------ probes
    def check_dense_outputs(self, ref_out: Any, cand_out: Any, where: str) -> None:
        """`dense_outputs`: every output element the candidate returns is its own memory where the reference's are. An
        output whose elements share memory (a stride-0 `expand`, overlapping `as_strided`) reads right while writing a
        fraction of what the reference writes: a speedup of memory not written."""
        from ..harness.checks import overlapping_outputs

        shared = overlapping_outputs(ref_out, cand_out)
        self.check(
            "dense_outputs",
            not shared,
            f"[{where}] {', '.join(shared)}: elements of the output share memory (a stride-0 or overlapping view) "
            "where the reference's do not — fewer values written than the output holds"
            if shared
            else "",
        )

    def check_plain_outputs(self, cand_out: Any, where: str) -> None:
        from ..harness.probes import foreign_outputs

        foreign = foreign_outputs(self.ref_types, cand_out)
        self.check(
            "plain_tensor_outputs",
            not foreign,
            f"[{where}] {', '.join(foreign)}: outputs must be plain torch.Tensor objects like the reference's (a "
            "tensor subclass or wrapper can defer its work until after the timer stops)"
            if foreign
            else "",
        )

    def free_memory(self) -> int | None:
        if not self.is_cuda:
            return None
        try:
            return int(self.torch.cuda.mem_get_info(self.device)[0])
        except Exception:  # noqa: BLE001
            return None
