"""Timing statistics and interleaving (pure functions; the GPU timers run in `pytest -m gpu`)."""

import numpy as np

from forge_lsp.engine.harness.timing import Samples, run_interleaved, speedup_ci, summarize


def test_interleaving_alternates_order_so_drift_cancels():
    order = []
    ref, cand = run_interleaved(
        lambda s: (order.append("R"), s.device_ms.append(1.0), s.host_ms.append(1.0)),
        lambda s: (order.append("C"), s.device_ms.append(1.0), s.host_ms.append(1.0)),
        warmup=1,
        min_reps=4,
        max_reps=4,
        budget_s=0.0,
    )
    assert "".join(order) == "RC" + "RCCRRCCR"
    assert len(ref.device_ms) == len(cand.device_ms) == 4


def test_speedup_ci_brackets_the_true_ratio():
    rng = np.random.default_rng(1)
    ref = list(2.0 + rng.normal(0, 0.02, 200))
    cand = list(1.0 + rng.normal(0, 0.01, 200))
    lo, hi = speedup_ci(ref, cand)
    assert lo < 2.0 < hi and hi - lo < 0.05


def test_summarize_reports_median_speedup_and_launch_bound_note():
    ref, cand = Samples([2.0] * 5, [0.01] * 5), Samples([0.5] * 5, [0.9] * 5)
    t = summarize("events", ref, cand, True, [])
    assert t.speedup == 4.0 and t.candidate_host_ms == 0.9
    assert any("launch-bound" in n for n in t.notes)
    # in graph mode the host time is a graph replay's, not the candidate's: no launch-bound note
    assert not summarize("graph", ref, cand, True, []).notes


def _sampler(rng, mean: float, sd: float):
    def sample(s: Samples) -> None:
        s.device_ms.append(mean + rng.normal(0, sd))
        s.host_ms.append(0.01)

    return sample


def test_precision_stops_a_steady_kernel_early_and_gives_a_noisy_one_the_whole_budget():
    from forge_lsp.engine.harness.timing import PRECISION_MIN_PAIRS, interval_width

    rng = np.random.default_rng(3)
    kw = dict(warmup=1, min_reps=10, max_reps=200, budget_s=30.0, precision=0.02)
    ref, cand = run_interleaved(_sampler(rng, 2.0, 0.004), _sampler(rng, 1.0, 0.002), **kw)
    assert PRECISION_MIN_PAIRS <= len(ref.device_ms) < 200  # decided before the cap
    assert interval_width(ref.device_ms, cand.device_ms) <= 0.02
    # 20% noise: the interval never gets that narrow, so every allowed pair is timed
    ref, cand = run_interleaved(_sampler(rng, 2.0, 0.4), _sampler(rng, 1.0, 0.2), **kw)
    assert len(ref.device_ms) == 200
    # precision 0: the budget and the caps alone decide, as before
    ref, _ = run_interleaved(_sampler(rng, 2.0, 0.004), _sampler(rng, 1.0, 0.002), **dict(kw, precision=0.0))
    assert len(ref.device_ms) == 200
