"""Rule-based bottleneck analysis, roofline placement and device peaks.

The metric dicts here are built by hand, with the exact ncu metric names of
`forge_lsp.profiler.metrics`, at values typical of each flaw (and of healthy kernels); real Nsight
Compute report fixtures from the GPU machine will replace or complement them later. Peaks are the
H200 datasheet row: 132 SMs, 4.8 TB/s, 67 TFLOP/s fp32, 989.4 TFLOP/s bf16.
"""

from __future__ import annotations

import json
import math
import random

import pytest

from forge_lsp.profiler.analyze import analyze, analyze_many
from forge_lsp.profiler.metrics import METRICS
from forge_lsp.profiler.model import DevicePeaks, HotLine, KernelProfile, LaunchConfig
from forge_lsp.profiler.peaks import (
    DATASHEET,
    PeaksUnavailable,
    datasheet_peaks,
    load_or_measure_peaks,
    measure_peaks,
    peaks_cache_path,
)
from forge_lsp.profiler.roofline import place

H200 = DATASHEET["H200"]

# A well-coalesced float copy: 1 GB through DRAM at 90% of 4.8 TB/s, full occupancy, 4 sectors per
# request, no divergence, warps waiting on memory (as they must), plenty of waves.
HEALTHY_COPY: dict[str, float] = {
    "gpu__time_duration.sum": 231_481.0,
    "dram__bytes_read.sum": 5e8,
    "dram__bytes_write.sum": 5e8,
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": 90.0,
    "lts__t_sector_hit_rate.pct": 0.5,
    "sm__warps_active.avg.pct_of_peak_sustained_active": 88.0,
    "sm__maximum_warps_per_active_cycle_pct": 100.0,
    "launch__occupancy_limit_registers": 8,
    "launch__occupancy_limit_shared_mem": 32,
    "launch__occupancy_limit_blocks": 32,
    "launch__occupancy_limit_warps": 8,
    "launch__grid_size": 488_282,
    "launch__block_size": 256,
    "launch__registers_per_thread": 16,
    "launch__waves_per_multiprocessor": 462.4,
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": 15_625_000,
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": 3_906_250,
    "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum": 15_625_000,
    "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum": 3_906_250,
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum": 0,
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum": 0,
    "sm__sass_inst_executed_op_shared_ld.sum": 0,
    "smsp__thread_inst_executed_per_inst_executed.ratio": 32.0,
    "smsp__sass_average_branch_targets_threads_uniform.pct": 100.0,
    "sm__inst_executed_pipe_tensor_op_hmma.avg.pct_of_peak_sustained_active": 0.0,
    "smsp__average_warps_active_per_issue_active.ratio": 40.0,
    "smsp__issue_active.avg.per_cycle_active": 0.1,
    "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio": 35.0,
    "smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio": 3.0,
    "smsp__average_warps_issue_stalled_selected_per_issue_active.ratio": 1.0,
}

# A kernel below its roof (40% of DRAM bandwidth) without flaws: the latency rules run on it.
HEALTHY_BELOW_ROOF = HEALTHY_COPY | {
    "gpu__time_duration.sum": 520_833.0,
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": 40.0,
    "smsp__average_warps_active_per_issue_active.ratio": 10.0,
    "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio": 2.0,
    "smsp__average_warps_issue_stalled_wait_per_issue_active.ratio": 2.0,
    "smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio": 0.5,
    "smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio": 5.0,
    "smsp__issue_active.avg.per_cycle_active": 0.5,
}

HOT_LINES = [
    HotLine(file="k.cu", line=10, stall_pct=40.0, dominant_stall="long_scoreboard"),
    HotLine(file="k.cu", line=20, stall_pct=25.0, dominant_stall="barrier"),
    HotLine(file="k.cu", line=30, stall_pct=15.0, dominant_stall="Short Scoreboard"),
    HotLine(file="k.cu", line=40, stall_pct=50.0, dominant_stall="smsp__pcsamp_warps_issue_stalled_long_scoreboard"),
    HotLine(file="k.cu", line=50, stall_pct=5.0, dominant_stall="branch_resolving"),
]


def profile(
    metrics: dict[str, float],
    *,
    launch: LaunchConfig | None = None,
    hot_lines: list[HotLine] | None = None,
    name: str = "k",
) -> KernelProfile:
    return KernelProfile(
        name=name,
        duration_ns=metrics.get("gpu__time_duration.sum", 0.0),
        launch=launch,
        metrics=metrics,
        hot_lines=hot_lines or [],
    )


