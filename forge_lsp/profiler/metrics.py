"""The curated Nsight Compute metric set (CudaForge's 24, plus what the analyzer needs).

Names are ncu metric names; `METRICS` maps each to a short label and its unit. Collected with
``ncu --metrics <','.join(METRICS)>``; the "full" mode keeps the whole report instead.
"""

from __future__ import annotations

from typing import NamedTuple


class Metric(NamedTuple):
    label: str
    unit: str


METRICS: dict[str, Metric] = {
    # time and launch
    "gpu__time_duration.sum": Metric("duration", "ns"),
    "sm__cycles_elapsed.avg": Metric("elapsed cycles", "cycle"),
    "launch__grid_size": Metric("grid size", "block"),
    "launch__block_size": Metric("block size", "thread"),
    "launch__registers_per_thread": Metric("registers/thread", "register"),
    "launch__shared_mem_per_block_static": Metric("static smem/block", "byte"),
    "launch__shared_mem_per_block_dynamic": Metric("dynamic smem/block", "byte"),
    "launch__waves_per_multiprocessor": Metric("waves per SM", "wave"),
    # speed of light
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": Metric("SM throughput", "%"),
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": Metric("memory throughput", "%"),
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": Metric("DRAM throughput", "%"),
    "dram__bytes_read.sum": Metric("DRAM read", "byte"),
    "dram__bytes_write.sum": Metric("DRAM write", "byte"),
    "dram__bytes.sum.per_second": Metric("DRAM bandwidth", "byte/s"),
    "lts__t_sector_hit_rate.pct": Metric("L2 hit rate", "%"),
    "l1tex__t_sector_hit_rate.pct": Metric("L1 hit rate", "%"),
    # occupancy
    "sm__warps_active.avg.pct_of_peak_sustained_active": Metric("achieved occupancy", "%"),
    "sm__maximum_warps_per_active_cycle_pct": Metric("theoretical occupancy", "%"),
    "launch__occupancy_limit_registers": Metric("block limit: registers", "block"),
    "launch__occupancy_limit_shared_mem": Metric("block limit: shared memory", "block"),
    "launch__occupancy_limit_blocks": Metric("block limit: blocks", "block"),
    "launch__occupancy_limit_warps": Metric("block limit: warps", "block"),
    # memory access quality
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": Metric("global load sectors", "sector"),
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": Metric("global load requests", "request"),
    "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum": Metric("global store sectors", "sector"),
    "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum": Metric("global store requests", "request"),
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum": Metric("smem load bank conflicts", "conflict"),
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum": Metric("smem store bank conflicts", "conflict"),
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum": Metric("smem load wavefronts", "wavefront"),
    "sm__sass_inst_executed_op_shared_ld.sum": Metric("smem load instructions", "inst"),
    "sm__sass_inst_executed_op_shared_st.sum": Metric("smem store instructions", "inst"),
    # execution
    "smsp__thread_inst_executed_per_inst_executed.ratio": Metric("active threads per instruction", "thread"),
    "smsp__sass_average_branch_targets_threads_uniform.pct": Metric("branch uniformity", "%"),
    "sm__inst_executed_pipe_tensor_op_hmma.avg.pct_of_peak_sustained_active": Metric("tensor pipe (HMMA)", "%"),
    "sm__inst_executed_pipe_tensor_op_gmma.avg.pct_of_peak_sustained_active": Metric("tensor pipe (wgmma)", "%"),
    "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active": Metric("FMA pipe", "%"),
    "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": Metric("fp32 FMA thread-instructions", "inst"),
    "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum": Metric("fp32 add thread-instructions", "inst"),
    "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum": Metric("fp32 mul thread-instructions", "inst"),
    # warp state: cycles a warp spends in each stall reason per issued instruction
    "smsp__average_warps_active_per_issue_active.ratio": Metric("warp cycles per issued instruction", "cycle"),
    "smsp__issue_active.avg.per_cycle_active": Metric("issue slot utilization", "ratio"),
    "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio": Metric(
        "stall: long scoreboard", "cycle"
    ),
    "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio": Metric("stall: barrier", "cycle"),
    "smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio": Metric("stall: mio throttle", "cycle"),
    "smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio": Metric(
        "stall: short scoreboard", "cycle"
    ),
    "smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio": Metric(
        "stall: math pipe throttle", "cycle"
    ),
    "smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio": Metric("stall: lg throttle", "cycle"),
    "smsp__average_warps_issue_stalled_wait_per_issue_active.ratio": Metric("stall: wait", "cycle"),
    "smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio": Metric("stall: not selected", "cycle"),
    "smsp__average_warps_issue_stalled_membar_per_issue_active.ratio": Metric("stall: membar", "cycle"),
    "smsp__average_warps_issue_stalled_branch_resolving_per_issue_active.ratio": Metric(
        "stall: branch resolving", "cycle"
    ),
    "smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio": Metric("stall: no instruction", "cycle"),
    "smsp__average_warps_issue_stalled_dispatch_stall_per_issue_active.ratio": Metric("stall: dispatch stall", "cycle"),
    "smsp__average_warps_issue_stalled_drain_per_issue_active.ratio": Metric("stall: drain", "cycle"),
    "smsp__average_warps_issue_stalled_imc_miss_per_issue_active.ratio": Metric("stall: imc miss", "cycle"),
    "smsp__average_warps_issue_stalled_sleeping_per_issue_active.ratio": Metric("stall: sleeping", "cycle"),
    "smsp__average_warps_issue_stalled_tex_throttle_per_issue_active.ratio": Metric("stall: tex throttle", "cycle"),
    "smsp__average_warps_issue_stalled_selected_per_issue_active.ratio": Metric("stall: selected", "cycle"),
}


