"""Rule-based "explain the bottleneck": findings from one kernel's Nsight Compute metrics, no LLM.

Each rule reads a few metrics (ncu names, see `metrics.py`), skips itself when one it needs is
missing, and yields a `Finding`: a stable rule id, the numbers behind it, the hot source lines it
concerns and a concrete suggestion. `analyze` runs every rule on one kernel and ranks the findings
by severity (0..1, descending); `analyze_many` looks at a whole launch sequence (launch overhead).

Severity scale: the roofline placement is context at ROOFLINE_SEVERITY (0.5); a flaw rule starts at
its floor when its metric just crosses the threshold and reaches its ceiling at a saturation value
(`_severity`). When the kernel runs at AT_ROOF_PCT of its roof or more, the latency-hiding and
parallelism rules (occupancy, grid size, warp stalls) are skipped: stalls are then the symptom of the
saturated resource, and only doing less work (fewer bytes or FLOPs) helps.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from .metrics import PCSAMP_PREFIX, STALL_PREFIX, STALL_SUFFIX, dram_bytes, sampled_stalls, stall_breakdown
from .model import DevicePeaks, Finding, HotLine, KernelProfile, Roofline
from .roofline import LATENCY_MAX_PCT, compute_roof, finite_metrics, place

# --- roofline placement
# Severity of the memory/compute-bound finding: the headline context, ranked below real flaws.
ROOFLINE_SEVERITY = 0.5
# At or above this % of the roof the kernel is at its ceiling (latency/parallelism rules are skipped).
AT_ROOF_PCT = 80.0

# --- occupancy
# Achieved occupancy (% of the SM's warp slots) below this is flagged.
LOW_OCCUPANCY_PCT = 30.0
# Theoretical minus achieved occupancy (percentage points) above this: the loss happens at run time
# (imbalanced or short-lived warps, too few blocks), not in the launch configuration.
OCCUPANCY_GAP_PCT = 20.0

# --- global memory coalescing (32-byte sectors per warp-level request)
# A warp reading one 32-bit word per thread, consecutively, touches 128 bytes = 4 sectors.
IDEAL_SECTORS_PER_REQUEST = 4.0
# Where ncu's source counters give the L2 sectors global accesses needed and the ideal for their access
# size (so 128-bit accesses are judged as such), a ratio above this is flagged; it saturates at 8x.
EXCESS_SECTORS_RATIO = 1.5
EXCESS_SECTORS_SATURATION = 8.0
# Flagged above this (2x the 32-bit ideal). 128-bit (float4) accesses ideally take 16: see the rule.
UNCOALESCED_SECTORS_PER_REQUEST = 8.0
# What 128-bit (float4) accesses take when coalesced: at or below it, sectors per request alone cannot tell a
# vector access from a wasteful scalar one, and the finding ranks below any certain one.
VECTOR_SECTORS_PER_REQUEST = 16.0
AMBIGUOUS_SECTORS_SEVERITY = 0.25
# Sectors of load/store instructions moving less than this share of the kernel's DRAM bytes: a minor path (the
# rest came by TMA or bulk copies, as in cuBLAS's Hopper GEMMs), ranked like an ambiguous finding.
MINOR_LSU_SHARE = 0.5
SECTOR_BYTES = 32.0
# One sector per thread (fully scattered): the severity saturates here.
SCATTERED_SECTORS_PER_REQUEST = 32.0

# --- DRAM traffic against the operation's minimum (`min_bytes`)
# Moving more than this multiple of the minimum bytes is flagged ...
EXCESS_TRAFFIC_RATIO = 1.5
# ... and the severity saturates at this multiple.
EXCESS_TRAFFIC_SATURATION = 4.0

# --- shared memory bank conflicts
# Extra wavefronts (conflicts) per shared load instruction above this (a 3-way conflict or worse on
# average) are flagged ...
BANK_CONFLICTS_PER_INST = 1.0
# ... and the severity saturates at this many (a 9-way conflict).
BANK_CONFLICTS_SATURATION = 8.0

# --- warp divergence
WARP_SIZE = 32
# Fewer active threads per executed instruction than this (75% of a warp) is flagged.
DIVERGENT_THREADS_PER_INST = 24.0
# Branch uniformity (% of branches all threads of a warp take the same way) below this is flagged.
BRANCH_UNIFORMITY_PCT = 90.0

# --- grid size
# A grid filling less than this fraction of one wave of resident blocks is too small.
UNDERFILLED_WAVES = 0.5
# Share of SM time the partial last wave leaves idle, (ceil(w) - w) / ceil(w), above which the tail
# effect is flagged. It can only exceed 0.2 below 4 waves; 1.1 waves -> 45%.
TAIL_IDLE_FRACTION = 0.2

# --- warp stalls (cycles per issued instruction, from `metrics.stall_breakdown`)
# A reason taking at least this share of the cycles between two issues of a warp is flagged.
STALL_MIN_SHARE = 0.3
# Schedulers issuing in at least this fraction of cycles hide their warps' stalls: skip the rule.
STALL_HIDDEN_ISSUE_ACTIVE = 0.8
# Not stalls to fix: "selected" is the issue cycle itself, "not_selected" means another eligible warp
# issued (the scheduler is busy, which is good).
STALL_IGNORED = frozenset({"selected", "not_selected"})

# --- launch overhead (across kernels)
# A kernel shorter than this (ns) is about as long as its own launch.
TINY_KERNEL_NS = 5_000.0
# GPU busy (sum of kernel durations) for less than this fraction of the wall time is flagged.
LAUNCH_BUSY_FRACTION = 0.5
# Typical host + driver cost of one launch (ns), to estimate idle time when no wall time is given.
LAUNCH_OVERHEAD_NS = 3_000.0

# Metric names used below (all in `metrics.METRICS`).
ACHIEVED_OCCUPANCY = "sm__warps_active.avg.pct_of_peak_sustained_active"
THEORETICAL_OCCUPANCY = "sm__maximum_warps_per_active_cycle_pct"
OCCUPANCY_LIMITS = {
    "registers": "launch__occupancy_limit_registers",
    "shared_mem": "launch__occupancy_limit_shared_mem",
    "blocks": "launch__occupancy_limit_blocks",
    "warps": "launch__occupancy_limit_warps",
}
GLOBAL_SECTORS = {
    "load": "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "store": "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
}
GLOBAL_REQUESTS = {
    "load": "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "store": "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
}
SHARED_LD_CONFLICTS = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"
SHARED_ST_CONFLICTS = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"
SHARED_LD_WAVEFRONTS = "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"
SHARED_LD_INSTRUCTIONS = "sm__sass_inst_executed_op_shared_ld.sum"
THREADS_PER_INST = "smsp__thread_inst_executed_per_inst_executed.ratio"
BRANCH_UNIFORMITY = "smsp__sass_average_branch_targets_threads_uniform.pct"
DIVERGENT_TARGETS = "smsp__sass_branch_targets_threads_divergent.sum"
SECTORS_THEORETICAL = "memory_l2_theoretical_sectors_global"
SECTORS_IDEAL = "memory_l2_theoretical_sectors_global_ideal"
WARP_CYCLES_PER_ISSUE = "smsp__average_warps_active_per_issue_active.ratio"
ISSUE_ACTIVE = "smsp__issue_active.avg.per_cycle_active"
DRAM_THROUGHPUT_PCT = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
L2_HIT_RATE = "lts__t_sector_hit_rate.pct"
L1_HIT_RATE = "l1tex__t_sector_hit_rate.pct"

# Stall reasons whose hot lines each rule points at.
MEMORY_STALLS = frozenset({"long_scoreboard", "lg_throttle", "tex_throttle", "drain"})
LATENCY_STALLS = frozenset({"long_scoreboard", "short_scoreboard", "wait", "barrier"})
COMPUTE_STALLS = frozenset({"math_pipe_throttle", "wait", "dispatch_stall"})
SHARED_STALLS = frozenset({"mio_throttle", "short_scoreboard"})
BRANCH_STALLS = frozenset({"branch_resolving"})


@dataclass(frozen=True)
class Stall:
    """What a stall reason means and what to do about it (NVIDIA's profiling-guide reading)."""

    label: str
    meaning: str
    suggestion: str


STALLS: dict[str, Stall] = {
    "long_scoreboard": Stall(
        "long scoreboard",
        "waiting for data from L1TEX: global, local or texture memory latency",
        "Keep more loads in flight: load several elements per thread before using them (unroll, ILP), "
        "raise occupancy, prefetch the next tile into shared memory (cp.async / TMA, double buffering) "
        "and improve locality; check for register spills to local memory.",
    ),
    "barrier": Stall(
        "barrier",
        "waiting at __syncthreads() for the slowest warp of the block",
        "Synchronize less often and do more work per barrier, balance work across the block's warps, "
        "use smaller blocks or warp-level primitives (__shfl_sync, cooperative groups) where a whole-block "
        "barrier is not needed.",
    ),
    "mio_throttle": Stall(
        "MIO throttle",
        "the memory-input/output queue is full: shared memory, special-function or "
        "dynamic-branch instructions are issued faster than served",
        "Issue fewer shared-memory instructions (wider 64/128-bit accesses, keep reused values in "
        "registers) and remove bank conflicts.",
    ),
    "short_scoreboard": Stall(
        "short scoreboard",
        "waiting for a shared-memory load or a special-function (MUFU: exp, rsqrt, sin) result",
        "Remove shared-memory bank conflicts, hoist shared loads out of inner loops into registers, and "
        "use cheaper math (fast intrinsics like __expf when accuracy allows).",
    ),
    "math_pipe_throttle": Stall(
        "math pipe throttle",
        "an execution pipe is saturated: the kernel is compute bound on that pipe",
        "Move work to a faster pipe (tensor cores for matrix products, FMA instead of separate mul+add, "
        "fp32 instead of fp64) or remove instructions; mixing pipes helps when one is saturated.",
    ),
    "lg_throttle": Stall(
        "LG throttle",
        "the local/global memory instruction queue is full",
        "Issue fewer, wider memory instructions (vectorize to 128-bit float4 loads/stores), combine "
        "adjacent accesses and avoid local-memory spills.",
    ),
    "wait": Stall(
        "wait",
        "waiting on a fixed-latency dependency (an arithmetic result not ready yet)",
        "Expose instruction-level parallelism: interleave independent computations, unroll loops, "
        "and keep enough warps per scheduler to cover the latency.",
    ),
    "membar": Stall(
        "memory barrier",
        "waiting for a memory fence to complete",
        "Remove unneeded __threadfence() / fences, use the narrowest scope (block instead of device) "
        "and relaxed atomics where ordering is not required.",
    ),
    "branch_resolving": Stall(
        "branch resolving",
        "waiting for a branch target or the branch's divergence bookkeeping",
        "Reduce branching: make conditions warp-uniform, replace short branches with selects, and "
        "hoist loop-invariant conditions out of loops.",
    ),
    "no_instruction": Stall(
        "no instruction",
        "the warp has no fetched instruction: instruction-cache misses",
        "Shrink the hot code (less unrolling or inlining of rarely taken paths); many small kernels "
        "also show this at start-up.",
    ),
    "dispatch_stall": Stall(
        "dispatch stall",
        "the dispatcher could not issue the selected instruction (pipeline conflict)",
        "Usually a compiler or hardware pipeline conflict; vary the instruction mix or the compiler flags and compare.",
    ),
    "drain": Stall(
        "drain",
        "waiting at exit for the warp's memory stores to drain",
        "Give each thread more work so the exit drain is amortized, and coalesce the final stores.",
    ),
    "imc_miss": Stall(
        "IMC miss",
        "waiting for an immediate-constant cache miss",
        "Access __constant__ memory with the same address across a warp; pass small tables as "
        "kernel arguments or load them into shared memory.",
    ),
    "tex_throttle": Stall(
        "TEX throttle",
        "the texture/L1TEX queue is full",
        "Issue fewer texture or surface fetches, or do more arithmetic per fetch.",
    ),
    "sleeping": Stall(
        "sleeping",
        "warps are sleeping (nanosleep, yield or a spin-wait)",
        "Check spin-waits and producer/consumer hand-offs for warps that wait on each other.",
    ),
}


@dataclass(frozen=True)
class _Context:
    profile: KernelProfile
    peaks: DevicePeaks
    roof: Roofline | None
    min_bytes: float | None

    def metric(self, name: str) -> float | None:
        """A metric's value, or None when it is missing."""
        return self.profile.metrics.get(name)


# ------------------------------------------------------------------------------------ helpers


def _severity(value: float, start: float, saturation: float, floor: float = 0.3, ceiling: float = 1.0) -> float:
    """`floor` when `value` is at `start`, rising linearly to `ceiling` at `saturation` (either direction)."""
    t = (value - start) / (saturation - start)
    return floor + (ceiling - floor) * min(max(t, 0.0), 1.0)


def _stall_name(label: str) -> str:
    """Normalize a stall label from a hot line ("Long Scoreboard", an ncu pc-sampling metric name, ...)."""
    name = label.strip().lower().replace(" ", "_")
    for prefix in (PCSAMP_PREFIX, STALL_PREFIX, "stall_"):
        name = name.removeprefix(prefix)
    return name.removesuffix(STALL_SUFFIX).removesuffix("_not_issued")


def _lines(profile: KernelProfile, reasons: Iterable[str]) -> list[HotLine]:
    """The profile's hot lines whose dominant stall is one of `reasons`, hottest first."""
    wanted = set(reasons)
    hits = [line for line in profile.hot_lines if _stall_name(line.dominant_stall) in wanted]
    return sorted(hits, key=lambda line: -line.stall_pct)


def _rate(value: float, unit: str) -> str:
    """1.23e12, "B/s" -> "1.23 TB/s"."""
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M")):
        if abs(value) >= scale:
            return f"{value / scale:.2f} {prefix}{unit}"
    return f"{value:.0f} {unit}"


def _block_size(ctx: _Context) -> int | None:
    if ctx.profile.launch is not None:
        return math.prod(ctx.profile.launch.block)
    value = ctx.metric("launch__block_size")
    return int(value) if value is not None else None


def _grid_size(ctx: _Context) -> int | None:
    if ctx.profile.launch is not None:
        return math.prod(ctx.profile.launch.grid)
    value = ctx.metric("launch__grid_size")
    return int(value) if value is not None else None


def _registers(ctx: _Context) -> int | None:
    launch = ctx.profile.launch
    if launch is not None and launch.registers_per_thread is not None:
        return launch.registers_per_thread
    value = ctx.metric("launch__registers_per_thread")
    return int(value) if value is not None else None


def _shared_mem_per_block(ctx: _Context) -> int | None:
    launch = ctx.profile.launch
    if launch is not None and (launch.shared_mem_static is not None or launch.shared_mem_dynamic is not None):
        return (launch.shared_mem_static or 0) + (launch.shared_mem_dynamic or 0)
    parts = [ctx.metric("launch__shared_mem_per_block_static"), ctx.metric("launch__shared_mem_per_block_dynamic")]
    known = [p for p in parts if p is not None]
    return int(sum(known)) if known else None


def _with_optional(evidence: dict[str, float | str], **optional: float | None) -> dict[str, float | str]:
    """`evidence` plus the optional values that are known."""
    return evidence | {key: value for key, value in optional.items() if value is not None}


# ------------------------------------------------------------------------------------ rules


def _roofline_rule(ctx: _Context) -> Iterator[Finding]:
    """memory_bound / compute_bound / latency_bound, from the roofline placement."""
    roof = ctx.roof
    if roof is None:
        return
    peaks, metrics = ctx.peaks, ctx.profile.metrics
    compute = compute_roof(metrics, peaks)
    ridge = compute.flops_per_s / peaks.dram_bytes_per_s
    evidence = _with_optional(
        {
            "arithmetic_intensity": roof.arithmetic_intensity,
            "ridge_point": ridge,
            "achieved_bytes_per_s": roof.achieved_bytes_per_s,
            "peak_bytes_per_s": peaks.dram_bytes_per_s,
            "achieved_flops_per_s": roof.achieved_flops_per_s,
            "peak_flops_per_s": compute.flops_per_s,
            "compute_roof": compute.pipe,
            "pct_of_roof": roof.pct_of_roof,
        },
        dram_throughput_pct=ctx.metric(DRAM_THROUGHPUT_PCT),
        l2_hit_rate_pct=ctx.metric(L2_HIT_RATE),
    )
    at_roof = roof.pct_of_roof >= AT_ROOF_PCT
    if roof.bound == "memory":
        yield Finding(
            rule="memory_bound",
            title=(
                f"Memory bound: {roof.pct_of_roof:.0f}% of the DRAM roof "
                f"({_rate(roof.achieved_bytes_per_s, 'B/s')} of {_rate(peaks.dram_bytes_per_s, 'B/s')})"
            ),
            severity=ROOFLINE_SEVERITY,
            evidence=evidence,
            lines=_lines(ctx.profile, MEMORY_STALLS),
            suggestion=(
                "At the bandwidth roof: only moving fewer bytes helps. Fuse with neighbouring "
                "operations, store intermediates in bf16/fp16, and keep reused data on chip."
                if at_roof
                else "Below the bandwidth roof: coalesce and vectorize accesses (128-bit), keep more "
                "bytes in flight (more blocks, several loads per thread), then move fewer bytes "
                "(fusion, lower precision)."
            ),
        )
    elif roof.bound == "compute":
        tensor_unused = compute.pipe == "fp32" and bool(peaks.bf16_tensor_flops_per_s or peaks.tf32_tensor_flops_per_s)
        yield Finding(
            rule="compute_bound",
            title=(
                f"Compute bound: {roof.pct_of_roof:.0f}% of the {compute.pipe} roof "
                f"({_rate(roof.achieved_flops_per_s, 'FLOP/s')} of {_rate(compute.flops_per_s, 'FLOP/s')})"
            ),
            severity=ROOFLINE_SEVERITY,
            evidence=evidence,
            lines=_lines(ctx.profile, COMPUTE_STALLS),
            suggestion=(
                (
                    "Use tensor cores for the matrix products (TF32/BF16 MMA: cuBLAS, tl.dot, WMMA); "
                    "their roof is far above the fp32 one. "
                    if tensor_unused
                    else ""
                )
                + (
                    "At the compute roof: only fewer or cheaper operations help (algebraic "
                    "simplification, precomputation, lower precision)."
                    if at_roof
                    else "Below the compute roof: raise instruction-level parallelism and issue "
                    "efficiency (unroll, FMA, fewer address computations), then remove work."
                )
            ),
        )
    else:
        compute_pct = 100 * roof.achieved_flops_per_s / compute.flops_per_s
        memory_pct = 100 * roof.achieved_bytes_per_s / peaks.dram_bytes_per_s
        yield Finding(
            rule="latency_bound",
            title=(
                f"Latency bound: {compute_pct:.0f}% of the {compute.pipe} compute peak and "
                f"{memory_pct:.0f}% of DRAM bandwidth"
            ),
            severity=_severity(max(compute_pct, memory_pct), LATENCY_MAX_PCT, 0.0, floor=0.6, ceiling=0.9),
            evidence=evidence | {"compute_pct_of_peak": compute_pct, "dram_pct_of_peak": memory_pct},
            lines=_lines(ctx.profile, LATENCY_STALLS),
            suggestion=(
                "Neither compute nor bandwidth is saturated: warps wait. Expose more parallelism "
                "(more blocks and warps, higher occupancy), more independent work per thread "
                "(ILP, unrolling) and fewer serializing barriers or atomics; the stall findings "
                "say what the warps wait on."
            ),
        )


def _occupancy_suggestion(limiter: str, limit: float, ctx: _Context) -> str:
    block, regs, smem = _block_size(ctx), _registers(ctx), _shared_mem_per_block(ctx)
    blocks = f"{limit:.0f} block{'s' if limit != 1 else ''} per SM"
    if limiter == "registers":
        bounds = f"__launch_bounds__({block}, {int(limit) + 1})" if block else "__launch_bounds__"
        used = f"{regs} registers per thread" if regs is not None else "register use"
        return (
            f"{used} allow only {blocks}: cap registers with {bounds} or -maxrregcount, and keep fewer "
            "values live (less unrolling, recompute cheap values)."
        )
    if limiter == "shared_mem":
        used = f"{smem} bytes of shared memory per block" if smem is not None else "Shared memory per block"
        return (
            f"{used} allow only {blocks}: use smaller tiles or fewer pipeline stages, reuse buffers, "
            "or raise the shared-memory carve-out (cudaFuncAttributePreferredSharedMemoryCarveout)."
        )
    if limiter == "blocks":
        size = f"Blocks of {block} threads" if block else "Small blocks"
        return (
            f"{size} hit the per-SM block limit ({blocks}) before filling the warp slots: use larger "
            "blocks (256 threads or more) or more work per block."
        )
    size = f"blocks of {block} threads" if block else "the block size"
    return (
        f"The warp slots limit {size} to {blocks}: choose a block size that packs evenly into the SM "
        "(128 or 256 threads)."
    )


def _occupancy_rule(ctx: _Context) -> Iterator[Finding]:
    """low_occupancy: achieved occupancy below LOW_OCCUPANCY_PCT, with the launch limiter named."""
    achieved = ctx.metric(ACHIEVED_OCCUPANCY)
    theoretical = ctx.metric(THEORETICAL_OCCUPANCY)
    # a profile taken in the process has the launch's (theoretical) occupancy only: what is achieved is at most that
    occupied = achieved if achieved is not None else theoretical
    if occupied is None or occupied >= LOW_OCCUPANCY_PCT:
        return
    limits = {name: value for name, metric in OCCUPANCY_LIMITS.items() if (value := ctx.metric(metric)) is not None}
    evidence = _with_optional(
        {"achieved_occupancy_pct": achieved} if achieved is not None else {},
        theoretical_occupancy_pct=theoretical,
        registers_per_thread=_registers(ctx),
        block_size=_block_size(ctx),
        shared_mem_per_block=_shared_mem_per_block(ctx),
    )
    evidence |= {f"block_limit_{name}": value for name, value in limits.items()}
    if achieved is not None and theoretical is not None and theoretical - achieved > OCCUPANCY_GAP_PCT:
        cause = "run time"
        suggestion = (
            f"The launch allows {theoretical:.0f}% but only {achieved:.0f}% is achieved: warps "
            "finish unevenly or the grid does not keep the SMs filled. Balance work across blocks "
            "and warps, launch more (or persistent) blocks, and avoid a few long-running warps."
        )
    elif limits:
        cause = min(limits, key=lambda name: limits[name])
        suggestion = _occupancy_suggestion(cause, limits[cause], ctx)
    else:
        cause = "unknown"
        suggestion = (
            "Raise the number of resident warps: fewer registers per thread, less shared memory "
            "per block, or larger blocks."
        )
    evidence["limiter"] = cause
    yield Finding(
        rule="low_occupancy",
        title=(
            f"Low occupancy: {occupied:.0f}% of the SM's warp slots "
            f"{'in use' if achieved is not None else 'allowed by the launch'} (limited by {cause.replace('_', ' ')})"
        ),
        severity=_severity(occupied, LOW_OCCUPANCY_PCT, 0.0, floor=0.3, ceiling=0.8),
        evidence=evidence,
        suggestion=suggestion,
        lines=(
            (_lines_by(ctx.profile, lambda h: h.register_span, share=0.2) if cause == "registers" else [])
            or _lines(ctx.profile, LATENCY_STALLS)
        ),
    )


def _lines_by(profile: KernelProfile, amount: Callable[[HotLine], float], share: float = 0.1) -> list[HotLine]:
    """Lines carrying at least `share` of the largest `amount`, largest first."""
    top = max((amount(h) for h in profile.hot_lines), default=0.0)
    if top <= 0:
        return []
    return sorted((h for h in profile.hot_lines if amount(h) >= share * top), key=lambda h: -amount(h))


def _excess_sectors(line: HotLine) -> float:
    return line.global_sectors - line.global_sectors_ideal


def _coalescing_rule(ctx: _Context) -> Iterator[Finding]:
    """uncoalesced_global_access: more L2 sectors than the access size needs.

    With ncu's source counters: theoretical vs. ideal sectors of all global accesses (exact for any
    access width), lines ranked by excess sectors. Otherwise: sectors per request above 8 (the ideal
    is 4 for 32-bit accesses, 16 for 128-bit ones, which this fallback cannot tell apart).
    """
    theoretical, ideal = ctx.metric(SECTORS_THEORETICAL), ctx.metric(SECTORS_IDEAL)
    if theoretical is not None and ideal:
        ratio = theoretical / ideal
        if ratio <= EXCESS_SECTORS_RATIO:
            return
        lines = _lines_by(ctx.profile, _excess_sectors) or _lines(ctx.profile, MEMORY_STALLS)
        yield Finding(
            rule="uncoalesced_global_access",
            title=(
                f"Uncoalesced global accesses: {ratio:.1f}x the L2 sectors their access size needs"
                + (f" (worst at line {lines[0].line})" if lines else "")
            ),
            severity=_severity(ratio, EXCESS_SECTORS_RATIO, EXCESS_SECTORS_SATURATION, floor=0.5),
            evidence=_with_optional(
                {"l2_sectors": theoretical, "ideal_l2_sectors": ideal, "ratio": ratio},
                **{
                    f"{kind}_sectors_per_request": sectors / r
                    for kind, m in GLOBAL_SECTORS.items()
                    if (sectors := ctx.metric(m)) is not None and (r := ctx.metric(GLOBAL_REQUESTS[kind]))
                },
            ),
            lines=lines,
            suggestion=_COALESCING_ADVICE,
        )
        return
    ratios: dict[str, float] = {}
    for kind, sectors_metric in GLOBAL_SECTORS.items():
        sectors, requests = ctx.metric(sectors_metric), ctx.metric(GLOBAL_REQUESTS[kind])
        if sectors is not None and requests:
            ratios[kind] = sectors / requests
    flagged = {kind: ratio for kind, ratio in ratios.items() if ratio > UNCOALESCED_SECTORS_PER_REQUEST}
    if not flagged:
        return
    worst_kind = max(flagged, key=lambda kind: flagged[kind])
    worst = flagged[worst_kind]
    kinds = " and ".join(f"{kind}s" for kind in flagged)
    # up to 16 sectors a request is what 128-bit accesses need: without the access width (ncu's source counters),
    # that is a question, not a cause to rank above what is certain
    maybe_vector = worst <= VECTOR_SECTORS_PER_REQUEST
    # every byte a load or store instruction moves passes through L1 as these sectors; when they are a small part of
    # the DRAM traffic, the rest came by other paths (TMA, bulk copies) and these accesses are not the bottleneck
    lsu_bytes = SECTOR_BYTES * sum(ctx.metric(m) or 0.0 for m in GLOBAL_SECTORS.values())
    moved = dram_bytes(ctx.profile.metrics)
    minor = moved > 0 and lsu_bytes < MINOR_LSU_SHARE * moved
    evidence = {f"{kind}_sectors_per_request": ratio for kind, ratio in ratios.items()} | {
        "ideal_sectors_per_request": IDEAL_SECTORS_PER_REQUEST
    }
    if minor:
        evidence["lsu_share_of_dram_bytes"] = lsu_bytes / moved
    yield Finding(
        rule="uncoalesced_global_access",
        title=(
            f"{'Possibly uncoalesced' if maybe_vector else 'Uncoalesced'} global {kinds}: {worst:.1f} sectors per "
            f"{worst_kind} request (ideal {IDEAL_SECTORS_PER_REQUEST:.0f} for 32-bit accesses"
            + (f", {VECTOR_SECTORS_PER_REQUEST:.0f} for 128-bit ones)" if maybe_vector else ")")
        ),
        severity=AMBIGUOUS_SECTORS_SEVERITY
        if maybe_vector or minor
        else _severity(worst, VECTOR_SECTORS_PER_REQUEST, SCATTERED_SECTORS_PER_REQUEST, floor=0.5),
        evidence=evidence,
        lines=_lines(ctx.profile, MEMORY_STALLS),
        suggestion=_COALESCING_ADVICE
        + (
            " (16 sectors per request is ideal for 128-bit float4 accesses: if these "
            "are vector accesses, they are already coalesced.)"
        ),
    )


_COALESCING_ADVICE = (
    "Make consecutive threads (threadIdx.x) touch consecutive addresses: map threadIdx.x to "
    "the fastest-varying index, transpose through shared memory for strided or column "
    "access, and prefer structure-of-arrays layouts."
)


def _traffic_rule(ctx: _Context) -> Iterator[Finding]:
    """excess_global_traffic: DRAM bytes well above the minimum the operation needs (when known)."""
    moved = dram_bytes(ctx.profile.metrics)
    if not ctx.min_bytes or ctx.min_bytes <= 0 or moved <= 0:
        return
    ratio = moved / ctx.min_bytes
    if ratio <= EXCESS_TRAFFIC_RATIO:
        return
    yield Finding(
        rule="excess_global_traffic",
        title=f"Excess DRAM traffic: {ratio:.1f}x the bytes the operation needs",
        severity=_severity(ratio, EXCESS_TRAFFIC_RATIO, EXCESS_TRAFFIC_SATURATION, floor=0.4),
        evidence=_with_optional(
            {"dram_bytes": moved, "min_bytes": ctx.min_bytes, "ratio": ratio},
            dram_read_bytes=ctx.metric("dram__bytes_read.sum"),
            dram_write_bytes=ctx.metric("dram__bytes_write.sum"),
            l2_hit_rate_pct=ctx.metric(L2_HIT_RATE),
            l1_hit_rate_pct=ctx.metric(L1_HIT_RATE),
        ),
        lines=_lines(ctx.profile, MEMORY_STALLS),
        suggestion=(
            "Read each input and write each output once: fuse passes over the same data, keep "
            "reused tiles in shared memory or registers, order blocks so reused data stays in L2 "
            "(tile swizzling), and avoid register spills to local memory."
        ),
    )


def _bank_conflict_rule(ctx: _Context) -> Iterator[Finding]:
    """shared_bank_conflicts: extra shared-load wavefronts per shared load instruction above 1."""
    conflicts = ctx.metric(SHARED_LD_CONFLICTS)
    if not conflicts:
        return
    instructions, wavefronts = ctx.metric(SHARED_LD_INSTRUCTIONS), ctx.metric(SHARED_LD_WAVEFRONTS)
    if instructions:
        per_inst = conflicts / instructions
    elif wavefronts and wavefronts > conflicts:  # conflict-free wavefronts stand in for instructions
        per_inst = conflicts / (wavefronts - conflicts)
    else:
        return
    if per_inst <= BANK_CONFLICTS_PER_INST:
        return
    yield Finding(
        rule="shared_bank_conflicts",
        title=f"Shared-memory bank conflicts: {per_inst:.1f} extra wavefronts per shared load",
        severity=_severity(per_inst, BANK_CONFLICTS_PER_INST, BANK_CONFLICTS_SATURATION, floor=0.4),
        evidence=_with_optional(
            {"load_bank_conflicts": conflicts, "conflicts_per_load": per_inst},
            store_bank_conflicts=ctx.metric(SHARED_ST_CONFLICTS),
            shared_load_instructions=instructions,
            shared_load_wavefronts=wavefronts,
        ),
        lines=(_lines_by(ctx.profile, lambda h: h.shared_excess_wavefronts) or _lines(ctx.profile, SHARED_STALLS)),
        suggestion=(
            "Make the 32 lanes of a warp hit 32 different banks: pad shared arrays (e.g. [32][33] "
            "instead of [32][32]) or XOR-swizzle the column index, read tiles along rows, and use "
            "64/128-bit shared accesses whose lanes map to distinct banks."
        ),
    )


def _divergence_rule(ctx: _Context) -> Iterator[Finding]:
    """warp_divergence: few active threads per instruction, or non-uniform branches."""
    threads, uniformity = ctx.metric(THREADS_PER_INST), ctx.metric(BRANCH_UNIFORMITY)
    if not ctx.metric(DIVERGENT_TARGETS):  # ncu reports 0% uniform when no branch diverged at all
        uniformity = None
    severities = []
    if threads is not None and threads < DIVERGENT_THREADS_PER_INST:
        severities.append(_severity(threads, DIVERGENT_THREADS_PER_INST, 4.0, floor=0.3, ceiling=0.9))
    if uniformity is not None and uniformity < BRANCH_UNIFORMITY_PCT:
        severities.append(_severity(uniformity, BRANCH_UNIFORMITY_PCT, 30.0, floor=0.3, ceiling=0.9))
    if not severities:
        return
    block = _block_size(ctx)
    partial_warp = block is not None and block % WARP_SIZE != 0
    title = (
        f"Warp divergence: {threads:.1f} of {WARP_SIZE} threads active per instruction"
        if threads is not None
        else f"Warp divergence: {uniformity:.0f}% of branches warp-uniform"
    )
    yield Finding(
        rule="warp_divergence",
        title=title,
        severity=max(severities),
        evidence=_with_optional(
            {}, threads_per_instruction=threads, branch_uniformity_pct=uniformity, block_size=block
        ),
        lines=_lines(ctx.profile, BRANCH_STALLS),
        suggestion=(
            (
                f"The block size {block} is not a multiple of {WARP_SIZE}: the last warp of every "
                "block runs partly empty; round it up. "
                if partial_warp
                else ""
            )
            + "Make branches warp-uniform: branch on values equal across a warp (block or warp "
            "indices), group work so neighbouring threads take the same path, replace short "
            "if/else with selects, and handle boundaries in a separate tail step."
        ),
    )


def _grid_rule(ctx: _Context) -> Iterator[Finding]:
    """too_few_blocks (grid smaller than the SM count, or a fraction of one wave) / tail_effect."""
    grid, sms = _grid_size(ctx), ctx.peaks.sm_count
    waves = ctx.metric("launch__waves_per_multiprocessor")
    evidence = _with_optional({"sm_count": sms}, grid_blocks=grid, waves_per_sm=waves)
    if grid is not None and grid < sms:
        yield Finding(
            rule="too_few_blocks",
            title=f"Too few blocks: {grid} blocks for {sms} SMs ({sms - grid} SMs idle)",
            severity=_severity(grid, sms, 0, floor=0.4),
            evidence=evidence,
            suggestion=(
                f"Launch at least {sms} blocks (better a few per SM): split the work finer (smaller "
                "tiles, split-K / split the reduction, one block per row segment) or use a "
                "persistent grid of SM-count x blocks-per-SM blocks."
            ),
        )
    elif waves is not None and 0 < waves < UNDERFILLED_WAVES:
        yield Finding(
            rule="too_few_blocks",
            title=f"Too few blocks: the grid fills {waves:.0%} of the GPU's resident-block slots",
            severity=_severity(waves, UNDERFILLED_WAVES, 0.0, floor=0.3, ceiling=0.6),
            evidence=evidence,
            suggestion=(
                "More, smaller blocks (or more warps per block) would keep more warps resident to "
                "hide latency: split the work finer or use split-K / split reductions."
            ),
        )
    elif waves is not None and waves > 1:
        full = math.ceil(waves)
        idle = (full - waves) / full
        if idle >= TAIL_IDLE_FRACTION:
            yield Finding(
                rule="tail_effect",
                title=f"Tail effect: {waves:.2f} waves per SM, the partial last wave leaves {idle:.0%} of SM time idle",
                severity=_severity(idle, TAIL_IDLE_FRACTION, 0.5, floor=0.3, ceiling=0.8),
                evidence=evidence | {"idle_fraction": idle},
                suggestion=(
                    "Make the grid a whole number of waves (a multiple of SM count x resident "
                    "blocks per SM), loop over tiles with a persistent grid, or split the work "
                    "finer so the last wave is a small part of the whole."
                ),
            )


def _stall_rule(ctx: _Context) -> Iterator[Finding]:
    """stall_<reason>: each reason taking STALL_MIN_SHARE or more of the cycles between issues."""
    breakdown, sampled = stall_breakdown(ctx.profile.metrics), False
    if not breakdown:  # a profile taken in the process: PC samples, no per-issue ratios
        breakdown, sampled = sampled_stalls(ctx.profile.metrics), True
    issue_active = ctx.metric(ISSUE_ACTIVE)
    if not breakdown or (issue_active is not None and issue_active >= STALL_HIDDEN_ISSUE_ACTIVE):
        return
    total = (None if sampled else ctx.metric(WARP_CYCLES_PER_ISSUE)) or sum(breakdown.values())
    for reason, cycles in breakdown.items():
        share = cycles / total
        if reason in STALL_IGNORED or share < STALL_MIN_SHARE:
            continue
        stall = STALLS.get(
            reason,
            Stall(
                reason.replace("_", " "),
                f"stall reason '{reason}'",
                "See the Nsight Compute warp-state documentation for this reason.",
            ),
        )
        yield Finding(
            rule=f"stall_{reason}",
            title=f"Warps stall on {stall.label} ({share:.0%} of the cycles between issues): {stall.meaning}",
            severity=_severity(share, STALL_MIN_SHARE, 0.8, floor=0.3, ceiling=0.9),
            evidence=_with_optional(
                {"reason": reason, "stall_samples": cycles, "samples": total, "share_pct": 100 * share}
                if sampled
                else {
                    "reason": reason,
                    "stall_cycles_per_issue": cycles,
                    "warp_cycles_per_issue": total,
                    "share_pct": 100 * share,
                },
                issue_active=issue_active,
            ),
            lines=_lines(ctx.profile, {reason}),
            suggestion=stall.suggestion,
        )


_Rule = Callable[[_Context], Iterator[Finding]]
_ALWAYS_RULES: tuple[_Rule, ...] = (
    _roofline_rule,
    _coalescing_rule,
    _traffic_rule,
    _bank_conflict_rule,
    _divergence_rule,
)
# Rules that say the kernel does not hide latency or use enough parallelism: pointless at the roof.
_LATENCY_RULES: tuple[_Rule, ...] = (_occupancy_rule, _grid_rule, _stall_rule)


# "Latency bound" (far below both roofs) says what, not why: when one of these causes fires, the most
# severe of them ranks above it, so the top finding is the one to act on.
LATENCY_CAUSES = (
    "low_occupancy",
    "too_few_blocks",
    "tail_effect",
    "uncoalesced_global_access",
    "shared_bank_conflicts",
    "excess_global_traffic",
    "warp_divergence",
)


def _uncertain(f: Finding) -> bool:
    """A coalescing finding made without ncu's access-width counters that says only "possibly" (`_coalescing_rule`)."""
    return f.rule == "uncoalesced_global_access" and f.severity <= AMBIGUOUS_SECTORS_SEVERITY


def _ranked(findings: Iterable[Finding]) -> list[Finding]:
    """Most severe first, causes above their symptoms (latency-bound, and warps stalled waiting on latency: too few
    warps, too few blocks or wasted sectors are why such stalls are not hidden); ties by rule id so the order is
    stable."""
    found = list(findings)
    symptoms = [f for f in found if f.rule == "latency_bound" or f.rule.removeprefix("stall_") in LATENCY_STALLS]
    # a cause the counters only suggest (sectors that 128-bit accesses would also need, or loads that carry a small
    # part of the DRAM traffic) is not raised above what was measured: it keeps its own rank
    causes = [f for f in found if f.rule in LATENCY_CAUSES and not _uncertain(f)]
    if symptoms and causes:
        worst = max(f.severity for f in symptoms)
        top = max(causes, key=lambda f: f.severity)
        if top.severity <= worst:
            top.severity = min(1.0, worst + 0.01)
    return sorted(found, key=lambda f: (-f.severity, f.rule))


def analyze(profile: KernelProfile, peaks: DevicePeaks, *, min_bytes: float | None = None) -> list[Finding]:
    """Findings for one kernel, most severe first.

    `min_bytes`: the fewest DRAM bytes the operation needs (each input read and each output
    written once), when the caller knows it; enables `excess_global_traffic`.
    """
    profile = profile.model_copy(update={"metrics": finite_metrics(profile.metrics)})
    roof = place(profile, peaks)
    ctx = _Context(profile, peaks, roof, min_bytes)
    rules = _ALWAYS_RULES
    if roof is None or roof.pct_of_roof < AT_ROOF_PCT:
        rules += _LATENCY_RULES
    return _ranked(finding for rule in rules for finding in rule(ctx))


def analyze_many(profiles: Sequence[KernelProfile], wall_ns: float | None = None) -> list[Finding]:
    """Findings about a launch sequence as a whole (per-kernel findings come from `analyze`).

    launch_overhead: the GPU is busy (sum of kernel durations) for less than LAUNCH_BUSY_FRACTION of
    the measured `wall_ns`; without a wall time, when there are several kernels and every one is
    shorter than TINY_KERNEL_NS (idle time then estimated at LAUNCH_OVERHEAD_NS per launch).
    """
    durations = [p.duration_ns for p in profiles if math.isfinite(p.duration_ns)]
    if not durations:
        return []
    n, busy = len(durations), sum(durations)
    tiny = sum(d < TINY_KERNEL_NS for d in durations)
    evidence: dict[str, float | str] = {
        "kernels": n,
        "tiny_kernels": tiny,
        "busy_ns": busy,
        "median_kernel_ns": statistics.median(durations),
    }
    if wall_ns is not None and math.isfinite(wall_ns) and wall_ns > 0:
        if busy / wall_ns >= LAUNCH_BUSY_FRACTION:
            return []
        idle = 1 - busy / wall_ns
        evidence |= {"wall_ns": wall_ns, "busy_pct": 100 * busy / wall_ns}
        title = f"Launch overhead: the GPU is busy {busy / wall_ns:.0%} of the wall time over {n} kernels"
    elif n > 1 and tiny == n:
        overhead = n * LAUNCH_OVERHEAD_NS
        idle = overhead / (overhead + busy)
        evidence["estimated_idle_pct"] = 100 * idle
        title = f"Launch overhead: {n} tiny kernels, each shorter than {TINY_KERNEL_NS / 1e3:.0f} us"
    else:
        return []
    return [
        Finding(
            rule="launch_overhead",
            title=title,
            severity=_severity(idle, 0.3, 0.95, floor=0.4),
            evidence=evidence,
            suggestion=(
                f"Fewer, bigger launches: fuse the {n} kernels, capture the sequence in a CUDA "
                "graph (torch.cuda.CUDAGraph, torch.compile(mode='reduce-overhead')), and remove host "
                "synchronizations (.item(), .cpu(), printing) between launches."
            ),
        )
    ]
