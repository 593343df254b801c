"""`forge eval TASK.py CANDIDATE.py` and `forge eval DIR [CANDIDATE_DIR]`."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import TextIO

from rich.console import Console
from rich.table import Table

from ..engine import (
    Candidate,
    Check,
    EvalOptions,
    StageTimeouts,
    Status,
    Task,
    TaskError,
    Timing,
    Verdict,
    load_candidate,
    load_task,
)
from ..engine.executor import ExecEvent, ExecutorUnavailable
from ..engine.executors import make_executor
from ..usecases.evaluate import BatchSummary, Evaluated, RepairOutcome, pair_directory
from ..words import interval_words, times


def console(stderr: bool = False) -> Console:
    """A rich console on stdout (or stderr). Into a pipe or a file nothing is wrapped or cut: lines keep their
    full length, so what is printed (a source, a run id) reads back as it is."""
    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty():
        return Console(stderr=stderr)
    return Console(stderr=stderr, width=100_000, soft_wrap=True, no_color=True)


def positive_int(text: str, least: int = 1) -> int:
    """argparse type: an integer of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"must be at least {least}, got {value}")
    return value


def non_negative_int(text: str) -> int:
    """argparse type: an integer of at least 0."""
    return positive_int(text, least=0)


def positive_float(text: str) -> float:
    """argparse type: a number above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number above 0, got {text}")
    return value


def non_negative_float(text: str) -> float:
    """argparse type: a finite number of at least 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of at least 0, got {text}")
    return value


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
    p.add_argument("--trials", type=positive_int, help="random input sets (default: the task's, else 3)")
    p.add_argument(
        "--vary",
        action="append",
        default=[],
        type=vary_spec,
        metavar="NAME=V1,V2",
        help="also verify with module constant NAME set to each value",
    )
    p.add_argument("--no-timing", action="store_true", help="verify only")
    p.add_argument(
        "--strict",
        action="store_true",
        help="ask for the full domain: a candidate wrong only for strided inputs or on a side stream is incorrect "
        "(default: correct, with its domain narrowed to contiguous inputs / the default stream)",
    )
    p.add_argument(
        "--judged-sets",
        type=non_negative_int,
        default=2,
        metavar="N",
        help="input sets whose outputs a judge process that never runs candidate code compares (0: none; default 2)",
    )
    p.add_argument(
        "--repair",
        action="store_true",
        help="write each automatic repair's source beside its candidate, as <candidate>.repaired.py",
    )
    p.add_argument(
        "--no-repair",
        action="store_true",
        help="do not derive and verify automatic repairs (launches moved to the current stream, inputs made "
        "contiguous, x.type() dispatch replaced)",
    )
    p.add_argument(
        "--sanitize",
        action="store_true",
        help="CUDA: also run each correct candidate once under compute-sanitizer (racecheck, memcheck, initcheck)",
    )
    p.add_argument("--timing-mode", choices=["auto", "events", "graph"], default="auto")
    p.add_argument(
        "--timeout",
        type=positive_float,
        metavar="SECONDS",
        help="limit of each stage (compile, first call, verify, time); a stage that runs longer is killed and "
        "the verdict is `timeout` (default: 600 s to compile, 180 s for a first call, 120 s to verify, 180 s to time)",
    )
    p.add_argument(
        "--memory-limit",
        type=non_negative_float,
        metavar="GIB",
        help="resident memory a worker's process tree may hold before its verdict is out_of_memory (0: no cap; "
        "default: $FORGE_HOST_MEMORY_LIMIT_GIB, else min(16 GiB, 75%% of the RAM))",
    )
    p.add_argument("--cache-dir", type=Path, help="compile cache (default ~/.cache/forge-lsp)")
    p.add_argument(
        "--build-workers",
        type=positive_int,
        metavar="N",
        help="processes that compile candidates at once (default: $FORGE_BUILD_WORKERS, else one per core but one, "
        "as many as half the available memory holds at 2 GiB each)",
    )
    p.add_argument(
        "--lanes",
        type=positive_int,
        metavar="N",
        help="candidates each GPU evaluates at once, each timed with the device to itself (default: "
        "$FORGE_DEVICE_LANES, else 3 where each worker's device memory can be measured apart, else 1)",
    )
    p.add_argument(
        "--events",
        type=Path,
        metavar="FILE",
        help="write what happened to each evaluation (queued, build started and finished, each stage, the verdict) "
        "to FILE as JSON lines, each with its wall-clock time: where a batch's time went",
    )
    add_executor_argument(p)
    p.set_defaults(func=run)


