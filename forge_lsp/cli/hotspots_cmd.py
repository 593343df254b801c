"""`forge hotspots ENTRY`: where a whole model spends its time, and its hot modules captured as tasks."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from rich.table import Table

from .eval_cmd import console, positive_float, positive_int


def add_parser(sub) -> None:
    p = sub.add_parser(
        "hotspots",
        help="find where a whole model spends its time and capture its hot modules' inputs",
        description="Run ENTRY (a script, forge observing every forward, or FILE.py:function returning "
        "(model, args)) in a worker under torch.profiler, and attribute the time (device time on a GPU, host "
        "time on the CPU) to module instances, module classes and ops, per forward, warm-up excluded. The hot "
        "classes' instances have their first calls' inputs, constructor and state_dict saved under "
        ".forge/captures/; --extract writes a KernelBench-format task per hot class under .forge/tasks/.",
    )
    p.add_argument("entry", nargs="?", help="script.py, FILE.py:function or module:function(key=value, ...)")
    p.add_argument("--device", default="auto", help="cuda:N, cpu, or auto (default: the configured device)")
    p.add_argument("--top", type=positive_int, default=5, help="hot classes to capture and rank (default 5)")
    p.add_argument("--class", dest="classes", action="append", default=[], metavar="NAME", help="also capture it")
    p.add_argument("--extract", action="store_true", help="write a task per hot class under .forge/tasks/")
    p.add_argument("--warmup", type=positive_int, default=2, help="forwards before the profiled ones")
    p.add_argument("--iters", type=positive_int, default=5, help="profiled forwards (function entries)")
    p.add_argument("--capture-calls", type=positive_int, default=2, help="calls captured per hot instance")
    p.add_argument("--capture-mb", type=positive_int, default=2048, help="host memory for all captures")
    p.add_argument("--timeout", type=positive_float, default=1800.0, metavar="SECONDS")
    p.add_argument("--workspace", type=Path, help="where .forge/ lives (default: the project around the entry)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=run_hotspots)


def run_hotspots(args: argparse.Namespace) -> int:
    from ..usecases import UseCaseError
    from ..usecases.hotspots import EntryFailed, HotspotsRequest, find_model_hotspots

    err = console(stderr=True)
    started = time.monotonic()
    last = [0.0]

    def progress(step: str, done: int | None, of: int | None) -> None:
        now = time.monotonic()
        if now - started < 2.0 and not (done and of and done == of):
            return
        if now - last[0] < 1.0 and done not in (None, of):
            return
        last[0] = now
        count = f" {done}/{of}" if done is not None and of else ""
        err.print(f"  {step}{count}… {now - started:.0f} s", highlight=False)

    request = HotspotsRequest(
        entry=args.entry,
        workspace=args.workspace,
        device=args.device,
        warmup=args.warmup,
        iterations=args.iters,
        top=args.top,
        classes=tuple(args.classes),
        capture_calls=args.capture_calls,
        capture_mb=args.capture_mb,
        extract=args.extract,
        timeout_s=args.timeout,
    )
    try:
        result = find_model_hotspots(request, on_progress=progress)
    except UseCaseError as exc:
        print(f"forge hotspots: {exc}", file=sys.stderr)
        return 1 if isinstance(exc, EntryFailed) else 2
    report = result.report
    if args.json:
        data = report.model_dump(mode="json")
        if result.extraction is not None:
            data["extracted"] = [
                {"class": t.cls, "task": str(t.path), "input_sets": [str(p) for p in t.input_sets]}
                for t in result.extraction.tasks
            ]
            data["not_extracted"] = [{"class": k, "reason": why} for k, why in result.extraction.skipped]
        json.dump(data, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    out = console()
    where = report.device_name or report.device
    out.print(
        f"[bold]{report.model}[/] from {report.entry} on {where}: {report.model_ms:.3f} ms per forward "
        f"({report.timer} time of its ops; {report.iterations} profiled forward"
        f"{'s' if report.iterations != 1 else ''}, {report.warmup} warm-up excluded)",
        highlight=False,
    )
    classes = Table(title="module classes", box=None, header_style="bold", title_justify="left")
    for col in ("class", "% total", "% self", "instances", "calls", "inputs (first call)", "defined at"):
        classes.add_column(col, no_wrap=col != "inputs (first call)")
    for c in sorted(report.classes, key=lambda c: -c.total_ms)[:15]:
        at = c.module if c.library or not (c.file and c.line) else f"{_short(c.file)}:{c.line}"
        mark = "*" if c.key in report.targets else ""
        classes.add_row(
            c.name + mark,
            f"{c.total_pct:.1f}",
            f"{c.self_pct:.1f}",
            str(c.instances),
            str(c.calls),
            ", ".join(t.label() for t in c.inputs[:3]),
            at,
        )
    out.print(classes)
    instances = Table(title="module instances (by their own ops)", box=None, header_style="bold", title_justify="left")
    for col in ("instance", "class", "% self", "% total", "ms self"):
        instances.add_column(col)
    for i in report.instances[:10]:
        instances.add_row(
            i.name,
            i.cls.rsplit(".", 1)[-1].split(":")[-1],
            f"{i.self_pct:.1f}",
            f"{i.total_pct:.1f}",
            f"{i.self_ms:.3f}",
        )
    out.print(instances)
    ops = Table(title="ops", box=None, header_style="bold", title_justify="left")
    for col in ("op", "% time", "calls per forward", "ms"):
        ops.add_column(col)
    for o in report.ops[:10]:
        ops.add_row(o.name, f"{o.pct:.1f}", str(o.calls), f"{o.self_ms:.3f}")
    out.print(ops)
    if report.targets:
        names = [c.name for c in map(report.cls, report.targets) if c is not None]
        out.print("* targets: " + ", ".join(names), highlight=False)
    for note in report.notes:
        out.print(f"note: {note}", highlight=False)
    for inst in report.instances:
        cap = inst.capture
        if cap is not None and (cap.skipped or cap.init_missing):
            out.print(f"not captured whole: {inst.name}: {cap.skipped or cap.init_missing}", highlight=False)
    if report.capture_folder:
        out.print(f"captures: {report.capture_folder}", highlight=False)
    if result.extraction is not None:
        for t in result.extraction.tasks:
            out.print(
                f"task: {_short(str(t.path))} ({len(t.input_sets)} captured input sets from {', '.join(t.instances)})",
                highlight=False,
            )
        for key, why in result.extraction.skipped:
            out.print(f"no task for {key}: {why}", highlight=False)
    return 0


def _short(path: str | None) -> str:
    if not path:
        return ""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd()))
    except ValueError:
        return path
