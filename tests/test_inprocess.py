"""What the in-process profile makes of CUPTI's three passes (`profiler/inprocess.py`): launches, PC samples and
counters become kernel profiles named as ncu names them, so the same findings come out of either path. The CUPTI
calls themselves run on the GPU (`test_source_map.py`'s `gpu` tests on the cupti and spare paths, and
`benchmarks/explain_speed.py`); here their output is written as CUPTI gives it."""

from __future__ import annotations

import pytest
from test_pcsamples import H200, PEAKS

from forge_lsp.profiler.analyze import analyze
from forge_lsp.profiler.cubin import LineTable, Row
from forge_lsp.profiler.cupti import CuptiError, KernelActivity, PcRecord
from forge_lsp.profiler.inprocess import RANGE_METRICS, Collected, kernels_of, range_metrics_by_kernel
from forge_lsp.profiler.metrics import METRICS, PCSAMP_PREFIX


def launch(name, start, duration, grid=(1024, 1, 1), block=(256, 1, 1), registers=32, shared=0):
    return KernelActivity(name, start, start + duration, grid, block, registers, shared, 0, correlation=start)


def test_the_range_profiler_reads_only_counters_the_launch_records_and_pc_samples_do_not_give():
    assert "dram__bytes_read.sum" in RANGE_METRICS
    assert "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum" in RANGE_METRICS
    assert not [m for m in RANGE_METRICS if m.startswith("launch__")]
    assert "sm__maximum_warps_per_active_cycle_pct" not in RANGE_METRICS
    assert not [m for m in RANGE_METRICS if "issue_stalled" in m]
    assert set(RANGE_METRICS) < set(METRICS)


def test_every_counter_a_finding_reads_is_collected_in_the_process_and_the_costly_breakdowns_are_not():
    """The findings (`analyze`, `roofline`) read the same counters on both paths: each counter of the metric set they
    name is one the range profiler collects; the speed-of-light breakdowns, 7 of GH100's 12 replay passes, no finding
    reads, and they are left to ncu's path."""
    import re
    from pathlib import Path

    from forge_lsp.profiler import analyze as analyze_mod
    from forge_lsp.profiler import roofline
    from forge_lsp.profiler.inprocess import SPEED_OF_LIGHT_BREAKDOWNS

    named = set()
    for module in (analyze_mod, roofline):
        named |= set(re.findall(r'"((?:sm|smsp|dram|lts|l1tex|gpu)__[a-z0-9_.]+)"', Path(module.__file__).read_text()))
    counters = {
        m for m in named & set(METRICS) if "issue_stalled" not in m and m != "sm__maximum_warps_per_active_cycle_pct"
    }
    assert len(counters) >= 15 and counters <= set(RANGE_METRICS), counters - set(RANGE_METRICS)
    assert not named & set(SPEED_OF_LIGHT_BREAKDOWNS)
    assert not set(SPEED_OF_LIGHT_BREAKDOWNS) & set(RANGE_METRICS) and set(SPEED_OF_LIGHT_BREAKDOWNS) < set(METRICS)


def test_counters_of_a_kernels_launches_add_up_and_its_rates_are_weighted_by_duration():
    names, durations = ["a", "b", "a"], [1000.0, 500.0, 3000.0]
    ranges = [
        ("a", {"dram__bytes_read.sum": 10.0, "dram__throughput.avg.pct_of_peak_sustained_elapsed": 20.0}),
        ("b", {"dram__bytes_read.sum": 7.0, "dram__throughput.avg.pct_of_peak_sustained_elapsed": 90.0}),
        ("a", {"dram__bytes_read.sum": 30.0, "dram__throughput.avg.pct_of_peak_sustained_elapsed": 60.0}),
    ]
    by_kernel = range_metrics_by_kernel(names, durations, ranges)
    assert by_kernel["a"]["dram__bytes_read.sum"] == 40.0
    assert by_kernel["a"]["dram__throughput.avg.pct_of_peak_sustained_elapsed"] == pytest.approx(50.0)  # (20+180)/4
    assert by_kernel["b"] == {"dram__bytes_read.sum": 7.0, "dram__throughput.avg.pct_of_peak_sustained_elapsed": 90.0}


