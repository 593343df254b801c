"""benchmarks/multi_gpu.py (issue 18's measurement): its timing intervals and overlap count on hand-made events, and its
CPU check end to end — the local pool, Ray with 1 and 2 CPU actors and MCTS runs with a scripted model, every
candidate correct, no two timings at once on a device, the figures in its JSON consistent with one another."""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys

import pytest
from conftest import ROOT

from forge_lsp.engine.executor import ExecEvent

SCRIPT = ROOT / "benchmarks" / "multi_gpu.py"


def load_bench():
    spec = importlib.util.spec_from_file_location("multi_gpu_bench", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


bench = load_bench()


def ev(kind: str, job: int, t: float, device: str = "cpu", stage: str = "") -> ExecEvent:
    return ExecEvent(kind, job, "task", f"cand{job}", device=device, stage=stage, t=t)  # type: ignore[arg-type]


def pairs_on_one_device(timings: list[dict]) -> int:
    """Overlapping pairs counted here, independently of the script."""
    return sum(
        1
        for i, a in enumerate(timings)
        for b in timings[i + 1 :]
        if a["device"] == b["device"] and max(a["start"], b["start"]) < min(a["end"], b["end"])
    )


def test_a_timing_runs_from_its_time_stage_to_the_jobs_next_stage_or_its_verdict():
    events = [
        ev("queued", 1, 0.0, device=""),
        ev("stage", 1, 0.5, stage="verify"),
        ev("stage", 1, 1.0, stage="time"),
        ev("stage", 2, 1.5, device="cuda:1", stage="time"),  # another job's events do not end job 1's timing
        ev("verdict", 2, 2.5, device="cuda:1"),
        ev("verdict", 1, 3.0),
        ev("stage", 3, 3.0, stage="time"),
        ev("stage", 3, 3.5, stage="sanitize"),  # the job's next stage ends its timing
        ev("verdict", 3, 9.0),
        ev("stage", 4, 10.0, stage="time"),  # never ended: the run was cut
    ]
    T = bench.Timing
    assert bench.timing_intervals(events) == [T("cpu", 1, 1.0, 3.0), T("cpu", 3, 3.0, 3.5), T("cuda:1", 2, 1.5, 2.5)]
    cut = bench.timing_intervals(events, until=12.0)
    assert T("cpu", 4, 10.0, 12.0, closed=False) in cut and len(cut) == 4
    # job 1 ends at 3.0 as job 3 begins: touching, not overlapping; job 2 is on another device
    assert bench.overlapping(cut) == []


def test_two_timings_under_way_at_once_on_one_device_are_counted():
    T = bench.Timing
    a, b = T("cuda:0", 1, 0.0, 2.0), T("cuda:0", 2, 1.0, 3.0)
    inner, same = T("cuda:0", 3, 0.5, 0.7), T("cuda:0", 4, 0.0, 2.0)
    elsewhere, after = T("cuda:1", 5, 0.0, 3.0), T("cuda:0", 6, 3.0, 4.0)
    assert bench.overlapping([a, b]) == [(a, b)]
    assert len(bench.overlapping([a, inner])) == 1 and len(bench.overlapping([a, same])) == 1
    assert bench.overlapping([a, elsewhere, after]) == []
    everything = [a, b, inner, same, elsewhere, after]
    # a-b, a-inner, a-same, b-same, inner-same (b begins after inner ends; b ends at 3.0 as `after` begins)
    assert len(bench.overlapping(everything)) == 5
    assert pairs_on_one_device([vars(t) for t in everything]) == 5
    # from events: job 2 starts timing on cuda:0 while job 1 still times there
    events = [
        ev("stage", 1, 0.0, "cuda:0", "time"),
        ev("stage", 2, 1.0, "cuda:0", "time"),
        ev("verdict", 1, 2.0, "cuda:0"),
        ev("verdict", 2, 3.0, "cuda:0"),
    ]
    assert len(bench.overlapping(bench.timing_intervals(events))) == 1
    # the same jobs on two devices do not overlap
    events[1], events[3] = ev("stage", 2, 1.0, "cuda:1", "time"), ev("verdict", 2, 3.0, "cuda:1")
    assert bench.overlapping(bench.timing_intervals(events)) == []


def test_timings_by_the_workers_own_seconds_and_the_scaling_efficiency():
    T = bench.Timing
    late = [T("x", 1, 0.0, 2.2), T("x", 2, 2.0, 3.0)]  # job 1's verdict came in late
    assert len(bench.overlapping(late)) == 1
    assert bench.overlapping(bench.worker_timings(late, {1: 1.5, 2: 0.5})) == []
    assert bench.efficiency(18.0, 10.0, 2) == pytest.approx(0.9)
    assert bench.efficiency(40.0, 10.0, 4) == pytest.approx(1.0)
    assert bench.efficiency(None, 10.0, 2) is None and bench.efficiency(10.0, 0.0, 2) is None


@pytest.mark.slow  # builds two C++ extensions, starts a Ray instance and its actors
def test_the_cpu_check_evaluates_every_candidate_and_never_times_two_at_once_on_a_device(tmp_path, cache_dir):
    out = tmp_path / "multi.json"
    # the session's compile cache: the bundled example's C++ build is shared with the other tests that build it
    r = subprocess.run(
        [sys.executable, str(SCRIPT), "--cpu-check", "--out", str(out), "--cache-dir", str(cache_dir)],
        capture_output=True,
        text=True,
        timeout=540,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    data = json.loads(out.read_text())
    runs = {(x["kind"], x["executor"], x["n_devices"]): x for x in data["runs"]}
    assert set(runs) == {
        ("warmup", "local", 1),
        ("batch", "local", 1),
        ("batch", "ray", 1),
        ("batch", "ray", 2),
        ("mcts", "ray", 1),
        ("mcts", "ray", 2),
    }, list(runs)
    assert data["machine"]["candidates"] == 2 and data["machine"]["tasks"] == 2

    for key, run in runs.items():
        assert run["error"] is None and not run["cut"], (key, run["error"])
        assert run["candidates"] == run["of"] > 0 and run["statuses"] == ["correct"] * run["of"], (key, run)
        assert run["correct"] == run["candidates"]
        assert run["per_min"] == pytest.approx(60.0 * run["candidates"] / run["wall_s"])
        assert len(run["devices"]) == key[2]
        # every correct candidate timed once, on a device of the run's, and no two at once on one device
        timings = run["timings"]
        assert len(timings) == run["correct"] and len({t["job"] for t in timings}) == len(timings), (key, timings)
        assert all(t["closed"] and t["start"] < t["end"] and t["device"] in run["devices"] for t in timings)
        assert run["overlaps"] == pairs_on_one_device(timings) == 0, (key, run["overlap_pairs"])
        assert run["overlaps_by_worker_seconds"] == 0
        assert set(run["devices_used"]) <= set(run["devices"])
        if key[2] == 2:  # both actors evaluated and timed
            assert {t["device"] for t in timings} == set(run["devices"]), (key, timings)
            base = runs[(key[0], key[1], 1)]
            assert run["efficiency"] == pytest.approx(run["per_min"] / base["per_min"] / 2)
            assert run["baseline"] == base["label"]
        else:
            assert run.get("efficiency") is None

    for n in (1, 2):  # an MCTS round as wide as the executor: n candidates a round
        mcts = runs[("mcts", "ray", n)]
        assert mcts["width"] == n and mcts["rounds"] == mcts["rounds_planned"] == math.ceil(4 / n)
        assert mcts["candidates"] == mcts["coder_calls"] == mcts["rounds"] * n == 4
        assert [a["device"] for a in mcts["actors"]] == ["cpu"] * n

    # the table comes last: a header and a row for each run, as the JSON has them
    lines = r.stdout.strip().splitlines()
    assert lines[-len(data["runs"]) - 2].startswith("| configuration | devices | candidates |")
    rows = lines[-len(data["runs"]) :]
    assert rows == data["table"][2:]
    assert all(row.rstrip(" |").endswith("| 0") for row in rows)