def add_executor_argument(p: argparse.ArgumentParser, default: str | None = "local") -> None:
    p.add_argument(
        "--executor",
        default=default,
        metavar="local|ray|ray://HOST:PORT",
        help="where evaluations run: local (default: one worker per visible device, builds spread over the CPU "
        "cores across tasks), ray (the Ray cluster RAY_ADDRESS names, else a Ray instance on this machine; "
        "needs forge-lsp[ray]) or ray://HOST:PORT (that cluster, through the Ray Client)",
    )


def vary_spec(text: str) -> tuple[str, list[int]]:
    """argparse type of --vary: ``NAME=INT[,INT...]``, a module constant's name and at least one value (a name
    without values would check no other size, and say the size checks passed)."""
    name, sep, values = text.partition("=")
    try:
        ints = [int(v) for v in values.split(",") if v.strip()]
    except ValueError:
        ints = []
    if not sep or not name.strip().isidentifier() or not ints:
        raise argparse.ArgumentTypeError(
            f"expected NAME=INT[,INT...] (a module constant and the values to verify it at), got {text!r}"
        )
    return name.strip(), ints


def _vary(specs: list[tuple[str, list[int]]]) -> dict[str, list[int]] | None:
    return {name: values for name, values in specs} if specs else None


def _fmt_ms(ms: float) -> str:
    return f"{ms * 1000:.1f} µs" if ms < 1 else f"{ms:.3f} ms"


#: What each stage of an evaluation is called in progress lines.
STAGE_LABELS = {
    "starting": "starting the worker",
    "load_task": "loading the task",
    "compile": "compiling",
    "build": "compiling",
    "first_call": "first call",
    "verify": "verifying",
    "time": "timing",
    "sanitize": "sanitizing",
    "reference": "running the task's own model",
}


class StageProgress:
    """Progress lines on a stream during long waits: a stage that has lasted `after` seconds is announced
    (``bias_act_cpp: compiling… 2 s``), then again every `every` seconds while it lasts. Short stages print
    nothing. Feed it `stage(candidate, stage)` (the engine's `on_stage`) and `done()` after each verdict."""

    def __init__(self, stream: TextIO, after: float = 2.0, every: float = 10.0) -> None:
        self.stream, self.after, self.every = stream, after, every
        self._lock = threading.Lock()
        self._what: tuple[str, str] | None = None
        self._since = 0.0
        self._next = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._tick, name="forge-progress", daemon=True)

    def __enter__(self) -> StageProgress:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=1)

    def stage(self, candidate: str, stage: str) -> None:
        with self._lock:
            self._what = (candidate, STAGE_LABELS.get(stage, stage.replace("_", " ")))
            self._since = time.monotonic()
            self._next = self._since + self.after

    def done(self) -> None:
        with self._lock:
            self._what = None

    def _tick(self) -> None:
        while not self._stop.wait(0.2):
            with self._lock:
                now = time.monotonic()
                if self._what is None or now < self._next:
                    continue
                name, label = self._what
                waited = now - self._since
                self._next = now + self.every
            try:
                self.stream.write(f"  {name}: {label}… {waited:.0f} s\n")
                self.stream.flush()
            except (OSError, ValueError):
                return