def test_ranges_that_do_not_match_the_launches_one_for_one_are_matched_by_name_and_strays_dropped():
    names, durations = ["_Z6kernelPf", "_Z5otherv"], [100.0, 100.0]
    ranges = [("_Z6kernelPf", {"dram__bytes_read.sum": 5.0}), ("unknown", {"dram__bytes_read.sum": 9.0}), ("x", {})]
    assert range_metrics_by_kernel(names, durations, ranges) == {"_Z6kernelPf": {"dram__bytes_read.sum": 5.0}}


def test_a_counter_the_launch_does_not_define_is_left_out_not_counted_as_nan():
    by_kernel = range_metrics_by_kernel(["a"], [1.0], [("a", {"dram__bytes_read.sum": float("nan"), "x.sum": 1.0})])
    assert by_kernel == {"a": {"x.sum": 1.0}}


def collected_for(table_rows, *, registers=32, grid=(1024, 1, 1), counters=None, stalls=None):
    """A `Collected` as the three passes give it for one kernel `_Z4kernPf`, its cubin standing in as a line
    table."""
    name = "_Z4kernPf"
    return Collected(
        activities=[launch(name, 0, 40_000, grid=grid, registers=registers), launch(name, 50_000, 40_000, grid=grid)],
        pcs=[
            PcRecord(7, name, 0x40, stalls or {PCSAMP_PREFIX + "long_scoreboard": 900}),
            PcRecord(7, name, 0x10, {PCSAMP_PREFIX + "wait": 100, PCSAMP_PREFIX + "wait_not_issued": 50}),
        ],
        ranges=[(name, dict(counters or {})), (name, dict(counters or {}))],
        cubins={},
    ), LineTable({name: table_rows})


def profiles_with_table(collected, table, monkeypatch, **kwargs):
    import forge_lsp.profiler.inprocess as inprocess

    monkeypatch.setattr(inprocess, "line_table", lambda cubin: table)
    collected.cubins = {7: b"cubin"}
    return kernels_of(collected, H200, **kwargs)


def test_a_kernel_s_profile_has_its_launches_summed_its_hot_line_and_its_counters_named_as_ncu_names_them(
    monkeypatch,
):
    rows = [Row(0x00, "/cache/k.cu", 3), Row(0x30, "/cache/k.cu", 7), Row(0x50, "/cache/k.cu", 8)]
    counters = {"dram__bytes_read.sum": 1e6, "sm__warps_active.avg.pct_of_peak_sustained_active": 80.0}
    collected, table = collected_for(rows, counters=counters)
    (profile,) = profiles_with_table(collected, table, monkeypatch, demangle=lambda n: "kern(float*)")
    assert profile.name == "kern(float*)" and profile.reader == "cupti"
    assert profile.duration_ns == 80_000 and profile.metrics["gpu__time_duration.sum"] == 80_000
    assert profile.metrics["dram__bytes_read.sum"] == 2e6  # both launches
    assert profile.metrics["sm__warps_active.avg.pct_of_peak_sustained_active"] == pytest.approx(80.0)
    assert profile.metrics["launch__grid_size"] == 1024 and profile.metrics["launch__registers_per_thread"] == 32
    top = profile.hot_lines[0]
    assert (top.file, top.line, top.dominant_stall) == ("/cache/k.cu", 7, "long_scoreboard")
    assert top.stall_pct == pytest.approx(90.0)  # 900 of 1000 issued-stall samples; "not issued" left out


def test_the_findings_of_the_in_process_path_come_out_of_analyze_like_ncus(monkeypatch):
    """A register-starved kernel and a kernel with bank conflicts, each found from the in-process metrics alone."""
    rows = [Row(0x00, "/cache/k.cu", 3), Row(0x30, "/cache/k.cu", 7)]
    achieved = {"sm__warps_active.avg.pct_of_peak_sustained_active": 12.0, "dram__bytes_read.sum": 1e6}
    starved, table = collected_for(rows, registers=200, counters=achieved)
    (profile,) = profiles_with_table(starved, table, monkeypatch)
    findings = analyze(profile, PEAKS)
    assert findings[0].rule == "low_occupancy", [f.rule for f in findings]
    assert findings[0].evidence["limiter"] == "registers"
    assert findings[0].evidence["achieved_occupancy_pct"] == pytest.approx(12.0)
    conflicts = {
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum": 31e6,
        "sm__sass_inst_executed_op_shared_ld.sum": 1e6,
        "dram__bytes_read.sum": 1e6,
    }
    banked, table = collected_for(rows, counters=conflicts, stalls={PCSAMP_PREFIX + "mio_throttle": 900})
    (profile,) = profiles_with_table(banked, table, monkeypatch)
    rules = [f.rule for f in analyze(profile, PEAKS)]
    assert rules[0] == "shared_bank_conflicts", rules