def rules(metrics: dict[str, float], **kwargs) -> list[str]:
    return [f.rule for f in analyze(profile(metrics), H200, **kwargs)]


def finding(metrics: dict[str, float], rule: str, **kwargs):
    found = [f for f in analyze(profile(metrics, hot_lines=HOT_LINES), H200, **kwargs) if f.rule == rule]
    assert len(found) == 1, f"{rule} did not fire once: {rules(metrics, **kwargs)}"
    return found[0]


def test_fixture_metric_names_are_curated():
    assert set(HEALTHY_COPY) <= set(METRICS)


# ------------------------------------------------------------------------------------ roofline


def test_roofline_hand_computation_memory_bound():
    # 1 GB in 250 us = 4.0 TB/s of 4.8 TB/s -> 83.3% of the roof, no FLOPs -> AI 0 -> memory bound.
    roof = place(
        profile({"gpu__time_duration.sum": 250_000.0, "dram__bytes_read.sum": 6e8, "dram__bytes_write.sum": 4e8}), H200
    )
    assert roof is not None
    assert roof.bound == "memory"
    assert roof.arithmetic_intensity == 0.0
    assert roof.achieved_bytes_per_s == pytest.approx(4.0e12)
    assert roof.pct_of_roof == pytest.approx(100 * 4.0 / 4.8)


def test_roofline_hand_computation_compute_bound():
    # 2 x 2.5e10 FMA = 5e10 FLOP in 1 ms = 50 TFLOP/s of 67 -> 74.6%; AI = 5e10 / 1e8 = 500 > ridge 13.96.
    roof = place(
        profile(
            {
                "gpu__time_duration.sum": 1e6,
                "dram__bytes_read.sum": 1e8,
                "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": 2.5e10,
            }
        ),
        H200,
    )
    assert roof is not None
    assert roof.bound == "compute"
    assert roof.arithmetic_intensity == pytest.approx(500.0)
    assert roof.achieved_flops_per_s == pytest.approx(50e12)
    assert roof.pct_of_roof == pytest.approx(100 * 50 / 67)


def test_roofline_latency_bound_when_nothing_is_saturated():
    # 1e8 bytes in 1 ms = 0.1 TB/s (2%), 1e9 FLOP = 1 TFLOP/s (1.5%).
    roof = place(
        profile(
            {
                "gpu__time_duration.sum": 1e6,
                "dram__bytes_read.sum": 1e8,
                "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum": 1e9,
            }
        ),
        H200,
    )
    assert roof is not None
    assert roof.bound == "latency"
    assert roof.arithmetic_intensity == pytest.approx(10.0)  # below the ridge: % of roof is the DRAM share
    assert roof.pct_of_roof == pytest.approx(100 * 0.1 / 4.8)


def test_roofline_tensor_pipe_uses_tensor_roof():
    # HMMA pipe at 60% for 1 ms on 989.4 TFLOP/s -> ~5.94e11 FLOP; 1e9 bytes -> AI 594 > ridge 206.
    roof = place(
        profile(
            {
                "gpu__time_duration.sum": 1e6,
                "dram__bytes_read.sum": 1e9,
                "sm__inst_executed_pipe_tensor_op_hmma.avg.pct_of_peak_sustained_active": 60.0,
            }
        ),
        H200,
    )
    assert roof is not None
    assert roof.bound == "compute"
    assert roof.achieved_flops_per_s == pytest.approx(0.6 * 989.4e12)
    assert roof.pct_of_roof == pytest.approx(60.0)


@pytest.mark.parametrize(
    "metrics",
    [
        {"gpu__time_duration.sum": 0.0, "dram__bytes_read.sum": 1e9},
        {"gpu__time_duration.sum": 1e6},
        {"gpu__time_duration.sum": 1e6, "dram__bytes_read.sum": 0.0, "dram__bytes_write.sum": 0.0},
    ],
)
def test_roofline_none_without_duration_or_bytes(metrics):
    assert place(profile(metrics), H200) is None
    assert not {"memory_bound", "compute_bound", "latency_bound"} & set(rules(metrics))


# ------------------------------------------------------------------------------------ healthy kernels


