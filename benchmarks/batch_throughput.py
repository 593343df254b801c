"""Batch judging throughput: a corpus of model-style load_inline candidates through `forge eval DIR`'s use case.

    PYTHONPATH=. python3 benchmarks/batch_throughput.py --device cuda:0 --out $OUT/cold.json            # cold cache
    PYTHONPATH=. python3 benchmarks/batch_throughput.py --device cuda:0 --out $OUT/warm.json --cache-dir D  # warm

The corpus: every candidate of `corpus/model_style/candidates/` (model-style: legacy-stream launches, raw
`data_ptr`, `x.type()`, real bugs) and of `corpus/kernelbench/candidates/`, each paired with its task in
`corpus/kernelbench/tasks/`, plus the structured-input corpus (`corpus/structured/`). They run through
`usecases.evaluate.evaluate_batch` with the automatic repairs and `forge eval`'s default options — what
`forge eval DIR` does — on an executor sized as `forge eval` sizes it (build workers from cores and memory).

Recorded (JSON at `--out`, written as results come, so a cut run keeps what it did):
- wall time, candidates (originals) a minute, evaluations (repairs included) a minute;
- builds: count, sum, median, and the build floor (their sum divided by the machine's cores);
- the device's busy seconds and share of the wall time, and where its time went: the tasks' own models
  (`reference`), and per stage of the evaluations (load, first call, verify, time), summed;
- harness failures: an evaluation that raised instead of giving a verdict, or a verdict naming forge itself;
- each verdict (status, failed check, domain, speedup) and, with `--expected`, how it compares with the
  corpus's expectations; with `--compare FILE` (an earlier run's JSON), which verdicts changed;
- a timeline in 20-second steps: verdicts done, builds running on average, the device's busy share.
It prints a short table last.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from forge_lsp.engine import EvalOptions, load_candidate, load_task  # noqa: E402
from forge_lsp.engine.devices import default_build_workers
from forge_lsp.engine.executor import ExecEvent  # noqa: E402
from forge_lsp.engine.executors import make_executor  # noqa: E402
from forge_lsp.engine.worker_client import EvaluationCancelled  # noqa: E402
from forge_lsp.usecases.evaluate import (  # noqa: E402
    Evaluated,
    evaluate_batch,
    pair_directory,  # noqa: E402
    summarize,
)

TASKS = ROOT / "corpus" / "kernelbench" / "tasks"
CAND_DIRS = [ROOT / "corpus" / "model_style" / "candidates", ROOT / "corpus" / "kernelbench" / "candidates"]
EXPECTED = ROOT / "corpus" / "model_style" / "expected"
STRUCTURED = ROOT / "corpus" / "structured"
#: words in a verdict's reason or traceback that say the harness failed, not the candidate
HARNESS_WORDS = ('forge_lsp/engine/worker.py", line', "internal error", "harness error", "WorkerProtocolError")


def corpus(structured: bool) -> list[tuple]:
    work = []
    for cand_dir in CAND_DIRS:
        for task_path, cand_paths in pair_directory(TASKS, cand_dir):
            task = load_task(task_path)
            work += [(task, load_candidate(p)) for p in cand_paths]
    if structured:
        for task_path, cand_paths in pair_directory(STRUCTURED, STRUCTURED):
            task = load_task(task_path)
            work += [(task, load_candidate(p)) for p in cand_paths]
    return work


def expectations() -> dict[str, dict]:
    out: dict[str, dict] = {}
    for f in sorted(EXPECTED.glob("*.json")):
        out.update(json.loads(f.read_text()))
    return out


def row_of(r: Evaluated) -> dict:
    def one(v) -> dict:
        return {
            "status": v.status.value,
            "failed_check": v.failed_check,
            "layouts": v.domain.layouts if v.correct and v.domain else None,
            "streams": v.domain.streams if v.correct and v.domain else None,
            "speedup": v.speedup,
            "reason": v.reason[:240],
            "stages": v.stages,
            "costs": {c.name: c.seconds for c in v.checks if c.seconds},
            "n": v.timing.candidate.n if v.timing else None,
        }

    row = {"candidate": r.candidate.path.stem if r.candidate.path else r.candidate.name, "task": r.task.name}
    row.update(one(r.verdict))
    row["repaired"] = one(r.repair.verdict) if r.repair is not None else None
    return row


def earlier_verdicts(files: list[Path]) -> dict[str, dict]:
    """candidate -> its verdict in earlier runs' JSON: this benchmark's rows, model_style_corpus.py's (`got`) or
    batch_memory.py's (status and failed check only)."""
    out: dict[str, dict] = {}
    for f in files:
        for r in json.loads(f.read_text())["rows"]:
            got = r.get("got", r)
            v = {k: got[k] for k in ("status", "failed_check", "layouts", "streams", "repaired") if k in got}
            out[r["candidate"]] = v
    return out


