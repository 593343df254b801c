"""The model-style corpus through forge eval's use case, each verdict and repair against its expectation.

    PYTHONPATH=. python3 benchmarks/model_style_corpus.py --device cuda:0 --out $OUT/corpus.json [--budget-s 360]
    PYTHONPATH=. .venv/bin/python benchmarks/model_style_corpus.py --device cpu --structured-only   # the CPU part

Evaluates every candidate of `corpus/model_style/candidates/` against its task in
`corpus/kernelbench/tasks/` (and, with the structured-input corpus, every honest candidate of
`corpus/structured/`, each expected `correct`) through `usecases.evaluate.evaluate_batch` — what `forge eval DIR`
runs — with the automatic repairs. Each result is compared with `corpus/model_style/expected/*.json`: status, failed
check, domain (layouts, streams), and the repair's fixes and verdict. Results are written to `--out` as they come (a
run cut at `--budget-s` keeps what it did). It prints a short table last: how many match, by expected status; the
repairs' hit rate; candidates a minute; and each mismatch, with the verdict's reason.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from forge_lsp.engine import EvalOptions, load_candidate, load_task  # noqa: E402
from forge_lsp.engine.executors import make_executor  # noqa: E402
from forge_lsp.engine.worker_client import EvaluationCancelled  # noqa: E402
from forge_lsp.usecases.evaluate import (  # noqa: E402
    Evaluated,
    evaluate_batch,
    pair_directory,  # noqa: E402
    summarize,
)

TASKS = ROOT / "corpus" / "kernelbench" / "tasks"
CANDS = ROOT / "corpus" / "model_style" / "candidates"
EXPECTED = ROOT / "corpus" / "model_style" / "expected"
STRUCTURED = ROOT / "corpus" / "structured"


def expectations() -> dict[str, dict]:
    out: dict[str, dict] = {}
    for f in sorted(EXPECTED.glob("*.json")):
        out.update(json.loads(f.read_text()))
    return out


def actual(r: Evaluated) -> dict:
    v = r.verdict
    row = {
        "status": v.status.value,
        "failed_check": v.failed_check,
        "layouts": v.domain.layouts if v.correct and v.domain else None,
        "streams": v.domain.streams if v.correct and v.domain else None,
        "reason": v.reason[:300],
        "speedup": v.speedup,
        "repaired": None,
    }
    if r.repair is not None:
        rv = r.repair.verdict
        row["repaired"] = {
            "applied": r.repair.kinds,
            "status": rv.status.value,
            "failed_check": rv.failed_check,
            "layouts": rv.domain.layouts if rv.correct and rv.domain else None,
            "streams": rv.domain.streams if rv.correct and rv.domain else None,
            "reason": rv.reason[:300],
            "speedup": rv.speedup,
        }
    return row


KEYS = ("status", "failed_check", "layouts", "streams")


def differences(want: dict, got: dict) -> list[str]:
    """What differs between an expectation and a result ([] when they agree)."""
    out = [f"{k}: expected {want.get(k)!r}, got {got.get(k)!r}" for k in KEYS if want.get(k) != got.get(k)]
    wr, gr = want.get("repaired"), got.get("repaired")
    if (wr is None) != (gr is None):
        out.append(f"repair: expected {'one' if wr else 'none'}, got {'one' if gr else 'none'}")
    elif wr is not None and gr is not None:
        if sorted(wr.get("applied") or []) != sorted(gr.get("applied") or []):
            out.append(f"repair fixes: expected {wr.get('applied')}, got {gr.get('applied')}")
        out += [f"repaired {k}: expected {wr.get(k)!r}, got {gr.get(k)!r}" for k in KEYS if wr.get(k) != gr.get(k)]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--out", type=Path, default=Path("corpus-results.json"))
    ap.add_argument("--budget-s", type=float, default=400.0, help="cancel what is left after this many seconds")
    ap.add_argument("--cache-dir", type=Path, default=None)
    ap.add_argument("--structured-only", action="store_true", help="only the structured-input corpus (CPU too)")
    ap.add_argument("--limit", type=int, default=0, help="at most this many model-style candidates (0: all)")
    ap.add_argument("--first", default="", help="evaluate the candidates of expected/FIRST.json before the others")
    ap.add_argument("--only", default="", help="only the candidates of expected/ONLY.json (and the structured corpus)")
    ap.add_argument("--no-structured", action="store_true", help="leave the structured-input corpus out")
    ap.add_argument(
        "--timing-budget", type=float, default=1.0, help="seconds of timing per candidate (EvalOptions.timing_budget_s)"
    )
    args = ap.parse_args()

    expected = expectations()
    work = []
    if not args.structured_only:
        pairs = pair_directory(TASKS, CANDS)
        for task_path, cand_paths in pairs:
            task = load_task(task_path)
            work += [(task, load_candidate(p)) for p in cand_paths]
        if args.only:
            only = set(json.loads((EXPECTED / f"{args.only}.json").read_text()))
            work = [tc for tc in work if tc[1].path.stem in only]
        if args.first:
            first = set(json.loads((EXPECTED / f"{args.first}.json").read_text()))
            work.sort(key=lambda tc: tc[1].path.stem not in first)  # stable: that file's candidates first
        if args.limit:
            work = work[: args.limit]
    for task_path, cand_paths in [] if args.no_structured else pair_directory(STRUCTURED, STRUCTURED):
        task = load_task(task_path)
        for p in cand_paths:
            expected[p.stem] = {
                "status": "correct",
                "failed_check": None,
                "layouts": "any",
                "streams": "any" if args.device != "cpu" else None,
                "repaired": None,
            }
            work.append((task, load_candidate(p)))
    print(f"{len(work)} candidates on {args.device}", flush=True)

    rows: list[dict] = []
    lock = threading.Lock()
    t0 = time.perf_counter()

    def save() -> None:
        args.out.write_text(
            json.dumps({"device": args.device, "wall_s": time.perf_counter() - t0, "rows": rows}, indent=1, default=str)
        )

    def on_result(r: Evaluated) -> None:
        got = actual(r)
        want = expected.get(r.candidate.path.stem if r.candidate.path else r.candidate.name, {})
        row = {
            "candidate": r.candidate.path.stem if r.candidate.path else r.candidate.name,
            "task": r.task.name,
            "expected": want,
            "got": got,
            "diff": differences(want, got) if want else ["no expectation"],
            "device_name": r.verdict.device_name,
        }
        with lock:
            rows.append(row)
            save()
        print(
            f"  {row['candidate']}: {got['status']}"
            + (f" ({got['layouts']}/{got['streams']})" if got["status"] == "correct" else "")
            + (f" -> repaired {got['repaired']['status']}" if got["repaired"] else "")
            + ("" if not row["diff"] else "  MISMATCH " + "; ".join(row["diff"])),
            flush=True,
        )

    options = EvalOptions(timing_budget_s=args.timing_budget, min_reps=5 if args.timing_budget < 1 else 10)
    executor = make_executor("local", args.device, options=options, cache_dir=args.cache_dir)
    timer = threading.Timer(args.budget_s, executor.cancel)
    timer.start()
    evaluated: list[Evaluated] = []
    busy: dict[str, float] = {}
    cut = False
    try:
        with executor:
            try:
                evaluated = evaluate_batch(executor, work, on_result=on_result, ordered=False)
            finally:
                busy = executor.busy_seconds()
    except EvaluationCancelled:
        cut = True
    finally:
        timer.cancel()
    wall = time.perf_counter() - t0
    save()
    summary = summarize(evaluated, wall, busy) if evaluated else None

    print()
    print(
        f"{'expected status':<16} {'n':>4} {'verdict as expected':>20} {'domain as expected':>19} {'repair as expected':>19}"
    )
    by = Counter(r["expected"].get("status", "?") for r in rows)
    for status, n in by.most_common():
        mine = [r for r in rows if r["expected"].get("status") == status]
        verdict_ok = sum(not [d for d in r["diff"] if d.startswith(("status", "failed_check"))] for r in mine)
        domain_ok = sum(not [d for d in r["diff"] if d.startswith(("layouts", "streams"))] for r in mine)
        repair_ok = sum(not [d for d in r["diff"] if d.startswith("repair")] for r in mine)
        print(f"{status:<16} {n:>4} {verdict_ok:>20} {domain_ok:>19} {repair_ok:>19}")
    exact = sum(not r["diff"] for r in rows)
    print(f"{'all':<16} {len(rows):>4}   exactly as expected: {exact}")
    reps = [r["got"]["repaired"] for r in rows if r["got"]["repaired"]]
    if reps:
        full = sum(x["status"] == "correct" and x["layouts"] == "any" and x["streams"] in ("any", None) for x in reps)
        print(
            f"repairs: {len(reps)} derived, {sum(x['status'] == 'correct' for x in reps)} correct, {full} on the "
            "full domain; by fix: "
            + ", ".join(f"{k} {n}" for k, n in Counter(k for x in reps for k in x["applied"]).most_common())
        )
    if summary is not None:
        print(
            f"wall {wall:.1f} s, {summary.per_minute:.1f} candidates a minute (repairs included in the time), "
            f"device busy {summary.device_busy}"
        )
    if cut:
        print(
            f"cut at the {args.budget_s:g} s budget: {len(rows)} of {len(work)} results "
            f"({len(rows) / wall * 60:.1f} a minute)"
        )
    for r in rows:
        if r["diff"]:
            print(f"MISMATCH {r['candidate']}: {'; '.join(r['diff'])} — {r['got']['reason'][:160]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