def test_healthy_copy_only_reports_its_placement():
    found = analyze(profile(HEALTHY_COPY, hot_lines=HOT_LINES), H200, min_bytes=1e9)
    assert [f.rule for f in found] == ["memory_bound"]
    assert found[0].evidence["pct_of_roof"] == pytest.approx(90.0, abs=0.1)
    assert "At the bandwidth roof" in found[0].suggestion
    assert [line.line for line in found[0].lines] == [40, 10]  # memory stalls, hottest first


def test_healthy_kernel_below_roof_has_no_flaw_findings():
    assert rules(HEALTHY_BELOW_ROOF, min_bytes=1e9) == ["memory_bound"]


# ------------------------------------------------------------------------------------ rules


def test_latency_bound_fires_when_nothing_is_saturated():
    metrics = HEALTHY_BELOW_ROOF | {"gpu__time_duration.sum": 5e6}  # 0.2 TB/s
    f = finding(metrics, "latency_bound")
    assert f.evidence["dram_pct_of_peak"] == pytest.approx(100 * 1e9 / 5e-3 / 4.8e12)
    assert f.severity > 0.8
    assert {line.line for line in f.lines} == {10, 20, 30, 40}


def test_compute_bound_suggests_tensor_cores_for_fp32_kernels():
    metrics = {
        "gpu__time_duration.sum": 1e6,
        "dram__bytes_read.sum": 1e8,
        "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": 2.5e10,
    }
    f = finding(metrics, "compute_bound")
    assert f.evidence["compute_roof"] == "fp32"
    assert "tensor cores" in f.suggestion


@pytest.mark.parametrize(
    "limits, limiter, hint",
    [
        ((1, 8, 32, 8), "registers", "__launch_bounds__(256, 2)"),
        ((8, 1, 32, 8), "shared_mem", "smaller tiles"),
        ((8, 8, 2, 8), "blocks", "larger blocks"),
    ],
)
def test_low_occupancy_names_the_limiter(limits, limiter, hint):
    names = ("registers", "shared_mem", "blocks", "warps")
    metrics = (
        HEALTHY_BELOW_ROOF
        | {f"launch__occupancy_limit_{n}": v for n, v in zip(names, limits, strict=False)}
        | {
            "sm__warps_active.avg.pct_of_peak_sustained_active": 12.0,
            "sm__maximum_warps_per_active_cycle_pct": 12.5,
            "launch__registers_per_thread": 200,
            "launch__shared_mem_per_block_static": 98_304,
        }
    )
    f = finding(metrics, "low_occupancy")
    assert f.evidence["limiter"] == limiter
    assert f.evidence["achieved_occupancy_pct"] == 12.0
    assert hint in f.suggestion
    assert 0.3 < f.severity <= 0.8


def test_low_occupancy_from_run_time_imbalance():
    metrics = HEALTHY_BELOW_ROOF | {"sm__warps_active.avg.pct_of_peak_sustained_active": 20.0}
    f = finding(metrics, "low_occupancy")
    assert f.evidence["limiter"] == "run time"


def test_low_occupancy_uses_launch_config_when_given():
    metrics = HEALTHY_BELOW_ROOF | {
        "sm__warps_active.avg.pct_of_peak_sustained_active": 12.0,
        "sm__maximum_warps_per_active_cycle_pct": 12.5,
        "launch__occupancy_limit_registers": 1,
    }
    launch = LaunchConfig(grid=(1024, 1, 1), block=(128, 1, 1), registers_per_thread=255)
    f = next(f for f in analyze(profile(metrics, launch=launch), H200) if f.rule == "low_occupancy")
    assert f.evidence["registers_per_thread"] == 255
    assert "__launch_bounds__(128, 2)" in f.suggestion


def test_occupancy_not_flagged_when_achieved_is_fine():
    assert "low_occupancy" not in rules(
        HEALTHY_BELOW_ROOF | {"sm__warps_active.avg.pct_of_peak_sustained_active": 45.0}
    )


@pytest.mark.parametrize(
    "sectors_per_request, fires", [(4.0, False), (6.0, False), (8.0, False), (12.0, True), (32.0, True)]
)
def test_uncoalesced_global_loads(sectors_per_request, fires):
    metrics = HEALTHY_BELOW_ROOF | {
        "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": 1e6 * sectors_per_request,
        "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": 1e6,
    }
    assert ("uncoalesced_global_access" in rules(metrics)) is fires