class BatchProgress:
    """`forge eval DIR`'s progress on stderr: candidates done of the total, the rate, the time left and the counts by
    status. On a terminal, a rich progress bar that the verdicts and stage lines print above; otherwise one plain
    line per candidate done (a log reads them in order)."""

    def __init__(self, total: int, console: Console | None = None) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.total, self.done = total, 0
        self.counts: Counter[str] = Counter()
        self.t0 = time.monotonic()
        self.console = console or Console(stderr=True)
        self.live = self.console.is_terminal
        self.bar = (
            Progress(
                TextColumn("forge eval"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[rate]}"),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                TextColumn("{task.fields[counts]}"),
                console=self.console,
                redirect_stdout=False,
                transient=False,
            )
            if self.live
            else None
        )
        self._task = self.bar.add_task("", total=total, rate="", counts="") if self.bar is not None else None

    def __enter__(self) -> BatchProgress:
        if self.bar is not None:
            self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()

    def rate(self) -> float:
        """Candidates done a minute so far."""
        elapsed = time.monotonic() - self.t0
        return 60.0 * self.done / elapsed if elapsed > 0 else 0.0

    def counts_text(self) -> str:
        return ", ".join(f"{k} {n}" for k, n in self.counts.most_common())

    def line(self) -> str:
        """The plain line: ``forge eval: 12/40 done, 25.3 a minute, about 67 s left; correct 9, incorrect 3``."""
        rate = self.rate()
        left = (self.total - self.done) * 60.0 / rate if rate > 0 else float("nan")
        eta = f"about {left:.0f} s left" if left == left else "time left unknown"
        return f"forge eval: {self.done}/{self.total} done, {rate:.1f} a minute, {eta}; {self.counts_text()}"

    def result(self, verdict: Verdict) -> None:
        self.done += 1
        self.counts[verdict.status.value] += 1
        if self.bar is not None and self._task is not None:
            self.bar.update(self._task, completed=self.done, rate=f"{self.rate():.1f}/min", counts=self.counts_text())
        else:
            self.console.print(self.line(), markup=False, highlight=False, soft_wrap=True)


class EventLog:
    """`--events FILE`: each `ExecEvent` as one JSON line, written as it happens (a run cut short keeps what it
    did). Events come from the executor's threads."""

    def __init__(self, path: Path) -> None:
        self._file = path.open("w", encoding="utf-8")
        self._lock = threading.Lock()

    def __call__(self, event: ExecEvent) -> None:
        line = json.dumps(dataclasses.asdict(event), separators=(",", ":"))
        with self._lock:
            if not self._file.closed:
                self._file.write(line + "\n")
                self._file.flush()

    def close(self) -> None:
        with self._lock:
            self._file.close()


def _result_cell(c: Check) -> str:
    if not c.passed:
        return "[red]FAIL[/]"
    return "[yellow]narrows[/]" if c.narrows else "[green]pass[/]"


def render(out: Console, task_name: str, cand_name: str, v: Verdict) -> None:
    ok = v.status is Status.correct
    color = "green" if ok else "red"
    out.print(
        f"[bold]{cand_name}[/] vs [bold]{task_name}[/] on {v.device_name or v.device} "
        f"({v.backend}): [{color} bold]{v.status.value}[/] — {v.reason}"
    )
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    table.add_column("check")
    table.add_column("result")
    table.add_column("detail", overflow="fold")
    for c in v.checks:
        table.add_row(c.name, _result_cell(c), c.detail)
    if v.checks:
        out.print(table)
    if v.domain is not None:
        d = v.domain
        color = "green" if d.full else "yellow"
        out.print(
            f"  domain: [{color}]{d.describe()}[/]; sizes {', '.join(d.sizes) or '-'}; dtypes {', '.join(d.dtypes) or '-'}"
        )
    if v.mismatch:
        m = v.mismatch
        where = (
            f" at index {m.index}: expected {m.expected:.6g}, got {m.actual:.6g}"
            if m.index is not None and m.expected is not None and m.actual is not None
            else ""
        )
        out.print(f"  mismatch [{m.input_set}] {m.output} ({m.problem}){where}")
    if v.timing:
        t = v.timing
        out.print(
            f"  reference {_fmt_ms(t.reference.median_ms)}  candidate {_fmt_ms(t.candidate.median_ms)}  {_speedup(t)}"
        )
        for note in t.notes:
            out.print(f"  note: {note}")
    stages = "  ".join(f"{k} {s:.2f}s" for k, s in v.stages.items() if s >= 0)
    if stages:
        out.print(f"  stages: {stages}")
    if not ok and (v.traceback or v.log_excerpt):
        text = (v.traceback or v.log_excerpt).strip().splitlines()
        out.print("  " + "\n  ".join(text[-15:]), markup=False, highlight=False)
    out.print()


