"""How wide a round of the tree search is, and what it does with its width, on the CPU: a real chat-completions server
on 127.0.0.1 with scripted replies, real worker processes, a real run store (its events, with their timestamps).

An MCTS round expands max(concurrency, the executor's capacity) targets: their Coder calls run at once, and the new
candidates are evaluated together — at once, where the executor has the devices for it (here a Ray instance with
two CPU actors: capacity 2, with concurrency 1), queued together before any is evaluated on a one-device pool."""

from __future__ import annotations

import json
import threading
import time

import candidates as C
import pytest
from conftest import FIXTURES, short_tmp, start_local_ray

from forge_lsp.agent.config import ModelSettings
from forge_lsp.agent.events import EventBus
from forge_lsp.agent.optimize import OptimizeOptions, Optimizer
from forge_lsp.agent.provider import ChatModel
from forge_lsp.agent.store import EventRecord, RunStore
from forge_lsp.engine import load_task
from forge_lsp.engine.executor import Executor
from forge_lsp.engine.local_pool import LocalPool

pytestmark = pytest.mark.integration  # real processes end to end: left out of the fast loop (./dev test --fast)

pytest_plugins = ["fake_openai"]

#: how long the scripted model takes to answer each Coder call
MODEL_DELAY_S = 1.0
#: how long each candidate takes to load (its module sleeps): long beside the Ray executor's 0.25 s event polling
LOAD_S = 3.0


def slow_loading(tag: str) -> str:
    """A correct candidate whose module takes LOAD_S to load (the `compile` stage), distinct per tag."""
    src = C.TORCH_CORRECT.replace("import torch\n", f"import time, torch\ntime.sleep({LOAD_S})\n", 1)
    return src + f"\n# variant {tag}\n"


class ScriptedCoder:
    """Coder replies, each after MODEL_DELAY_S; records when each request arrived."""

    def __init__(self, make_source=slow_loading) -> None:
        self.make_source = make_source
        self.arrivals: list[float] = []
        self._lock = threading.Lock()

    def __call__(self, request: dict) -> dict:
        assert "You are the Judge" not in request["messages"][0]["content"]  # round 1 expands the root: no Judge
        with self._lock:
            self.arrivals.append(time.monotonic())
            n = len(self.arrivals)
        reply = {"summary": f"variant {n}", "source": self.make_source(str(n))}
        return {"delay": MODEL_DELAY_S, "content": json.dumps(reply)}


def one_round(tmp_path, executor: Executor, server, **opts) -> tuple[Optimizer, object]:
    model = ChatModel(
        ModelSettings(model="scripted", base_url=server.base_url, timeout_s=10.0, max_retries=0),
        api_key="sk-forge-test",
        sleep=lambda s: None,
    )
    store = RunStore.for_workspace(tmp_path)
    options = OptimizeOptions(
        **({"search": "mcts", "rounds": 1, "final_retime": False, "offline": False, "roofline_stop": None} | opts)
    )
    opt = Optimizer(
        load_task(FIXTURES / "softmax_small.py"),
        store=store,
        evaluator=executor,
        options=options,
        coder=model,
        judge=model,
        bus=EventBus(store),
    )
    return opt, opt.run()


def spans(events: list[EventRecord]) -> dict[str, tuple[float, float]]:
    """candidate -> (its first evaluation stage, its verdict), from the stored events' timestamps."""
    first: dict[str, float] = {}
    end: dict[str, float] = {}
    for e in events:
        cand = getattr(e.event, "candidate", None)
        if e.kind in ("candidate_stage", "candidate_compiled"):
            first.setdefault(cand, e.ts)
        elif e.kind in ("candidate_verified", "candidate_failed"):
            end[cand] = e.ts
    return {c: (first[c], end[c]) for c in end}


def check_round(opt: Optimizer, result, coder: ScriptedCoder) -> tuple[list, list[EventRecord]]:
    """The run made one round of two targets, whose Coder calls were in flight at once, and two correct candidates."""
    assert result.status == "done" and result.rounds == 1, result.stop_reason
    events = opt.store.events(result.run_id)
    rounds = [e for e in events if e.kind == "round"]
    assert len(rounds) == 1 and len(rounds[0].event.targets) == 2, [e.event for e in rounds]
    # the second Coder request arrived before the first was answered: the expansions ran concurrently
    assert len(coder.arrivals) == 2
    assert abs(coder.arrivals[1] - coder.arrivals[0]) < MODEL_DELAY_S / 2, coder.arrivals
    cands = opt.store.candidates(result.run_id)
    assert len(cands) == 2 and all(c.correct for c in cands), [
        (c.id, c.verdict.status if c.verdict else None, c.verdict.reason[:300] if c.verdict else "") for c in cands
    ]
    return cands, events


@pytest.mark.slow  # a Ray instance and its actors
def test_an_mcts_round_as_wide_as_the_executor_evaluates_its_candidates_at_once(
    tmp_path, tmp_path_factory, fake_openai, cache_dir, fast_options, monkeypatch
):
    """Concurrency 1, but an executor with two actors: the round brings two candidates, evaluated at the same time."""
    # as in test_ray_executor.py: no usage reports, no token, every server of Ray's on 127.0.0.1 only
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    monkeypatch.setenv("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    ray = pytest.importorskip("ray")
    from forge_lsp.engine.ray_executor import RayExecutor

    start_local_ray(ray, short_tmp("forge-ray-"))
    try:
        with RayExecutor(options=fast_options, cache_dir=cache_dir, actors=2) as ex:
            assert ex.capacity == 2
            ray.get([a.hello.remote() for a in ex.actors])  # both actors' device workers up before the round
            coder = ScriptedCoder()
            fake_openai.script(coder, coder, coder)
            opt, result = one_round(tmp_path, ex, fake_openai, concurrency=1)
            assert opt.width() == 2
            cands, events = check_round(opt, result, coder)
    finally:
        ray.shutdown()
    # both candidates were being evaluated at the same time: each began before the other's verdict
    (a0, a1), (b0, b1) = spans(events).values()
    assert max(a0, b0) < min(a1, b1), spans(events)
    assert min(a1, b1) - max(a0, b0) > LOAD_S / 2, spans(events)  # for most of a load, not a polling slip


def test_an_mcts_round_of_concurrency_2_queues_both_candidates_before_evaluating_them(
    tmp_path, fake_openai, cache_dir, fast_options
):
    """One device (capacity 1) but concurrency 2: two Coder calls at once, and both candidates queued together, before
    the first one's evaluation begins (then one at a time on the device)."""
    with LocalPool("cpu", options=fast_options, cache_dir=cache_dir, build_workers=0) as pool:
        assert pool.capacity == 1
        coder = ScriptedCoder(make_source=lambda tag: C.TORCH_CORRECT + f"\n# variant {tag}\n")
        fake_openai.script(coder, coder, coder)
        opt, result = one_round(tmp_path, pool, fake_openai, concurrency=2)
        assert opt.width() == 2
        cands, events = check_round(opt, result, coder)
    queued = [e.ts for e in events if e.kind == "candidate_queued"]
    first_stage = min(t0 for t0, _ in spans(events).values())
    assert len(queued) == 2 and max(queued) < first_stage, (queued, first_stage)
