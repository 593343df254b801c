"""The model-style corpus (`corpus/model_style/`): every candidate has an expectation, every expectation is well
formed, and the automatic repairs derived from a verdict shaped like the expected one are the expected fixes (CPU);
on a GPU, candidates evaluated through forge eval's use case give their expected verdicts (`gpu`; the whole corpus
is `benchmarks/model_style_corpus.py`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from forge_lsp.engine import Domain, Narrowing, Status, Verdict
from forge_lsp.engine.repair import repair_candidate

pytestmark = pytest.mark.integration  # real processes end to end: left out of the fast loop (./dev test --fast)

ROOT = Path(__file__).resolve().parents[1]
CANDS = ROOT / "corpus" / "model_style" / "candidates"
TASKS = ROOT / "corpus" / "kernelbench" / "tasks"
EXPECTED: dict[str, dict] = {}
for _f in sorted((ROOT / "corpus" / "model_style" / "expected").glob("*.json")):
    EXPECTED.update(json.loads(_f.read_text()))
STATUSES = {s.value for s in Status}
STYLES = {
    "legacy_launch",
    "raw_data_ptr",
    "type_dispatch",
    "float4",
    "fixed_block",
    "hard_coded_size",
    "thread_per_row",
}


def test_every_candidate_has_a_well_formed_expectation_and_the_corpus_is_model_style():
    files = {p.stem for p in CANDS.glob("*.py")}
    assert files == set(EXPECTED) and len(files) >= 100
    tasks = {p.stem for p in TASKS.glob("*.py")}
    for name, e in EXPECTED.items():
        assert any(name.startswith(t + "_") for t in tasks), name
        assert e["status"] in STATUSES, name
        assert (e["failed_check"] is not None) == (e["status"] == "incorrect"), name
        if e["status"] == "correct":
            assert e["layouts"] in ("any", "contiguous") and e["streams"] in ("any", "default"), name
        else:
            assert e["layouts"] is None and e["streams"] is None, name
        assert e["why"].strip(), name
    styles = {t for e in EXPECTED.values() for t in e["style"]}
    assert STYLES <= styles, STYLES - styles  # every way models write kernels that the issue names
    assert sum("legacy_launch" in e["style"] for e in EXPECTED.values()) >= 60


def verdict_like(e: dict) -> Verdict:
    """A verdict with the expectation's status and domain, its limits found by the checks that find them."""
    if e["status"] != "correct":
        return Verdict(status=Status(e["status"]), failed_check=e["failed_check"])
    narrowed = []
    if e["layouts"] == "contiguous":
        narrowed.append(Narrowing(check="noncontiguous_inputs", axis="layouts", found="wrong_values", detail="-"))
    if e["streams"] == "default":
        narrowed.append(Narrowing(check="current_stream", axis="streams", found="wrong_values", detail="-"))
    return Verdict(status=Status.correct, domain=Domain(layouts=e["layouts"], streams=e["streams"], narrowed=narrowed))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_repair_of_each_candidate_is_the_expected_one(name):
    e = EXPECTED[name]
    found = repair_candidate((CANDS / f"{name}.py").read_text(), verdict_like(e))
    want = e["repaired"]
    if want is None:
        assert found is None or not found.fixes, (name, found.fixes if found else None)
        return
    assert found is not None, name
    assert sorted(f.kind for f in found.fixes) == sorted(want["applied"]), name
    compile(found.source, name, "exec")
    if "current_stream" in want["applied"]:
        assert "c10::cuda::getCurrentCUDAStream()" in found.source
    if "scalar_type" in want["applied"]:
        assert ".type()" not in found.source.replace(".scalar_type()", "")


@pytest.mark.gpu
def test_a_sample_of_the_corpus_gets_its_expected_verdicts_and_repairs_on_the_gpu(cache_dir):
    """One candidate of each expected outcome, through forge eval's use case on the GPU."""
    from forge_lsp.engine import EvalOptions, load_candidate, load_task
    from forge_lsp.engine.executors import make_executor
    from forge_lsp.usecases.evaluate import evaluate_batch

    sample: dict[tuple, str] = {}
    for name, e in sorted(EXPECTED.items()):
        sample.setdefault((e["status"], e["failed_check"], e["layouts"], e["streams"]), name)
    tasks = sorted(TASKS.glob("*.py"), key=lambda p: -len(p.stem))
    work = []
    for name in sample.values():
        task = next(t for t in tasks if name.startswith(t.stem + "_"))
        work.append((load_task(task), load_candidate(CANDS / f"{name}.py")))
    options = EvalOptions(timing_budget_s=0.2, min_reps=5, max_reps=20)
    with make_executor("local", "cuda:0", options=options, cache_dir=cache_dir) as ex:
        results = evaluate_batch(ex, work)
    wrong = []
    for r in results:
        e, v = EXPECTED[r.candidate.path.stem], r.verdict
        got = (
            v.status.value,
            v.failed_check,
            v.domain.layouts if v.correct else None,
            v.domain.streams if v.correct else None,
        )
        if got != (e["status"], e["failed_check"], e["layouts"], e["streams"]):
            wrong.append((r.candidate.name, got, v.reason[:200]))
        if e["repaired"] is not None and e["repaired"]["status"] == "correct":
            if r.repair is None or not r.repair.verdict.correct or not r.repair.verdict.domain.full:
                wrong.append((r.candidate.name, "repair", r.repair.verdict.reason[:200] if r.repair else None))
    assert not wrong, wrong