def _speedup(t: Timing) -> str:
    """A verdict's speedup, its interval and what the interval decides, in words: one line's end."""
    lo, hi = t.speedup_ci95
    l2 = ", L2 flushed" if t.l2_flush else ""
    return (
        f"speedup [bold]{times(t.speedup)}[/] (95% CI {lo:.2f}–{hi:.2f}, n={t.candidate.n}, {t.mode}{l2}): "
        f"[bold]{interval_words(t.speedup, lo, hi)}[/]"
    )


def render_repair(out: Console, cand_name: str, r: RepairOutcome, written: Path | None) -> None:
    """The automatic repair of a candidate, under the candidate's own verdict: what was fixed, its verdict, what is
    left."""
    v = r.verdict
    ok = v.status is Status.correct
    color = "green" if ok else "red"
    fixed = ", ".join(r.kinds)
    out.print(
        f"  [bold]repaired[/] ({fixed}{f', {r.rounds} rounds' if r.rounds > 1 else ''}): "
        f"[{color} bold]{v.status.value}[/] — {v.reason}"
    )
    for f in r.fixes:
        out.print(f"    fixed: {f.detail}")
    if v.domain is not None:
        out.print(f"    domain: {v.domain.describe()}")
    if v.timing:
        out.print(f"    {_speedup(v.timing)}")
    for limit in r.remaining:
        out.print(f"    not repaired: {limit}")
    if not ok and v.failed_check:
        out.print(f"    failed check: {v.failed_check}")
    if written is not None:
        out.print(f"    wrote {written}")
    out.print()


def render_summary(out: Console, s: BatchSummary) -> None:
    """A batch's last lines: counts by status and domain, the failed checks ranked, the repairs, the pace."""
    correct = s.by_status.get("correct", 0)
    after = s.after_repair.get("correct", 0)
    out.print(
        f"[bold]{correct}/{s.candidates} candidates correct[/]"
        + (f" ({after} with their repairs)" if after != correct else "")
        + f" in {s.wall_s:.1f} s, {s.per_minute:.1f} a minute"
        + (f", the device busy {100 * s.device_busy:.0f}% of it" if s.device_busy is not None else "")
    )
    out.print("  by status: " + ", ".join(f"{k} {n}" for k, n in s.by_status.items()))
    if s.by_domain:
        out.print("  correct on: " + "; ".join(f"{k}: {n}" for k, n in s.by_domain.items()))
    if s.failed_checks:
        out.print("  failed checks: " + ", ".join(f"{k} {n}" for k, n in s.failed_checks))
    if s.narrowed_by:
        out.print("  narrowed by: " + ", ".join(f"{k} {n}" for k, n in s.narrowed_by))
    if s.repaired:
        out.print(
            f"  repairs: {s.repaired} derived, {s.repaired_correct} correct ({s.repaired_full_domain} on the full "
            "domain): " + ", ".join(f"{k} {n}" for k, n in s.repairs_by_kind.items())
        )


def write_repair(cand: Candidate, r: RepairOutcome) -> Path | None:
    """`<candidate>.repaired.py` beside the candidate's file (None when the candidate has no file)."""
    if cand.path is None:
        return None
    target = cand.path.with_name(cand.path.stem + ".repaired.py")
    target.write_text(r.source, encoding="utf-8")
    return target


