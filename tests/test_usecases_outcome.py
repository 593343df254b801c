"""What an optimization run says it found (`usecases.optimize.answer_of`, `OptimizeResult.words`): the outcome
first, in the same words the CLI and the report use. Pure: run outcomes built here, no worker, no model."""

from __future__ import annotations

from forge_lsp.agent.optimize import RunOutcome
from forge_lsp.agent.store import CandidateRecord
from forge_lsp.engine import Status, Verdict
from forge_lsp.engine.verdict import Domain
from forge_lsp.usecases.optimize import OptimizeResult, answer_of


def outcome(status="done", stop="round budget spent", best=None, speedup=None, final=None, failure=None, model=True):
    return RunOutcome(
        run_id="r1",
        status=status,
        stop_reason=stop,
        best=best,
        best_speedup=speedup,
        rounds=2,
        candidates=3,
        spent_usd=0.0,
        model_configured=model,
        final_speedup=final,
        final_failure=failure,
    )


def record(speedup: float) -> CandidateRecord:
    verdict = Verdict(
        status=Status.correct,
        reason="all checks passed",
        checkpoint_compatible=True,
        domain=Domain(sizes=["the task's own"], dtypes=["float32"], layouts="any"),
    )
    return CandidateRecord(
        id="c2",
        run_id="r1",
        parent_id=None,
        seq=2,
        origin="coder",
        summary="fused",
        instruction="",
        source="class ModelNew: ...",
        source_sha="x",
        status="evaluated",
        verdict=verdict,
        speedup=speedup,
        correct=True,
    )


def said(o: RunOutcome) -> tuple[str | None, str]:
    answer, withheld, message = answer_of(o)
    return withheld, OptimizeResult(o, None, answer, withheld, message).words  # type: ignore[arg-type]


def test_a_faster_candidate_is_said_with_its_final_re_timing_first():
    withheld, words = said(outcome(best=record(1.5), speedup=1.5, final=1.42))
    assert withheld is None and words == "1.42× (final re-timing; search 1.50×) faster candidate found"


def test_a_slower_best_is_no_faster_candidate_and_nothing_written():
    withheld, words = said(outcome(best=record(1.2), speedup=1.2, final=0.97))
    assert withheld == "not_faster"
    assert (
        words
        == "no faster candidate, nothing written: no verified candidate faster than the reference (round budget spent)"
    )


def test_without_a_model_the_words_say_only_offline_candidates_ran():
    withheld, words = said(outcome(model=False))
    assert withheld == "no_candidate"
    assert words.startswith("no faster candidate, nothing written: no offline candidate beat the reference")


def test_a_best_that_fails_its_final_re_check_is_not_offered_and_says_why():
    withheld, words = said(outcome(best=record(2.0), speedup=2.0, final=None, failure="outputs_match: 3 elements"))
    assert withheld == "recheck_failed"
    assert words.startswith("no faster candidate, nothing written: the best candidate failed its final re-check")
    assert words.endswith("outputs_match: 3 elements")


def test_failed_and_cancelled_runs_say_so_and_nothing_else():
    assert said(outcome(status="failed", stop="the task's reference raised")) == (
        "failed",
        "the task's reference raised",
    )
    assert said(outcome(status="cancelled")) == ("cancelled", "cancelled")