def test_uncoalesced_severity_scales_with_the_ratio():
    def severity(ratio: float) -> float:
        return finding(
            HEALTHY_BELOW_ROOF
            | {
                "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum": 1e6 * ratio,
                "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum": 1e6,
            },
            "uncoalesced_global_access",
        ).severity

    assert severity(10) < severity(20) < severity(32) == pytest.approx(1.0)
    f = finding(
        HEALTHY_BELOW_ROOF
        | {
            "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum": 3.2e7,
            "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum": 1e6,
        },
        "uncoalesced_global_access",
    )
    assert f.evidence["store_sectors_per_request"] == 32.0
    assert f.evidence["load_sectors_per_request"] == 4.0
    assert "stores" in f.title and "loads" not in f.title


@pytest.mark.parametrize(
    "min_bytes, fires", [(None, False), (1e9, False), (0.7e9, False), (0.5e9, True), (0.25e9, True)]
)
def test_excess_global_traffic(min_bytes, fires):
    assert ("excess_global_traffic" in rules(HEALTHY_BELOW_ROOF, min_bytes=min_bytes)) is fires


def test_excess_global_traffic_evidence():
    f = finding(HEALTHY_BELOW_ROOF, "excess_global_traffic", min_bytes=0.25e9)
    assert f.evidence["ratio"] == pytest.approx(4.0)
    assert f.severity == pytest.approx(1.0)


@pytest.mark.parametrize("conflicts, fires", [(0, False), (5e5, False), (1e6, False), (4e6, True)])
def test_shared_bank_conflicts_per_instruction(conflicts, fires):
    metrics = HEALTHY_BELOW_ROOF | {
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum": conflicts,
        "sm__sass_inst_executed_op_shared_ld.sum": 1e6,
    }
    assert ("shared_bank_conflicts" in rules(metrics)) is fires


def test_shared_bank_conflicts_from_wavefronts_when_instructions_are_missing():
    metrics = {k: v for k, v in HEALTHY_BELOW_ROOF.items() if k != "sm__sass_inst_executed_op_shared_ld.sum"}
    metrics |= {
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum": 3.1e7,  # 32-way conflicts
        "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum": 3.2e7,
    }
    f = finding(metrics, "shared_bank_conflicts")
    assert f.evidence["conflicts_per_load"] == pytest.approx(31.0)
    assert f.severity == pytest.approx(1.0)
    assert [line.line for line in f.lines] == [30]


@pytest.mark.parametrize(
    "threads, uniformity, divergent, fires",
    [
        (32.0, 100.0, 0.0, False),
        (28.0, 95.0, 10.0, False),
        (12.0, 100.0, 0.0, True),
        (32.0, 70.0, 5e4, True),
        (32.0, 0.0, 0.0, False),  # seen on the H200: 0% "uniform" reported for a kernel with no divergent branch
    ],
)
def test_warp_divergence(threads, uniformity, divergent, fires):
    metrics = HEALTHY_BELOW_ROOF | {
        "smsp__thread_inst_executed_per_inst_executed.ratio": threads,
        "smsp__sass_average_branch_targets_threads_uniform.pct": uniformity,
        "smsp__sass_branch_targets_threads_divergent.sum": divergent,
    }
    assert ("warp_divergence" in rules(metrics)) is fires


def test_warp_divergence_mentions_partial_warps():
    metrics = HEALTHY_BELOW_ROOF | {
        "smsp__thread_inst_executed_per_inst_executed.ratio": 20.0,
        "launch__block_size": 48,
    }
    f = finding(metrics, "warp_divergence")
    assert "not a multiple of 32" in f.suggestion
    assert [line.line for line in f.lines] == [50]


def test_too_few_blocks_when_grid_is_smaller_than_the_sm_count():
    metrics = HEALTHY_BELOW_ROOF | {"launch__grid_size": 33, "launch__waves_per_multiprocessor": 0.03}
    f = finding(metrics, "too_few_blocks")
    assert f.evidence["grid_blocks"] == 33 and f.evidence["sm_count"] == 132
    assert "99 SMs idle" in f.title
    assert f.severity == pytest.approx(0.4 + 0.6 * 0.75)


def test_too_few_blocks_when_the_grid_fills_a_fraction_of_a_wave():
    assert "too_few_blocks" in rules(
        HEALTHY_BELOW_ROOF | {"launch__grid_size": 264, "launch__waves_per_multiprocessor": 0.25}
    )


