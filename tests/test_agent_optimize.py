"""The optimization loop end to end on the CPU: a real chat-completions server on 127.0.0.1 with
scripted replies, real worker processes evaluating Triton-interpreter candidates, a real run store."""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys

import candidates as C
import pytest
from conftest import FIXTURES

from forge_lsp.agent.config import ModelSettings
from forge_lsp.agent.events import EventBus
from forge_lsp.agent.optimize import OptimizeOptions, Optimizer
from forge_lsp.agent.provider import ChatModel
from forge_lsp.agent.run_events import CandidateTimed, Profiled
from forge_lsp.agent.store import RunStore
from forge_lsp.engine import load_task
from forge_lsp.engine.local_pool import LocalPool

pytestmark = pytest.mark.integration  # real processes end to end: left out of the fast loop (./dev test --fast)

pytest_plugins = ["fake_openai"]

SECRET = "sk-forge-test-0123456789abcdef"


def variant(src: str, tag: str) -> str:
    """The same candidate with a distinct source (so it is a new candidate, not a duplicate)."""
    return src + f"\n# variant {tag}\n"


def coder_reply(source: str, summary: str) -> str:
    return json.dumps({"summary": summary, "source": source})


FAST_CPU = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)
"""

REPAIR = json.dumps({"critical_issue": "unbalanced parenthesis in the max reduction", "fix": "remove the stray ')'"})
OPTIMIZE = json.dumps({"bottleneck": "one pass per row", "method": "fuse", "plan": "keep the row in registers"})


def is_judge(request: dict) -> bool:
    return "You are the Judge" in request["messages"][0]["content"]


@pytest.fixture()
def evaluator(cache_dir, fast_options):
    ev = LocalPool("cpu", options=fast_options, cache_dir=cache_dir, build_workers=0)
    yield ev
    ev.close()


def optimizer(tmp_path, evaluator, server, prices=None, timeout_s=5.0, first_token_s=90.0, **opts) -> Optimizer:
    model = ChatModel(
        ModelSettings(
            model="scripted",
            base_url=server.base_url,
            timeout_s=timeout_s,
            first_token_s=first_token_s,
            max_retries=2,
        ),
        api_key=SECRET,
        sleep=lambda s: None,
        prices=prices,
    )
    store = RunStore.for_workspace(tmp_path)
    options = OptimizeOptions(**({"rounds": 2, "concurrency": 1, "final_retime": False, "offline": False} | opts))
    return Optimizer(
        load_task(FIXTURES / "softmax_small.py"),
        store=store,
        evaluator=evaluator,
        options=options,
        coder=model,
        judge=model,
        bus=EventBus(store),
    )


def test_linear_round_repairs_a_scripted_compile_error(tmp_path, evaluator, fake_openai):
    fake_openai.script(
        coder_reply(C.TRITON_COMPILE_ERROR, "first try"),
        REPAIR,
        coder_reply(variant(C.TRITON_CORRECT, "fixed"), "fixed the reduction"),
    )
    opt = optimizer(tmp_path, evaluator, fake_openai, search="linear")
    result = opt.run()
    cands = opt.store.candidates(result.run_id)
    assert [c.origin for c in cands] == ["coder", "repair"]
    assert cands[0].verdict.status == "compile_error" and cands[1].correct
    assert cands[1].parent_id == cands[0].id and "stray" in cands[1].instruction
    judge_request = next(r for r in fake_openai.chat_requests if is_judge(r.body))
    assert "compile_error" in judge_request.messages[1]["content"]  # the Judge saw the failing verdict
    assert result.best.id == cands[1].id and result.status == "done"
    calls = opt.store.calls(result.run_id)
    assert [c.role for c in calls] == ["coder", "judge", "coder"] and all(c.error is None for c in calls)
    # once a verdict exists, the Coder sees the real input shapes and dtypes
    coder_prompts = [r.messages[1]["content"] for r in fake_openai.chat_requests if not is_judge(r.body)]
    assert "float32 tensor of shape (16, 100)" not in coder_prompts[0]
    assert "float32 tensor of shape (16, 100)" in coder_prompts[1]


@pytest.mark.slow
def test_mcts_expands_more_than_one_branch_with_concurrent_expansions(tmp_path, evaluator, fake_openai):
    counter = iter(range(100))

    def reply(request: dict) -> str:
        if is_judge(request):
            return OPTIMIZE
        n = next(counter)
        return coder_reply(variant(C.TRITON_CORRECT, str(n)), f"variant {n}")

    fake_openai.script(*[reply] * 40)
    opt = optimizer(tmp_path, evaluator, fake_openai, search="mcts", rounds=3, concurrency=2)
    result = opt.run()
    cands = opt.store.candidates(result.run_id)
    roots = [c for c in cands if c.parent_id is None]
    assert len(roots) >= 2, [(c.id, c.parent_id) for c in cands]  # several branches from the reference
    assert any(c.parent_id is not None for c in cands)  # and deeper refinement of one of them
    assert len(cands) == 6 and all(c.correct for c in cands), [
        (c.id, c.parent_id, c.verdict.status if c.verdict else None, c.verdict.reason[:200] if c.verdict else "")
        for c in cands
    ]
    assert result.rounds == 3


def test_dollar_budget_stops_the_run(tmp_path, evaluator, fake_openai):
    fake_openai.script(
        *[
            lambda r, i=i: OPTIMIZE if is_judge(r) else coder_reply(variant(C.TRITON_CORRECT, f"b{i}"), f"b{i}")
            for i in range(20)
        ]
    )
    # the fake server reports token usage; at this price every call costs more than $0.2
    opt = optimizer(
        tmp_path, evaluator, fake_openai, prices={"scripted": (1e6, 1e6)}, search="linear", rounds=10, budget_usd=0.5
    )
    result = opt.run()
    assert "dollar budget" in result.stop_reason
    assert result.spent_usd >= 0.5 and result.rounds < 10


@pytest.mark.slow
def test_resume_continues_a_killed_run_without_repeating_evaluations(tmp_path, evaluator, fake_openai):
    fake_openai.script(coder_reply(variant(C.TRITON_CORRECT, "r1"), "first"))
    opt = optimizer(tmp_path, evaluator, fake_openai, search="linear", rounds=1)
    first = opt.run()
    store = opt.store
    # a kill while a candidate was queued: it is in the store, not evaluated, the run marked running
    queued = store.add_candidate(
        first.run_id, variant(C.TRITON_CORRECT, "queued"), parent_id=None, origin="coder", summary="queued when killed"
    )
    store.set_run_status(first.run_id, "running", "killed")
    evaluated_before = {c.id: c.evaluated for c in store.candidates(first.run_id) if c.evaluated}

    seen: list[str] = []
    real = evaluator.evaluate_many

    def counting(task, cands, **kw):
        seen.extend(c.source for c in cands)
        return real(task, cands, **kw)

    evaluator.evaluate_many = counting
    fake_openai.script(OPTIMIZE, coder_reply(variant(C.TRITON_CORRECT, "r2"), "second"))
    resumed = optimizer(tmp_path, evaluator, fake_openai, search="linear", rounds=2).run(resume=first.run_id)
    assert resumed.run_id == first.run_id and resumed.rounds == 2  # one round before the kill, one after
    after = {c.id: c for c in store.candidates(first.run_id)}
    assert after[queued.id].status == "evaluated" and after[queued.id].correct
    for cid, when in evaluated_before.items():
        assert after[cid].evaluated == when  # finished evaluations were not repeated
    assert seen == [queued.source, variant(C.TRITON_CORRECT, "r2")]


@pytest.mark.slow
def test_model_failures_are_recorded_and_the_run_goes_on(tmp_path, evaluator, fake_openai):
    fake_openai.script(
        {"status": 429, "headers": {"Retry-After": "0"}},
        "this is not json at all",
        coder_reply(variant(C.TRITON_CORRECT, "after-429"), "after a 429 and a bad reply"),
        OPTIMIZE,
        {"refusal": "I can't help with that"},
        OPTIMIZE,
        coder_reply(variant(C.TRITON_CORRECT, "after-refusal"), "after a refusal"),
    )
    opt = optimizer(tmp_path, evaluator, fake_openai, search="linear", rounds=3)
    result = opt.run()
    cands = opt.store.candidates(result.run_id)
    assert [c.summary for c in cands] == ["after a 429 and a bad reply", "after a refusal"]
    errors = [c.error for c in opt.store.calls(result.run_id) if c.error]
    assert len(errors) == 1 and errors[0].startswith("refusal")
    assert result.status == "done"


def test_a_bad_key_ends_the_run_with_a_clear_reason(tmp_path, evaluator, fake_openai):
    fake_openai.script({"status": 401})
    result = optimizer(tmp_path, evaluator, fake_openai, rounds=2).run()
    assert result.status == "failed" and "401" in result.stop_reason and SECRET not in result.stop_reason


@pytest.mark.slow
def test_no_api_key_in_database_logs_or_worker_environment(tmp_path, evaluator, fake_openai, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    env_dump = tmp_path / "worker_env.json"
    spy = variant(C.TRITON_CORRECT, "spy").replace(
        "class ModelNew(nn.Module):",
        f"import os, json\nopen({str(env_dump)!r}, 'w').write(json.dumps(dict(os.environ)))\n"
        "class ModelNew(nn.Module):",
    )
    fake_openai.script(coder_reply(spy, f"reads the environment (the key is {SECRET})"))
    opt = optimizer(tmp_path, evaluator, fake_openai, search="linear", rounds=1)
    result = opt.run()
    assert fake_openai.chat_requests[0].headers["authorization"] == f"Bearer {SECRET}"  # the key did go to the model
    assert opt.store.candidates(result.run_id)[0].correct
    worker_env = json.loads(env_dump.read_text())
    assert SECRET not in json.dumps(worker_env) and "OPENAI_API_KEY" not in worker_env
    opt.store.close()
    stored = b"".join(p.read_bytes() for p in (tmp_path / ".forge").iterdir())
    assert SECRET.encode() not in stored
    for log in evaluator.cache_dir.rglob("*.log"):
        assert SECRET not in log.read_text(errors="replace")


def test_forge_optimize_without_a_model_says_how_to_configure_one(tmp_path):
    task = tmp_path / "softmax_small.py"
    task.write_text((FIXTURES / "softmax_small.py").read_text())
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "FORGE_MODEL")}
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "forge_lsp.cli.main",
            "optimize",
            str(task),
            "--device",
            "cpu",
            "--no-offline",
            "--cache-dir",
            str(tmp_path / "cache"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
    )
    assert "No model configured" in r.stderr and re.search(r"OPENAI_API_KEY|FORGE_MODEL|\[tool\.forge\]", r.stderr)
    assert r.returncode == 1  # nothing to evaluate: no candidate
    runs = subprocess.run(
        [sys.executable, "-m", "forge_lsp.cli.main", "runs", "--workspace", str(tmp_path), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    (run,) = json.loads(runs.stdout)
    assert run["task"] == str(task) and run["status"] == "done" and run["candidates"] == 0
    assert "no model configured" in run["message"]


def optimize_apply_one_round(tmp_path, task, fake) -> subprocess.CompletedProcess:
    """`forge optimize TASK --apply`: one linear round on the CPU with the scripted model, no offline seeds."""
    (tmp_path / "forge.toml").write_text(f'model = "scripted"\nbase_url = "{fake.base_url}"\n')
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "FORGE_MODEL")} | {"OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "forge_lsp.cli.main",
            "optimize",
            str(task),
            "--device",
            "cpu",
            "--no-offline",
            "--rounds",
            "1",
            "--search",
            "linear",
            "--apply",
            "--cache-dir",
            str(tmp_path / "cache"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
    )


@pytest.mark.slow
def test_forge_optimize_apply_rewrites_the_class_in_place(tmp_path, fake_openai):
    """`forge optimize --apply`: the same guarded rewrite the editor's Accept uses, written to the task file."""
    task = tmp_path / "softmax_mod.py"
    task.write_text((FIXTURES / "slow_softmax.py").read_text())
    fast = (
        "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
        "        return torch.softmax(x, dim=1)\n"
    )
    fake_openai.script(coder_reply(fast, "vectorized softmax"))
    r = optimize_apply_one_round(tmp_path, task, fake_openai)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "applied to" in r.stdout
    check = (
        f"import sys, torch; sys.path.insert(0, {str(tmp_path)!r}); sys.path.insert(0, {str(FIXTURES)!r})\n"
        "import softmax_mod as m, slow_softmax as ref\n"
        "x = ref.get_inputs()[0]\n"
        "y = m.Model()(x)\n"
        "print(torch.allclose(y, ref.Model()(x), atol=1e-6), m.Model._forge_calls['optimized'])"
    )
    out = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["True", "1"], out.stderr[-2000:]


