"""Interleaved timing of reference and candidate, with a speedup confidence interval.

CUDA: each sample is a pair of device events around one call (see `CudaTimer`), followed by
a synchronization of the whole device; a separate pass from an idle device compares host
and event time, so work left running on another stream shows up (`escaped_ms`).
Reference and candidate alternate A B B A ... so drift cancels.
CPU: `time.perf_counter_ns` with the same interleaving.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ..verdict import Timing, TimingStats


@dataclass
class Samples:
    device_ms: list[float] = field(default_factory=list)  # events (or perf_counter on CPU)
    host_ms: list[float] = field(default_factory=list)  # host time incl. a device-wide sync


def stats(xs: list[float]) -> TimingStats:
    a = np.asarray(xs, dtype=np.float64)
    return TimingStats(
        median_ms=float(np.median(a)),
        mean_ms=float(a.mean()),
        min_ms=float(a.min()),
        p10_ms=float(np.percentile(a, 10)),
        p90_ms=float(np.percentile(a, 90)),
        n=len(xs),
    )


def speedup_ci(ref: list[float], cand: list[float], n_boot: int = 2000, seed: int = 0) -> tuple[float, float]:
    """95% bootstrap interval of median(ref)/median(cand), resampling interleaved pairs together."""
    r, c = np.asarray(ref), np.asarray(cand)
    n = min(len(r), len(c))
    r, c = r[:n], c[:n]
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(n_boot, n))
    ratios = np.median(r[idx], axis=1) / np.median(c[idx], axis=1)
    lo, hi = np.percentile(ratios, [2.5, 97.5])
    return float(lo), float(hi)


class CudaTimer:
    """Device time of one call, with the call's host-side launch work hidden.

    Before each sample the L2 is flushed and the stream is given a GPU-side delay longer than
    the call's host overhead, so every kernel of the call is already queued when the start
    event fires: the events measure the kernels and the gaps between them, not how fast the
    Python side of this machine happens to be. The host overhead is measured and reported
    separately (`host_ms`).
    """

    def __init__(self, device: torch.device, l2_flush: bool) -> None:
        self.device = device
        self.flush_buf = None
        if l2_flush:
            l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 64 << 20)
            self.flush_buf = torch.empty(max(4 * l2, 256 << 20) // 4, dtype=torch.float32, device=device)
        self.start = torch.cuda.Event(enable_timing=True)
        self.end = torch.cuda.Event(enable_timing=True)
        self.delay_cycles = 0
        self.cycles_per_ms = self._calibrate_sleep()

    def _calibrate_sleep(self) -> float:
        cycles = 2_000_000
        torch.cuda._sleep(cycles // 10)  # warm up
        self.start.record()
        torch.cuda._sleep(cycles)
        self.end.record()
        torch.cuda.synchronize(self.device)
        return cycles / max(self.start.elapsed_time(self.end), 1e-3)

    def hide_host_overhead(self, *fns: Callable[[], Any]) -> float:
        """Size the GPU-side delay from the slowest host overhead among `fns` (ms, returned)."""
        worst = 0.0
        for fn in fns:
            times = []
            for _ in range(5):
                torch.cuda.synchronize(self.device)
                t0 = time.perf_counter_ns()
                fn()
                times.append((time.perf_counter_ns() - t0) / 1e6)
            torch.cuda.synchronize(self.device)
            worst = max(worst, statistics.median(times))
        self.delay_cycles = int((2.0 * worst + 0.05) * self.cycles_per_ms)
        return worst

    def sample(self, fn: Callable[[], Any], into: Samples) -> None:
        if self.flush_buf is not None:
            self.flush_buf.zero_()
        if self.delay_cycles:
            torch.cuda._sleep(self.delay_cycles)
        stream = torch.cuda.current_stream(self.device)
        self.start.record(stream)
        t0 = time.perf_counter_ns()
        fn()
        t1 = time.perf_counter_ns()
        self.end.record(stream)
        torch.cuda.synchronize(self.device)  # every stream of the device
        into.device_ms.append(self.start.elapsed_time(self.end))
        into.host_ms.append((t1 - t0) / 1e6)

    def idle_start_gap(self, fn: Callable[[], Any]) -> float:
        """Ms the device stays busy after `fn`'s stream has finished, on one call from an idle start: the wall time
        to a device-wide synchronize less the event time on the stream."""
        stream = torch.cuda.current_stream(self.device)
        torch.cuda.synchronize(self.device)
        self.start.record(stream)
        t0 = time.perf_counter_ns()
        fn()
        self.end.record(stream)
        torch.cuda.synchronize(self.device)
        t1 = time.perf_counter_ns()
        return (t1 - t0) / 1e6 - self.start.elapsed_time(self.end)

    def escaped_ms(self, ref_fn: Callable[[], Any], cand_fn: Callable[[], Any], n: int = 10) -> float:
        """How much longer the device stays busy after the candidate's stream finished than after the reference's
        (ms): the lower quartile of `n` paired, interleaved differences. Work the candidate leaves on another stream
        delays every call of it (or most); another process's kernels on the same device delay calls of either at
        random, and cancel in the pairing."""
        diffs = []
        for _ in range(n):
            r = self.idle_start_gap(ref_fn)
            diffs.append(self.idle_start_gap(cand_fn) - r)
        return statistics.quantiles(diffs, n=4)[0]


class GraphTimer(CudaTimer):
    """Times replays of a captured CUDA graph: no launch gaps, for kernels of a few microseconds."""

    def __init__(self, device: torch.device, l2_flush: bool, fn: Callable[[], Any]) -> None:
        super().__init__(device, l2_flush)
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            for _ in range(2):
                fn()
        torch.cuda.current_stream(device).wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self._keep = fn()
        torch.cuda.synchronize(device)

    def sample(self, fn: Callable[[], Any], into: Samples) -> None:  # noqa: ARG002 - replays the graph
        super().sample(self.graph.replay, into)


def run_interleaved(
    ref_sample: Callable[[Samples], None],
    cand_sample: Callable[[Samples], None],
    *,
    warmup: int,
    min_reps: int,
    max_reps: int,
    budget_s: float,
    before_pair: Callable[[int], None] | None = None,
    after_pair: Callable[[int], None] | None = None,
    precision: float = 0.0,
) -> tuple[Samples, Samples]:
    """Pairs of samples, A B then B A, until the budget is spent (at least `min_reps`, at most `max_reps`), or,
    with `precision`, until the speedup's 95% interval is that narrow relative to the speedup (checked every
    `PRECISION_EVERY` pairs from `PRECISION_MIN_PAIRS` on): a steady kernel is decided in tens of pairs, a noisy one
    gets the whole budget. `before_pair(i)` runs before pair i (warm-up pairs included) and `after_pair(i)` after
    it, both outside the timed regions."""
    ref, cand = Samples(), Samples()
    scratch = Samples()
    call = 0
    for _ in range(warmup):
        if before_pair:
            before_pair(call)
        ref_sample(scratch)
        cand_sample(scratch)
        if after_pair:
            after_pair(call)
        call += 1
    t_end = time.monotonic() + budget_s
    i = 0
    while i < max_reps and (i < min_reps or time.monotonic() < t_end):
        if before_pair:
            before_pair(call)
        if i % 2 == 0:  # A B, then B A: order effects cancel
            ref_sample(ref)
            cand_sample(cand)
        else:
            cand_sample(cand)
            ref_sample(ref)
        if after_pair:
            after_pair(call)
        call += 1
        i += 1
        if precision > 0 and i >= max(min_reps, PRECISION_MIN_PAIRS) and i % PRECISION_EVERY == 0:
            if interval_width(ref.device_ms, cand.device_ms) <= precision:
                break
    return ref, cand


#: `run_interleaved(precision=...)` decides from this many pairs on, every this many pairs
PRECISION_MIN_PAIRS = 30
PRECISION_EVERY = 10


def interval_width(ref: list[float], cand: list[float]) -> float:
    """The width of the speedup's 95% interval relative to the speedup (0.02: the interval spans 2% of it)."""
    speedup = statistics.median(ref) / max(statistics.median(cand), 1e-12)
    lo, hi = speedup_ci(ref, cand, n_boot=500)
    return (hi - lo) / max(speedup, 1e-12)


