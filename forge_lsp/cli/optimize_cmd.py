"""`forge optimize FILE.py[::Class]`, `forge runs`, `forge show RUN`."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

from rich.console import Console
from rich.table import Table

from ..agent.progress import waiting_words
from ..agent.run_events import (
    Budget,
    CandidateFailed,
    CandidateQueued,
    CandidateStage,
    CandidateTimed,
    FinalRetime,
    ModelCall,
    ModelWaiting,
    NewBest,
    Round,
    Written,
)
from ..agent.store import EventRecord
from ..words import interval_words, speedup_words, times
from .eval_cmd import StageProgress, add_executor_argument, console, non_negative_float, positive_float, positive_int


def add_parsers(sub) -> None:
    p = sub.add_parser(
        "optimize",
        help="search for a faster verified implementation of a module",
        description="Coder/Judge rounds with tree search over candidates, each compiled, verified "
        "and timed by the engine. Without a configured model: torch.compile variants and forge's "
        "built-in Triton kernels only.",
    )
    p.add_argument("target", nargs="?", help="FILE.py or FILE.py::ClassName (KernelBench-style task file)")
    p.add_argument(
        "--resume",
        metavar="RUN",
        help="continue an interrupted run (with --model-wide: its folder under .forge/model_wide, or 'latest')",
    )
    p.add_argument("--search", choices=["mcts", "linear"])
    p.add_argument("--rounds", type=positive_int)
    p.add_argument("--budget-usd", type=positive_float)
    p.add_argument("--wall-s", type=positive_float, help="wall-time budget in seconds")
    p.add_argument("--concurrency", type=positive_int, help="expansions per round (mcts)")
    p.add_argument("--model", help="model name (coder and judge)")
    p.add_argument("--base-url", help="OpenAI-compatible endpoint, e.g. http://localhost:11434/v1")
    p.add_argument("--no-offline", action="store_true", help="skip the offline seeds")
    p.add_argument(
        "--apply",
        action="store_true",
        help="rewrite the class in FILE.py with the best verified candidate (guarded; the original "
        "computation stays as the fallback) instead of writing FILE_forge_best.py; with --model-wide, each kept "
        "module whose class is defined in the workspace's own files",
    )
    p.add_argument("--device", default="auto", help="cuda:N, cpu, or auto (default: the configured device, else auto)")
    p.add_argument(
        "--model-wide",
        action="store_true",
        help="TARGET is a whole model's entry (script.py, FILE.py:function): find its hot modules, optimize each "
        "on its captured inputs, check the whole model end to end and write .forge/model_wide/.../forge_patch.py",
    )
    p.add_argument("--top", type=positive_int, default=3, help="--model-wide: how many hot module classes")
    p.add_argument(
        "--undo-apply",
        metavar="RUN",
        help="--model-wide: put back every file a run's --apply rewrote, in one step (its folder under "
        ".forge/model_wide, or 'latest'); refused, changing nothing, when a file was edited since",
    )
    p.add_argument(
        "--model-modes",
        type=model_modes_spec,
        metavar="MODES",
        help="--model-wide: whole-model modes to try, the replacements in place, each checked end to end "
        "(comma-separated: torch.compile modes default, max-autotune-no-cudagraphs, reduce-overhead; channels_last; "
        "cuda_graphs; blocks (the hot blocks compiled one by one); eager_casts (with a compile: eager's bf16/fp16 "
        "roundings kept); several joined with '+', e.g. channels_last+default; 'none' for none; default with offline "
        "candidates on: default, reduce-overhead, channels_last, channels_last+default, cuda_graphs, "
        "channels_last+cuda_graphs, blocks on a GPU; default, channels_last on the CPU; a compile that leaves "
        "eager's accuracy in bf16/fp16 is tried again with eager_casts)",
    )
    p.add_argument(
        "--module-budget",
        type=positive_float,
        metavar="SECONDS",
        help="--model-wide: seconds each hot module's run may take; at the budget its run is stopped and the module "
        "left as it is (default: no limit)",
    )
    p.add_argument(
        "--memory-limit",
        type=non_negative_float,
        metavar="GIB",
        help="resident memory a worker's process tree may hold before its verdict is out_of_memory (0: no cap; "
        "default: [tool.forge] memory_limit_gib, else $FORGE_HOST_MEMORY_LIMIT_GIB, else min(16 GiB, 75%% of the RAM))",
    )
    p.add_argument("--workspace", type=Path, help="where .forge/ lives (default: the project around the file)")
    p.add_argument("--cache-dir", type=Path)
    add_executor_argument(p, default=None)
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=run_optimize)

    r = sub.add_parser("runs", help="list optimization runs of this workspace")
    r.add_argument("--workspace", type=Path, default=Path.cwd())
    r.add_argument("--json", action="store_true")
    r.set_defaults(func=run_runs)

    s = sub.add_parser("show", help="print one run: its outcome, candidates, verdicts, speedups, cost")
    s.add_argument("run", help="a run id, a unique prefix of one, or 'latest'")
    s.add_argument("--workspace", type=Path, default=Path.cwd())
    s.add_argument("--source", metavar="CANDIDATE", help="print one candidate's source (e.g. c3)")
    s.set_defaults(func=run_show)


def _overrides(args: argparse.Namespace) -> dict:
    """The configuration keys given on the command line (those not given are left to the configuration)."""
    given = {
        "model": args.model,
        "base_url": args.base_url,
        "search": args.search,
        "rounds": args.rounds,
        "budget_usd": args.budget_usd,
        "wall_s": args.wall_s,
        "concurrency": args.concurrency,
        "memory_limit_gib": args.memory_limit,
        "executor": args.executor,
    }
    return {k: v for k, v in given.items() if v is not None}


def _split_target(target: str) -> tuple[Path, str | None]:
    if "::" in target:
        path, cls = target.split("::", 1)
        return Path(path), cls
    return Path(target), None


def run_optimize(args: argparse.Namespace) -> int:
    if args.model_wide or args.undo_apply:
        return run_model_wide(args)
    from ..agent.config import HOW_TO_CONFIGURE
    from ..usecases import UseCaseError
    from ..usecases.optimize import ModuleOptimization, OptimizeRequest

    err = console(stderr=True)
    path, cls = _split_target(args.target) if args.target else (None, None)
    overrides = _overrides(args)
    request = OptimizeRequest(
        task_file=path,
        model_class=cls,
        workspace=args.workspace or (Path.cwd() if args.resume else None),
        resume=args.resume,
        overrides=overrides,
        device=args.device,
        offline=not args.no_offline,
        cache_dir=args.cache_dir,
    )
    stages = StageProgress(sys.stderr)
    try:
        optimization = ModuleOptimization(request, on_event=None if args.quiet else _printer(err, stages))
    except UseCaseError as exc:
        print(f"forge optimize: {exc}", file=sys.stderr)
        return 2
    if not optimization.model_configured:
        err.print(
            "[yellow bold]No model configured[/]: running the offline candidates only "
            "(torch.compile variants and forge's built-in Triton kernels)."
        )
        err.print(HOW_TO_CONFIGURE, markup=False, highlight=False)
    try:
        with stages:
            result = optimization.run()
    except KeyboardInterrupt:
        optimization.interrupted("interrupted (Ctrl-C)")
        err.print(f"[yellow]interrupted[/]: resume with `forge optimize --resume {optimization.run_id}`")
        return 130
    outcome = result.outcome
    out = console()
    _summary(out, optimization.store, result.run_id)
    out.print(
        f"run {result.run_id}: {outcome.status} ({outcome.stop_reason}); {_count(outcome.rounds, 'round')}, "
        f"{_count(outcome.candidates, 'candidate')}, ${outcome.spent_usd:.4f}"
    )
    for note in outcome.notes:
        out.print(f"  {note}")
    if result.reference_failure is not None:
        where = f" (line {result.reference_failure.line})" if result.reference_failure.line else ""
        out.print(f"[red]your module failed in the worker{where}[/]: {result.reference_failure.reason}")
    best = outcome.best
    if result.answer is None:
        done = "applied" if args.apply else "written"
        if result.withheld in ("not_faster", "recheck_failed") and best is not None:
            why = (
                f"it failed its final re-check ({outcome.final_failure})"
                if result.withheld == "recheck_failed"
                else f"it is {speedup_words(outcome.answer_speedup or 0.0)} than the reference"
            )
            out.print(
                f"no verified candidate is faster than the reference: the best, {best.id}, was not {done} "
                f"because {why}. Inspect it with `forge show {result.run_id}`."
            )
        elif result.withheld == "state_dict":
            out.print(
                f"[red]not {done}[/]: the candidate does not load the module's state_dict (strict), so user "
                "checkpoints would not load into it"
            )
        else:
            out.print(result.message)
        out.print(f"outcome: {_outcome_of(optimization.store, result.run_id)}", highlight=False)
        return 130 if outcome.status == "cancelled" else 1
    answer = result.answer
    out.print(f"best: {answer.candidate.id} {times(answer.speedup)} — {answer.candidate.summary}")
    if args.apply:
        code = _apply(out, result, optimization.store)
    else:
        dest = result.task.path.with_name(f"{result.task.path.stem}_forge_best.py")
        dest.write_text(answer.candidate.source)
        optimization.store.add_event(result.run_id, Written(path=str(dest)))
        code = 0
    out.print(f"outcome: {_outcome_of(optimization.store, result.run_id)}", highlight=False)
    return code


def _outcome_of(store, run_id: str) -> str:
    from ..usecases.runs import run_details

    return run_details(store, run_id).outcome


def _apply(out: Console, result, store) -> int:
    """Rewrite the task's class in place with the answer (the same rewrite the editor's Accept uses)."""
    from ..usecases import UseCaseError
    from ..usecases.apply import apply_to_file

    try:
        rewrite = apply_to_file(result.task, result.answer, result.run_id)
    except UseCaseError as exc:
        out.print(f"[red]not applied[/]: {exc}")
        return 1
    store.add_event(result.run_id, Written(path=f"{result.task.path} (class {result.task.model_class})"))
    out.print(
        f"applied to {result.task.path} ({rewrite.summary}); the original class is kept as "
        f"{rewrite.reference_class} and runs for inputs outside what was verified"
    )
    return 0


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _printer(err: Console, stages: StageProgress | None = None, every: float = 10.0):
    """Prints a run's events on `err`; with `stages`, a candidate's compile or verification that lasts over 2 s is
    said there too. A model call that lasts over 2 s is said at once, then every `every` seconds."""
    said: dict[str, float] = {}  # role -> seconds of the call when last said

    def show(record: EventRecord) -> None:
        e = record.event
        if stages is not None:
            if isinstance(e, CandidateStage) and e.candidate:
                stages.stage(short(e.candidate), e.stage)
            elif isinstance(e, CandidateTimed | CandidateFailed | Round | FinalRetime):
                stages.done()
        if isinstance(e, ModelWaiting):
            last = said.get(e.role)
            if last is None or e.seconds < last or e.seconds - last >= every:
                said[e.role] = e.seconds
                err.print(f"  waiting for the {e.role} model… {waiting_words(e, ' so far')}", highlight=False)
            return
        if isinstance(e, ModelCall):
            said.pop(e.role, None)
        if isinstance(e, Round):
            err.print(
                f"[bold]round {e.round}[/]"
                + (f"/{e.of}" if e.of else "")
                + (f" · best {speedup_words(e.best_speedup)}" if e.best_speedup else "")
                + (f" · {e.phase}" if e.phase else ""),
                highlight=False,
            )
        elif isinstance(e, CandidateQueued):
            err.print(f"  queued {short(e.candidate)} ({e.origin}): {e.summary[:90]}", highlight=False)
        elif isinstance(e, CandidateTimed) and e.speedup:
            err.print(
                f"  [green]correct[/] {short(e.candidate)}: {speedup_words(e.speedup)}"
                + (" (final re-timing)" if e.final else ""),
                highlight=False,
            )
        elif isinstance(e, CandidateFailed):
            err.print(f"  [red]{e.status or 'failed'}[/] {short(e.candidate)}: {e.reason[:140]}", highlight=False)
        elif isinstance(e, NewBest) and (e.speedup or 0) > 1:  # "best" is never a slowdown
            err.print(
                f"  [bold green]new best[/] {short(e.candidate)}: {speedup_words(e.speedup or 0)}", highlight=False
            )
        elif isinstance(e, ModelCall) and not e.ok:
            err.print(f"  [yellow]model call failed[/] ({e.error}): {(e.message or '')[:160]}", highlight=False)
        elif isinstance(e, Budget):
            err.print(f"stopping: {e.reason}", highlight=False)

    return show


def short(candidate: str | None) -> str:
    """A candidate's id within its run ("c3" of "RUN/c3")."""
    return (candidate or "").split("/")[-1]


