"""One optimization run: seeds, Coder/Judge rounds, evaluation, budgets, resume, final re-timing.

`Optimizer.run` drives a run to its end and returns a `RunOutcome`. It does the following:
- evaluates the offline seeds (torch.compile variants, built-in library kernels);
- repairs, before any model is asked again, a candidate whose verdict shows a known mechanical cause (`engine.repair`:
  launches on the legacy default stream, a contiguity assumption, the deprecated `x.type()` dispatch): the repaired
  candidate (origin ``auto-repair``, the original's child) is verified like any other;
- then, when a model is configured, repeats rounds. Pick targets (`search.py`). For each
  target, ask the Judge (repair mode for a failed candidate, optimize mode with profiler
  findings for a correct one) and the Coder, concurrently. Evaluate the new candidates together
  (builds overlap, timing is serial per GPU). Record everything;
- stops on the round, wall-time or dollar budget, a roofline fraction, or cancel;
- re-times the best verified candidate against the reference.

Everything goes to the `RunStore` as it happens and out through the `EventBus`. A killed run
resumes from the store: evaluated candidates keep their verdicts, candidates that were queued
are evaluated, and the tree and round count are rebuilt.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from ..engine import Candidate, Task, Verdict
from ..engine.executor import Executor
from ..engine.pipe import Prepared
from ..engine.repair import repair_candidate
from ..engine.verdict import Status, Timing
from .events import EventBus
from .progress import speedup_label
from .roles import (
    CoderReply,
    OptimizeAdvice,
    Prompts,
    RepairAdvice,
    coder_messages,
    instruction_from,
    judge_optimize_messages,
    judge_repair_messages,
)
from .run_events import (
    Budget,
    CandidateFailed,
    CandidateQueued,
    CandidateStage,
    CandidateTimed,
    CandidateVerified,
    FinalRetime,
    FinalTiming,
    ModelCall,
    ModelWaiting,
    NewBest,
    Profiled,
    Round,
    RunEvent,
    RunFinished,
    RunStarted,
)
from .search import ROOT, Node, SearchParams, Tree, select_linear, select_mcts
from .store import CandidateRecord, RunStore

#: Provider error kinds that end the run (the same call would fail every time).
FATAL_ERRORS = ("auth", "not_found", "bad_request", "connection")

#: forge's automatic repairs of one candidate, at most this many deep (a repair of a repair of ...).
AUTO_REPAIR_ROUNDS = 2
AUTO_REPAIR = "auto-repair"


class OptimizeOptions(BaseModel):
    search: str = "mcts"
    rounds: int = 10
    concurrency: int = 4
    budget_usd: float | None = None
    wall_s: float | None = None
    roofline_stop: float | None = 0.9
    repair_limit: int = 2
    #: Profile under ncu at most once per this many rounds (one profile costs ~8-10 s on an H200); in
    #: between, the Judge reads the nearest profiled ancestor's findings, labelled as such.
    profile_interval: int = 3
    offline: bool = True
    final_retime: bool = True

    @classmethod
    def from_config(cls, config: Any, **overrides: Any) -> OptimizeOptions:
        """The run options an `AgentConfig` asks for (budgets, search), with `overrides` on top."""
        return cls(
            **(
                {
                    "search": config.search,
                    "rounds": config.rounds,
                    "concurrency": config.concurrency,
                    "budget_usd": config.budget_usd,
                    "wall_s": config.wall_s,
                    "roofline_stop": config.roofline_stop,
                }
                | overrides
            )
        )


def models_from_config(config: Any) -> tuple[Any, Any]:
    """(coder, judge) chat models of an `AgentConfig`, or (None, None) when no model is configured."""
    if config.coder is None:
        return None, None
    from .config import api_key
    from .provider import ChatModel

    coder = ChatModel(config.coder, api_key=api_key(config.coder), prices=config.prices)
    judge = ChatModel(config.judge, api_key=api_key(config.judge), prices=config.prices) if config.judge else coder
    return coder, judge


@dataclass
class RunOutcome:
    run_id: str
    status: str  # done | cancelled | failed
    stop_reason: str
    best: CandidateRecord | None
    best_speedup: float | None
    rounds: int
    candidates: int
    spent_usd: float
    model_configured: bool
    notes: list[str] = field(default_factory=list)
    final_speedup: float | None = None  # the best candidate re-timed at the end (None: not re-timed)
    final_failure: str | None = None  # why the best candidate failed its final re-check
    final_timing: Timing | None = None  # the final re-timing of `best` against the reference
    #: the task's own model failed when called alone, before any candidate: no candidate was evaluated
    reference_failure: Prepared | None = None

    @property
    def answer_speedup(self) -> float | None:
        """The speedup to report for `best`: the final re-timing when there was one; None when the
        best candidate failed its final re-check."""
        if self.best is None or self.final_failure is not None:
            return None
        return self.final_speedup if self.final_speedup is not None else self.best_speedup

    @property
    def improves(self) -> bool:
        """Whether `best` is worth offering: verified, and faster than the reference (after re-timing)."""
        return self.answer_speedup is not None and self.answer_speedup > 1.0


class RunCancelled(Exception):
    pass


class ReferenceFailed(Exception):
    def __init__(self, prepared: Prepared) -> None:
        super().__init__(prepared.reason)
        self.prepared = prepared


ProfileFn = Callable[[Task, Candidate], dict[str, Any] | None]


class Optimizer:
    def __init__(
        self,
        task: Task,
        *,
        store: RunStore,
        evaluator: Executor,
        options: OptimizeOptions,
        coder: Any = None,
        judge: Any = None,
        bus: EventBus | None = None,
        prompts: Prompts | None = None,
        offline: Callable[[Task], list[Any]] | None = None,
        profile: ProfileFn | None = None,
        config_record: dict[str, Any] | None = None,
        peaks: dict[str, Any] | None = None,
    ):
        self.task, self.store, self.evaluator, self.opt = task, store, evaluator, options
        self.coder, self.judge = coder, judge or coder
        self.bus = bus or EventBus(store)
        self.prompts = prompts or Prompts()
        self.offline, self.profile = offline, profile
        self.config_record = config_record or {}
        self.peaks = peaks
        self.params = SearchParams(repair_limit=options.repair_limit)
        self.tree = Tree()
        self.records: dict[str, CandidateRecord] = {}
        self.profiles: dict[str, dict[str, Any]] = {}
        self._final: dict[str, Any] = {}  # the final re-timing of the best candidate
        self._answered: set[str] = set()  # roles whose model has replied in this run
        self._last_profiled: int | None = None  # the round of the last fresh profile
        self._cancel = threading.Event()
        self._lock = threading.Lock()
        self.run_id = ""
        self.rounds = 0
        self.started = time.monotonic()

    # --------------------------------------------------------------------------- control
    def cancel(self) -> None:
        """Stop the run: no new model calls or evaluations; the one in flight is killed."""
        self._cancel.set()
        self.evaluator.cancel()

    def _check_cancel(self) -> None:
        if self._cancel.is_set():
            raise RunCancelled()

    def _publish(self, event: RunEvent) -> None:
        self.bus.publish(self.run_id, event)

    # ------------------------------------------------------------------------------- run
    def run(self, resume: str | None = None) -> RunOutcome:
        notes: list[str] = []
        if resume:
            self._load(resume)
            self.store.set_run_status(self.run_id, "running", "resumed")
            self._publish(RunStarted(resumed=True, candidates=len(self.records), rounds=self.rounds))
        else:
            self.run_id = self.store.create_run(
                self.task.path,
                self.task.model_class,
                self.task.source,
                self.config_record | {"options": self.opt.model_dump()},
            )
            self._publish(RunStarted(resumed=False, task=str(self.task.path), model_configured=self.coder is not None))
        stop = "rounds"
        reference: Prepared | None = None
        try:
            self._check_cancel()  # a cancel that came before the run started
            self._check_reference()
            pending = [r for r in self.records.values() if r.status == "queued"]
            if pending:
                self._evaluate(pending)
            if not self.records and self.opt.offline and self.offline is not None:
                self._seed()
            if self.coder is None:
                stop = "no model configured: offline candidates only"
            else:
                stop = self._loop()
            if self.opt.final_retime:
                notes += self._retime_best()
            status = "done"
        except RunCancelled:
            status, stop = "cancelled", "cancelled"
        except FatalModelError as exc:
            status, stop = "failed", str(exc)
        except ReferenceFailed as exc:
            status, stop, reference = "failed", exc.prepared.reason, exc.prepared
        best = self._best_record()
        spent = self.store.spent(self.run_id)[0]
        self.store.set_run_status(self.run_id, status, stop, best.id if best else None)
        self._publish(
            RunFinished(
                status=status,
                reason=stop,
                best=best.id if best else None,
                best_speedup=best.speedup if best else None,
                spent_usd=spent,
            )
        )
        return RunOutcome(
            self.run_id,
            status,
            stop,
            best,
            best.speedup if best else None,
            self.rounds,
            len(self.records),
            spent,
            self.coder is not None,
            notes,
            final_speedup=self._final.get("speedup"),
            final_failure=self._final.get("failure"),
            final_timing=self._final.get("timing"),
            reference_failure=reference,
        )

    def _check_reference(self) -> None:
        """The task's model alone, in the worker, before any candidate: its own failure (an exception, a
        crash, a hang) ends the run as the user's, and no candidate is blamed for it."""
        try:
            prepared = self.evaluator.check_reference(self.task)
        except Exception as exc:
            if self._cancel.is_set():
                raise RunCancelled() from exc
            raise
        if not prepared.ok:
            raise ReferenceFailed(prepared)

    def _load(self, run_id: str) -> None:
        run = self.store.get_run(run_id)
        self.run_id = run.id
        for rec in self.store.candidates(run.id):
            self.records[rec.id] = rec
            node = self.tree.add(rec.id, rec.parent_id, rec.summary, repair=rec.origin in ("repair", AUTO_REPAIR))
            if rec.status == "evaluated":
                self.tree.record(
                    node.id,
                    correct=bool(rec.correct),
                    speedup=rec.speedup,
                    reason=rec.verdict.reason if rec.verdict else "",
                )
        self.rounds = sum(1 for e in self.store.events(run.id) if isinstance(e.event, Round))

    # ----------------------------------------------------------------------------- seeds
    def _seed(self) -> None:
        self._publish(Round(round=0, phase="offline seeds"))
        try:
            seeds = self.offline(self.task) if self.offline else []
        except Exception as exc:  # noqa: BLE001 - no seeds is not a failed run
            self._publish(CandidateFailed(candidate=None, reason=f"offline candidates unavailable: {exc}"))
            return
        recs = [
            self.store.add_candidate(
                self.run_id, s.source, parent_id=None, origin=f"offline:{s.name}", summary=s.summary
            )
            for s in seeds
        ]
        for rec in recs:
            self._add(rec)
        self._evaluate(recs)

    def _add(self, rec: CandidateRecord) -> Node:
        self.records[rec.id] = rec
        self._publish(CandidateQueued(candidate=rec.id, parent=rec.parent_id, origin=rec.origin, summary=rec.summary))
        return self.tree.add(rec.id, rec.parent_id, rec.summary, repair=rec.origin in ("repair", AUTO_REPAIR))

    # ------------------------------------------------------------------------------ loop
    def _budget_stop(self) -> str | None:
        if self.rounds >= self.opt.rounds:
            return f"round budget reached ({self.opt.rounds})"
        if self.opt.wall_s is not None and time.monotonic() - self.started >= self.opt.wall_s:
            return f"wall-time budget reached ({self.opt.wall_s:g} s)"
        if self.opt.budget_usd is not None:
            spent = self.store.spent(self.run_id)[0]
            if spent >= self.opt.budget_usd:
                return f"dollar budget reached (${spent:.4f} of ${self.opt.budget_usd:g})"
        best = self.tree.best()
        if best is not None and self.opt.roofline_stop and best.id in self.profiles:
            pct = (self.profiles[best.id].get("roofline") or {}).get("pct_of_roof")
            if pct is not None and pct >= 100 * self.opt.roofline_stop:
                return f"best candidate at {pct:.0f}% of the roofline"
        return None

    def _loop(self) -> str:
        while True:
            self._check_cancel()
            reason = self._budget_stop()
            if reason:
                self._publish(Budget(reason=reason))
                return reason
            if self.opt.search == "linear":
                targets = select_linear(self.tree, self.params)
            else:
                targets = select_mcts(self.tree, self.width(), self.params)
            self.rounds += 1
            best = self.tree.best()
            self._publish(
                Round(
                    round=self.rounds,
                    of=self.opt.rounds,
                    targets=[t.id for t in targets],
                    best_speedup=best.speedup if best else None,
                )
            )
            with ThreadPoolExecutor(max_workers=len(targets)) as pool:
                outcomes = list(pool.map(self._expand, targets))
            fatal = next((o for o in outcomes if isinstance(o, FatalModelError)), None)
            if fatal is not None:
                raise fatal
            new = [o for o in outcomes if isinstance(o, CandidateRecord)]
            if new:
                self._evaluate(new)

    def width(self) -> int:
        """Candidates an MCTS round expands: `concurrency`, and at least one per device the executor evaluates on
        at once, so that no device idles while a round's candidates are evaluated."""
        return max(1, self.opt.concurrency, self.evaluator.capacity)

    def _expand(self, target: Node) -> CandidateRecord | FatalModelError | None:
        """Judge (when there is a candidate to judge) then Coder; returns the new candidate."""
        try:
            self._check_cancel()
            ctx = self._task_context()
            parent_rec = self.records.get(target.id)
            instruction, origin = None, "coder"
            if parent_rec is not None and target.failed:
                origin = "repair"
                messages = judge_repair_messages(
                    self.prompts, ctx, candidate=_cand_ctx(parent_rec), verdict=_as_data(parent_rec.verdict)
                )
                advice = self._call("judge", self.judge, messages, RepairAdvice, target.id)
                instruction = instruction_from(advice, self.prompts) if advice else None
            elif parent_rec is not None:
                prof = self._profile(parent_rec)
                timing = parent_rec.verdict.timing if parent_rec.verdict else None
                messages = judge_optimize_messages(
                    self.prompts,
                    ctx,
                    candidate=_cand_ctx(parent_rec),
                    timing=timing.model_dump(mode="json") if timing else None,
                    roofline=(prof or {}).get("roofline"),
                    findings=(prof or {}).get("findings", [])[:6],
                    profiled_on=(prof or {}).get("inherited_from"),
                    tried=[{"summary": c.summary, "outcome": _outcome(c)} for c in target.children],
                )
                advice = self._call("judge", self.judge, messages, OptimizeAdvice, target.id)
                instruction = instruction_from(advice, self.prompts) if advice else None
            self._check_cancel()
            failed_siblings = [
                {"summary": c.summary, "reason": c.reason or "not evaluated"} for c in target.children if c.failed
            ]
            messages = coder_messages(
                self.prompts,
                ctx,
                parent=_cand_ctx(parent_rec) if parent_rec else None,
                instruction=instruction,
                failed_siblings=failed_siblings,
                examples=self._examples(),
            )
            reply = self._call("coder", self.coder, messages, CoderReply, target.id)
            if reply is None:
                return None
            with self._lock:
                rec = self.store.add_candidate(
                    self.run_id,
                    reply.source,
                    parent_id=None if target.id == ROOT else target.id,
                    origin=origin,
                    summary=reply.summary.strip()[:300],
                    instruction=instruction or "",
                )
                self._add(rec)
            return rec
        except FatalModelError as exc:
            return exc
        except RunCancelled:
            return None

    def _call(
        self, role: str, model: Any, messages: list[dict[str, str]], schema: type[BaseModel], candidate_id: str
    ) -> Any:
        from .provider import ProviderError

        cand = None if candidate_id == ROOT else candidate_id
        try:
            with _Waiting(
                lambda seconds, pieces: self._publish(ModelWaiting(role=role, seconds=seconds, pieces=pieces))
            ) as waiting:
                result = self._until_cancelled(
                    lambda: model.complete(messages, schema, on_progress=waiting.pieces), model
                )
        except ProviderError as exc:
            self.store.add_call(
                self.run_id,
                role=role,
                model=getattr(model.settings, "model", "?"),
                messages=messages,
                reply_text="",
                parsed=None,
                error=f"{exc.kind}: {exc}",
                candidate_id=cand,
            )
            self._publish(ModelCall(role=role, ok=False, error=exc.kind, message=str(exc)))
            if exc.kind in FATAL_ERRORS:
                raise FatalModelError(f"{role} model failed: {exc}") from exc
            if exc.kind == "timeout" and role not in self._answered:
                # an endpoint that accepts and never answers would hold every round this long: stop now
                raise FatalModelError(f"{role} model never answered in this run: {exc}") from exc
            return None
        self._answered.add(role)
        usage = result.usage
        self.store.add_call(
            self.run_id,
            role=role,
            model=result.model,
            messages=messages,
            reply_text=result.text,
            parsed=result.parsed.model_dump(),
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            cost_usd=usage.cost_usd,
            latency_s=result.latency_s,
            candidate_id=cand,
        )
        self._publish(
            ModelCall(
                role=role,
                ok=True,
                model=result.model,
                attempts=result.attempts,
                prompt_tokens=usage.prompt_tokens,
                completion_tokens=usage.completion_tokens,
                cost_usd=usage.cost_usd,
                latency_s=result.latency_s,
            )
        )
        return result.parsed

    def _until_cancelled(self, call: Callable[[], Any], model: Any) -> Any:
        """`call()` (a model call), which a cancel of the run ends at once: the model's client is closed, which
        aborts the request in flight, and `RunCancelled` is raised without waiting for the reply."""
        box: dict[str, Any] = {}
        done = threading.Event()

        def run() -> None:
            try:
                box["value"] = call()
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread as it is
                box["error"] = exc
            finally:
                done.set()

        threading.Thread(target=run, name="forge-model-call", daemon=True).start()
        while not done.wait(0.1):
            if self._cancel.is_set():
                close = getattr(model, "close", None)
                if close is not None:
                    try:
                        close()
                    except Exception:  # noqa: BLE001 - the run is cancelled either way
                        pass
                raise RunCancelled()
        if "error" in box:
            raise box["error"]
        return box["value"]

    # ------------------------------------------------------------------------ evaluation
    def _evaluate(self, recs: list[CandidateRecord]) -> None:
        todo = []
        for rec in recs:
            self._check_cancel()
            done = self.store.evaluated_by_source(self.run_id, rec.source)
            if done is not None and done.id != rec.id and done.verdict is not None:  # evaluated already: reuse
                self._finish(rec, done.verdict, reused=done.id)
            else:
                todo.append(rec)
        if not todo:
            return
        cands = {rec.id: Candidate.from_source(rec.source, rec.id.replace("/", "_")) for rec in todo}
        by_name = {c.name: rec for rec, c in zip(todo, cands.values(), strict=True)}

        def on_stage(cand: Candidate, stage: str) -> None:
            self._publish(
                CandidateStage(
                    kind="candidate_compiled" if stage in ("first_call", "verify") else "candidate_stage",
                    candidate=by_name[cand.name].id,
                    stage=stage,
                )
            )

        def on_verdict(cand: Candidate, verdict: Verdict) -> None:
            self._finish(by_name[cand.name], verdict)

        try:
            self.evaluator.evaluate_many(self.task, list(cands.values()), on_stage=on_stage, on_verdict=on_verdict)
        except Exception as exc:
            if self._cancel.is_set():
                raise RunCancelled() from exc
            raise
        self._auto_repair(recs)

    def _auto_repair(self, recs: list[CandidateRecord]) -> None:
        """forge's own repairs of the candidates just evaluated, before any model is asked again: each one whose
        verdict shows a known mechanical cause gets a repaired child, verified like any other (and repaired again,
        up to `AUTO_REPAIR_ROUNDS` deep)."""
        new = []
        for rec in recs:
            self._check_cancel()
            if rec.verdict is None or rec.status != "evaluated":
                continue
            depth, applied = self._repair_history(rec)
            if depth >= AUTO_REPAIR_ROUNDS:
                continue
            found = repair_candidate(rec.source, rec.verdict, already=applied)
            if found is None or not found.fixes:
                continue
            kinds = ", ".join(dict.fromkeys(f.kind for f in found.fixes))
            said = "; ".join(f.detail for f in found.fixes)
            if found.remaining:
                said += ". Not repaired: " + "; ".join(found.remaining)
            with self._lock:
                child = self.store.add_candidate(
                    self.run_id,
                    found.source,
                    parent_id=rec.id,
                    origin=AUTO_REPAIR,
                    summary=f"{rec.summary} (forge's repair: {kinds})"[:300],
                    instruction=said,
                )
                self._add(child)
            new.append(child)
        if new:
            self._evaluate(new)

    def _repair_history(self, rec: CandidateRecord) -> tuple[int, list[Any]]:
        """How many automatic repairs deep `rec` is, and the fix kinds its repairs applied (none to tell: a fix
        already in a source finds nothing more to change there)."""
        depth = 0
        node: CandidateRecord | None = rec
        while node is not None and node.origin == AUTO_REPAIR:
            depth += 1
            node = self.records.get(node.parent_id) if node.parent_id else None
        return depth, []

    def _finish(self, rec: CandidateRecord, verdict: Verdict, reused: str | None = None) -> None:
        correct = verdict.status == Status.correct
        speedup = verdict.speedup if correct else None
        self.store.set_verdict(rec.id, verdict, correct=correct, speedup=speedup)
        rec.status, rec.verdict, rec.correct, rec.speedup = "evaluated", verdict, correct, speedup
        previous = self.tree.best()
        self.tree.record(rec.id, correct=correct, speedup=speedup, reason=verdict.reason)
        if correct:
            self._publish(CandidateVerified(candidate=rec.id, reused=reused))
            self._publish(CandidateTimed(candidate=rec.id, speedup=speedup))
            best = self.tree.best()
            if best is not None and best.id == rec.id and (previous is None or previous.id != rec.id):
                self._publish(NewBest(candidate=rec.id, speedup=speedup, summary=rec.summary))
        else:
            self._publish(
                CandidateFailed(
                    candidate=rec.id,
                    status=verdict.status.value,
                    check=verdict.failed_check,
                    reason=verdict.reason[:500],
                    reused=reused,
                )
            )

    def _profile(self, rec: CandidateRecord) -> dict[str, Any] | None:
        """Hardware feedback for the Judge: this candidate's profile, a fresh one when the interval allows,
        else the nearest profiled ancestor's (with ``inherited_from`` set)."""
        if self.profile is None:
            return None
        with self._lock:
            if rec.id in self.profiles:
                return self.profiles[rec.id]
            due = self._last_profiled is None or self.rounds - self._last_profiled >= self.opt.profile_interval
            if not due:
                for ancestor in reversed(self.tree.nodes[rec.id].path()[:-1]):
                    if ancestor.id in self.profiles and self.profiles[ancestor.id]:
                        return self.profiles[ancestor.id] | {"inherited_from": ancestor.id}
            self._last_profiled = self.rounds
        self._publish(Profiled(candidate=rec.id, phase="start"))
        prof = self.profile(self.task, Candidate.from_source(rec.source, rec.id.replace("/", "_")))
        self.profiles[rec.id] = prof or {}
        if prof and prof.get("findings") is not None:
            self.store.set_findings(rec.id, prof["findings"])
        # the candidate's place on the roofline (intensity, achieved FLOP/s and bytes/s, the ceilings it was
        # placed under) is recorded with the event: the run's report places it from there
        roofline = (prof or {}).get("roofline") or None
        self._publish(
            Profiled(
                candidate=rec.id,
                phase="done",
                mode=(prof or {}).get("mode"),
                kernel=(prof or {}).get("kernel"),
                pct_of_roof=(roofline or {}).get("pct_of_roof"),
                roofline=roofline,
            )
        )
        return self.profiles[rec.id]

    def _retime_best(self) -> list[str]:
        best = self._best_record()
        if best is None:
            return ["no verified candidate"]
        self._check_cancel()
        self._publish(FinalRetime(candidate=best.id, search_speedup=best.speedup))
        # the final acceptance: verified and timed again, and (CUDA) run under compute-sanitizer
        try:
            verdict = self.evaluator.evaluate(self.task, Candidate.from_source(best.source, "final"), sanitize=True)
        except Exception as exc:  # a cancel kills the worker or the compute-sanitizer run in flight
            if self._cancel.is_set():
                raise RunCancelled() from exc
            raise
        if verdict.status != Status.correct or verdict.speedup is None:
            self._publish(
                CandidateFailed(
                    candidate=best.id, status=verdict.status.value, reason=f"final re-timing: {verdict.reason}"
                )
            )
            self._final = {"failure": verdict.reason}
            return [f"the best candidate failed its final re-check: {verdict.reason}"]
        self._final = {"speedup": verdict.speedup, "timing": verdict.timing}
        self._publish(CandidateTimed(candidate=best.id, speedup=verdict.speedup, final=True))
        timing = verdict.timing.model_dump(mode="json") if verdict.timing else None
        self.store.add_event(self.run_id, FinalTiming(candidate=best.id, speedup=verdict.speedup, timing=timing))
        if verdict.speedup <= 1:  # "best" is never a slowdown: the fastest, said as slower
            from ..words import speedup_words

            return [f"fastest candidate {best.id}: {speedup_words(verdict.speedup)} (final re-timing)"]
        return [f"best candidate {best.id}: {speedup_label(verdict.speedup, best.speedup)}"]

    def _best_record(self) -> CandidateRecord | None:
        best = self.tree.best()
        return self.records.get(best.id) if best else None

    # ---------------------------------------------------------------------------- context
    def _task_context(self) -> dict[str, Any]:
        hello = self.evaluator.hello()
        return {
            "model_class": self.task.model_class,
            "vary": sorted(self.task.vary),
            "device_name": hello.device_name,
            "device_type": "cpu" if hello.device == "cpu" else "cuda",
            "peaks": self.peaks,
            "task_path": str(self.task.path),
            "reference_source": self.task.source,
            "inputs": self._inputs(),
        }

    def _inputs(self) -> list[dict[str, Any]]:
        """The real inputs (dtype, shape) of the first input set, from any verdict of this run."""
        for rec in self.records.values():
            specs = rec.verdict.inputs if rec.verdict else []
            if specs:
                first = specs[0].case
                return [s.model_dump(mode="json") for s in specs if s.case == first]
        return []

    def _examples(self) -> list[str]:
        """Few-shot: the source of the best correct offline library candidate, if any."""
        lib = [r for r in self.records.values() if r.origin.startswith("offline:library") and r.correct]
        lib.sort(key=lambda r: -(r.speedup or 0))
        return [lib[0].source] if lib else []


