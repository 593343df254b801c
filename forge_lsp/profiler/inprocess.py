"""Profile one call inside the process that already holds the model, its inputs and its built kernels: no ncu, no
new process. Three passes over the same call, each alone on the device:

1. kernel activity records: each launch's duration, grid, block, registers and shared memory;
2. PC sampling: where the warps stalled and why, mapped to source lines through the cubins of the modules the
   process loaded (captured from the start, before the candidate was built);
3. the range profiler, kernel replay: the hardware counters the findings and the roofline need. It comes last:
   once CUPTI's profiler is initialized in a process, PC sampling there collects nothing.

`collect` runs them (CUPTI through `cupti.py`); `kernels_of` turns what they gave into `KernelProfile`s with the
metrics named as ncu names them, so `analyze` and `roofline` read both paths alike. `kernels_of` is pure.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from ..child import StageClock
from .cubin import LineTable, line_table
from .metrics import METRICS, STALL_PREFIX
from .model import KernelProfile
from .pcsamples import THEORETICAL_OCCUPANCY, KernelRecord, PcSample, SmLimits, kernel_profiles

#: ncu's speed-of-light breakdowns: each the maximum over dozens of units' throughputs, so each needs counters of its
#: own: on GH100 they take 7 of the 12 replay passes the set needs with them, 5 without (`benchmarks/offline_passes.py`,
#: CUPTI's host API), at about 0.07 s a pass. No finding reads them (the roofline places a kernel from its DRAM bytes,
#: FLOPs and tensor pipes); ncu's path still shows them.
SPEED_OF_LIGHT_BREAKDOWNS = (
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
)

#: the counters the range profiler reads: ncu's metric set less what the launch records give (``launch__*``, the
#: theoretical occupancy computed from them), the per-issue stall ratios, which the PC samples stand in for, and the
#: speed-of-light breakdowns no finding reads
RANGE_METRICS: list[str] = [
    m
    for m in METRICS
    if not m.startswith("launch__")
    and m != THEORETICAL_OCCUPANCY
    and not m.startswith(STALL_PREFIX)
    and m not in SPEED_OF_LIGHT_BREAKDOWNS
]


#: ranges the counters pass makes room for beyond the launches the records saw (a call that launches a few more)
RANGE_MARGIN = 16


@dataclass
class Collected:
    """What the three passes gave, before it is read as kernel profiles."""

    activities: list = field(default_factory=list)  # cupti.KernelActivity, in launch order
    pcs: list = field(default_factory=list)  # cupti.PcRecord
    ranges: list[tuple[str, dict[str, float]]] = field(default_factory=list)  # one per launch, in launch order
    cubins: dict[int, bytes] = field(default_factory=dict)  # the sampled instructions' cubins, by CRC
    unsupported: list[str] = field(default_factory=list)  # metrics the chip does not know
    passes: int = 0  # replay passes the counters needed
    notes: list[str] = field(default_factory=list)  # a pass that failed, and why (the others still count)


def collect(
    run: Callable[[], object],
    sync: Callable[[], None],
    *,
    ctx: int,
    device_index: int,
    modules,
    stages: dict[str, float],
    metrics: list[str] | None = None,
) -> Collected:
    """Run `run` (one forward; `sync` waits for the device) once per pass. `modules` is the `cupti.ModuleCubins`
    started before the kernels were built. A pass that CUPTI refuses is noted and the others go on; with no kernel
    record at all, `CuptiError` (nothing to report)."""
    from . import cupti

    out = Collected()
    mark = StageClock(stages).mark

    activities = cupti.KernelActivities()
    activities.enable()
    try:
        run()
        sync()
    finally:
        out.activities = activities.collect()
    mark("cupti_records")
    if not out.activities:
        raise cupti.CuptiError("cuptiActivityEnable", -1, "the call launched no kernel CUPTI recorded")
    try:
        sampler = cupti.PcSampler(ctx)
        mark("cupti_pc_setup")  # enabling and configuring it: a part that could be done before the request
        try:
            sampler.start()
            run()
            sync()
            out.pcs = sampler.stop()
        finally:
            sampler.close()
        out.cubins = modules.by_crc({p.cubin_crc for p in out.pcs})
    except cupti.CuptiError as exc:
        out.notes.append(f"PC sampling: {exc}")
    mark("cupti_pc_sampling")
    try:
        host = cupti.host_config(ctx, device_index, list(metrics or RANGE_METRICS))
        # a range per launch: room for every launch the records saw (a forward of hundreds of kernels has hundreds of
        # ranges), and no counter image sized for more than the call makes
        profiler = cupti.RangeProfiler(ctx, host, max_ranges=len(out.activities) + RANGE_MARGIN)
        mark("cupti_counters_setup")  # the profiler initialized, the host side built, the counter image made
        try:
            out.unsupported, out.passes = profiler.host.unsupported, profiler.host.passes
            profiler.start()
            run()
            sync()
            out.ranges = profiler.stop()
        finally:
            profiler.close()
    except cupti.CuptiError as exc:
        out.notes.append(f"counters: {exc}")
    mark("cupti_counters")
    return out


def _is_total(metric: str) -> bool:
    return metric.endswith(".sum")


def range_metrics_by_kernel(
    names: list[str], durations: list[float], ranges: list[tuple[str, dict[str, float]]]
) -> dict[str, dict[str, float]]:
    """Each kernel's counters over its launches: totals (``*.sum``) added, rates and ratios averaged by duration.
    Ranges are the launches in launch order; when their count differs from the records', a range is matched to the
    records by its name instead, and a range matching none is dropped."""
    per_launch: list[tuple[str, float, dict[str, float]]] = []
    if len(ranges) == len(names):
        per_launch = [(n, d, values) for n, d, (_, values) in zip(names, durations, ranges, strict=True)]
    else:
        total = {n: sum(d for m, d in zip(names, durations, strict=True) if m == n) for n in names}
        for label, values in ranges:
            match = next((n for n in total if n == label or (label and (label in n or n in label))), None)
            if match is not None:
                per_launch.append((match, total[match], values))
    totals: dict[str, dict[str, float]] = defaultdict(dict)
    weights: dict[str, float] = defaultdict(float)
    for name, duration, values in per_launch:
        weight = max(duration, 1.0)
        weights[name] += weight
        for metric, value in values.items():
            if value != value:  # NaN: the counter is not defined for this launch
                continue
            totals[name][metric] = totals[name].get(metric, 0.0) + (value if _is_total(metric) else value * weight)
    return {
        name: {m: (v if _is_total(m) else v / weights[name]) for m, v in metrics.items()}
        for name, metrics in totals.items()
    }


def kernels_of(
    collected: Collected,
    limits: SmLimits | None,
    *,
    demangle: Callable[[str], str] = lambda name: name,
    top: int = 12,
) -> list[KernelProfile]:
    """The profiles of the kernels the call ran, longest first: launch and occupancy from the records, stalls and
    hot lines from the PC samples, counters from the ranges; names demangled for display."""
    records = [
        KernelRecord(
            name=a.name,
            duration_ns=float(a.end_ns - a.start_ns),
            grid=a.grid,
            block=a.block,
            registers_per_thread=a.registers_per_thread,
            shared_static=a.shared_static,
            shared_dynamic=a.shared_dynamic,
        )
        for a in collected.activities
    ]
    samples = [PcSample(kernel=p.kernel, offset=p.offset, stalls=dict(p.stalls)) for p in collected.pcs]
    table = LineTable()
    for cubin in collected.cubins.values():
        try:
            table.update(line_table(cubin))
        except Exception:  # noqa: BLE001 - a cubin pyelftools cannot read maps no line; the samples still count
            continue
    profiles = kernel_profiles(records, samples, table, limits, top=top)
    counters = range_metrics_by_kernel([r.name for r in records], [r.duration_ns for r in records], collected.ranges)
    for profile in profiles:
        found = counters.get(profile.name, {})
        profile.metrics = {**found, **profile.metrics, "gpu__time_duration.sum": profile.duration_ns}
        profile.reader = "cupti"
        profile.name = demangle(profile.name)
    return profiles


def sm_limits(device) -> SmLimits:
    """The device's per-SM limits, from torch's device properties (compute capability 9.0's where torch says
    nothing)."""
    import torch

    props = torch.cuda.get_device_properties(device)
    defaults = SmLimits(sm_count=props.multi_processor_count)
    threads = getattr(props, "max_threads_per_multi_processor", 0) or defaults.max_warps * defaults.warp_size
    return SmLimits(
        sm_count=props.multi_processor_count,
        max_warps=threads // defaults.warp_size,
        registers=getattr(props, "regs_per_multiprocessor", 0) or defaults.registers,
        shared_bytes=getattr(props, "shared_memory_per_multiprocessor", 0) or defaults.shared_bytes,
    )


def demangler() -> Callable[[str], str]:
    """torch's C++ demangler where it has one; else names stay as the cubin spells them."""
    try:
        import torch

        demangle = torch._C._demangle
    except (ImportError, AttributeError):
        return lambda name: name

    def readable(name: str) -> str:
        try:
            return demangle(name) or name
        except Exception:  # noqa: BLE001 - a name it cannot read stays as it was
            return name

    return readable