def test_sixteen_sectors_a_request_at_the_dram_roof_is_memory_bound_first_and_only_possibly_uncoalesced(monkeypatch):
    """A float4 copy seen without ncu's source counters: 16 sectors a request is what 128-bit accesses need, so the
    certain finding (at the DRAM roof) ranks first and the sectors are a question below it."""
    rows = [Row(0x00, "/cache/k.cu", 3), Row(0x30, "/cache/k.cu", 7)]
    moved = 0.92 * PEAKS.dram_bytes_per_s * 80e-6  # 92% of the roof over the two launches' 80 µs
    counters = {
        "dram__bytes_read.sum": moved / 4,  # two launches: each half of the reads and writes
        "dram__bytes_write.sum": moved / 4,
        "dram__throughput.avg.pct_of_peak_sustained_elapsed": 92.0,
        "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": 16e6,
        "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": 1e6,
        "sm__warps_active.avg.pct_of_peak_sustained_active": 90.0,
    }
    collected, table = collected_for(rows, counters=counters)
    (profile,) = profiles_with_table(collected, table, monkeypatch)
    findings = analyze(profile, PEAKS)
    assert findings[0].rule == "memory_bound", [(f.rule, f.severity) for f in findings]
    maybe = next(f for f in findings if f.rule == "uncoalesced_global_access")
    assert maybe.title.startswith("Possibly uncoalesced") and "16 for 128-bit" in maybe.title


def test_more_sectors_a_request_than_any_access_width_needs_is_uncoalesced_and_ranks_above_the_stall(monkeypatch):
    rows = [Row(0x00, "/cache/k.cu", 3), Row(0x30, "/cache/k.cu", 7)]
    counters = {
        "dram__bytes_read.sum": 1e6,
        "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum": 32e6,
        "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum": 1e6,
        "sm__warps_active.avg.pct_of_peak_sustained_active": 90.0,
    }
    collected, table = collected_for(rows, counters=counters)
    (profile,) = profiles_with_table(collected, table, monkeypatch)
    findings = analyze(profile, PEAKS)
    assert findings[0].rule == "uncoalesced_global_access", [(f.rule, f.severity) for f in findings]
    assert findings[0].title.startswith("Uncoalesced global stores: 32.0 sectors")
    assert any(f.rule == "stall_long_scoreboard" for f in findings[1:])


def test_scattered_stores_that_move_a_sliver_of_the_dram_traffic_rank_below_the_compute_roof(monkeypatch):
    """A Hopper GEMM as the in-process counters see it: its operands come by TMA (no load instruction's sectors), its
    few epilogue stores look scattered. Those stores are not what bounds it: the compute roof ranks first."""
    rows = [Row(0x00, "/cache/k.cu", 3), Row(0x30, "/cache/k.cu", 7)]
    flops = 0.8 * PEAKS.fp32_flops_per_s * 80e-6  # 80% of the fp32 roof over the two launches' 80 µs
    counters = {
        "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": flops / 4,  # per launch: half the FMAs, 2 flops each
        "dram__bytes_read.sum": 5e7,
        "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum": 32e3,  # 1 MB a launch through L1: 2% of the DRAM bytes
        "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum": 1e3,
        "sm__warps_active.avg.pct_of_peak_sustained_active": 40.0,
    }
    collected, table = collected_for(rows, counters=counters, stalls={PCSAMP_PREFIX + "math_pipe_throttle": 900})
    (profile,) = profiles_with_table(collected, table, monkeypatch)
    findings = analyze(profile, PEAKS)
    assert findings[0].rule == "compute_bound", [(f.rule, f.severity) for f in findings]
    scattered = next(f for f in findings if f.rule == "uncoalesced_global_access")
    assert scattered.evidence["lsu_share_of_dram_bytes"] == pytest.approx(2 * 32e3 * 32 / 1e8)
    assert scattered.severity < findings[0].severity