@pytest.mark.parametrize(
    "waves, rule",
    [(1.1, "tail_effect"), (2.2, "tail_effect"), (1.9, None), (2.0, None), (4.5, None), (462.4, None), (0.8, None)],
)
def test_tail_effect(waves, rule):
    metrics = HEALTHY_BELOW_ROOF | {
        "launch__grid_size": int(waves * 132 * 8),
        "launch__waves_per_multiprocessor": waves,
    }
    found = {"tail_effect", "too_few_blocks"} & set(rules(metrics))
    assert found == ({rule} if rule else set())


def test_tail_effect_idle_fraction():
    metrics = HEALTHY_BELOW_ROOF | {"launch__waves_per_multiprocessor": 1.1}
    assert finding(metrics, "tail_effect").evidence["idle_fraction"] == pytest.approx(0.45)


def test_dominant_stall_long_scoreboard():
    metrics = HEALTHY_BELOW_ROOF | {
        "smsp__average_warps_active_per_issue_active.ratio": 20.0,
        "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio": 14.0,
        "smsp__issue_active.avg.per_cycle_active": 0.2,
    }
    f = finding(metrics, "stall_long_scoreboard")
    assert f.evidence["share_pct"] == pytest.approx(70.0)
    assert [line.line for line in f.lines] == [40, 10]
    assert "in flight" in f.suggestion
    assert not [r for r in rules(metrics) if r.startswith("stall_") and r != "stall_long_scoreboard"]


def test_two_large_stall_reasons_both_fire():
    metrics = HEALTHY_BELOW_ROOF | {
        "smsp__average_warps_active_per_issue_active.ratio": 20.0,
        "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio": 8.0,
        "smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio": 7.0,
    }
    found = analyze(profile(metrics, hot_lines=HOT_LINES), H200)
    stalls = [f for f in found if f.rule.startswith("stall_")]
    assert [f.rule for f in stalls] == ["stall_barrier", "stall_mio_throttle"]
    assert [line.line for line in stalls[0].lines] == [20]
    assert "__syncthreads" in stalls[0].title and "work per barrier" in stalls[0].suggestion


@pytest.mark.parametrize(
    "override",
    [
        {"smsp__issue_active.avg.per_cycle_active": 0.9},  # schedulers busy: latency hidden
        {"smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio": 9.0},  # not a stall to fix
    ],
)
def test_stalls_not_flagged_when_hidden_or_benign(override):
    metrics = (
        HEALTHY_BELOW_ROOF
        | {
            "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio": 6.0,
            "smsp__average_warps_active_per_issue_active.ratio": 20.0,
        }
        | override
    )
    if "smsp__issue_active.avg.per_cycle_active" in override:
        assert not [r for r in rules(metrics) if r.startswith("stall_")]
    else:  # long scoreboard is 30% and still fires; not_selected (45%) never does
        assert [r for r in rules(metrics) if r.startswith("stall_")] == ["stall_long_scoreboard"]


def test_unknown_stall_reason_gets_a_generic_finding():
    metrics = HEALTHY_BELOW_ROOF | {"smsp__average_warps_issue_stalled_gmma_per_issue_active.ratio": 8.0}
    assert "stall_gmma" in rules(metrics)


# ------------------------------------------------------------------------------------ launch overhead


def kernels(n: int, duration_ns: float) -> list[KernelProfile]:
    return [KernelProfile(name=f"k{i}", duration_ns=duration_ns) for i in range(n)]


def test_launch_overhead_from_wall_time():
    found = analyze_many(kernels(20, 2_000.0), wall_ns=200_000.0)
    assert [f.rule for f in found] == ["launch_overhead"]
    assert found[0].evidence["busy_pct"] == pytest.approx(20.0)
    assert "CUDA graph" in found[0].suggestion


def test_launch_overhead_from_tiny_kernels_without_wall_time():
    found = analyze_many(kernels(10, 2_000.0))
    assert [f.rule for f in found] == ["launch_overhead"]
    assert found[0].evidence["estimated_idle_pct"] == pytest.approx(60.0)


