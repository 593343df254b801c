"""Optimize a module: search for a faster verified implementation, and decide what to offer.

`ModuleOptimization` prepares one run (task, configuration, models, evaluator, offline seeds,
the Judge's hardware feedback, prompts, run store), runs it, and says what it found in an
`OptimizeResult`. The one rule of what is offered lives here (`answer_of`): the run's best
candidate after its final re-check, faster than the reference as re-timed, and loading the
module's `state_dict` — so that it can replace the user's class in place. `forge optimize`
writes or applies it; the editor proposes it. Both say the same sentence about the run.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..agent.config import AgentConfig
from ..agent.events import EventBus
from ..agent.optimize import OptimizeOptions, Optimizer, RunOutcome, models_from_config
from ..agent.progress import RunProgress, outcome_words, speedup_label
from ..agent.run_events import Outcome
from ..agent.store import CandidateRecord, EventRecord, RunStore
from ..engine import EvalOptions, Task, TaskError, Verdict, load_task
from ..engine.executor import Executor, ExecutorUnavailable
from ..engine.executors import make_executor
from ..reintegrate import VerifiedDomain, domain_from_verdict
from .common import UseCaseError, check_device, find_workspace

#: Verdict reasons that mean the user's own module failed in the worker, not a candidate.
REFERENCE_FAILED = ("the reference model failed", "the reference constructor failed", "the task file failed to load")


def eval_options(config: AgentConfig) -> EvalOptions:
    """The engine's options a run's configuration asks for (the host-memory cap, `memory_limit_gib`; `strict`)."""
    if config.memory_limit_gib is None:
        return EvalOptions(strict=config.strict)
    return EvalOptions(host_memory_limit_bytes=int(config.memory_limit_gib * (1 << 30)), strict=config.strict)


def executor_for(config: AgentConfig, device: str, cache_dir: Path | None = None) -> Executor:
    """The executor the configuration names (`executor`: local, ray, ray://HOST:PORT) on `device`; a
    `UseCaseError` that says what to install or change when it cannot be made."""
    try:
        return make_executor(
            config.executor,
            device,
            options=eval_options(config),
            cache_dir=cache_dir,
            build_workers=config.build_workers,
        )
    except (ValueError, ExecutorUnavailable) as exc:
        raise UseCaseError(str(exc)) from exc


@dataclass(frozen=True)
class OptimizeRequest:
    task_file: Path | None = None  # a KernelBench-style file (None with `resume`)
    model_class: str | None = None  # the module (default: the task's Model)
    workspace: Path | None = None  # where the configuration and `.forge/` are (default: found from the file)
    resume: str | None = None  # a run id to continue
    overrides: dict[str, Any] = field(default_factory=dict)  # configuration keys, as in [tool.forge]
    device: str = "auto"  # "auto": the configured device, else the first GPU, else the CPU
    offline: bool = True  # evaluate the offline seeds first
    profile: bool = True  # Nsight Compute feedback for the Judge (GPU only)
    cache_dir: Path | None = None


@dataclass
class Answer:
    """The run's answer, worth offering: verified again, faster than the reference, reintegrable."""

    candidate: CandidateRecord
    verdict: Verdict
    speedup: float  # the final re-timing
    search_speedup: float | None  # the search's measurement of the same candidate
    domain: VerifiedDomain  # what it was verified on (the rewrite runs it only there)

    @property
    def label(self) -> str:
        return speedup_label(self.speedup, self.search_speedup)


@dataclass
class ReferenceFailure:
    """The user's own module failed in the worker (not a candidate): why, and where in their file."""

    reason: str
    line: int | None  # 1-based line of the task file, when a traceback frame points into it


@dataclass
class OptimizeResult:
    outcome: RunOutcome
    task: Task
    answer: Answer | None  # what to offer, if anything
    withheld: Withheld | None  # why nothing is offered
    message: str  # what the run found, in one sentence (the editor's notification)
    reference_failure: ReferenceFailure | None = None

    @property
    def run_id(self) -> str:
        return self.outcome.run_id

    @property
    def words(self) -> str:
        """What the run found, the outcome first, as the CLI and the report say it (`outcome_words`): "1.42×
        (final re-timing) faster candidate found", "no faster candidate, nothing written: <why>"."""
        if self.withheld in ("not_faster", "no_candidate", "recheck_failed"):
            return outcome_words("done", self.message, None, None)
        return self.message


#: Why a run's best candidate is not offered (`OptimizeResult.withheld`).
Withheld = Literal["recheck_failed", "not_faster", "state_dict", "no_candidate", "failed", "cancelled"]


def answer_of(outcome: RunOutcome) -> tuple[Answer | None, Withheld | None, str]:
    """The answer to offer (or None, and why not), and the sentence that says what the run found."""
    best = outcome.best
    if outcome.status == "failed":
        return None, "failed", outcome.stop_reason
    if outcome.status == "cancelled":
        return None, "cancelled", "cancelled"
    if best is not None and outcome.final_failure is not None:
        return None, "recheck_failed", f"the best candidate failed its final re-check: {outcome.final_failure[:200]}"
    if best is not None and best.verdict is not None and outcome.improves:
        speedup = outcome.answer_speedup
        assert speedup is not None  # improves implies it
        label = speedup_label(speedup, outcome.best_speedup)
        if not best.verdict.checkpoint_compatible:
            return (
                None,
                "state_dict",
                (
                    f"{label} faster, but not offered: its state_dict does not load into the module, so it cannot "
                    "replace it in place"
                ),
            )
        domain = domain_from_verdict(best.verdict)
        answer = Answer(best, best.verdict, speedup, outcome.best_speedup, domain)
        return answer, None, f"{label} faster candidate found"
    withheld: Withheld = "not_faster" if best is not None else "no_candidate"
    if not outcome.model_configured:
        return None, withheld, "no offline candidate beat the reference (no model is configured)"
    return None, withheld, f"no verified candidate faster than the reference ({outcome.stop_reason})"


def reference_failure(store: RunStore, outcome: RunOutcome, task: Task) -> ReferenceFailure | None:
    """Where the user's own module failed in the workers, if it did: alone, before any candidate (the
    run's reference check), else the first verdict of the run that says so."""
    from .common import failure_line

    alone = outcome.reference_failure
    if alone is not None:
        return ReferenceFailure(alone.reason, failure_line(alone.traceback + "\n" + alone.log_excerpt, task))
    for rec in store.candidates(outcome.run_id):
        v = rec.verdict
        if v is not None and v.reason.startswith(REFERENCE_FAILED):
            return ReferenceFailure(v.reason, failure_line(v.traceback + "\n" + v.log_excerpt, task))
    return None


class ModuleOptimization:
    """One optimization run, prepared; `run()` carries it out, `cancel()` stops it from another thread."""

    def __init__(
        self,
        request: OptimizeRequest,
        *,
        store: RunStore | None = None,
        on_event: Callable[[EventRecord], None] | None = None,
    ) -> None:
        from ..agent.config import ConfigError, load_config
        from ..agent.roles import Prompts
        from .explain import judge_feedback
        from .runs import workspace_store

        self.request = request
        if request.device != "auto":  # before any work; a configured device is checked once it is read
            check_device(request.device)
        path, model_class, workspace = self._target(request, store)
        self.workspace = workspace
        if request.resume:
            found = store or workspace_store(workspace)
            if found is None:
                raise UseCaseError(f"no runs to resume in {workspace} (no .forge/runs.sqlite)")
            try:
                run = found.get_run(request.resume)
            except KeyError as exc:
                raise UseCaseError(f"{exc.args[0]} in {found.path}") from exc
            path, model_class = Path(run.task_path), run.model_class
            store = found
        try:
            self.task = load_task(path, model_class=model_class)
        except (TaskError, OSError) as exc:
            raise UseCaseError(str(exc)) from exc
        try:
            self.config = load_config(workspace, request.overrides)
        except ConfigError as exc:
            raise UseCaseError(str(exc)) from exc
        coder, judge = models_from_config(self.config)
        self.model_configured = coder is not None
        device = check_device(request.device if request.device != "auto" else self.config.device)
        # the store once the request is known to run: a refused one leaves no .forge/ behind
        self.store = store or RunStore.for_workspace(workspace)
        self.evaluator = executor_for(self.config, device, request.cache_dir)
        self.bus = EventBus(self.store)
        if on_event is not None:
            self.bus.subscribe(on_event)
        evaluator = self.evaluator
        self._cancel = cancel = threading.Event()  # stops what the optimizer does not own: the graph probe

        def offline_seeds(task: Task) -> list[Any]:
            from ..agent.offline import offline_candidates

            return offline_candidates(
                task,
                device=evaluator.device,
                cancel=cancel,
                modes=self.config.compile_modes,
                library=self.config.offline_library,
            )

        self.options = OptimizeOptions.from_config(self.config, offline=request.offline)
        self.optimizer = Optimizer(
            self.task,
            store=self.store,
            evaluator=self.evaluator,
            options=self.options,
            coder=coder,
            judge=judge,
            bus=self.bus,
            offline=offline_seeds if request.offline else None,
            profile=judge_feedback(self.evaluator.device, request.cache_dir) if request.profile else None,
            config_record=self.config.redacted(),
            prompts=Prompts(workspace),
        )

    @staticmethod
    def _target(request: OptimizeRequest, store: RunStore | None) -> tuple[Path, str | None, Path]:
        if request.task_file is None and not request.resume:
            raise UseCaseError("name a task file (FILE.py[::Class]) or a run to resume")
        if request.task_file is None:
            return Path(), None, request.workspace or (store.path.parent.parent if store else Path.cwd())
        return request.task_file, request.model_class, request.workspace or find_workspace(request.task_file)

    @property
    def run_id(self) -> str:
        return self.optimizer.run_id

    def progress(self) -> RunProgress:
        """The run's progress, for a front end to feed this run's events and say as it goes."""
        return RunProgress(
            rounds=self.options.rounds,
            model=self.model_configured,
            offline=self.options.offline,
            wall_s=self.options.wall_s,
        )

    def cancel(self) -> None:
        """Stop the run: no new model call or evaluation; the one in flight, or the graph probe, is killed."""
        self._cancel.set()
        self.optimizer.cancel()

    def interrupted(self, note: str) -> None:
        """The run was stopped from outside (Ctrl-C): stop it and mark it resumable in the store."""
        self._cancel.set()
        self.optimizer.cancel()
        if self.run_id:
            self.store.set_run_status(self.run_id, "interrupted", note)

    def run(self) -> OptimizeResult:
        try:
            outcome = self.optimizer.run(resume=self.request.resume)
        finally:
            self.evaluator.close()
        answer, withheld, message = answer_of(outcome)
        failure = reference_failure(self.store, outcome, self.task)
        if outcome.run_id:  # what the run found, in the words every front end says it (`forge show`, the report)
            self.store.add_event(
                outcome.run_id,
                Outcome(message=message, withheld=withheld, speedup=answer.speedup if answer else None),
            )
        return OptimizeResult(outcome, self.task, answer, withheld, message, failure)