def _summary(out: Console, store, run_id: str, top: int = 8) -> None:
    cands = [c for c in store.candidates(run_id) if c.status == "evaluated"]
    table = Table(title="verified candidates, fastest first", box=None, header_style="bold")
    for col in ("id", "origin", "speedup", "summary"):
        table.add_column(col)
    ranked = sorted((c for c in cands if c.correct), key=lambda c: -(c.speedup or 0))[:top]
    for c in ranked:
        table.add_row(c.id.split("/")[-1], c.origin, times(c.speedup) if c.speedup else "-", c.summary[:80])
    if ranked:
        out.print(table)


def run_runs(args: argparse.Namespace) -> int:
    from ..usecases.runs import list_runs, workspace_store

    store = workspace_store(args.workspace)
    if store is None:  # nothing to list: nothing is created either
        if args.json:
            print("[]")
        else:
            print(f"no runs in {args.workspace.resolve()} (no .forge/runs.sqlite yet)", file=sys.stderr)
        return 0

    table = Table(box=None, header_style="bold")
    for col in ("run", "started", "status", "task", "best", "candidates", "cost"):
        table.add_column(col)
    rows = []
    for d in list_runs(store):
        run, best = d.run, d.best
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
                "candidates": len(d.candidates),
                "spent_usd": d.spent_usd,
            }
        )
        table.add_row(
            run.id,
            datetime.fromtimestamp(run.created).strftime("%Y-%m-%d %H:%M"),
            run.status,
            f"{Path(run.task_path).name}::{run.model_class}",
            times(best.speedup) if best and best.speedup else "-",
            str(len(d.candidates)),
            f"${d.spent_usd:.4f}",
        )
    if args.json:
        print(json.dumps(rows, indent=2))
    elif rows:
        console().print(table)
    else:
        print(f"no runs in {args.workspace.resolve()}", file=sys.stderr)
    return 0