def cpu_sampler(fn: Callable[[], Any]) -> Callable[[Samples], None]:
    def sample(into: Samples) -> None:
        t0 = time.perf_counter_ns()
        fn()
        t1 = time.perf_counter_ns()
        into.device_ms.append((t1 - t0) / 1e6)
        into.host_ms.append((t1 - t0) / 1e6)

    return sample


def time_alone(
    fn: Callable[[], Any], device: torch.device, l2_flush: bool, budget_s: float = 0.3, min_n: int = 10, max_n: int = 60
) -> list[float]:
    """`fn` timed on its own with the timer the interleaved timing uses on `device` (ms per call): after two warm-up
    calls, until `budget_s` has passed and `min_n` samples are in, at most `max_n`."""
    samples = Samples()
    if device.type == "cuda":
        timer = CudaTimer(device, l2_flush)
        timer.hide_host_overhead(fn)

        def sample() -> None:
            timer.sample(fn, samples)

    else:
        cpu = cpu_sampler(fn)

        def sample() -> None:
            cpu(samples)

    for _ in range(2):
        fn()
    end = time.perf_counter() + budget_s
    while len(samples.device_ms) < max_n and (len(samples.device_ms) < min_n or time.perf_counter() < end):
        sample()
    return samples.device_ms


def summarize(mode: str, ref: Samples, cand: Samples, l2_flush: bool, notes: list[str]) -> Timing:
    r, c = stats(ref.device_ms), stats(cand.device_ms)
    ref_host, cand_host = statistics.median(ref.host_ms), statistics.median(cand.host_ms)
    # only in events mode is host_ms the candidate's own host side: in graph mode it is a replay's
    # launch, which says nothing about the candidate (and graphs already hide its host side)
    if mode == "events" and cand_host > c.median_ms:
        notes.append(
            f"launch-bound: the candidate's host side takes {cand_host * 1000:.0f} us per call, longer "
            f"than its {c.median_ms * 1000:.0f} us of device time (CUDA graphs would hide it)"
        )
    return Timing(
        mode=mode,
        reference=r,
        candidate=c,
        speedup=r.median_ms / c.median_ms,
        speedup_ci95=speedup_ci(ref.device_ms, cand.device_ms),
        l2_flush=l2_flush,
        reference_host_ms=ref_host,
        candidate_host_ms=cand_host,
        notes=notes,
    )
