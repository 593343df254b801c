"""`forge optimize FILE.py[::Class]`, `forge runs`, `forge show RUN`."""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import datetime
from pathlib import Path

from rich.console import Console
from rich.table import Table

from ..engine import TaskError, load_task


def add_parsers(sub) -> None:
    p = sub.add_parser(
        "optimize",
        help="search for a faster verified implementation of a module",
        description="Coder/Judge rounds with tree search over candidates, each compiled, verified "
        "and timed by the engine. Without a configured model: torch.compile variants and forge's "
        "built-in Triton kernels only.",
    )
    p.add_argument("target", nargs="?", help="FILE.py or FILE.py::ClassName (KernelBench-style task file)")
    p.add_argument("--resume", metavar="RUN", help="continue an interrupted run")
    p.add_argument("--search", choices=["mcts", "linear"])
    p.add_argument("--rounds", type=int)
    p.add_argument("--budget-usd", type=float)
    p.add_argument("--wall-s", type=float, help="wall-time budget in seconds")
    p.add_argument("--concurrency", type=int, help="expansions per round (mcts)")
    p.add_argument("--model", help="model name (coder and judge)")
    p.add_argument("--base-url", help="OpenAI-compatible endpoint, e.g. http://localhost:11434/v1")
    p.add_argument("--no-offline", action="store_true", help="skip the offline seeds")
    p.add_argument(
        "--apply",
        action="store_true",
        help="rewrite the class in FILE.py with the best verified candidate (guarded; the original "
        "computation stays as the fallback) instead of writing FILE_forge_best.py",
    )
    p.add_argument("--device", default="auto")
    p.add_argument("--workspace", type=Path, help="where .forge/ lives (default: the project around the file)")
    p.add_argument("--cache-dir", type=Path)
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=run_optimize)

    r = sub.add_parser("runs", help="list optimization runs of this workspace")
    r.add_argument("--workspace", type=Path, default=Path.cwd())
    r.add_argument("--json", action="store_true")
    r.set_defaults(func=run_runs)

    s = sub.add_parser("show", help="print one run: candidates, verdicts, speedups, cost")
    s.add_argument("run")
    s.add_argument("--workspace", type=Path, default=Path.cwd())
    s.add_argument("--source", metavar="CANDIDATE", help="print one candidate's source (e.g. c3)")
    s.set_defaults(func=run_show)


def find_workspace(path: Path) -> Path:
    """The nearest folder above `path` with pyproject.toml, forge.toml, .forge or .git; else its folder."""
    start = path.resolve().parent if path.is_file() or path.suffix else path.resolve()
    for folder in (start, *start.parents):
        if any((folder / marker).exists() for marker in ("forge.toml", "pyproject.toml", ".forge", ".git")):
            return folder
    return start


def _split_target(target: str) -> tuple[Path, str | None]:
    if "::" in target:
        path, cls = target.split("::", 1)
        return Path(path), cls
    return Path(target), None


