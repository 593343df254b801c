"""Evaluate candidates against tasks, with their automatic repairs, and say what a batch came to.

`evaluate_batch` is `forge eval`'s use case (one pair, or a directory of them: `pair_directory`). Every candidate is evaluated; one
whose verdict shows a cause an automatic repair lifts (`engine.repair`: launches on the legacy default stream, a
contiguity assumption, the deprecated `x.type()` dispatch) gets a repaired candidate, derived from its source and
verified like any other, at most `REPAIR_ROUNDS` rounds deep. Each result carries the original verdict and the
repair's. `summarize` counts a batch: by status, by domain, the failed checks ranked, the repairs' hit rate, the
wall time and the candidates a minute.
"""

from __future__ import annotations

import ast
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, Field

from ..engine import Candidate, Task, Verdict
from ..engine.executor import Executor, StageCallback
from ..engine.repair import Fix, repair_candidate
from ..engine.verdict import RepairKind, Status
from ..parsing import parse

#: A repaired candidate whose verdict shows another known cause is repaired again, up to this many rounds in all.
REPAIR_ROUNDS = 2


class RepairOutcome(BaseModel):
    """A candidate's automatic repair: the repaired source, what was fixed (every round), what no fix lifts, and the
    repaired candidate's verdict (the last round's)."""

    source: str
    fixes: list[Fix]
    remaining: list[str] = Field(default_factory=list)
    rounds: int = 1
    verdict: Verdict

    @property
    def kinds(self) -> list[RepairKind]:
        return list(dict.fromkeys(f.kind for f in self.fixes))


@dataclass
class Evaluated:
    """One candidate of a batch: its verdict, and its repair's when one applied."""

    task: Task
    candidate: Candidate
    verdict: Verdict
    repair: RepairOutcome | None = None

    @property
    def final(self) -> Verdict:
        """The verdict that counts for the candidate: the repaired one when the repair is correct, else its own."""
        if self.repair is not None and self.repair.verdict.correct:
            return self.repair.verdict
        return self.verdict


class BatchSummary(BaseModel):
    """What a batch came to (`forge eval DIR`'s last lines, and `summary` in its `--json`)."""

    candidates: int
    by_status: dict[str, int] = Field(description="status -> candidates, as evaluated (before any repair)")
    by_domain: dict[str, int] = Field(
        description="for the correct ones: their domain in words ('any layout, any current stream', 'contiguous "
        "inputs only'...) -> candidates"
    )
    failed_checks: list[tuple[str, int]] = Field(description="the checks that rejected candidates, most first")
    narrowed_by: list[tuple[str, int]] = Field(description="the checks that narrowed a correct verdict, most first")
    repaired: int = Field(0, description="candidates an automatic repair applied to")
    repaired_correct: int = Field(0, description="... whose repaired candidate is correct")
    repaired_full_domain: int = Field(0, description="... and correct on the full domain")
    repairs_by_kind: dict[str, int] = Field(
        default_factory=dict, description="fix kind -> candidates it was applied to"
    )
    after_repair: dict[str, int] = Field(
        default_factory=dict, description="status -> candidates, counting a correct repair as the candidate's verdict"
    )
    wall_s: float
    per_minute: float = Field(description="candidates (originals) evaluated a minute, repairs included in the time")
    device_busy: float | None = Field(
        None, description="the share of the wall time the devices spent evaluating (0-1, averaged over the devices)"
    )


@dataclass
class _Item:
    index: int  # the original's place in the work
    task: Task
    candidate: Candidate
    round: int = 0  # 0: the original; 1, 2: repair rounds
    applied: list[RepairKind] = field(default_factory=list)
    fixes: list[Fix] = field(default_factory=list)
    remaining: list[str] = field(default_factory=list)


def defines_class(path: Path, cls: str) -> bool:
    """Whether the Python file at `path` defines a top-level class `cls` (read from its AST, never run)."""
    try:
        tree = parse(path.read_text(encoding="utf-8", errors="replace"))
    except SyntaxError:
        return cls == "ModelNew"  # a broken candidate is still a candidate: it gets a verdict
    return any(isinstance(n, ast.ClassDef) and n.name == cls for n in tree.body)


def pair_directory(task_dir: Path, cand_dir: Path) -> list[tuple[Path, list[Path]]]:
    """Match candidates `<task>_*.py` (longest task-name prefix wins) to tasks `<task>.py`."""
    tasks = sorted(p for p in task_dir.glob("*.py") if defines_class(p, "Model") and not defines_class(p, "ModelNew"))
    cands = sorted(p for p in cand_dir.glob("*.py") if p not in tasks and defines_class(p, "ModelNew"))
    pairs: dict[Path, list[Path]] = {t: [] for t in tasks}
    for c in cands:
        owners = [t for t in tasks if c.stem.startswith(t.stem + "_") or c.stem == t.stem]
        if owners:
            pairs[max(owners, key=lambda t: len(t.stem))].append(c)
    return [(t, cs) for t, cs in pairs.items() if cs]


def repaired_name(candidate: Candidate, round_: int) -> str:
    return f"{candidate.name}.repaired" + (f"{round_}" if round_ > 1 else "")


