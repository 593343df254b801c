"""Faster, slower or inconclusive: a decision drawn from interleaved timings only when an interval decides it.

`decide` times a change against the original in rounds of interleaved pairs (one call without, one with), and
after each round computes the speedup (the median of the pairs' ratios) with its 99% interval (the sign test's,
from the ratios' order statistics: exact whatever the noise's distribution). Above 1 the change is faster,
below 1 slower; an interval that holds 1 within `EQUAL_WITHIN` of it is *equal* (timing longer could at most find
a difference too small to keep); one that still holds 1, wider, after the time budget (or the most pairs) is
*inconclusive*. On either of the last two the caller keeps nothing. Each round doubles the pairs timed so far, so
a noisy machine is timed longer before anything is said. Pure: the sampler and the clock are passed in (`model_check` times forwards with them; tests
give it noise of their own).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from ..words import times

#: the outcomes of `decide`
FASTER, SLOWER, EQUAL, INCONCLUSIVE = "faster", "slower", "equal", "inconclusive"

#: an interval holding 1 and lying within this share of it both ways decides "equal": a change worth less than 1% is
#: not worth a patch, and telling it apart from none would take forwards by the thousand
EQUAL_WITHIN = 0.01


#: the interval each look decides with: 99%, since a run looks again while it is undecided (a few looks at 95% each
#: would call a change faster that is not more often than one in forty)
LEVEL = 0.99


def _order_rank(n: int, level: float) -> int:
    """The largest k such that the k-th smallest and k-th largest of n samples bound their median with at least
    `level` coverage (the sign test's interval: a binomial count, exact, whatever the distribution)."""
    tail = (1 - level) / 2
    cdf, k = 0.0, 0
    for i in range(n + 1):
        cdf += math.comb(n, i) / 2**n
        if cdf > tail:
            k = i  # P(count <= i - 1) <= tail
            break
    return max(k, 0)


def bootstrap(
    before: list[float], after: list[float], n_boot: int = 0, level: float = LEVEL
) -> tuple[float | None, list[float] | None]:
    """The speedup (before / after) as the median of the pairs' ratios — each pair timed back to back, so a load
    that comes and goes weighs on both alike — and the distribution-free interval of that median at `level` (order
    statistics of the ratios; `n_boot` is unused, kept for callers that name it)."""
    n = min(len(before), len(after))
    if n == 0 or min(before[:n] + after[:n]) <= 0:
        return None, None
    logs = sorted(math.log(b / a) for b, a in zip(before[:n], after[:n], strict=True))
    k = _order_rank(n, level)
    if k == 0:  # too few pairs for an interval at this level: it holds everything
        return math.exp(statistics.median(logs)), [0.0, math.inf]
    return math.exp(statistics.median(logs)), [math.exp(logs[k - 1]), math.exp(logs[n - k])]


def outliers(xs: list[float]) -> int:
    """Samples beyond Tukey's far fences (3 interquartile ranges past the quartiles)."""
    if len(xs) < 4:
        return 0
    q1, _, q3 = statistics.quantiles(xs, n=4)
    spread = 3 * (q3 - q1)
    return sum(1 for x in xs if x < q1 - spread or x > q3 + spread)


@dataclass
class Decision:
    outcome: str  # FASTER, SLOWER, EQUAL or INCONCLUSIVE
    speedup: float | None
    ci: list[float] | None
    before_ms: float
    after_ms: float
    pairs: int  # forwards timed each way
    rounds: int
    noise_pct: float  # the interval's half-width, as a share of the speedup
    outliers: int  # timings far outside the others, both ways together

    @property
    def faster(self) -> bool:
        return self.outcome == FASTER

    def says(self) -> str:
        """The decision in words, with the figures it rests on."""
        if self.speedup is None or self.ci is None:
            return "not timed"
        figures = (
            f"{times(self.speedup)} (99% CI {self.ci[0]:.2f}-{self.ci[1]:.2f}, {self.pairs} forwards each way"
            + (f", {self.outliers} outlier timings" if self.outliers else "")
            + ")"
        )
        if self.outcome == INCONCLUSIVE:
            return f"inconclusive: timing noise of {self.noise_pct:.0f}% — {figures}"
        if self.outcome == EQUAL:
            return f"equal: no difference beyond ±{EQUAL_WITHIN:.0%} — {figures}"
        return f"{self.outcome}: {figures}"

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"says": self.says()}


def decide(
    sample: Callable[[int], tuple[list[float], list[float]]],
    reps: int,
    budget_s: float,
    max_pairs: int = 480,
    clock: Callable[[], float] = time.monotonic,
) -> Decision:
    """Time in rounds until the interval decides: `sample(n)` gives n interleaved pairs (ms without, ms with). The
    first round has `reps` pairs; each next one as many as all before, while `budget_s` (seconds of `clock`) and
    `max_pairs` allow."""
    before: list[float] = []
    after: list[float] = []
    start = clock()
    n, rounds = max(2, reps), 0
    while True:
        b, a = sample(n)
        before += b
        after += a
        rounds += 1
        speedup, ci = bootstrap(before, after)
        if speedup is None or ci is None:
            outcome = INCONCLUSIVE
            break
        if ci[0] > 1.0:
            outcome = FASTER
            break
        if ci[1] < 1.0:
            outcome = SLOWER
            break
        if ci[0] >= 1 / (1 + EQUAL_WITHIN) and ci[1] <= 1 + EQUAL_WITHIN:
            outcome = EQUAL
            break
        n = min(len(before), max_pairs - len(before))
        if n <= 0 or clock() - start >= budget_s:
            outcome = INCONCLUSIVE
            break
    noise = 100.0 * (ci[1] - ci[0]) / 2 / speedup if speedup and ci else 100.0
    return Decision(
        outcome=outcome,
        speedup=speedup,
        ci=ci,
        before_ms=statistics.median(before) if before else 0.0,
        after_ms=statistics.median(after) if after else 0.0,
        pairs=len(before),
        rounds=rounds,
        noise_pct=round(noise, 1),
        outliers=outliers(before) + outliers(after),
    )
