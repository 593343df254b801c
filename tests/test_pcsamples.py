"""A kernel's profile from PC samples and kernel records taken in the process (`profiler/pcsamples.py`): the
occupancy calculator against CUDA's figures, the samples on the lines of a real cubin, and the findings `analyze`
draws from them without ncu's counters (too few blocks, the top stall on its line, low theoretical occupancy)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from forge_lsp.profiler.analyze import analyze
from forge_lsp.profiler.cubin import LineTable, Row, line_table
from forge_lsp.profiler.model import DevicePeaks
from forge_lsp.profiler.pcsamples import (
    PCSAMP_PREFIX,
    THEORETICAL_OCCUPANCY,
    KernelRecord,
    PcSample,
    SmLimits,
    kernel_profiles,
    occupancy,
)

H200 = SmLimits(sm_count=132)
PEAKS = DevicePeaks(
    name="NVIDIA H200",
    sm_count=132,
    l2_bytes=50 << 20,
    dram_bytes_per_s=4.2e12,
    fp32_flops_per_s=51e12,
    source="datasheet",
)


@pytest.mark.parametrize(
    ("threads", "registers", "shared", "blocks", "limiter", "pct"),
    [
        # CUDA's occupancy calculator (compute capability 9.0) on the same launches
        (256, 32, 0, 8, "warps", 100.0),  # 8 warps a block, 64 slots
        (256, 200, 0, 1, "registers", 12.5),  # 200 -> 6400 registers a warp: 10 warps, one block of 8
        (128, 64, 48 * 1024, 4, "shared_mem", 25.0),  # 49 KiB + 1 KiB reserved a block: 4 of 228 KiB
        (32, 16, 0, 32, "blocks", 50.0),  # one warp a block: the 32-block limit first
        (32, 96, 0, 20, "registers", 31.25),  # 3072 a warp: 5 warps in each quarter of the register file, not 21
    ],
)
def test_occupancy_is_cudas_for_each_limiter(threads, registers, shared, blocks, limiter, pct):
    occ = occupancy(H200, threads, registers, shared)
    limits = {k.removeprefix("launch__occupancy_limit_"): v for k, v in occ.items() if k.startswith("launch__")}
    assert min(limits.values()) == blocks
    assert limits[limiter] == blocks
    assert occ[THEORETICAL_OCCUPANCY] == pytest.approx(pct)


def test_samples_become_hot_lines_with_their_share_and_reason_and_unmapped_samples_count_in_the_whole():
    table = LineTable({"k": [Row(0, "/w/k.cu", 3), Row(32, "/w/k.cu", 5), Row(64, "/w/k.cu", 6)]})
    samples = [
        PcSample("k", 40, {PCSAMP_PREFIX + "long_scoreboard": 60, PCSAMP_PREFIX + "long_scoreboard_not_issued": 99}),
        PcSample("k", 48, {"long_scoreboard": 10, "wait": 5}),  # same line (5); bare names read alike
        PcSample("k", 0, {PCSAMP_PREFIX + "wait": 5}),
        PcSample("other", 8, {PCSAMP_PREFIX + "barrier": 20}),  # no record for it: not a kernel of the profile
        PcSample("k", 70, {PCSAMP_PREFIX + "math_pipe_throttle": 20}),  # between rows: the earlier row's line, 6
    ]
    (profile,) = kernel_profiles([KernelRecord("k", 1000.0, (4, 1, 1), (256, 1, 1), 32)], samples, table, H200)
    lines = {(h.file, h.line): h for h in profile.hot_lines}
    assert set(lines) == {("/w/k.cu", 5), ("/w/k.cu", 3), ("/w/k.cu", 6)}
    hot = profile.hot_lines[0]
    assert (hot.line, hot.dominant_stall, hot.samples) == (5, "long_scoreboard", 75)
    assert hot.stall_pct == pytest.approx(75.0)  # of 100 issued samples: the "not issued" half is left out
    assert profile.metrics[PCSAMP_PREFIX + "long_scoreboard"] == 70
    assert profile.reader == "pc_sampling"


def test_a_one_block_kernel_gets_too_few_blocks_and_its_stalled_load_line_without_ncus_counters():
    """The top finding the independent check saw in model-written kernels (one block for 132 SMs, a long-scoreboard
    line), drawn from what PC sampling and the kernel records give."""
    table = LineTable({"k": [Row(0, "/w/c.py", 10), Row(64, "/w/c.py", 12)]})
    samples = [PcSample("k", 64, {PCSAMP_PREFIX + "long_scoreboard": 900}), PcSample("k", 0, {"selected": 100})]
    (profile,) = kernel_profiles([KernelRecord("k", 5e6, (1, 1, 1), (256, 1, 1), 30)], samples, table, H200)
    findings = analyze(profile, PEAKS)
    assert findings[0].rule == "too_few_blocks", [f.rule for f in findings]
    stall = next(f for f in findings if f.rule == "stall_long_scoreboard")
    assert stall.evidence["share_pct"] == pytest.approx(90.0)
    assert stall.lines and (stall.lines[0].file, stall.lines[0].line) == ("/w/c.py", 12)


def test_registers_that_allow_one_block_are_found_as_low_occupancy_from_the_launch_alone():
    samples = [PcSample("k", 0, {PCSAMP_PREFIX + "long_scoreboard": 50})]
    table = LineTable({"k": [Row(0, "/w/k.cu", 8)]})
    (profile,) = kernel_profiles([KernelRecord("k", 1e6, (4096, 1, 1), (256, 1, 1), 200)], samples, table, H200)
    low = next(f for f in analyze(profile, PEAKS) if f.rule == "low_occupancy")
    assert low.evidence["limiter"] == "registers" and low.evidence["theoretical_occupancy_pct"] == pytest.approx(12.5)
    assert "achieved_occupancy_pct" not in low.evidence and "allowed" in low.title


@pytest.mark.integration
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_samples_at_a_real_kernels_offsets_land_on_its_source_lines(tmp_path):
    """Offsets the cubin's line table gives for a line come back to that line through the samples' path."""
    src = tmp_path / "k.cu"
    src.write_text(
        'extern "C" __global__ void gather(const float* x, const int* idx, float* y, int n) {\n'
        "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    if (i < n) y[i] = x[idx[i]];\n"
        "}\n"
    )
    done = subprocess.run(
        ["nvcc", "-cubin", "-lineinfo", "-arch=sm_90", "-o", "k.cubin", "k.cu"], cwd=tmp_path, capture_output=True
    )
    assert done.returncode == 0, done.stderr
    table = line_table((tmp_path / "k.cubin").read_bytes())
    rows = table.kernels["gather"]
    load = next(r for r in rows if r.line == 3)
    samples = [PcSample("gather", load.offset, {PCSAMP_PREFIX + "long_scoreboard": 40})]
    (profile,) = kernel_profiles([KernelRecord("gather", 1.0, (1, 1, 1), (32, 1, 1))], samples, table)
    assert [(h.file, h.line, h.samples) for h in profile.hot_lines] == [(str(src), 3, 40)]
