"""Profiler data: what a profile of one kernel says, and what the analyzer concludes. Plain data."""

from __future__ import annotations

from pydantic import BaseModel, Field


class DevicePeaks(BaseModel):
    """Roofline ceilings of one device. `source` says whether they were measured or looked up."""

    name: str
    sm_count: int
    l2_bytes: int
    dram_bytes_per_s: float
    fp32_flops_per_s: float
    bf16_tensor_flops_per_s: float | None = None
    tf32_tensor_flops_per_s: float | None = None
    source: str = Field(description="'measured' (micro-benchmarks, cached) or 'datasheet'")


class HotLine(BaseModel):
    """A source line: its share of the kernel's sampled warp stalls, and its per-instruction counters.

    The counters come from ncu's source page (SASS instructions mapped through line info):
    L2 sectors its global accesses needed vs. the ideal for their access size, shared-memory
    wavefronts beyond one per instruction (bank conflicts), and how long the values it defines
    stay live in registers (instructions summed over its definitions).
    """

    file: str
    line: int
    stall_pct: float = 0.0
    dominant_stall: str = ""
    samples: int = 0
    source: str = ""
    #: the generated file and line the compiler's line info named, when `file`/`line` were mapped back to the
    #: string literal it came from (`profiler.source_map`): load_inline's `cuda.cu` line 7 is the `.py` line
    compiled_as: str = ""
    global_sectors: float = 0.0
    global_sectors_ideal: float = 0.0
    shared_excess_wavefronts: float = 0.0
    register_span: int = Field(
        0, description="sum over register values defined here of their live range, in instructions"
    )


class LaunchConfig(BaseModel):
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    registers_per_thread: int | None = None
    shared_mem_static: int | None = None
    shared_mem_dynamic: int | None = None


class KernelProfile(BaseModel):
    """One profiled kernel launch: its name, launch, duration and raw ncu metrics (by ncu name)."""

    name: str
    duration_ns: float
    launch: LaunchConfig | None = None
    metrics: dict[str, float] = {}
    hot_lines: list[HotLine] = []
    reader: str = Field("ncu_report", description="'ncu_report' (per-line data) or 'csv' (metrics only)")


class Finding(BaseModel):
    """One diagnosis: ranked, with the numbers behind it and what to do."""

    rule: str = Field(description="stable id, e.g. 'uncoalesced_global_access'")
    title: str
    severity: float = Field(description="0..1, used for ranking")
    evidence: dict[str, float | str] = {}
    lines: list[HotLine] = []
    suggestion: str


class Roofline(BaseModel):
    arithmetic_intensity: float = Field(description="FLOP per DRAM byte")
    achieved_flops_per_s: float
    achieved_bytes_per_s: float
    bound: str = Field(description="memory | compute | latency")
    pct_of_roof: float = Field(description="achieved / attainable at this intensity, percent")


class Explanation(BaseModel):
    kernel: KernelProfile
    peaks: DevicePeaks
    roofline: Roofline | None = None
    findings: list[Finding] = []
    narrative: str | None = None


class OpTime(BaseModel):
    """One row of torch.profiler's breakdown (degraded mode)."""

    name: str
    calls: int
    device_us: float
    cpu_us: float


class ProfileResult(BaseModel):
    """What profiling one module produced: ncu kernels, or a degraded timing with the reason."""

    mode: str = Field(description="'cupti' (profiled in the process), 'ncu' (under Nsight Compute) or 'degraded'")
    reason: str = Field("", description="why profiling degraded, and how to enable counters")
    device_name: str = ""
    kernels: list[KernelProfile] = []
    wall_ms: float | None = Field(None, description="median time per call (degraded mode)")
    ops: list[OpTime] = []
    report_path: str | None = None
    seconds: float = Field(0.0, description="wall time the profiling took")
    stages_s: dict[str, float] = Field({}, description="seconds per stage inside the profiled process")
    log_excerpt: str = ""
    #: source texts by the file name their line info names: the programs compiled in the profiled process that are no
    #: files (NVRTC's), and the files ncu imported into its report; where the hot lines in them are read
    #: (`source_map.map_hot_lines`), the build's files or not
    sources: dict[str, str] = {}

    @property
    def measured_by(self) -> str:
        """How the kernels were measured, in words ("" for a degraded profile)."""
        return {"cupti": "in its process by CUPTI", "ncu": "under Nsight Compute"}.get(self.mode, "")