@pytest.mark.slow
def test_forge_optimize_apply_refuses_a_best_candidate_slower_than_the_reference(tmp_path, fake_openai):
    """The best *verified* candidate can still be slower than the user's code: nothing is applied or written."""
    task = tmp_path / "softmax_mod.py"
    original = (FIXTURES / "softmax_small.py").read_text()
    task.write_text(original)
    slow = (
        "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
        "        return torch.stack([torch.softmax(row, dim=0) for row in x])\n"
    )
    fake_openai.script(coder_reply(slow, "one row at a time"))
    r = optimize_apply_one_round(tmp_path, task, fake_openai)
    out = " ".join(r.stdout.split())
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-3000:]
    assert "no verified candidate is faster than the reference" in out and "was not applied" in out
    assert re.search(r"it is \d+(\.\d\d)?× slower than the reference", out), out
    assert task.read_text() == original and not (tmp_path / "softmax_mod_forge_best.py").exists()


@pytest.mark.slow
def test_a_best_candidate_that_fails_its_final_recheck_is_not_the_answer(tmp_path, evaluator, fake_openai):
    """A candidate that passes in the search and lies afterwards: the final re-check catches it."""
    armed = tmp_path / "armed"
    liar = f"""
import os
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.softmax(x, dim=1)
        return y + 1 if os.path.exists({str(armed)!r}) else y
"""
    fake_openai.script(coder_reply(liar, "softmax"))
    opt = optimizer(tmp_path, evaluator, fake_openai, search="linear", rounds=1, final_retime=True)
    opt.bus.subscribe(lambda ev: armed.touch() if isinstance(ev.event, CandidateTimed) and not ev.event.final else None)
    result = opt.run()
    assert result.best is not None and result.best.correct  # the search saw a correct candidate
    assert result.final_failure is not None and "elements outside atol" in result.final_failure
    assert result.answer_speedup is None and not result.improves
    assert any("failed its final re-check" in n for n in result.notes)