@pytest.mark.parametrize(
    "profiles, wall_ns",
    [
        (kernels(3, 1e6), 3.2e6),  # busy 94%
        (kernels(10, 50_000.0), None),  # not tiny
        (kernels(1, 2_000.0), None),  # one kernel and no wall time: nothing to compare
        ([], 1e6),
    ],
)
def test_no_launch_overhead(profiles, wall_ns):
    assert analyze_many(profiles, wall_ns=wall_ns) == []


# ------------------------------------------------------------------------------------ ranking, robustness

FLAWED = HEALTHY_BELOW_ROOF | {
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": 3.2e7,
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": 1e6,
    "sm__warps_active.avg.pct_of_peak_sustained_active": 25.0,
    "sm__maximum_warps_per_active_cycle_pct": 25.0,
    "launch__occupancy_limit_registers": 2,
    "launch__waves_per_multiprocessor": 1.1,
    "smsp__thread_inst_executed_per_inst_executed.ratio": 20.0,
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum": 2.5e6,
    "sm__sass_inst_executed_op_shared_ld.sum": 1e6,
    "smsp__average_warps_active_per_issue_active.ratio": 20.0,
    "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio": 12.0,
}


def test_findings_are_ranked_by_severity():
    found = analyze(profile(FLAWED, hot_lines=HOT_LINES), H200, min_bytes=0.5e9)
    severities = [f.severity for f in found]
    assert severities == sorted(severities, reverse=True)
    assert all(0.0 <= s <= 1.0 for s in severities)
    assert found[0].rule == "uncoalesced_global_access"  # 32 sectors per request: the worst flaw
    assert set(f.rule for f in found) == {
        "uncoalesced_global_access",
        "memory_bound",
        "low_occupancy",
        "tail_effect",
        "warp_divergence",
        "shared_bank_conflicts",
        "stall_long_scoreboard",
        "excess_global_traffic",
    }
    assert [f.rule for f in found].index("memory_bound") > [f.rule for f in found].index("stall_long_scoreboard")


def test_at_the_roof_latency_rules_are_skipped():
    at_roof = FLAWED | {"gpu__time_duration.sum": 231_481.0}  # 90% of DRAM bandwidth
    found = set(rules(at_roof))
    assert "memory_bound" in found and "uncoalesced_global_access" in found
    assert not found & {"low_occupancy", "tail_effect", "stall_long_scoreboard"}


def test_empty_metrics_do_not_crash():
    assert analyze(KernelProfile(name="k", duration_ns=0.0), H200) == []
    assert analyze(KernelProfile(name="k", duration_ns=1e6), H200, min_bytes=1e9) == []


def test_missing_zero_or_nan_metrics_do_not_crash():
    for name in FLAWED:  # drop each metric in turn
        analyze(profile({k: v for k, v in FLAWED.items() if k != name}, hot_lines=HOT_LINES), H200, min_bytes=1e9)
    rng = random.Random(0)
    for _ in range(200):  # random subsets, some values zero or NaN
        metrics = {k: rng.choice([v, v, 0.0, math.nan]) for k, v in FLAWED.items() if rng.random() < 0.5}
        for f in analyze(profile(metrics, hot_lines=HOT_LINES), H200, min_bytes=rng.choice([None, 0.0, 1e9])):
            assert 0.0 <= f.severity <= 1.0
            json.dumps(f.model_dump())


# ------------------------------------------------------------------------------------ peaks


