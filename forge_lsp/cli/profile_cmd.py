"""`forge profile TASK.py [CANDIDATE.py]`: the hardware counters of the measured call (CUPTI in its process, or
Nsight Compute)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from ..profiler.metrics import METRICS
from ..profiler.model import ProfileResult
from .eval_cmd import console, positive_float

_SHOWN = (
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "launch__registers_per_thread",
    "lts__t_sector_hit_rate.pct",
)


def add_parser(sub) -> None:
    p = sub.add_parser(
        "profile",
        help="profile the reference or a candidate: hardware counters, stalls and hot lines",
        description="Profile one call of the task's Model (or the candidate's ModelNew) on a GPU: in its own process "
        "by CUPTI, or under Nsight Compute (--ncu, --full, or where CUPTI is unavailable; the output says which ran "
        "and why). Without counters, falls back to event timing and torch.profiler's breakdown and says why.",
    )
    p.add_argument("task", type=Path)
    p.add_argument("candidate", type=Path, nargs="?")
    p.add_argument("--device", default="auto", help="cuda:N, cpu, or auto (default)")
    p.add_argument("--kernel", help="profile only kernels whose name matches this regex")
    p.add_argument("--full", action="store_true", help="collect ncu's full set and keep the report")
    p.add_argument(NCU_FLAG, action="store_true", help=NCU_HELP)
    p.add_argument("--timeout", type=positive_float, default=300.0, metavar="SECONDS")
    p.add_argument("--json", action="store_true")
    p.add_argument("--cache-dir", type=Path)
    p.set_defaults(func=run)


NCU_FLAG = "--ncu"
NCU_HELP = (
    "profile under Nsight Compute (a new process, every launch replayed) instead of in the process by CUPTI, "
    "which is the default on a GPU"
)


def render(out: Console, result: ProfileResult) -> None:
    from ..usecases.explain import failure_excerpt

    if result.mode == "degraded":
        out.print(f"[yellow bold]degraded profile[/]: {result.reason}", highlight=False)
    elif result.reason:  # the path that ran, and why not the other
        out.print(result.reason, highlight=False)
    failure = failure_excerpt(result)
    if failure:  # nothing was measured: say what failed (the user's code, as a rule), not just that it did
        out.print("nothing could be measured; the profiled process ended with:", highlight=False)
        out.print("  " + failure.replace("\n", "\n  "), markup=False, highlight=False)
    how = f", {result.measured_by}" if result.measured_by else ""
    out.print(f"device: {result.device_name or '?'}  (profiling took {result.seconds:.1f} s{how})")
    if result.kernels:
        table = Table(box=None, header_style="bold")
        for col in ("kernel", "time", "grid", "block", *(METRICS[m].label for m in _SHOWN)):
            table.add_column(col)
        for k in result.kernels:
            launch = k.launch
            table.add_row(
                k.name[:60],
                f"{k.duration_ns / 1000:.1f} µs",
                "x".join(map(str, launch.grid)) if launch else "",
                "x".join(map(str, launch.block)) if launch else "",
                *(f"{k.metrics[m]:.1f}" if m in k.metrics else "" for m in _SHOWN),
            )
        out.print(table)
    if result.wall_ms is not None:
        out.print(f"median time per call: {result.wall_ms * 1000:.1f} µs")
    if result.ops:
        on_device = any(op.device_us for op in result.ops)  # the CPU has no device time: no column of zeros
        table = Table(box=None, header_style="bold")
        for col in ("op / kernel", "calls", *(("device µs",) if on_device else ()), "cpu µs"):
            table.add_column(col)
        for op in result.ops[:15]:
            device = (f"{op.device_us:.1f}",) if on_device else ()
            table.add_row(op.name[:70], str(op.calls), *device, f"{op.cpu_us:.1f}")
        out.print(table)
    if result.report_path:
        out.print(f"report: {result.report_path}")


def run(args: argparse.Namespace) -> int:
    from ..usecases import UseCaseError
    from ..usecases.explain import ProfileRequest, profile_target

    request = ProfileRequest(
        target=args.task,
        candidate=args.candidate,
        kernel=args.kernel,
        device=args.device,
        full=args.full,
        in_process=not args.ncu,
        timeout=args.timeout,
        cache_dir=args.cache_dir,
    )
    try:
        result = profile_target(request).result
    except UseCaseError as exc:
        print(f"forge profile: {exc}", file=sys.stderr)
        return 2
    if args.json:
        json.dump(result.model_dump(mode="json"), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        render(console(), result)
    return 0 if (result.kernels or result.wall_ms is not None) else 1


def add_explain_parser(sub) -> None:
    p = sub.add_parser(
        "explain",
        help="profile, then explain the bottleneck of each kernel (rule-based)",
        description="Profile one call of a task (like `forge profile`), or the launches of a "
        "__global__ kernel of a .cu file by the script that runs it; place each kernel on the "
        "device's roofline and list ranked findings with evidence, source lines and suggestions.",
    )
    p.add_argument("target", type=Path, help="TASK.py, or a .cu/.cuh file")
    p.add_argument("candidate", type=Path, nargs="?", help="with TASK.py: a candidate to explain instead of Model")
    p.add_argument("--kernel", help="kernel name (a .cu file with several kernels) or, for a task, a name regex")
    p.add_argument(
        "--entry",
        type=Path,
        help="with a .cu file: the Python script that loads and launches it "
        "(default: the Python file beside it that names it)",
    )
    p.add_argument("--launch-skip", type=int, default=0, help="with a .cu file: launches to skip (warm-up)")
    p.add_argument("--device", default="auto", help="cuda:N, cpu, or auto (default)")
    p.add_argument("--timeout", type=positive_float, default=300.0, metavar="SECONDS")
    p.add_argument("--json", action="store_true")
    p.add_argument("--cache-dir", type=Path)
    p.add_argument("--no-narrative", action="store_true", help="skip the LLM narrative even when a model is configured")
    p.add_argument("--full", action="store_true", help="under ncu, with its full set, and keep the report")
    p.add_argument(NCU_FLAG, action="store_true", help=NCU_HELP)
    p.set_defaults(func=run_explain)


def run_explain(args: argparse.Namespace) -> int:
    from ..usecases import UseCaseError
    from ..usecases.explain import ProfileRequest, explain

    request = ProfileRequest(
        target=args.target,
        candidate=args.candidate,
        kernel=args.kernel,
        entry=args.entry,
        launch_skip=args.launch_skip,
        device=args.device,
        full=args.full,
        in_process=not args.ncu,
        timeout=args.timeout,
        cache_dir=args.cache_dir,
    )
    on_start = None if args.json else (lambda what: print(what, file=sys.stderr))
    try:
        explained = explain(request, narrative=not args.no_narrative, on_start=on_start)
    except UseCaseError as exc:
        print(f"forge explain: {exc}", file=sys.stderr)
        return 2
    result, explanations = explained.result, explained.explanations
    peaks, peaks_note, narrative_note = explained.peaks, explained.peaks_note, explained.narrative_note
    if args.json:
        json.dump(
            {
                "profile": result.model_dump(mode="json"),
                "peaks_note": peaks_note,
                "narrative_note": narrative_note,
                "findings_note": explained.findings_note,
                "explanations": [e.model_dump(mode="json") for e in explanations],
            },
            sys.stdout,
            indent=2,
        )
        sys.stdout.write("\n")
        return 0 if explanations else 1
    out = console()
    render(out, result)
    if result.kernels and peaks is None:
        out.print(
            f"[yellow]no peak figures for {result.device_name!r} ({peaks_note}): cannot place kernels on a roofline[/]"
        )
    for e in explanations:
        out.print(f"\n[bold]{e.kernel.name}[/]  ({e.peaks.source} peaks of {e.peaks.name}: {peaks_note})")
        if e.roofline:
            r = e.roofline
            out.print(
                f"  roofline: {r.bound}-bound, {r.pct_of_roof:.0f}% of the roof at "
                f"{r.arithmetic_intensity:.2f} FLOP/byte ({r.achieved_bytes_per_s / 1e12:.2f} TB/s)"
            )
        for i, f in enumerate(e.findings, 1):
            out.print(f"  {i}. [bold]{f.title}[/] ({f.rule}, severity {f.severity:.2f})")
            if f.evidence:
                out.print(
                    "     evidence: "
                    + ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in f.evidence.items()),
                    highlight=False,
                )
            for h in f.lines[:3]:
                out.print(f"     {h.file}:{h.line}  {h.stall_pct:.0f}% of stalls ({h.dominant_stall})")
            out.print(f"     → {f.suggestion}")
        if e.narrative:
            out.print("  [bold]narrative[/]:\n    " + e.narrative.replace("\n", "\n    "), highlight=False)
    if narrative_note and explanations:
        out.print(f"[dim]{narrative_note}[/]", highlight=False)
    if explained.findings_note and (result.kernels or result.wall_ms is not None):
        out.print(explained.findings_note, highlight=False)
    return 0 if (explanations or result.wall_ms is not None) else 1