@pytest.mark.slow
def test_judge_profiles_at_most_once_per_interval_and_says_when_findings_are_inherited(
    tmp_path, evaluator, fake_openai
):
    profiled: list[str] = []

    def profile(task, candidate):
        profiled.append(candidate.name)
        return {
            "mode": "ncu",
            "roofline": {"bound": "memory", "pct_of_roof": 40.0, "arithmetic_intensity": 0.5},
            "findings": [{"title": f"Finding for {candidate.name}", "suggestion": "do better", "lines": []}],
        }

    fake_openai.script(
        *[
            lambda r, i=i: OPTIMIZE if is_judge(r) else coder_reply(variant(FAST_CPU, f"p{i}"), f"p{i}")
            for i in range(20)
        ]
    )
    opt = optimizer(tmp_path, evaluator, fake_openai, search="linear", rounds=5, profile_interval=3)
    opt.profile = profile
    opt.run()
    # judged rounds 2..5 each refine the latest candidate; fresh profiles only in rounds 2 and 5
    assert len(profiled) == 2, profiled
    judge_prompts = [r.messages[1]["content"] for r in fake_openai.chat_requests if is_judge(r.body)]
    assert len(judge_prompts) == 4
    assert "measured on its ancestor" not in judge_prompts[0] and "measured on its ancestor" in judge_prompts[1]
    assert all("Finding for" in p for p in judge_prompts)