def run_show(args: argparse.Namespace) -> int:
    from ..usecases import UseCaseError
    from ..usecases.runs import run_details, workspace_store

    store = workspace_store(args.workspace)
    if store is None:
        print(f"forge show: no runs in {args.workspace.resolve()} (no .forge/runs.sqlite)", file=sys.stderr)
        return 2
    try:
        d = run_details(store, args.run)
    except UseCaseError as exc:
        print(f"forge show: {exc}", file=sys.stderr)
        return 2
    run = d.run
    out = console()
    if args.source:
        cid = args.source if "/" in args.source else f"{run.id}/{args.source}"
        cand = next((c for c in d.candidates if c.id == cid), None)
        if cand is None:
            print(f"forge show: no candidate {cid!r}", file=sys.stderr)
            return 2
        sys.stdout.write(cand.source if cand.source.endswith("\n") else cand.source + "\n")  # as stored, byte for byte
        return 0
    age = time.time() - run.updated
    out.print(f"[bold]{run.id}[/]: {d.outcome}", highlight=False)
    if d.final is not None:
        ci = f", 95% CI {d.final.ci95[0]:.2f}-{d.final.ci95[1]:.2f}" if d.final.ci95 else ""
        ms = (
            f": reference {d.final.reference_ms:.3f} ms, candidate {d.final.candidate_ms:.3f} ms"
            if d.final.reference_ms and d.final.candidate_ms
            else ""
        )
        out.print(
            f"final re-timing of {d.final.candidate.split('/')[-1]}: {times(d.final.speedup)}{ci}{ms}",
            highlight=False,
        )
    out.print(
        f"{run.status} — {run.message}\ntask {run.task_path}::{run.model_class}\n"
        f"model calls: {len(store.calls(run.id))}, tokens {d.tokens_in} in / {d.tokens_out} out, ${d.spent_usd:.4f}; "
        f"updated {age:.0f} s ago",
        highlight=False,
    )
    table = Table(box=None, header_style="bold")
    for col in ("id", "parent", "origin", "verdict", "speedup", "summary"):
        table.add_column(col)
    for c in d.candidates:
        table.add_row(
            c.id.split("/")[-1],
            (c.parent_id or "root").split("/")[-1],
            c.origin,
            c.verdict.status.value if c.verdict else c.status,
            times(c.speedup) if c.speedup else "-",
            c.summary[:70],
        )
    out.print(table)
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
        out.print(costs)
    return 0