def is_harness_failure(v) -> bool:
    text = (v.reason or "") + (v.traceback or "")
    return v.status.value == "crashed" and any(w in text for w in HARNESS_WORDS)


class Timeline:
    """The executor's events, kept with their times: builds, the device's stages and verdicts."""

    def __init__(self) -> None:
        self.events: list[ExecEvent] = []
        self.lock = threading.Lock()

    def __call__(self, ev: ExecEvent) -> None:
        with self.lock:
            self.events.append(ev)

    def reference_seconds(self) -> float:
        """Seconds the lanes spent on tasks' own models: from a `reference` stage event to the lane's next event."""
        by_dev: dict[tuple[str, int], list[ExecEvent]] = defaultdict(list)
        for e in self.events:
            if e.device:
                by_dev[e.device, e.lane].append(e)
        total = 0.0
        for evs in by_dev.values():
            for a, b in zip(evs, evs[1:], strict=False):
                if a.kind == "stage" and a.stage == "reference":
                    total += b.t - a.t
        return total

    def steps(self, t0: float, wall: float, step: float = 20.0) -> list[dict]:
        n = max(1, int(wall // step) + 1)
        done = [0] * n
        building = [0.0] * n
        busy = [0.0] * n
        starts: dict[int, float] = {}
        for e in self.events:
            if e.kind == "build_started":
                starts[e.job] = e.t
            elif e.kind == "build_finished" and e.job in starts:
                _spread(building, starts.pop(e.job) - t0, e.t - t0, step)
            elif e.kind == "verdict":
                i = min(n - 1, int((e.t - t0) // step))
                done[i] += 1
                if e.seconds:
                    _spread(busy, e.t - t0 - e.seconds, e.t - t0, step)
        return [
            {
                "t": round(i * step),
                "verdicts": done[i],
                "building": round(building[i] / step, 1),
                "lanes_busy": round(busy[i] / step, 2),  # lanes at work on evaluations, on average
            }
            for i in range(n)
        ]


def _spread(into: list[float], a: float, b: float, step: float) -> None:
    """Add the interval [a, b) to the buckets it overlaps, each by its overlap in seconds."""
    a = max(a, 0.0)
    i = int(a // step)
    while a < b and i < len(into):
        end = min(b, (i + 1) * step)
        into[i] += end - a
        a, i = end, i + 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--out", type=Path, default=Path("batch-throughput.json"))
    ap.add_argument("--cache-dir", type=Path, default=None, help="compile cache (default: a new empty one: cold)")
    ap.add_argument("--budget-s", type=float, default=540.0, help="cancel what is left after this many seconds")
    ap.add_argument("--limit", type=int, default=0, help="at most this many candidates (0: all)")
    ap.add_argument("--no-structured", action="store_true", help="leave the structured-input corpus out")
    ap.add_argument(
        "--compare",
        type=Path,
        nargs="*",
        default=[],
        help="earlier runs' JSON (this benchmark's, model_style_corpus.py's "
        "or batch_memory.py's): say which verdicts changed",
    )
    ap.add_argument(
        "--benchmark-set",
        type=Path,
        default=None,
        help="eval_speed.py's JSON: also evaluate the benchmark set "
        "(corpus/ops/tasks, corpus/ops/candidates) in the middle of the batch, builds running beside its timing, and "
        "compare its speedups with that file's",
    )
    ap.add_argument("--label", default="", help="a name for this run in the table (cold, warm...)")
    ap.add_argument("--lanes", type=int, default=None, help="the GPU's lanes (default: forge's)")
    args = ap.parse_args()

    work = corpus(not args.no_structured)
    if args.limit:
        work = work[: args.limit]
    bench_names: set[str] = set()
    if args.benchmark_set:
        bench = []
        for task_path, cand_paths in pair_directory(
            ROOT / "corpus" / "ops" / "tasks", ROOT / "corpus" / "ops" / "candidates"
        ):
            task = load_task(task_path)
            bench += [(task, load_candidate(p)) for p in cand_paths if "load_inline" not in p.stem]
        bench_names = {c.path.stem for _, c in bench}
        # spread over the first half of the batch: timed while the corpus's builds run on every build worker
        step = max(1, len(work) // 2 // max(1, len(bench)))
        for i, tc in enumerate(bench):
            work.insert(10 + i * (step + 1), tc)
    cache = args.cache_dir or Path(tempfile.mkdtemp(prefix="forge-cold-cache-"))
    cores = os.cpu_count() or 1
    workers = default_build_workers()
    print(f"{len(work)} candidates on {args.device}; {cores} cores, {workers} build workers, cache {cache}", flush=True)

    rows: list[dict] = []
    lock = threading.Lock()
    timeline = Timeline()
    t0_wall = time.time()
    t0 = time.perf_counter()
    state: dict = {}

    def save() -> None:
        args.out.write_text(json.dumps({**state, "rows": rows}, indent=1, default=str))

    def on_result(r: Evaluated) -> None:
        with lock:
            rows.append(row_of(r))
            if len(rows) % 10 == 0:
                state["wall_s"] = time.perf_counter() - t0
                save()

    executor = make_executor("local", args.device, options=EvalOptions(), cache_dir=cache, lanes=args.lanes)
    executor.subscribe(timeline)
    timer = threading.Timer(args.budget_s, executor.cancel)
    timer.start()
    evaluated: list[Evaluated] = []
    busy: dict[str, float] = {}
    lane_busy: dict[str, float] = {}
    cut = False
    try:
        with executor:
            try:
                evaluated = evaluate_batch(executor, work, on_result=on_result, ordered=False)
            finally:
                busy = executor.busy_seconds()
                lane_busy = executor.lane_seconds() if hasattr(executor, "lane_seconds") else dict(busy)
    except EvaluationCancelled:
        cut = True
    finally:
        timer.cancel()
    wall = time.perf_counter() - t0

    builds = [e.seconds for e in timeline.events if e.kind == "build_finished" and e.seconds]
    verdicts = [e for e in timeline.events if e.kind == "verdict"]
    stage_sum: Counter = Counter()
    cost_sum: Counter = Counter()
    for row in rows:
        for v in (row, row["repaired"]):
            if v:
                stage_sum.update(
                    {k: s for k, s in v["stages"].items() if k not in ("total", "build", "build_fallback") and s > 0}
                )
                cost_sum.update(v["costs"])
    fallbacks = [
        v["stages"]["build_fallback"]
        for row in rows
        for v in (row, row["repaired"])
        if v and "build_fallback" in v["stages"]
    ]
    harness = [
        r for r in evaluated if is_harness_failure(r.verdict) or (r.repair and is_harness_failure(r.repair.verdict))
    ]
    summary = summarize(evaluated, wall, busy) if evaluated else None
    busy_s = sum(busy.values())
    # the device's time on evaluations (from each verdict's event), what the workers' stages account for of it, and
    # the rest of its busy time: tasks loaded and their inputs drawn ahead, their own models called
    eval_s = sum(e.seconds or 0.0 for e in verdicts if e.device)
    worker_total_s = sum(
        v["stages"].get("total", 0.0) for row in rows for v in (row, row["repaired"]) if v and v["stages"].get("total")
    )
    state.update(
        label=args.label,
        device=args.device,
        cut=cut,
        candidates=len(work),
        judged=len(rows),
        evaluations=len(verdicts),
        wall_s=round(wall, 1),
        per_minute=round(len(rows) / wall * 60, 1),
        evaluations_per_minute=round(len(verdicts) / wall * 60, 1),
        cores=cores,
        build_workers=workers,
        builds=len(builds),
        build_sum_s=round(sum(builds), 1),
        build_median_s=round(statistics.median(builds), 2) if builds else None,
        build_floor_s=round(sum(builds) / cores, 1),
        header_fallbacks=len(fallbacks),
        header_fallback_s=round(sum(fallbacks), 1),
        lanes=len(lane_busy),
        lane_busy_s={k: round(v, 1) for k, v in lane_busy.items()},
        device_busy_s=round(busy_s, 1),
        device_busy=round(busy_s / wall / max(1, len(busy)), 3) if busy else None,
        device_evaluations_s=round(eval_s, 1),
        device_worker_stages_s=round(worker_total_s, 1),
        device_preparing_s=round(sum(lane_busy.values()) - eval_s, 1),
        reference_s=round(timeline.reference_seconds(), 1),
        stages_s={k: round(v, 1) for k, v in stage_sum.most_common()},
        check_costs_s={k: round(v, 1) for k, v in cost_sum.most_common(8)},
        first_verdict_s=round(min(e.t for e in verdicts) - t0_wall, 1) if verdicts else None,
        harness_failures=[r.candidate.name for r in harness],
        by_status=dict(Counter(r["status"] for r in rows)),
        summary=summary.model_dump() if summary else None,
        timeline=timeline.steps(t0_wall, wall),
    )
    expected = expectations()
    mism = []
    for row in rows:
        want = expected.get(row["candidate"])
        if want and (want["status"], want["failed_check"]) != (row["status"], row["failed_check"]):
            mism.append(
                f"{row['candidate']}: expected {want['status']}/{want['failed_check']}, got "
                f"{row['status']}/{row['failed_check']}: {row['reason'][:120]}"
            )
    state["unexpected"] = mism
    changed = []
    before = earlier_verdicts(args.compare)
    if args.compare:
        for row in rows:
            b = before.get(row["candidate"])
            if b is None:
                continue
            rb, ra = b.get("repaired") or {}, row.get("repaired") or {}
            keys = [k for k in ("status", "failed_check", "layouts", "streams") if k in b]
            if any(b[k] != row[k] for k in keys) or ("repaired" in b and any(rb.get(k) != ra.get(k) for k in keys)):
                changed.append(
                    f"{row['candidate']}: {b['status']}/{b['failed_check']} -> {row['status']}/{row['failed_check']}"
                    + (f" (repair {rb.get('status')} -> {ra.get('status')})" if rb or ra else "")
                    + f": {row['reason'][:100]}"
                )
        state["changed_vs"] = {
            "files": [str(f) for f in args.compare],
            "common": len(set(before) & {r["candidate"] for r in rows}),
            "changed": changed,
        }
    if args.benchmark_set:
        then = {r["candidate"]: r for r in json.loads(args.benchmark_set.read_text())["fast"]}
        bench_rows = []
        for row in rows:
            if row["candidate"] in bench_names and row["candidate"] in then and row["speedup"]:
                old_s = then[row["candidate"]]["speedup"]
                bench_rows.append(
                    {
                        "candidate": row["candidate"],
                        "speedup": row["speedup"],
                        "then": old_s,
                        "diff": row["speedup"] / old_s - 1,
                        "n": row.get("n"),
                    }
                )
        state["benchmark_set"] = {"file": str(args.benchmark_set), "rows": bench_rows}
    save()

    print()
    print("t(s)  verdicts  building  lanes_busy")
    for s in state["timeline"]:
        print(f"{s['t']:>4} {s['verdicts']:>9} {s['building']:>9} {s['lanes_busy']:>11}")
    for m in mism[:20]:
        print("UNEXPECTED", m[:240])
    for c in changed[:20]:
        print("CHANGED", c[:240])
    for b in state.get("benchmark_set", {}).get("rows", []):
        print(
            f"BENCH {b['candidate']:<24} {b['speedup']:.3f}x  then {b['then']:.3f}x  {100 * b['diff']:+.1f}%  n={b['n']}"
        )
    print(
        f"stages (s, summed): {state['stages_s']}; reference {state['reference_s']} s; costs {state['check_costs_s']}"
    )
    print(
        f"device: evaluations {state['device_evaluations_s']} s (the workers' stages {state['device_worker_stages_s']} s"
        f" of it), preparing tasks {state['device_preparing_s']} s"
    )
    print(f"by status: {state['by_status']}")
    print(
        f"{args.label or 'run':<6} judged {len(rows)}/{len(work)}{' (cut)' if cut else ''} in {wall:.0f} s: "
        f"{state['per_minute']}/min ({len(verdicts)} evaluations, {state['evaluations_per_minute']}/min); "
        f"builds {len(builds)} sum {state['build_sum_s']} s, floor {state['build_floor_s']} s on {cores} cores "
        f"({workers} workers), header fallbacks {len(fallbacks)} ({state['header_fallback_s']} s); device busy {state['device_busy_s']} s ({state['device_busy']}), "
        f"{state['lanes']} lane(s) at work {sum(state['lane_busy_s'].values()):.0f} s; first verdict at "
        f"{state['first_verdict_s']} s; harness failures {len(harness)}; unexpected {len(mism)}"
        + (f"; changed {len(changed)}/{state['changed_vs']['common']}" if args.compare else "")
        + (
            f"; benchmark set within {100 * max(abs(b['diff']) for b in state['benchmark_set']['rows']):.1f}%"
            if state.get("benchmark_set", {}).get("rows")
            else ""
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
