"""A kernel's profile from what can be measured inside the process that ran it, without ncu: PC samples (where the
warps stalled, and why) and kernel records (the launch and its duration), with the SASS mapped to source lines by
the build's cubins (`cubin.py`) and the launch's occupancy computed from the device's per-SM limits.

The metrics are named as ncu names them, so `analyze` reads both paths alike: the stall samples as
``smsp__pcsamp_warps_issue_stalled_<reason>``, the launch as ``launch__*``, the theoretical occupancy and what
limits it. Counters only a replaying profiler gives (DRAM bytes, L2 sectors, bank conflicts, achieved occupancy)
are absent, and the rules that need them stay silent. Pure: samples in, `KernelProfile`s out.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from .cubin import LineTable
from .metrics import PCSAMP_PREFIX, issued_stall
from .model import HotLine, KernelProfile, LaunchConfig

THEORETICAL_OCCUPANCY = "sm__maximum_warps_per_active_cycle_pct"


@dataclass(frozen=True)
class SmLimits:
    """What one SM holds (CUDA's occupancy calculator's inputs). The defaults are compute capability 9.0's."""

    sm_count: int
    max_warps: int = 64
    max_blocks: int = 32
    registers: int = 65536
    register_unit: int = 256  # registers are allocated per warp in units of this many
    subpartitions: int = 4  # the register file is split among the SM's schedulers, each holding whole warps
    shared_bytes: int = 233472  # 228 KiB usable per SM
    shared_unit: int = 128
    shared_reserved_per_block: int = 1024  # the system's share of each block's shared memory
    warp_size: int = 32


def occupancy(
    limits: SmLimits, block_threads: int, registers_per_thread: int, shared_per_block: int
) -> dict[str, float]:
    """Blocks per SM allowed by each resource (ncu's ``launch__occupancy_limit_*``) and the theoretical occupancy in
    percent of the SM's warp slots (``sm__maximum_warps_per_active_cycle_pct``)."""
    warps = max(1, math.ceil(block_threads / limits.warp_size))
    by_warps = limits.max_warps // warps
    if registers_per_thread > 0:
        per_warp = math.ceil(registers_per_thread * limits.warp_size / limits.register_unit) * limits.register_unit
        warps_by_registers = (limits.registers // limits.subpartitions // per_warp) * limits.subpartitions
        by_registers = warps_by_registers // warps
    else:
        by_registers = limits.max_blocks
    per_block = shared_per_block + limits.shared_reserved_per_block
    per_block = math.ceil(per_block / limits.shared_unit) * limits.shared_unit
    by_shared = limits.shared_bytes // per_block if shared_per_block > 0 else limits.max_blocks
    blocks = min(by_warps, by_registers, by_shared, limits.max_blocks)
    return {
        "launch__occupancy_limit_warps": float(by_warps),
        "launch__occupancy_limit_registers": float(by_registers),
        "launch__occupancy_limit_shared_mem": float(by_shared),
        "launch__occupancy_limit_blocks": float(limits.max_blocks),
        THEORETICAL_OCCUPANCY: 100.0 * blocks * warps / limits.max_warps,
    }


@dataclass(frozen=True)
class KernelRecord:
    """One launch as the activity records give it."""

    name: str
    duration_ns: float
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    registers_per_thread: int = 0
    shared_static: int = 0
    shared_dynamic: int = 0


@dataclass
class PcSample:
    """The samples of one SASS instruction: its kernel (the name the cubin's symbols use), its offset into the kernel's
    code, and the samples by stall reason (CUPTI names them as ncu does, ``smsp__pcsamp_warps_issue_stalled_<r>``, or
    bare)."""

    kernel: str
    offset: int
    stalls: dict[str, int] = field(default_factory=dict)


def _issued(samples: Iterable[PcSample]) -> Iterator[tuple[PcSample, str, int]]:
    """Each sample's issued stall counts: (sample, reason, samples), the "not issued" half and empty counts left out."""
    for sample in samples:
        for counter, n in sample.stalls.items():
            if n > 0 and (reason := issued_stall(counter)) is not None:
                yield sample, reason, n


def kernel_profiles(
    records: Iterable[KernelRecord],
    samples: Iterable[PcSample],
    table: LineTable,
    limits: SmLimits | None = None,
    top: int = 12,
) -> list[KernelProfile]:
    """One profile per kernel that ran (its launches' durations summed, the first launch's shape), longest first, with
    its stall samples, its `top` hottest lines and, given the device's `limits`, its occupancy and waves."""
    launches: dict[str, list[KernelRecord]] = defaultdict(list)
    for record in records:
        launches[record.name].append(record)
    by_kernel: dict[str, list[PcSample]] = defaultdict(list)
    for sample in samples:
        by_kernel[sample.kernel].append(sample)
    out = []
    for name, runs in launches.items():
        first = runs[0]
        metrics: dict[str, float] = {
            "launch__grid_size": float(math.prod(first.grid)),
            "launch__block_size": float(math.prod(first.block)),
            "launch__registers_per_thread": float(first.registers_per_thread),
            "launch__shared_mem_per_block_static": float(first.shared_static),
            "launch__shared_mem_per_block_dynamic": float(first.shared_dynamic),
        }
        if limits is not None:
            occ = occupancy(
                limits, math.prod(first.block), first.registers_per_thread, first.shared_static + first.shared_dynamic
            )
            metrics |= occ
            resident = min(v for k, v in occ.items() if k.startswith("launch__occupancy_limit_"))
            if resident > 0:
                metrics["launch__waves_per_multiprocessor"] = math.prod(first.grid) / (resident * limits.sm_count)
        kernel_samples = by_kernel.get(name, [])
        reasons: dict[str, float] = defaultdict(float)
        for _, reason, n in _issued(kernel_samples):
            reasons[reason] += n
        metrics |= {PCSAMP_PREFIX + reason: n for reason, n in reasons.items()}
        out.append(
            KernelProfile(
                name=name,
                duration_ns=sum(r.duration_ns for r in runs),
                launch=LaunchConfig(
                    grid=first.grid,
                    block=first.block,
                    registers_per_thread=first.registers_per_thread,
                    shared_mem_static=first.shared_static,
                    shared_mem_dynamic=first.shared_dynamic,
                ),
                metrics=metrics,
                hot_lines=hot_lines(kernel_samples, table, top),
                reader="pc_sampling",
            )
        )
    out.sort(key=lambda k: -k.duration_ns)
    return out


def hot_lines(samples: Iterable[PcSample], table: LineTable, top: int = 12) -> list[HotLine]:
    """The source lines with the most stall samples, each with its share of all the kernel's samples (those of
    instructions the cubins map to no line count in the whole) and its most frequent reason."""
    per_line: dict[tuple[str, int], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    total = 0.0
    for sample, reason, n in _issued(samples):
        total += n
        if (where := table.line_of(sample.kernel, sample.offset)) is not None:
            per_line[where][reason] += n
    rows = []
    for (file, line), reasons in per_line.items():
        count = sum(reasons.values())
        rows.append(
            HotLine(
                file=file,
                line=line,
                stall_pct=100.0 * count / total if total else 0.0,
                dominant_stall=max(reasons.items(), key=lambda kv: kv[1])[0],
                samples=int(count),
            )
        )
    rows.sort(key=lambda h: (-h.samples, h.file, h.line))
    return rows[:top]