REPLAY_NCU = """#!/bin/sh
# ncu, replaying a report recorded on the H200 (tests/fixtures/ncu): writes it where -o says, and the
# profiled process's result (the device's name) beside its request, as the real run would
out=""; req=""; prev=""
for a in "$@"; do
  [ "$prev" = "-o" ] && out="$a"
  case "$a" in *request.json) req="$a";; esac
  prev="$a"
done
gunzip -c {recorded} > "$out"
printf '{{"device_name": "{device}", "stages_s": {{}}}}' > "${{req%.json}}.result.json"
"""


@pytest.mark.slow
def test_a_profiled_candidate_is_placed_on_the_roofline_in_its_run_and_its_report(
    tmp_path, evaluator, fake_openai, monkeypatch
):
    """The Judge's hardware feedback as the optimizer gets it on a GPU (`judge_feedback`: Nsight Compute's
    report read with ncu_report, the device's peaks from forge's cache, the kernel placed on the roofline),
    here with an ncu that replays a report recorded on the H200 and the peaks measured in the same session:
    the `profiled` event carries the candidate's roofline placement and the ceilings it was placed under, and
    the run's report data places the candidate from it."""
    from forge_lsp.profiler.model import DevicePeaks
    from forge_lsp.profiler.peaks import driver_version, peaks_cache_path
    from forge_lsp.profiler.report import read_report
    from forge_lsp.profiler.roofline import place
    from forge_lsp.report.data import gather
    from forge_lsp.usecases.explain import judge_feedback

    pytest.importorskip("ncu_report", reason="NVIDIA's ncu-report reader is a dev dependency")
    recorded = FIXTURES / "ncu" / "good_copy.ncu-rep.gz"
    peaks = DevicePeaks.model_validate_json((FIXTURES / "ncu" / "peaks.json").read_text())
    ncu = tmp_path / "ncu"
    ncu.write_text(REPLAY_NCU.format(recorded=recorded, device=peaks.name))
    ncu.chmod(0o755)
    monkeypatch.setenv("NCU", str(ncu))
    cache = tmp_path / "profile-cache"
    cached = peaks_cache_path(cache, peaks.name, driver_version())  # as measured earlier on this device
    cached.parent.mkdir(parents=True)
    cached.write_text(peaks.model_dump_json())

    fake_openai.script(
        *[
            lambda r, i=i: OPTIMIZE if is_judge(r) else coder_reply(variant(FAST_CPU, f"r{i}"), f"r{i}")
            for i in range(6)
        ]
    )
    opt = optimizer(tmp_path, evaluator, fake_openai, search="linear", rounds=2)
    opt.profile = judge_feedback("cuda:0", cache_dir=cache)
    result = opt.run()
    events = [e for e in opt.store.events(result.run_id) if isinstance(e.event, Profiled) and e.event.phase == "done"]
    assert len(events) == 1, [e.event for e in opt.store.events(result.run_id) if e.kind == "profiled"]
    done = events[0].event
    assert done.mode == "ncu" and done.kernel == "scale4"

    # the placement is roofline.place of the recorded kernel under the cached peaks, with those peaks
    (gunzipped := tmp_path / "good_copy.ncu-rep").write_bytes(gzip.decompress(recorded.read_bytes()))
    (kernel,) = read_report(gunzipped)
    expected = place(kernel, peaks)
    roof = done.roofline
    for key in ("arithmetic_intensity", "achieved_flops_per_s", "achieved_bytes_per_s"):
        assert roof[key] > 0 and roof[key] == pytest.approx(getattr(expected, key)), key
    assert roof["bound"] == "memory" and roof["pct_of_roof"] == pytest.approx(expected.pct_of_roof)
    assert done.pct_of_roof == roof["pct_of_roof"]
    assert roof["compute_pipe"] == "fp32" and roof["compute_roof_flops_per_s"] == peaks.fp32_flops_per_s
    assert roof["dram_bytes_per_s"] == peaks.dram_bytes_per_s
    assert roof["peaks_device"] == "NVIDIA H200" and roof["peaks_source"] == "measured"

    # the report places that candidate (and only it: the other was never profiled)
    data = gather(opt.store, result.run_id, peaks=peaks, peaks_note="measured")
    rows = {r.id: r for r in data.candidates}
    placed = [r for r in rows.values() if r.roofline]
    assert [r.id for r in placed] == [(done.candidate or "").split("/")[-1]] and placed[0].correct
    assert placed[0].profiled and placed[0].roofline == roof