def fp32_flops(metrics: dict[str, float]) -> float:
    """FP32 floating-point operations from SASS counters (an FMA counts as two)."""
    return (
        2 * metrics.get("smsp__sass_thread_inst_executed_op_ffma_pred_on.sum", 0.0)
        + metrics.get("smsp__sass_thread_inst_executed_op_fadd_pred_on.sum", 0.0)
        + metrics.get("smsp__sass_thread_inst_executed_op_fmul_pred_on.sum", 0.0)
    )


STALL_PREFIX = "smsp__average_warps_issue_stalled_"
STALL_SUFFIX = "_per_issue_active.ratio"


def stall_breakdown(metrics: dict[str, float]) -> dict[str, float]:
    """Stall reason -> cycles per issued instruction, largest first."""
    out = {
        k[len(STALL_PREFIX) : -len(STALL_SUFFIX)]: v
        for k, v in metrics.items()
        if k.startswith(STALL_PREFIX) and k.endswith(STALL_SUFFIX) and v > 0
    }
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


PCSAMP_PREFIX = "smsp__pcsamp_warps_issue_stalled_"


def issued_stall(counter: str) -> str | None:
    """The stall reason a PC-sampling counter names (``smsp__pcsamp_warps_issue_stalled_<reason>``, or bare); None for
    the "not issued" half, which ncu's source page leaves out of a line's stalls too."""
    reason = counter.removeprefix(PCSAMP_PREFIX)
    return None if reason.endswith("_not_issued") else reason


def sampled_stalls(metrics: dict[str, float]) -> dict[str, float]:
    """Stall reason -> PC samples of warps stalled on it (not counting the "not issued" half), largest first: the
    breakdown a profile taken in the process has, where ncu's per-issue ratios are missing."""
    out = {
        reason: v
        for k, v in metrics.items()
        if k.startswith(PCSAMP_PREFIX) and (reason := issued_stall(k)) is not None and v > 0
    }
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def dram_bytes(metrics: dict[str, float]) -> float:
    return metrics.get("dram__bytes_read.sum", 0.0) + metrics.get("dram__bytes_write.sum", 0.0)