def run_optimize(args: argparse.Namespace) -> int:
    from ..agent.config import HOW_TO_CONFIGURE, ConfigError, load_config
    from ..agent.events import EventBus
    from ..agent.optimize import OptimizeOptions, Optimizer, models_from_config
    from ..agent.store import RunStore
    from ..engine import Evaluator

    console = Console(stderr=True)
    if not args.target and not args.resume:
        print("forge optimize: name a task file (FILE.py[::Class]) or --resume RUN", file=sys.stderr)
        return 2
    if args.resume:
        workspace = args.workspace or Path.cwd()
        store = RunStore.for_workspace(workspace)
        try:
            run = store.get_run(args.resume)
        except KeyError as exc:
            print(f"forge optimize: {exc.args[0]} in {store.path}", file=sys.stderr)
            return 2
        path, cls = Path(run.task_path), run.model_class
    else:
        path, cls = _split_target(args.target)
        workspace = args.workspace or find_workspace(path)
        store = RunStore.for_workspace(workspace)
    try:
        task = load_task(path, model_class=cls)
    except (TaskError, OSError) as exc:
        print(f"forge optimize: {exc}", file=sys.stderr)
        return 2
    overrides = {
        k: v
        for k, v in {
            "model": args.model,
            "base_url": args.base_url,
            "search": args.search,
            "rounds": args.rounds,
            "budget_usd": args.budget_usd,
            "wall_s": args.wall_s,
            "concurrency": args.concurrency,
        }.items()
        if v is not None
    }
    try:
        config = load_config(workspace, overrides)
    except ConfigError as exc:
        print(f"forge optimize: {exc}", file=sys.stderr)
        return 2
    coder, judge = models_from_config(config)
    if coder is None:
        console.print(
            "[yellow bold]No model configured[/]: running the offline candidates only "
            "(torch.compile variants and forge's built-in Triton kernels)."
        )
        console.print(HOW_TO_CONFIGURE, markup=False, highlight=False)
    options = OptimizeOptions.from_config(config, offline=not args.no_offline)
    from ..agent.profiling import make_profile_fn

    def offline_candidates(t):
        from ..agent.offline import offline_candidates as generate

        return generate(t, device=evaluator.device)

    evaluator = Evaluator(args.device if args.device != "auto" else config.device, cache_dir=args.cache_dir)
    bus = EventBus(store)
    if not args.quiet:
        bus.subscribe(_printer(console))
    optimizer = Optimizer(
        task,
        store=store,
        evaluator=evaluator,
        options=options,
        coder=coder,
        judge=judge,
        bus=bus,
        offline=offline_candidates,
        profile=make_profile_fn(evaluator.device, args.cache_dir),
        config_record=config.redacted(),
    )
    from ..agent.roles import Prompts

    optimizer.prompts = Prompts(workspace)
    try:
        result = optimizer.run(resume=args.resume)
    except KeyboardInterrupt:
        optimizer.cancel()
        console.print(f"[yellow]interrupted[/]: resume with `forge optimize --resume {optimizer.run_id}`")
        store.set_run_status(optimizer.run_id, "interrupted", "interrupted (Ctrl-C)")
        return 130
    finally:
        evaluator.close()
    out = Console()
    _summary(out, store, result.run_id)
    out.print(
        f"run {result.run_id}: {result.status} ({result.stop_reason}); {_count(result.rounds, 'round')}, "
        f"{_count(result.candidates, 'candidate')}, ${result.spent_usd:.4f}"
    )
    for note in result.notes:
        out.print(f"  {note}")
    if result.best is not None and not result.improves:
        why = (
            f"it failed its final re-check ({result.final_failure})"
            if result.final_failure is not None
            else f"it runs at {result.answer_speedup:.2f}x the reference"
        )
        out.print(
            f"no verified candidate is faster than the reference: the best, {result.best.id}, was not "
            f"{'applied' if args.apply else 'written'} because {why}. Inspect it with `forge show {result.run_id}`."
        )
        return 1 if result.status != "cancelled" else 130
    if result.best is not None:
        out.print(f"best: {result.best.id} {result.answer_speedup:.2f}x — {result.best.summary}")
        if args.apply:
            return _apply(out, task, result)
        dest = task.path.with_name(f"{task.path.stem}_forge_best.py")
        dest.write_text(result.best.source)
        out.print(f"written to {dest}")
        return 0
    out.print("no verified candidate faster than nothing was found")
    return 1 if result.status != "cancelled" else 130


def _apply(out: Console, task, result) -> int:
    """Rewrite the task's class in place with the best candidate (the same rewrite the editor's Accept uses)."""
    from ..reintegrate import RewriteError, domain_from_verdict, rewrite_module

    verdict = result.best.verdict or {}
    if not verdict.get("checkpoint_compatible"):
        out.print(
            "[red]not applied[/]: the candidate does not load the module's state_dict (strict), so user "
            "checkpoints would not load into it"
        )
        return 1
    text = task.path.read_text()
    if task.sha and text != task.source:
        out.print(f"[red]not applied[/]: {task.path} changed during the run; nothing was changed")
        return 1
    try:
        rewrite = rewrite_module(
            text,
            task.model_class,
            result.best.source,
            domain_from_verdict(verdict),
            run_id=result.run_id,
            candidate_id=result.best.id,
            speedup=result.answer_speedup,
        )
    except RewriteError as exc:
        out.print(f"[red]not applied[/]: {exc}")
        return 1
    task.path.write_text(rewrite.new_text)
    out.print(
        f"applied to {task.path} ({rewrite.summary}); the original class is kept as "
        f"{rewrite.reference_class} and runs for inputs outside what was verified"
    )
    return 0


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _printer(console: Console):
    def show(event) -> None:
        d = event.data
        k = event.kind
        if k == "round":
            console.print(
                f"[bold]round {d.get('round')}[/]"
                + (f"/{d['of']}" if d.get("of") else "")
                + (f" · best {d['best_speedup']:.2f}x" if d.get("best_speedup") else "")
                + (f" · {d['phase']}" if d.get("phase") else ""),
                highlight=False,
            )
        elif k == "candidate_queued":
            console.print(
                f"  queued {d['candidate'].split('/')[-1]} ({d['origin']}): {d['summary'][:90]}", highlight=False
            )
        elif k == "candidate_timed" and d.get("speedup"):
            console.print(
                f"  [green]correct[/] {d['candidate'].split('/')[-1]}: {d['speedup']:.2f}x"
                + (" (final re-timing)" if d.get("final") else ""),
                highlight=False,
            )
        elif k == "candidate_failed":
            cid = (d.get("candidate") or "").split("/")[-1]
            console.print(f"  [red]{d.get('status', 'failed')}[/] {cid}: {d.get('reason', '')[:140]}", highlight=False)
        elif k == "new_best":
            console.print(
                f"  [bold green]new best[/] {d['candidate'].split('/')[-1]}: {d['speedup']:.2f}x", highlight=False
            )
        elif k == "model_call" and not d.get("ok"):
            console.print(
                f"  [yellow]model call failed[/] ({d.get('error')}): {d.get('message', '')[:160]}", highlight=False
            )
        elif k == "budget":
            console.print(f"stopping: {d['reason']}", highlight=False)

    return show