class _FakeCupti:
    """CUPTI as `collect` uses it, on the CPU: the launches of the call `run` makes (`launches` of them each time), a
    PC sampler that can refuse, and a range profiler that keeps a range per launch up to the room it was given."""

    def __init__(self, launches: int, sampler_refuses: bool = False) -> None:
        self.launches, self.sampler_refuses, self.max_ranges, self.passes_seen = launches, sampler_refuses, None, []
        fake = self

        class KernelActivities:
            def enable(self):
                fake.passes_seen.append("records")

            def collect(self):
                return [launch(f"k{i % 3}", 1000 * i, 500) for i in range(fake.launches)]

        class PcSampler:
            def __init__(self, ctx):
                if fake.sampler_refuses:
                    raise CuptiError("cuptiPCSamplingEnable", 1, "not supported on this device")

            def start(self):
                fake.passes_seen.append("pc")

            def stop(self):
                return [PcRecord(7, "k0", 16, {"smsp__pcsamp_warps_issue_stalled_long_scoreboard": 5})]

            def close(self):
                pass

        class Host:
            unsupported, passes = [], 5

        class RangeProfiler:
            def __init__(self, ctx, host, *, max_ranges=256):
                self.host, fake.max_ranges = host, max_ranges

            def start(self):
                fake.passes_seen.append("counters")

            def stop(self):
                kept = min(fake.launches, fake.max_ranges)
                return [(f"k{i % 3}", {"dram__bytes_read.sum": 1.0}) for i in range(kept)]

            def close(self):
                pass

        self.KernelActivities, self.PcSampler, self.RangeProfiler = KernelActivities, PcSampler, RangeProfiler
        self.host_config = lambda ctx, index, metrics: Host()


def _collect_with(monkeypatch, fake: _FakeCupti):
    from forge_lsp.profiler import cupti, inprocess

    for name in ("KernelActivities", "PcSampler", "RangeProfiler", "host_config"):
        monkeypatch.setattr(cupti, name, getattr(fake, name))
    calls, stages = [], {}

    class Modules:
        def by_crc(self, wanted):
            return {crc: b"" for crc in wanted}

    out = inprocess.collect(
        lambda: calls.append(1), lambda: None, ctx=1, device_index=0, modules=Modules(), stages=stages
    )
    return out, calls, stages


def test_the_counters_pass_has_a_range_for_every_launch_of_a_long_forward(monkeypatch):
    """A forward of 300 launches (a whole model's) gets 300 ranges, one per launch, each matched to its record, where
    room for a fixed 256 dropped the last 44 launches' counters; the call runs once per pass, and each pass's set-up
    is a stage of its own."""
    from forge_lsp.profiler.inprocess import RANGE_MARGIN

    fake = _FakeCupti(launches=300)
    out, calls, stages = _collect_with(monkeypatch, fake)
    assert fake.max_ranges == 300 + RANGE_MARGIN and len(out.ranges) == 300 and len(out.activities) == 300
    assert fake.passes_seen == ["records", "pc", "counters"] and len(calls) == 3 and out.passes == 5
    assert list(stages) == [
        "cupti_records",
        "cupti_pc_setup",
        "cupti_pc_sampling",
        "cupti_counters_setup",
        "cupti_counters",
    ]
    by_kernel = range_metrics_by_kernel([a.name for a in out.activities], [500.0] * 300, out.ranges)
    assert by_kernel["k0"]["dram__bytes_read.sum"] == 100.0  # every launch of k0 counted, none dropped


def test_a_pc_sampler_that_refuses_is_noted_and_the_counters_still_run(monkeypatch):
    fake = _FakeCupti(launches=4, sampler_refuses=True)
    out, calls, _ = _collect_with(monkeypatch, fake)
    assert out.pcs == [] and out.notes == [
        "PC sampling: cuptiPCSamplingEnable failed: not supported on this device (1)"
    ]
    assert fake.passes_seen == ["records", "counters"] and len(calls) == 2 and len(out.ranges) == 4