@pytest.mark.parametrize(
    "device_name, row",
    [
        ("NVIDIA H200", "H200 SXM 141GB"),
        ("NVIDIA H200 NVL", "H200 NVL"),
        ("NVIDIA H100 80GB HBM3", "H100 SXM5 80GB"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA A100-SXM4-80GB", "A100 SXM4 80GB"),
        ("NVIDIA A100-SXM4-40GB", "A100 40GB"),
        ("NVIDIA A100 80GB PCIe", "A100 PCIe 80GB"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA L40", "L40"),
        ("NVIDIA GeForce RTX 4090", "GeForce RTX 4090"),
        ("NVIDIA A10", "A10"),
        ("Tesla T4", "T4"),
    ],
)
def test_datasheet_lookup(device_name, row):
    peaks = datasheet_peaks(device_name)
    assert peaks is not None and peaks.name == row and peaks.source == "datasheet"


@pytest.mark.parametrize("device_name", ["NVIDIA A10G", "NVIDIA GeForce RTX 3090", "Intel Arc"])
def test_datasheet_lookup_misses(device_name):
    assert datasheet_peaks(device_name) is None


def test_h200_datasheet_numbers():
    assert (H200.sm_count, H200.l2_bytes, H200.dram_bytes_per_s) == (132, 50 * 2**20, 4.8e12)
    assert H200.fp32_flops_per_s == 67e12
    assert H200.bf16_tensor_flops_per_s == pytest.approx(989.4e12)
    assert H200.tf32_tensor_flops_per_s == pytest.approx(494.7e12)


MEASURED = DevicePeaks(
    name="NVIDIA H200",
    sm_count=132,
    l2_bytes=50 * 2**20,
    dram_bytes_per_s=4.3e12,
    fp32_flops_per_s=51e12,
    bf16_tensor_flops_per_s=760e12,
    tf32_tensor_flops_per_s=380e12,
    source="measured",
)


class Measure:
    """Injected measure function: counts calls, returns MEASURED or raises."""

    def __init__(self, fail: bool = False) -> None:
        self.calls = 0
        self.fail = fail

    def __call__(self, device) -> DevicePeaks:
        self.calls += 1
        if self.fail:
            raise RuntimeError("CUDA error: out of memory")
        return MEASURED


def identity(name: str = "NVIDIA H200", driver: str = "550.54.15"):
    return lambda device: (name, driver)


def test_peaks_measured_once_then_cached(tmp_path):
    measure = Measure()
    first = load_or_measure_peaks(0, tmp_path, measure=measure, identify=identity())
    second = load_or_measure_peaks(0, tmp_path, measure=measure, identify=identity())
    assert first == second == MEASURED
    assert measure.calls == 1
    path = peaks_cache_path(tmp_path, "NVIDIA H200", "550.54.15")
    assert path.parent == tmp_path / "peaks"
    assert DevicePeaks.model_validate_json(path.read_text()) == MEASURED
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temp file left behind


def test_peaks_cache_is_per_driver(tmp_path):
    measure = Measure()
    load_or_measure_peaks(0, tmp_path, measure=measure, identify=identity(driver="550.54.15"))
    load_or_measure_peaks(0, tmp_path, measure=measure, identify=identity(driver="560.35.03"))
    assert measure.calls == 2
    assert len(list((tmp_path / "peaks").iterdir())) == 2


def test_corrupt_cache_is_measured_again(tmp_path):
    path = peaks_cache_path(tmp_path, "NVIDIA H200", "550.54.15")
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    measure = Measure()
    assert load_or_measure_peaks(0, tmp_path, measure=measure, identify=identity()) == MEASURED
    assert measure.calls == 1


def test_datasheet_fallback_when_measuring_fails_and_is_not_cached(tmp_path):
    failing = Measure(fail=True)
    peaks = load_or_measure_peaks(0, tmp_path, measure=failing, identify=identity())
    assert peaks.source == "datasheet" and peaks.dram_bytes_per_s == 4.8e12
    assert not (tmp_path / "peaks").exists()
    working = Measure()
    assert load_or_measure_peaks(0, tmp_path, measure=working, identify=identity()) == MEASURED
    assert working.calls == 1


def test_no_measurement_and_no_datasheet_raises(tmp_path):
    with pytest.raises(PeaksUnavailable, match="no datasheet entry"):
        load_or_measure_peaks(0, tmp_path, measure=Measure(fail=True), identify=identity("Mystery GPU 9000"))


def test_unidentifiable_device_raises(tmp_path):
    def no_gpu(device):
        raise RuntimeError("Found no NVIDIA driver on your system")

    with pytest.raises(PeaksUnavailable, match="cannot identify"):
        load_or_measure_peaks(0, tmp_path, measure=Measure(), identify=no_gpu)


def test_measure_peaks_rejects_non_cuda_devices():
    with pytest.raises(ValueError, match="CUDA device"):
        measure_peaks("cpu")


@pytest.mark.gpu
def test_measure_peaks_on_the_gpu(tmp_path):
    peaks = load_or_measure_peaks(0, tmp_path)
    assert peaks.source == "measured" and peaks.sm_count > 0 and peaks.l2_bytes > 0
    sheet = datasheet_peaks(peaks.name)
    if sheet is not None:  # micro-benchmarks reach a large share of the datasheet, never far above it
        assert 0.5 * sheet.dram_bytes_per_s < peaks.dram_bytes_per_s < 1.1 * sheet.dram_bytes_per_s
        assert 0.4 * sheet.fp32_flops_per_s < peaks.fp32_flops_per_s < 1.1 * sheet.fp32_flops_per_s
        assert peaks.sm_count == sheet.sm_count


def test_a_cause_outranks_the_latency_bound_symptom():
    latency = HEALTHY_BELOW_ROOF | {"gpu__time_duration.sum": 5e6}
    mild_occupancy = latency | {
        "sm__warps_active.avg.pct_of_peak_sustained_active": 25.0,
        "sm__maximum_warps_per_active_cycle_pct": 25.0,
        "launch__occupancy_limit_registers": 2,
        "launch__occupancy_limit_warps": 8,
    }
    found = analyze(profile(mild_occupancy, hot_lines=HOT_LINES), H200)
    order = [f.rule for f in found]
    assert order.index("low_occupancy") < order.index("latency_bound")
    assert next(f for f in found if f.rule == "low_occupancy").severity <= 1.0
    # without a cause, the symptom stays on top
    assert analyze(profile(latency, hot_lines=HOT_LINES), H200)[0].rule == "latency_bound"


def test_a_coalescing_finding_the_counters_only_suggest_is_not_raised_above_the_stalls():
    """Without ncu's access-width counters, global loads that carry a small part of the DRAM traffic (a GEMM whose
    tiles come by TMA) are only possibly uncoalesced: ranked by their own severity, not above the latency finding as
    a measured cause is."""
    latency = HEALTHY_BELOW_ROOF | {"gpu__time_duration.sum": 5e6}
    minor_loads = latency | {  # 24 sectors a request, but 37 MB through loads and stores of the kernel's 400 MB
        "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": 7.5e5,
        "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": 3.1e4,
        "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum": 4e5,
        "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum": 1e5,
        "dram__bytes_read.sum": 4e8,
    }
    found = analyze(profile(minor_loads, hot_lines=HOT_LINES), H200)
    coalescing = next(f for f in found if f.rule == "uncoalesced_global_access")
    assert "lsu_share_of_dram_bytes" in coalescing.evidence and coalescing.severity <= 0.25
    assert found[0].rule != "uncoalesced_global_access", [(f.rule, f.severity) for f in found]
    # measured (most of the traffic through scattered loads), the same sectors are a cause and rank first
    scattered = minor_loads | {  # 800 MB through the loads: most of the traffic
        "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": 2.5e7,
        "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": 7.8e5,
    }
    assert analyze(profile(scattered, hot_lines=HOT_LINES), H200)[0].rule == "uncoalesced_global_access"


def test_register_limited_occupancy_points_at_the_lines_holding_registers_longest():
    metrics = HEALTHY_BELOW_ROOF | {
        "sm__warps_active.avg.pct_of_peak_sustained_active": 12.0,
        "sm__maximum_warps_per_active_cycle_pct": 12.5,
        "launch__occupancy_limit_registers": 1,
        "launch__occupancy_limit_warps": 8,
    }
    lines = [
        *HOT_LINES,
        HotLine(file="k.cu", line=7, register_span=50_000),
        HotLine(file="k.cu", line=9, register_span=900),
    ]
    f = next(f for f in analyze(profile(metrics, hot_lines=lines), H200) if f.rule == "low_occupancy")
    assert [h.line for h in f.lines] == [7]


def test_coalescing_uses_sectors_vs_ideal_so_wide_accesses_are_not_flagged():
    vector_copy = HEALTHY_BELOW_ROOF | {  # 16 sectors per request, exactly what 128-bit accesses need
        "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": 1.6e7,
        "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": 1e6,
        "memory_l2_theoretical_sectors_global": 1.6e7,
        "memory_l2_theoretical_sectors_global_ideal": 1.6e7,
    }
    assert "uncoalesced_global_access" not in rules(vector_copy)
    strided = vector_copy | {"memory_l2_theoretical_sectors_global": 6.4e7}
    lines = [
        HotLine(file="k.cu", line=3, global_sectors=1.6e7, global_sectors_ideal=1.6e7),
        HotLine(file="k.cu", line=6, global_sectors=4.8e7, global_sectors_ideal=6e6),
    ]
    f = next(f for f in analyze(profile(strided, hot_lines=lines), H200) if f.rule == "uncoalesced_global_access")
    assert f.evidence["ratio"] == pytest.approx(4.0) and [h.line for h in f.lines] == [6]
