"""The Ray executor on a local Ray instance (2 CPUs, 127.0.0.1 only, its files in the test area): the same verdicts
as the local pool for C++ candidates, and an actor killed mid-evaluation is a `crashed` verdict, the run going on."""

from __future__ import annotations

import os
import threading
import time

import candidates as C
import pytest
from conftest import FIXTURES, short_tmp, start_local_ray

from forge_lsp.engine import Candidate, Status, Verdict, load_candidate, load_task
from forge_lsp.engine.local_pool import LocalPool

# set before ray is imported (it reads them then): no usage reports, no token, and Ray's single-machine mode —
# every one of its servers on the loopback address, none on the network
os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
os.environ["RAY_AUTH_MODE"] = "disabled"
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
ray = pytest.importorskip("ray")

pytestmark = pytest.mark.slow

EXAMPLES = FIXTURES.parent.parent / "forge_lsp" / "examples"


@pytest.fixture(scope="module")
def ray_instance():
    start_local_ray(ray, short_tmp("forge-ray-"))
    yield ray
    ray.shutdown()


def summary(v: Verdict) -> tuple:
    return (v.status, v.failed_check, [(c.name, c.passed) for c in v.checks], v.backend, v.task_sha, v.candidate_sha)


def test_ray_gives_the_local_pools_verdicts_and_a_killed_actor_is_a_crashed_verdict(
    ray_instance, cache_dir, fast_options
):
    from forge_lsp.engine.ray_executor import RayExecutor

    assert {n["NodeManagerAddress"] for n in ray.nodes()} == {"127.0.0.1"}
    softmax = load_task(FIXTURES / "softmax_small.py")
    bias_act = load_task(EXAMPLES / "bias_act_task.py")
    work = [
        (softmax, Candidate.from_source(C.CPP_CORRECT, "softmax_cpp")),
        (softmax, Candidate.from_source(C.CPP_INCORRECT, "softmax_wrong")),
        (bias_act, load_candidate(EXAMPLES / "bias_act_cpp.py")),
        (softmax, Candidate.from_source(C.TORCH_CORRECT, "softmax_torch")),
    ]
    with LocalPool("cpu", options=fast_options, cache_dir=cache_dir, build_workers=2) as pool:
        local = pool.evaluate_all(work, reference=True)
    assert [v.status for v in local] == [Status.correct, Status.incorrect, Status.correct, Status.correct]

    stages: list[tuple[str, str]] = []
    with RayExecutor(options=fast_options, cache_dir=cache_dir, actors=2) as ex:
        assert len(ex.devices) == 2 and ex.device == "cpu"
        remote = ex.evaluate_all(work, reference=True, on_stage=lambda c, s: stages.append((c.name, s)))
        assert [summary(v) for v in remote] == [summary(v) for v in local]
        assert ("softmax_cpp", "verify") in stages and ("bias_act_cpp", "time") in stages  # progress came back
        assert remote[1].mismatch is not None and remote[1].log_excerpt  # the whole verdict, logs included

        # an actor killed while it evaluates: that evaluation is `crashed`, the other goes on on the other actor
        sleepy = Candidate.from_source(
            C.TORCH_CORRECT.replace("import torch\n", "import time, torch\ntime.sleep(60)\n", 1), "sleepy"
        )
        fine = Candidate.from_source(C.TORCH_CORRECT, "fine")
        out: dict[str, list[Verdict]] = {}
        run = threading.Thread(
            target=lambda: out.setdefault("v", ex.evaluate_all([(softmax, sleepy), (softmax, fine)]))
        )
        run.start()
        deadline = time.monotonic() + 60
        while ex.actor_of("sleepy") is None and time.monotonic() < deadline:
            time.sleep(0.1)
        actor = ex.actor_of("sleepy")
        assert actor is not None
        time.sleep(1.0)  # mid-evaluation: the candidate's module is loading in the actor's worker
        ray.kill(actor)
        run.join(timeout=120)
        assert not run.is_alive()
        crashed, ok = out["v"]
        assert crashed.status is Status.crashed and "died" in crashed.reason, crashed.reason
        assert ok.status is Status.correct, ok.reason
        # and the executor still evaluates, on the actor left
        assert ex.evaluate(softmax, Candidate.from_source(C.TORCH_CORRECT, "after")).correct


def test_an_actors_build_workers_compile_two_tasks_candidates_at_once(ray_instance, tmp_path, fast_options):
    """One actor with two build workers: the candidates of two tasks compile at the same time on the node (a cold
    cache of its own, so both C++ extensions are really built) while its device worker takes one at a time."""
    from test_executor import intervals

    from forge_lsp.engine.executor import ExecEvent
    from forge_lsp.engine.ray_executor import RayExecutor

    softmax = load_task(FIXTURES / "softmax_small.py")
    bias_act = load_task(EXAMPLES / "bias_act_task.py")
    work = [
        (softmax, Candidate.from_source(C.CPP_CORRECT, "softmax_cpp")),
        (bias_act, load_candidate(EXAMPLES / "bias_act_cpp.py")),
    ]
    events: list[ExecEvent] = []
    with RayExecutor(options=fast_options, cache_dir=tmp_path / "cache", actors=1, build_workers=2) as ex:
        ex.subscribe(events.append)
        verdicts = ex.evaluate_all(work, reference=True)
    assert [v.status for v in verdicts] == [Status.correct, Status.correct], [v.reason for v in verdicts]
    builds = intervals(events, "build_started", "build_finished")
    assert len(builds) == 2, events
    (a0, a1, _), (b0, b1, _) = builds.values()
    assert max(a0, b0) < min(a1, b1), f"the two builds did not overlap: {builds}"


@pytest.mark.parametrize("driver", [None, "3"], ids=["unset", "set"])
def test_an_actors_workers_get_the_drivers_thread_setting_not_rays_single_thread(
    ray_instance, cache_dir, fast_options, monkeypatch, driver
):
    """Ray sets OMP_NUM_THREADS=1 in each actor (a GPU actor holds no CPU), which would leave its workers' torch one
    core to make and compare inputs: an actor's environment, which its workers inherit, has the driver's setting."""
    from forge_lsp.engine.ray_executor import RayExecutor

    if driver is None:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OMP_NUM_THREADS", driver)
    with RayExecutor(options=fast_options, cache_dir=cache_dir, actors=1) as ex:
        where = ray.get(ex.actors[0].where.remote())
    assert where["omp_threads"] == driver, where
