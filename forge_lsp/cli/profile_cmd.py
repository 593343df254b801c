"""`forge profile TASK.py [CANDIDATE.py]`: Nsight Compute metrics of the measured call."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from ..engine import TaskError, load_candidate, load_task, resolve_device
from ..profiler.metrics import METRICS
from ..profiler.model import ProfileResult

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
        help="profile the reference or a candidate with Nsight Compute",
        description="Profile one call of the task's Model (or the candidate's ModelNew) under "
        "Nsight Compute. Without ncu or counter permissions, falls back to event timing and "
        "torch.profiler's breakdown and says why.",
    )
    p.add_argument("task", type=Path)
    p.add_argument("candidate", type=Path, nargs="?")
    p.add_argument("--device", default="auto")
    p.add_argument("--kernel", help="profile only kernels whose name matches this regex")
    p.add_argument("--full", action="store_true", help="collect ncu's full set and keep the report")
    p.add_argument("--timeout", type=float, default=300.0)
    p.add_argument("--json", action="store_true")
    p.add_argument("--cache-dir", type=Path)
    p.set_defaults(func=run)


def render(console: Console, result: ProfileResult) -> None:
    if result.mode != "ncu":
        console.print(f"[yellow bold]degraded profile[/]: {result.reason}")
    console.print(f"device: {result.device_name or '?'}  (profiling took {result.seconds:.1f} s)")
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
        console.print(table)
    if result.wall_ms is not None:
        console.print(f"median time per call: {result.wall_ms * 1000:.1f} µs")
    if result.ops:
        table = Table(box=None, header_style="bold")
        for col in ("op / kernel", "calls", "device µs", "cpu µs"):
            table.add_column(col)
        for op in result.ops[:15]:
            table.add_row(op.name[:70], str(op.calls), f"{op.device_us:.1f}", f"{op.cpu_us:.1f}")
        console.print(table)
    if result.report_path:
        console.print(f"report: {result.report_path}")


def run(args: argparse.Namespace) -> int:
    from ..profiler.ncu import profile

    try:
        task = load_task(args.task)
        cand = load_candidate(args.candidate) if args.candidate else None
    except (TaskError, OSError) as exc:
        print(f"forge profile: {exc}", file=sys.stderr)
        return 2
    result = profile(
        task,
        cand,
        device=resolve_device(args.device),
        kernel=args.kernel,
        full=args.full,
        timeout=args.timeout,
        cache_dir=args.cache_dir,
    )
    if args.json:
        json.dump(result.model_dump(mode="json"), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        render(Console(), result)
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
    p.add_argument("--device", default="auto")
    p.add_argument("--timeout", type=float, default=300.0)
    p.add_argument("--json", action="store_true")
    p.add_argument("--cache-dir", type=Path)
    p.add_argument("--no-narrative", action="store_true", help="skip the LLM narrative even when a model is configured")
    p.set_defaults(func=run_explain, full=False)


class _UsageError(Exception):
    pass


def _cu_target(args: argparse.Namespace) -> tuple[str, Path]:
    """(kernel name, entry script) for `forge explain FILE.cu`, or a usage error that says what to pass."""
    from ..workspace.cuda_source import global_kernels, python_files_loading

    try:
        text = args.target.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise _UsageError(str(exc)) from exc
    names = list(dict.fromkeys(k.name for k in global_kernels(text)))
    if args.kernel:
        if names and args.kernel not in names:
            raise _UsageError(f"{args.target} has no __global__ kernel {args.kernel!r} (it has: {', '.join(names)})")
        kernel = args.kernel
    elif len(names) == 1:
        kernel = names[0]
    elif not names:
        raise _UsageError(f"{args.target} defines no __global__ kernel")
    else:
        raise _UsageError(f"{args.target} defines several kernels; pick one with --kernel ({', '.join(names)})")
    if args.entry:
        return kernel, args.entry
    loaders = python_files_loading(args.target)
    if not loaders:
        raise _UsageError(
            f"no Python file beside {args.target} names it; pass the script that launches "
            f"{kernel!r} with --entry SCRIPT.py"
        )
    return kernel, loaders[0]


def run_explain(args: argparse.Namespace) -> int:
    from ..profiler.analyze import analyze
    from ..profiler.model import Explanation
    from ..profiler.ncu import device_peaks, profile, profile_cu_kernel
    from ..profiler.roofline import place

    device = resolve_device(args.device)
    try:
        if args.target.suffix in (".cu", ".cuh"):
            kernel, entry = _cu_target(args)
            if not args.json:
                print(f"profiling {kernel!r} as launched by {entry}", file=sys.stderr)
            result = profile_cu_kernel(
                args.target,
                kernel,
                entry,
                device=device,
                launch_skip=args.launch_skip,
                timeout=args.timeout,
                cache_dir=args.cache_dir,
            )
        else:
            task = load_task(args.target)
            cand = load_candidate(args.candidate) if args.candidate else None
            result = profile(
                task, cand, device=device, kernel=args.kernel, timeout=args.timeout, cache_dir=args.cache_dir
            )
    except (TaskError, OSError, _UsageError) as exc:
        print(f"forge explain: {exc}", file=sys.stderr)
        return 2
    peaks, peaks_note = (
        device_peaks(device, result.device_name, cache_dir=args.cache_dir) if result.kernels else (None, "")
    )
    explanations = (
        [
            Explanation(kernel=k, peaks=peaks, roofline=place(k, peaks), findings=analyze(k, peaks))
            for k in result.kernels
        ]
        if peaks
        else []
    )
    narrative_note = _add_narratives(args, explanations)
    if args.json:
        json.dump(
            {
                "profile": result.model_dump(mode="json"),
                "peaks_note": peaks_note,
                "narrative_note": narrative_note,
                "explanations": [e.model_dump(mode="json") for e in explanations],
            },
            sys.stdout,
            indent=2,
        )
        sys.stdout.write("\n")
        return 0 if explanations else 1
    console = Console()
    render(console, result)
    if result.kernels and peaks is None:
        console.print(
            f"[yellow]no peak figures for {result.device_name!r} ({peaks_note}): cannot place kernels on a roofline[/]"
        )
    for e in explanations:
        console.print(f"\n[bold]{e.kernel.name}[/]  ({e.peaks.source} peaks of {e.peaks.name}: {peaks_note})")
        if e.roofline:
            r = e.roofline
            console.print(
                f"  roofline: {r.bound}-bound, {r.pct_of_roof:.0f}% of the roof at "
                f"{r.arithmetic_intensity:.2f} FLOP/byte ({r.achieved_bytes_per_s / 1e12:.2f} TB/s)"
            )
        for i, f in enumerate(e.findings, 1):
            console.print(f"  {i}. [bold]{f.title}[/] ({f.rule}, severity {f.severity:.2f})")
            if f.evidence:
                console.print(
                    "     evidence: "
                    + ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in f.evidence.items()),
                    highlight=False,
                )
            for h in f.lines[:3]:
                console.print(f"     {h.file}:{h.line}  {h.stall_pct:.0f}% of stalls ({h.dominant_stall})")
            console.print(f"     → {f.suggestion}")
        if e.narrative:
            console.print("  [bold]narrative[/]:\n    " + e.narrative.replace("\n", "\n    "), highlight=False)
    if narrative_note and explanations:
        console.print(f"[dim]{narrative_note}[/]", highlight=False)
    return 0 if (explanations or result.wall_ms is not None) else 1


def _add_narratives(args: argparse.Namespace, explanations: list) -> str:
    """The Judge's narrative for each explanation when a model is configured; a note saying what happened."""
    if not explanations or args.no_narrative:
        return ""
    from ..agent.config import ConfigError, api_key, load_config
    from .optimize_cmd import find_workspace

    try:
        config = load_config(find_workspace(args.target))
    except ConfigError as exc:
        return f"no narrative: {exc}"
    settings = config.judge or config.coder
    if settings is None:
        return "no narrative: no model configured (the findings above are rule-based)"
    from ..agent.narrative import narrate
    from ..agent.provider import ChatModel

    model = ChatModel(settings, api_key=api_key(settings), prices=config.prices)
    source = (
        args.target.read_text(errors="replace")
        if args.target.suffix in (".cu", ".cuh")
        else (args.candidate.read_text(errors="replace") if args.candidate else args.target.read_text(errors="replace"))
    )
    note = ""
    for e in explanations:
        e.narrative, note = narrate(model, e, source=source[:12000])
    return note