class _Waiting:
    """While a model call lasts over `after` seconds, says so every `every` seconds (`model_waiting`: seconds so
    far, the pieces of the reply received), from a thread of its own: a call blocked on a silent endpoint
    reports too."""

    def __init__(self, report: Callable[..., None], after: float = 2.0, every: float = 2.0) -> None:
        self._report, self._after, self._every = report, after, every
        self._pieces = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="forge-model-waiting", daemon=True)

    def pieces(self, n: int) -> None:
        self._pieces = n

    def __enter__(self) -> _Waiting:
        self._start = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=1.0)

    def _run(self) -> None:
        if self._stop.wait(self._after):
            return
        while True:
            self._report(seconds=round(time.monotonic() - self._start, 1), pieces=self._pieces)
            if self._stop.wait(self._every):
                return


class FatalModelError(Exception):
    """The model endpoint cannot serve this run (bad key, unknown model, unreachable)."""


def _as_data(verdict: Verdict | None) -> dict[str, Any]:
    """A verdict as the prompt templates read it (plain data)."""
    return verdict.model_dump(mode="json") if verdict is not None else {}


def _cand_ctx(rec: CandidateRecord) -> dict[str, Any]:
    """A candidate as the prompts read it: with the domain it was verified on and, for forge's own repair, what it
    fixed and what it could not."""
    domain = rec.verdict.domain if rec.verdict is not None else None
    return {
        "id": rec.id,
        "summary": rec.summary,
        "source": rec.source,
        "speedup": rec.speedup,
        "origin": rec.origin,
        "auto_repair": rec.instruction if rec.origin == AUTO_REPAIR else "",
        "limits": domain.limits() if domain is not None else [],
        "narrowed": [n.detail for n in domain.narrowed] if domain is not None else [],
    }


def _outcome(node: Node) -> str:
    if node.correct:
        return f"correct, {node.speedup:.2f}×" if node.speedup else "correct"
    if node.failed:
        return f"failed: {node.reason[:200]}"
    return "not evaluated yet"