def run(args: argparse.Namespace) -> int:
    from ..usecases import UseCaseError
    from ..usecases.common import check_device, failure_line, task_paths
    from ..usecases.evaluate import Stopwatch, evaluate_batch, summarize

    try:
        device = check_device(args.device)
    except UseCaseError as exc:
        print(f"forge eval: {exc}", file=sys.stderr)
        return 2
    out = console(stderr=args.json)
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

    opts = EvalOptions(
        timing=not args.no_timing,
        timing_mode=args.timing_mode,
        trials=args.trials,
        strict=args.strict,
        judged_sets=args.judged_sets,
    )
    if args.memory_limit is not None:
        opts = opts.model_copy(update={"host_memory_limit_bytes": int(args.memory_limit * (1 << 30))})
    if args.timeout is not None:  # every stage of a candidate's evaluation (the worker's own start keeps its limit)
        t = args.timeout
        opts = opts.model_copy(
            update={"timeouts": StageTimeouts(load_task=t, compile=t, first_call=t, verify=t, time=t)}
        )
    work: list[tuple[Task, Candidate]] = []
    for task_path, cand_paths in jobs:
        try:
            task = load_task(task_path, vary=_vary(args.vary))
        except TaskError as exc:
            print(f"forge eval: {exc}", file=sys.stderr)
            return 2
        for p in cand_paths:
            try:
                work.append((task, load_candidate(p)))
            except OSError as exc:
                print(f"forge eval: cannot read {p}: {exc}", file=sys.stderr)
                return 2
    try:
        executor = make_executor(
            args.executor,
            device,
            options=opts,
            cache_dir=args.cache_dir,
            build_workers=args.build_workers,
            lanes=args.lanes,
        )
    except (ValueError, ExecutorUnavailable) as exc:
        print(f"forge eval: {exc}", file=sys.stderr)
        return 2
    events: EventLog | None = None
    if args.events is not None:
        try:
            events = EventLog(args.events)
        except OSError as exc:
            executor.close()
            print(f"forge eval: cannot write {args.events}: {exc.strerror or exc}", file=sys.stderr)
            return 2
        executor.subscribe(events)
    results: list[dict] = []
    said: set[str] = set()  # tasks whose own failure was said
    clock = Stopwatch()
    batch = BatchProgress(len(work), console(stderr=True)) if len(work) > 1 else None
    with executor as ex, batch or contextlib.nullcontext(), StageProgress(sys.stderr) as progress:

        def show(r: Evaluated) -> None:
            """Each candidate's result, in the order of the work, as soon as it and those before it are in."""
            progress.done()
            if batch is not None:
                batch.result(r.verdict)
            task, cand, v = r.task, r.candidate, r.verdict
            if v.stages.get("reference", 0.0) < 0 and task.sha not in said:  # the task's own model failed
                said.add(task.sha)
                line = failure_line(v.traceback + "\n" + v.log_excerpt, task)
                where = f" ({task.path}:{line})" if line else ""
                print(
                    f"forge eval: {task.name}: {v.reason}{where}; no candidate evaluated",
                    file=sys.stderr,
                    flush=True,
                )
            v.traceback, v.log_excerpt = task_paths(v.traceback, task, cand), task_paths(v.log_excerpt, task, cand)
            v.reason = task_paths(v.reason, task, cand)
            written = write_repair(cand, r.repair) if args.repair and r.repair is not None else None
            if not args.json:
                render(out, task.name, cand.name, v)
                if r.repair is not None:
                    render_repair(out, cand.name, r.repair, written)
            entry: dict = {"task": str(task.path), "candidate": str(cand.path), "verdict": v.model_dump(mode="json")}
            entry["repair"] = (
                {
                    "fixes": [f.model_dump(mode="json") for f in r.repair.fixes],
                    "remaining": r.repair.remaining,
                    "rounds": r.repair.rounds,
                    "verdict": r.repair.verdict.model_dump(mode="json"),
                    "written": str(written) if written else None,
                }
                if r.repair is not None
                else None
            )
            results.append(entry)

        # every task's candidates build at once, spread over the build workers; on a device, each task's own model
        # runs alone before any of its candidates (a failure there is the user's, and no candidate's code runs), while the
        # devices verify and time those built; repairs are submitted as their originals' verdicts come in
        evaluated = evaluate_batch(
            ex,
            work,
            repair=not args.no_repair,
            sanitize=args.sanitize,
            on_stage=lambda c, stage: progress.stage(c.name, stage),
            on_result=show,
        )
        busy = ex.busy_seconds()
    if events is not None:
        events.close()
    summary = summarize(evaluated, clock.seconds(), busy)
    all_ok = all(r["verdict"]["status"] == "correct" for r in results)
    if args.json:
        if len(results) > 1 or args.task.is_dir():
            payload: object = {"results": results, "summary": summary.model_dump(mode="json")}
        else:
            payload = results[0]
        json.dump(payload, sys.stdout, indent=2)
        sys.stdout.write("\n")
    elif len(results) > 1:
        render_summary(out, summary)
    return 0 if all_ok else 1
