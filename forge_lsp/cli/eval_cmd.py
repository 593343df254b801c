"""`forge eval TASK.py CANDIDATE.py` and `forge eval DIR [CANDIDATE_DIR]`."""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from ..engine import Candidate, EvalOptions, Evaluator, Status, TaskError, Verdict, load_candidate, load_task


def add_parser(sub) -> None:
    p = sub.add_parser(
        "eval",
        help="verify and time candidate(s) against a task",
        description="Verify and time a candidate ModelNew against a task's Model. "
        "With directories, every candidate <task>_*.py is evaluated against <task>.py.",
    )
    p.add_argument("task", type=Path, help="task file (Model, get_inputs, get_init_inputs) or a directory")
    p.add_argument("candidate", type=Path, nargs="?", help="candidate file (ModelNew) or a directory")
    p.add_argument("--device", default="auto", help="cuda:N, cpu, or auto (default)")
    p.add_argument("--json", action="store_true", help="print verdicts as JSON")
    p.add_argument("--trials", type=int, help="random input sets (default: the task's, else 3)")
    p.add_argument(
        "--vary",
        action="append",
        default=[],
        metavar="NAME=V1,V2",
        help="also verify with module constant NAME set to each value",
    )
    p.add_argument("--no-timing", action="store_true", help="verify only")
    p.add_argument(
        "--sanitize",
        action="store_true",
        help="CUDA: also run each correct candidate once under compute-sanitizer (racecheck, memcheck, initcheck)",
    )
    p.add_argument("--timing-mode", choices=["auto", "events", "graph"], default="auto")
    p.add_argument("--cache-dir", type=Path, help="compile cache (default ~/.cache/forge-lsp)")
    p.set_defaults(func=run)


def _defines(path: Path, cls: str) -> bool:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except SyntaxError:
        return cls == "ModelNew"  # a broken candidate is still a candidate: it gets a verdict
    return any(isinstance(n, ast.ClassDef) and n.name == cls for n in tree.body)


def pair_directory(task_dir: Path, cand_dir: Path) -> list[tuple[Path, list[Path]]]:
    """Match candidates `<task>_*.py` (longest task-name prefix wins) to tasks `<task>.py`."""
    tasks = sorted(p for p in task_dir.glob("*.py") if _defines(p, "Model") and not _defines(p, "ModelNew"))
    cands = sorted(p for p in cand_dir.glob("*.py") if p not in tasks and _defines(p, "ModelNew"))
    pairs: dict[Path, list[Path]] = {t: [] for t in tasks}
    for c in cands:
        owners = [t for t in tasks if c.stem.startswith(t.stem + "_") or c.stem == t.stem]
        if owners:
            pairs[max(owners, key=lambda t: len(t.stem))].append(c)
    return [(t, cs) for t, cs in pairs.items() if cs]


def _vary(specs: list[str]) -> dict[str, list[int]] | None:
    if not specs:
        return None
    out: dict[str, list[int]] = {}
    for spec in specs:
        name, _, values = spec.partition("=")
        try:
            out[name.strip()] = [int(v) for v in values.split(",") if v.strip()]
        except ValueError:
            raise SystemExit(f"forge eval: --vary expects NAME=INT[,INT...], got {spec!r}") from None
    return out


def _fmt_ms(ms: float) -> str:
    return f"{ms * 1000:.1f} µs" if ms < 1 else f"{ms:.3f} ms"


def render(console: Console, task_name: str, cand_name: str, v: Verdict) -> None:
    ok = v.status is Status.correct
    color = "green" if ok else "red"
    console.print(
        f"[bold]{cand_name}[/] vs [bold]{task_name}[/] on {v.device_name or v.device} "
        f"({v.backend}): [{color} bold]{v.status.value}[/] — {v.reason}"
    )
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    table.add_column("check")
    table.add_column("result")
    table.add_column("detail", overflow="fold")
    for c in v.checks:
        table.add_row(c.name, "[green]pass[/]" if c.passed else "[red]FAIL[/]", c.detail)
    if v.checks:
        console.print(table)
    if v.mismatch:
        m = v.mismatch
        where = (
            f" at index {m.index}: expected {m.expected:.6g}, got {m.actual:.6g}"
            if m.index is not None and m.expected is not None and m.actual is not None
            else ""
        )
        console.print(f"  mismatch [{m.input_set}] {m.output} ({m.problem}){where}")
    if v.timing:
        t = v.timing
        lo, hi = t.speedup_ci95
        console.print(
            f"  reference {_fmt_ms(t.reference.median_ms)}  candidate {_fmt_ms(t.candidate.median_ms)}  "
            f"speedup [bold]{t.speedup:.3f}×[/] (95% CI {lo:.3f}–{hi:.3f}, n={t.candidate.n}, {t.mode}"
            f"{', L2 flushed' if t.l2_flush else ''})"
        )
        for note in t.notes:
            console.print(f"  note: {note}")
    stages = "  ".join(f"{k} {s:.2f}s" for k, s in v.stages.items() if s >= 0)
    if stages:
        console.print(f"  stages: {stages}")
    if not ok and (v.traceback or v.log_excerpt):
        text = (v.traceback or v.log_excerpt).strip().splitlines()
        console.print("  " + "\n  ".join(text[-15:]), markup=False, highlight=False)
    console.print()


def run(args: argparse.Namespace) -> int:
    console = Console(stderr=args.json)
    if args.task.is_dir():
        cand_dir = args.candidate or args.task
        if not cand_dir.is_dir():
            print("forge eval: with a task directory, the candidate must be a directory too", file=sys.stderr)
            return 2
        jobs = pair_directory(args.task, cand_dir)
        if not jobs:
            print(f"forge eval: no <task>.py / <task>_*.py pairs found in {args.task}", file=sys.stderr)
            return 2
    else:
        if args.candidate is None:
            print("forge eval: give a candidate file (or a directory of task/candidate pairs)", file=sys.stderr)
            return 2
        jobs = [(args.task, [args.candidate])]

    opts = EvalOptions(timing=not args.no_timing, timing_mode=args.timing_mode, trials=args.trials)
    results: list[dict] = []
    all_ok = True
    with Evaluator(args.device, options=opts, cache_dir=args.cache_dir) as ev:
        for task_path, cand_paths in jobs:
            try:
                task = load_task(task_path, vary=_vary(args.vary))
            except TaskError as exc:
                print(f"forge eval: {exc}", file=sys.stderr)
                return 2
            cands: list[Candidate] = []
            for p in cand_paths:
                try:
                    cands.append(load_candidate(p))
                except OSError as exc:
                    print(f"forge eval: cannot read {p}: {exc}", file=sys.stderr)
                    return 2

            def show(c: Candidate, v: Verdict, task=task) -> None:
                if args.sanitize and v.correct and ev.device != "cpu":
                    ev.sanitize_into(v, task, c)
                if not args.json:
                    render(console, task.name, c.name, v)

            verdicts = ev.evaluate_many(task, cands, on_verdict=show)
            for c, v in zip(cands, verdicts, strict=True):
                all_ok &= v.correct
                results.append({"task": str(task.path), "candidate": str(c.path), "verdict": v.model_dump(mode="json")})
    if args.json:
        json.dump(results if len(results) > 1 or args.task.is_dir() else results[0], sys.stdout, indent=2)
        sys.stdout.write("\n")
    elif len(results) > 1:
        n_ok = sum(r["verdict"]["status"] == "correct" for r in results)
        console.print(f"[bold]{n_ok}/{len(results)} candidates correct[/]")
    return 0 if all_ok else 1