@pytest.mark.slow
def test_cost_is_reported_per_call_per_round_and_per_run(tmp_path, evaluator, fake_openai):
    from forge_lsp.agent.store import costs_by_round

    fake_openai.script(
        *[
            lambda r, i=i: OPTIMIZE if is_judge(r) else coder_reply(variant(C.TRITON_CORRECT, f"cost{i}"), f"cost{i}")
            for i in range(10)
        ]
    )
    opt = optimizer(tmp_path, evaluator, fake_openai, prices={"scripted": (1.0, 2.0)}, search="linear", rounds=3)
    result = opt.run()
    calls = opt.store.calls(result.run_id)
    assert len(calls) == 5 and all(c.cost_usd and c.cost_usd > 0 for c in calls)  # coder; then judge+coder twice
    per_round = costs_by_round(opt.store, result.run_id)
    assert [r["round"] for r in per_round] == [1, 2, 3] and [r["calls"] for r in per_round] == [1, 2, 2]
    assert sum(r["cost_usd"] for r in per_round) == pytest.approx(result.spent_usd)
    assert result.spent_usd == pytest.approx(sum(c.cost_usd for c in calls))
    out = subprocess.run(
        [sys.executable, "-m", "forge_lsp.cli.main", "show", result.run_id, "--workspace", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "model calls per round" in out.stdout and out.returncode == 0


@pytest.mark.slow
def test_wall_time_budget_stops_the_run(tmp_path, evaluator, fake_openai):
    fake_openai.script(
        *[
            lambda r, i=i: OPTIMIZE if is_judge(r) else coder_reply(variant(C.TRITON_CORRECT, f"w{i}"), f"w{i}")
            for i in range(20)
        ]
    )
    opt = optimizer(tmp_path, evaluator, fake_openai, search="linear", rounds=50, wall_s=6.0)
    result = opt.run()
    assert "wall-time budget" in result.stop_reason and 1 <= result.rounds < 50


def test_an_endpoint_that_never_answers_ends_the_run_with_a_clear_reason(tmp_path, evaluator, fake_openai):
    """One request's retries, not one per round: a model that has not answered once in the run is given up."""
    fake_openai.script(*[{"delay": 30.0}] * 9)
    result = optimizer(tmp_path, evaluator, fake_openai, timeout_s=0.4, rounds=3).run()
    assert result.status == "failed", result.stop_reason
    assert "never answered" in result.stop_reason and "no first token" in result.stop_reason
    assert "within 0.4 s" in result.stop_reason
    assert len(fake_openai.chat_requests) == 2  # the first call's 2 first-token waits, no further round


def test_a_model_call_that_waits_says_so_every_two_seconds_to_live_consumers_only(tmp_path, evaluator, fake_openai):
    """`model_waiting` reaches subscribers while a call is blocked on a silent endpoint; it is not stored."""
    fake_openai.script(*[{"delay": 30.0}] * 4)
    opt = optimizer(tmp_path, evaluator, fake_openai, first_token_s=2.6, rounds=1)
    seen = []
    opt.bus.subscribe(lambda e: seen.append(e) if e.kind == "model_waiting" else None)
    result = opt.run()
    assert "no first token" in result.stop_reason
    assert [round(e.event.seconds) for e in seen][:2] == [2, 4]  # the wait goes on across the call's retry
    assert all(e.event.role == "coder" and e.event.pieces == 0 for e in seen)
    assert not [e for e in opt.store.events(result.run_id) if e.kind == "model_waiting"]


CONTIGUOUS_ONLY = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        rows, cols = x.shape
        return torch.softmax(x.as_strided((rows, cols), (cols, 1)), dim=1)  # reads x as row-major memory
"""


def test_a_known_limit_is_repaired_by_forge_before_the_models_are_asked_again(tmp_path, evaluator, fake_openai):
    """The Coder's candidate is right for contiguous inputs only: forge derives the repaired child itself (no model
    call), verifies it on the full domain, and the Judge then reads the original's limits and forge's repair."""
    fake_openai.script(
        coder_reply(CONTIGUOUS_ONLY, "row-major view"),
        OPTIMIZE,
        coder_reply(variant(FAST_CPU, "next"), "plain softmax"),
    )
    opt = optimizer(tmp_path, evaluator, fake_openai, search="linear", rounds=2)
    result = opt.run()
    cands = opt.store.candidates(result.run_id)
    assert [c.origin for c in cands][:2] == ["coder", "auto-repair"], [(c.id, c.origin) for c in cands]
    first, repaired = cands[0], cands[1]
    assert first.correct and first.verdict.domain.layouts == "contiguous"
    assert repaired.parent_id == first.id and repaired.correct and repaired.verdict.domain.layouts == "any"
    assert ".contiguous()" in repaired.source and "contiguous_inputs" in repaired.summary
    calls = opt.store.calls(result.run_id)
    assert [c.role for c in calls][:1] == ["coder"] and len(calls) == 3  # the repair cost no model call
    judge_prompts = [r.messages[1]["content"] for r in fake_openai.chat_requests if is_judge(r.body)]
    # the linear search refines the latest correct candidate: forge's repair, with no limit left to lift
    assert len(judge_prompts) == 1 and "Verified domain" not in judge_prompts[0]
    assert ".contiguous()" in judge_prompts[0]  # the Judge reads the repaired source


def test_the_judges_prompts_name_a_candidates_remaining_limits_and_forges_repair(tmp_path):
    """A candidate correct on a narrowed domain, and forge's repair of it that still fails: the Judge's optimize
    prompt names the limits, its repair prompt what forge fixed and what it could not."""
    from forge_lsp.agent.optimize import _as_data, _cand_ctx
    from forge_lsp.agent.roles import Prompts, judge_optimize_messages, judge_repair_messages
    from forge_lsp.engine import Domain, Narrowing, Status, Verdict

    store = RunStore.for_workspace(tmp_path)
    run = store.create_run(FIXTURES / "softmax_small.py", "Model", "src", {})
    narrowed = Domain(
        layouts="contiguous",
        streams="default",
        narrowed=[Narrowing(check="current_stream", axis="streams", found="wrong_values", detail="read before ready")],
    )
    rec = store.add_candidate(run, CONTIGUOUS_ONLY, parent_id=None, origin="coder", summary="fast")
    store.set_verdict(rec.id, Verdict(status=Status.correct, domain=narrowed), correct=True, speedup=2.0)
    fix = "3 kernel launches moved to the current stream. Not repaired: cupy.RawKernel launches stay on CuPy's stream"
    child = store.add_candidate(run, "src", parent_id=rec.id, origin="auto-repair", summary="r", instruction=fix)
    failed = Verdict(status=Status.incorrect, failed_check="outputs_match", reason="wrong", domain=narrowed)
    store.set_verdict(child.id, failed, correct=False, speedup=None)
    ctx = {"model_class": "Model", "reference_source": "ref", "vary": [], "inputs": [], "device_type": "cuda"}
    optimize = judge_optimize_messages(
        Prompts(),
        ctx,
        candidate=_cand_ctx(store.get_candidate(rec.id)),
        timing=None,
        roofline=None,
        findings=[],
        tried=[],
    )[1]["content"]
    assert "Verified domain: contiguous inputs only; the default stream only" in optimize
    assert "read before ready" in optimize
    child_rec = store.get_candidate(child.id)
    repair = judge_repair_messages(Prompts(), ctx, candidate=_cand_ctx(child_rec), verdict=_as_data(child_rec.verdict))
    text = repair[1]["content"]
    assert "forge already repaired this candidate automatically, and it still fails" in text
    assert "Not repaired: cupy.RawKernel launches" in text
    assert "Even once fixed, it is verified for contiguous inputs only" in text