def model_modes_spec(text: str) -> tuple[str, ...]:
    """argparse type of --model-modes: comma-separated whole-model modes, or "none"."""
    from ..usecases.model_wide import mode_error

    modes = tuple(m.strip() for m in text.split(",") if m.strip() and m.strip() != "none")
    for m in modes:
        why = mode_error(m)
        if why is not None:
            raise argparse.ArgumentTypeError(f"{why}; or none")
    return modes


def run_model_wide(args: argparse.Namespace) -> int:
    from ..usecases import UseCaseError
    from ..usecases.hotspots import EntryFailed
    from ..usecases.model_wide import ModelWideRequest, RunInterrupted, optimize_model

    err = console(stderr=True)
    if args.undo_apply:
        from ..usecases.common import find_workspace
        from ..usecases.model_wide import undo_applied

        try:
            back = undo_applied(args.workspace or find_workspace(Path.cwd()), args.undo_apply)
        except UseCaseError as exc:
            print(f"forge optimize --model-wide --undo-apply: {exc}", file=sys.stderr)
            return 1
        for path in back:
            console().print(f"put back {path}", highlight=False)
        return 0
    overrides = _overrides(args)
    request = ModelWideRequest(
        entry=args.target,
        workspace=args.workspace,
        device=args.device,
        top=args.top,
        overrides=overrides,
        offline=not args.no_offline,
        cache_dir=args.cache_dir,
        model_modes=args.model_modes,
        module_budget_s=args.module_budget,
        resume=args.resume,
    )
    cancel = threading.Event()

    def stop(signum: int, frame: object) -> None:  # the first Ctrl-C or SIGTERM stops the run and saves it
        if cancel.is_set():
            raise KeyboardInterrupt
        err.print(f"[yellow]{signal.Signals(signum).name}[/]: stopping; what finished is saved", highlight=False)
        cancel.set()

    before = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        result = optimize_model(
            request, say=None if args.quiet else lambda text: err.print(text, highlight=False), cancel=cancel
        )
    except RunInterrupted as exc:
        print(f"forge optimize --model-wide: {exc}", file=sys.stderr)
        return 130
    except UseCaseError as exc:
        print(f"forge optimize --model-wide: {exc}", file=sys.stderr)
        return 1 if isinstance(exc, EntryFailed) else 2
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
    out = console()
    report = result.report
    table = Table(title=f"{report.model}: hot modules", box=None, header_style="bold", title_justify="left")
    for col in ("class", "% of model", "module speedup", "status", "why"):
        table.add_column(col)
    for m in result.modules:
        table.add_row(m.name, f"{m.total_pct:.1f}", times(m.speedup) if m.speedup else "-", m.status, m.reason[:100])
    out.print(table)
    for m in result.modules:
        if m.carried:
            out.print(f"{m.name}: carried over to {len(m.carried)} more instance(s), each checked", highlight=False)
        for text in m.not_carried:
            out.print(f"{m.name}: {text}", highlight=False)
    check = result.check
    if check is not None:
        worst = max((o.get("max_abs") or 0.0 for o in check.outputs), default=0.0)
        out.print(
            f"end to end on {report.device_name or report.device}: outputs "
            f"{'match' if check.outputs_match else 'DIFFER'} (worst abs error {worst:.3g}); "
            f"{check.before_ms:.3f} ms -> {check.after_ms:.3f} ms per forward",
            highlight=False,
        )
        for o in check.outputs:
            if o.get("fp32"):
                f = o["fp32"]
                out.print(
                    f"  {o.get('dtype')} output {tuple(o.get('shape') or ())}: outside the tolerance; against the model "
                    f"run in fp32 its error is {f['err_max']:.3g} at worst, {f['err_mean']:.3g} on average, eager's own "
                    f"{f['eager_err_max']:.3g} and {f['eager_err_mean']:.3g}: "
                    + (f"within {f['factor']:g}x, accepted" if f["ok"] else f"more than {f['factor']:g}x, refused"),
                    highlight=False,
                )
        if check.fp32_note:
            out.print(f"  not judged against fp32: {check.fp32_note}", highlight=False)
        if check.cpu is not None and check.cpu.says():
            out.print(f"  {check.cpu.says()}", highlight=False)
        if check.speedup is not None and check.ci:
            out.print(
                f"speedup {times(check.speedup)} (99% CI {check.ci[0]:.2f}-{check.ci[1]:.2f}, {check.reps} forwards "
                f"each way): {interval_words(check.speedup, check.ci[0], check.ci[1], level='99%')}",
                highlight=False,
            )
        elif check.decision:
            out.print(f"replacements: {check.decision.get('says')}", highlight=False)
        for r in check.reverted:
            out.print(f"reverted {r.cls}: {r.why}", highlight=False)
        if check.model_modes:
            mods = times(check.modules_speedup) if check.modules_speedup else "none kept"
            out.print(f"whole-model modes (the replacements alone: {mods}):", highlight=False)
            marked = any("chosen" in row for row in check.model_modes)  # results before rows said so: by name
            for row in check.model_modes:
                said = (
                    f"{row.get('says') or row['decision']}, compiled in {row.get('compile_s')} s"
                    if row.get("ok") and row.get("decision")
                    else row.get("why", "not measured")
                )
                if row.get("note"):
                    said += f"; {row['note']}"
                picked = row.get("chosen", False) if marked else row["mode"] == check.model_mode
                chosen = "  <- chosen" if picked else ""
                alone = " (without the replacements)" if row.get("replacements") is False else ""
                out.print(f"  {row['mode']}{alone}: {said}{chosen}", highlight=False)
    for note in result.notes:
        out.print(note, highlight=False)
    if result.patch_file is not None:
        out.print(f"patch: {result.patch_file} (import it and call apply(model))", highlight=False)
    if args.apply:  # the kept answers of classes in the workspace's own files: the guarded rewrite, in place
        from ..usecases.model_wide import apply_class_edits

        edits = apply_class_edits(result, result.report_workspace or Path.cwd())
        for e in edits:
            if e.new_text is not None:
                out.print(f"rewrote {e.name} in {e.path} (guarded: other calls run the original)", highlight=False)
            else:
                out.print(f"{e.name}: not rewritten: {e.why}", highlight=False)
        if any(e.new_text is not None for e in edits) and result.folder is not None:
            out.print(f"undo: forge optimize --model-wide --undo-apply {result.folder.name}", highlight=False)
    out.print(f"outcome: {result.outcome.replace('_', ' ')}", highlight=False)
    return MODEL_WIDE_EXIT[result.outcome]


#: `forge optimize --model-wide`'s exit status: a patch written, nothing faster kept, or the timing undecided
MODEL_WIDE_EXIT = {"kept": 0, "nothing_kept": 1, "inconclusive": 3, "interrupted": 130}
