"""Place one kernel on the device's roofline.

Arithmetic intensity is FLOPs per DRAM byte. FLOPs are the fp32 FMA/ADD/MUL counts from SASS
(`metrics.fp32_flops`), which do not see tensor-core work; so when the tensor pipe is busy (at least
TENSOR_PIPE_MIN_PCT of its peak) the compute roof is the device's tensor peak (BF16 when known, else
TF32) and the tensor FLOPs are estimated as pipe utilization x that peak x duration. For TF32 kernels
that estimate is up to 2x high (a TF32 MMA does half the work of a BF16 one per pipe cycle), but
`pct_of_roof` stays right because it is then the pipe utilization itself.

Classification (`bound`): when neither the achieved FLOP/s nor the achieved DRAM bytes/s reach
LATENCY_MAX_PCT of their peaks, the kernel is "latency" bound (it waits, it does not saturate
anything); otherwise it is "memory" bound below the ridge point (AI < compute peak / bandwidth) and
"compute" bound above it. Below the ridge the DRAM fraction is always the larger of the two, so
the limiter and the side of the ridge agree.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from .metrics import dram_bytes, fp32_flops
from .model import DevicePeaks, KernelProfile, Roofline

# Tensor-pipe utilization metrics (% of peak while the SM is active). HMMA is in the curated set;
# GMMA (Hopper wgmma, which HMMA does not count) is read when a full report provides it.
TENSOR_PIPE_METRICS = (
    "sm__inst_executed_pipe_tensor_op_hmma.avg.pct_of_peak_sustained_active",
    "sm__inst_executed_pipe_tensor_op_gmma.avg.pct_of_peak_sustained_active",
)
# A tensor pipe busier than this (% of its peak) makes the tensor peak the compute roof; below it the
# kernel is a CUDA-core kernel that may issue a stray MMA.
TENSOR_PIPE_MIN_PCT = 10.0
# Below this share (%) of both the compute and the bandwidth peak, a kernel is latency bound.
LATENCY_MAX_PCT = 40.0


class ComputeRoof(NamedTuple):
    """The compute ceiling used for a kernel: FLOP/s and which pipe it is."""

    flops_per_s: float
    pipe: str  # "fp32" | "bf16 tensor" | "tf32 tensor"


def finite_metrics(metrics: dict[str, float]) -> dict[str, float]:
    """`metrics` without NaN or infinite values (ncu reports "n/a" counters as NaN): missing, not poison."""
    return {name: value for name, value in metrics.items() if math.isfinite(value)}


def tensor_pipe_pct(metrics: dict[str, float]) -> float:
    """Tensor-pipe utilization (% of peak), the busiest of the known tensor-pipe metrics; 0 if none."""
    return max((metrics.get(name, 0.0) for name in TENSOR_PIPE_METRICS), default=0.0)


def compute_roof(metrics: dict[str, float], peaks: DevicePeaks) -> ComputeRoof:
    """The tensor peak when the tensor pipe is substantially busy (and the peak is known), else fp32."""
    if tensor_pipe_pct(metrics) >= TENSOR_PIPE_MIN_PCT:
        if peaks.bf16_tensor_flops_per_s:
            return ComputeRoof(peaks.bf16_tensor_flops_per_s, "bf16 tensor")
        if peaks.tf32_tensor_flops_per_s:
            return ComputeRoof(peaks.tf32_tensor_flops_per_s, "tf32 tensor")
    return ComputeRoof(peaks.fp32_flops_per_s, "fp32")


def place(profile: KernelProfile, peaks: DevicePeaks) -> Roofline | None:
    """Roofline placement of `profile`, or None without a duration or DRAM byte counts."""
    metrics = finite_metrics(profile.metrics)
    seconds = profile.duration_ns / 1e9
    moved = dram_bytes(metrics)
    if not (math.isfinite(seconds) and seconds > 0 and moved > 0):
        return None
    roof = compute_roof(metrics, peaks)
    flops = fp32_flops(metrics)
    if roof.pipe != "fp32":
        flops += tensor_pipe_pct(metrics) / 100 * roof.flops_per_s * seconds
    intensity = flops / moved
    achieved_flops, achieved_bytes = flops / seconds, moved / seconds
    compute_pct = 100 * achieved_flops / roof.flops_per_s
    memory_pct = 100 * achieved_bytes / peaks.dram_bytes_per_s
    below_ridge = intensity * peaks.dram_bytes_per_s < roof.flops_per_s
    # achieved / min(compute peak, AI x bandwidth): below the ridge that is the bandwidth fraction
    # (defined even at AI = 0), above it the compute fraction.
    pct_of_roof = memory_pct if below_ridge else compute_pct
    if max(compute_pct, memory_pct) < LATENCY_MAX_PCT:
        bound = "latency"
    else:
        bound = "memory" if below_ridge else "compute"
    return Roofline(
        arithmetic_intensity=intensity,
        achieved_flops_per_s=achieved_flops,
        achieved_bytes_per_s=achieved_bytes,
        bound=bound,
        pct_of_roof=pct_of_roof,
    )