def _summary(console: Console, store, run_id: str, top: int = 8) -> None:
    cands = [c for c in store.candidates(run_id) if c.status == "evaluated"]
    table = Table(title="best candidates", box=None, header_style="bold")
    for col in ("id", "origin", "speedup", "summary"):
        table.add_column(col)
    ranked = sorted((c for c in cands if c.correct), key=lambda c: -(c.speedup or 0))[:top]
    for c in ranked:
        table.add_row(c.id.split("/")[-1], c.origin, f"{c.speedup:.2f}x" if c.speedup else "-", c.summary[:80])
    if ranked:
        console.print(table)


def run_runs(args: argparse.Namespace) -> int:
    from ..agent.store import RunStore

    store = RunStore.for_workspace(args.workspace)
    table = Table(box=None, header_style="bold")
    for col in ("run", "started", "status", "task", "best", "candidates", "cost"):
        table.add_column(col)
    rows = []
    for run in store.list_runs():
        cands = store.candidates(run.id)
        best = next((c for c in cands if c.id == run.best_candidate), None)
        rows.append(
            {
                "run": run.id,
                "created": run.created,
                "status": run.status,
                "message": run.message,
                "task": run.task_path,
                "model_class": run.model_class,
                "best": run.best_candidate,
                "best_speedup": best.speedup if best else None,
                "candidates": len(cands),
                "spent_usd": store.spent(run.id)[0],
            }
        )
        table.add_row(
            run.id,
            datetime.fromtimestamp(run.created).strftime("%Y-%m-%d %H:%M"),
            run.status,
            f"{Path(run.task_path).name}::{run.model_class}",
            f"{best.speedup:.2f}x" if best and best.speedup else "-",
            str(len(cands)),
            f"${store.spent(run.id)[0]:.4f}",
        )
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        Console().print(table)
    return 0


def run_show(args: argparse.Namespace) -> int:
    from ..agent.store import RunStore

    store = RunStore.for_workspace(args.workspace)
    try:
        run = store.get_run(args.run)
    except KeyError as exc:
        print(f"forge show: {exc.args[0]}", file=sys.stderr)
        return 2
    console = Console()
    if args.source:
        cid = args.source if "/" in args.source else f"{run.id}/{args.source}"
        try:
            console.print(store.get_candidate(cid).source, markup=False, highlight=False)
        except KeyError as exc:
            print(f"forge show: {exc.args[0]}", file=sys.stderr)
            return 2
        return 0
    spent, tin, tout = store.spent(run.id)
    age = time.time() - run.updated
    console.print(
        f"[bold]{run.id}[/] {run.status} — {run.message}\ntask {run.task_path}::{run.model_class}\n"
        f"model calls: {len(store.calls(run.id))}, tokens {tin} in / {tout} out, ${spent:.4f}; "
        f"updated {age:.0f} s ago",
        highlight=False,
    )
    table = Table(box=None, header_style="bold")
    for col in ("id", "parent", "origin", "verdict", "speedup", "summary"):
        table.add_column(col)
    for c in store.candidates(run.id):
        verdict = (c.verdict or {}).get("status", c.status)
        table.add_row(
            c.id.split("/")[-1],
            (c.parent_id or "root").split("/")[-1],
            c.origin,
            verdict,
            f"{c.speedup:.2f}x" if c.speedup else "-",
            c.summary[:70],
        )
    console.print(table)
    from ..agent.store import costs_by_round

    per_round = costs_by_round(store, run.id)
    if per_round:
        costs = Table(title="model calls per round", box=None, header_style="bold")
        for col in ("round", "calls", "failed", "tokens in", "tokens out", "cost"):
            costs.add_column(col)
        for r in per_round:
            costs.add_row(
                str(r["round"]),
                str(r["calls"]),
                str(r["failed"]),
                str(r["prompt_tokens"]),
                str(r["completion_tokens"]),
                f"${r['cost_usd']:.4f}",
            )
        console.print(costs)
    return 0