def evaluate_batch(
    executor: Executor,
    work: Sequence[tuple[Task, Candidate]],
    *,
    repair: bool = True,
    sanitize: bool = False,
    on_stage: StageCallback | None = None,
    on_result: Callable[[Evaluated], None] | None = None,
    ordered: bool = True,
) -> list[Evaluated]:
    """Every (task, candidate) of `work` evaluated (each task's own model first, alone), and with `repair` each
    repairable one's repair too, submitted as soon as the original's verdict is in, so its build overlaps the rest
    of the batch. `on_result` is called on the caller's thread with each candidate's result, in the order of `work`,
    as soon as it and every result before it are complete (without `ordered`: as soon as it is complete). Raises only
    `EvaluationCancelled`."""
    futures: dict[Future[Verdict], _Item] = {}

    def submit(item: _Item) -> None:
        future = executor.submit(
            item.task, item.candidate, on_stage=on_stage, sanitize=sanitize, reference=item.round == 0
        )
        futures[future] = item

    for i, (task, cand) in enumerate(work):
        submit(_Item(i, task, cand))
    results: dict[int, Evaluated] = {}
    complete: set[int] = set()
    said = 0
    try:
        while futures:
            done, _ = wait(list(futures), return_when=FIRST_COMPLETED)
            for future in sorted(done, key=lambda f: (futures[f].index, futures[f].round)):
                item = futures.pop(future)
                verdict = future.result()  # raises EvaluationCancelled
                if item.round == 0:
                    results[item.index] = Evaluated(item.task, item.candidate, verdict)
                else:
                    results[item.index].repair = RepairOutcome(
                        source=item.candidate.source,
                        fixes=item.fixes,
                        remaining=item.remaining,
                        rounds=item.round,
                        verdict=verdict,
                    )
                nxt = _next_repair(item, verdict) if repair and item.round < REPAIR_ROUNDS else None
                if nxt is not None:
                    submit(nxt)
                else:
                    complete.add(item.index)
                    if not ordered and on_result is not None:
                        on_result(results[item.index])
            while ordered and said in complete:
                if on_result is not None:
                    on_result(results[said])
                said += 1
    except BaseException:
        for future in futures:
            future.cancel()
        raise
    return [results[i] for i in range(len(work))]


def _next_repair(item: _Item, verdict: Verdict) -> _Item | None:
    """The repair of `item` its verdict calls for, as the next item; None when none applies."""
    if verdict.stages.get("reference", 0.0) < 0:  # the task's own model failed: nothing of the candidate's to repair
        return None
    found = repair_candidate(item.candidate.source, verdict, already=item.applied)
    if found is None or not found.fixes:
        return None
    round_ = item.round + 1
    # no path: the repaired source is not the file's text, so its lines are not the file's lines
    candidate = Candidate.from_source(found.source, repaired_name(_original(item), round_))
    return _Item(
        item.index,
        item.task,
        candidate,
        round_,
        applied=[*item.applied, *(f.kind for f in found.fixes)],
        fixes=[*item.fixes, *found.fixes],
        remaining=found.remaining,
    )


def _original(item: _Item) -> Candidate:
    name = item.candidate.name.split(".repaired", 1)[0]
    return item.candidate.model_copy(update={"name": name})


def summarize(results: Sequence[Evaluated], wall_s: float, busy: dict[str, float] | None = None) -> BatchSummary:
    """Counts of a batch (see `BatchSummary`); `busy`: each device's seconds of work (`Executor.busy_seconds`)."""
    by_status = Counter(r.verdict.status.value for r in results)
    by_domain = Counter(
        r.verdict.domain.describe() if r.verdict.domain is not None else "not stated"
        for r in results
        if r.verdict.status is Status.correct
    )
    failed = Counter(r.verdict.failed_check or r.verdict.status.value for r in results if not r.verdict.correct)
    narrowed = Counter(
        n.check for r in results if r.verdict.correct and r.verdict.domain for n in r.verdict.domain.narrowed
    )
    repairs = [r.repair for r in results if r.repair is not None]
    kinds = Counter(k for rep in repairs for k in rep.kinds)
    return BatchSummary(
        candidates=len(results),
        by_status=dict(by_status.most_common()),
        by_domain=dict(by_domain.most_common()),
        failed_checks=failed.most_common(),
        narrowed_by=narrowed.most_common(),
        repaired=len(repairs),
        repaired_correct=sum(rep.verdict.correct for rep in repairs),
        repaired_full_domain=sum(
            rep.verdict.correct and rep.verdict.domain is not None and rep.verdict.domain.full for rep in repairs
        ),
        repairs_by_kind=dict(kinds.most_common()),
        after_repair=dict(Counter(r.final.status.value for r in results).most_common()),
        wall_s=round(wall_s, 3),
        per_minute=round(60.0 * len(results) / wall_s, 2) if wall_s > 0 else 0.0,
        device_busy=round(min(1.0, sum(busy.values()) / (wall_s * len(busy))), 3) if busy and wall_s > 0 else None,
    )


class Stopwatch:
    """Wall time of a batch, from its making."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()

    def seconds(self) -> float:
        return time.perf_counter() - self.t0
