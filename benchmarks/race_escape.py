"""How often a race right on most calls escapes the engine when the timing budget leaves few timed calls (a loaded
machine, a short budget), with `repeatable`'s old two runs against its default, and what the repeats cost honest
candidates.

    python benchmarks/race_escape.py [--runs 30] [--timed 5] [--load N] [--out results.json]

Evaluates each of the adversarial suite's races (class 6, the cases right on most single calls) `--runs` times with
timing limited to `--timed` calls, once with `repeats=2` and once with the default, and counts the evaluations that
end `correct` (escapes). Then evaluates the honest CPU candidates once each and reads the seconds `repeatable` took.
`--load N` keeps N busy processes running beside the evaluations. Prints a short table last.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from adversarial.cases import CHEATS, HONEST  # noqa: E402

from forge_lsp.engine import Candidate, EvalOptions, Evaluator, load_task  # noqa: E402

#: checks that run after `repeatable`: a race they catch got past it
LATER = frozenset(
    {
        "trained_parameters",
        "noncontiguous_inputs",
        "input_range",
        "timed_outputs_match",
        "clean_judge",
        "no_result_reuse",
    }
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--timed", type=int, default=5)
    ap.add_argument("--load", type=int, default=0)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    races = [c for c in CHEATS if c.flaky_first_call]
    default = EvalOptions().repeats
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.load)]
    rows, honest = [], []
    try:
        with Evaluator("cpu", options=EvalOptions(warmup=1, min_reps=args.timed, max_reps=args.timed)) as ev:
            for case in races:
                for repeats in (2, default):
                    caught: dict[str, int] = {}
                    for _ in range(args.runs):
                        v = ev.evaluate(
                            load_task(case.task_path),
                            Candidate.from_source(case.source, case.id),
                            ev.options.model_copy(update={"repeats": repeats}),
                        )
                        key = v.failed_check or ("escaped" if v.status.value == "correct" else v.status.value)
                        caught[key] = caught.get(key, 0) + 1
                    rows.append({"case": case.id, "repeats": repeats, "runs": args.runs, "outcomes": caught})
            for repeats in (2, default):
                for case in HONEST:
                    v = ev.evaluate(
                        load_task(case.task_path),
                        Candidate.from_source(case.source, case.id),
                        ev.options.model_copy(update={"repeats": repeats}),
                    )
                    check = next(c for c in v.checks if c.name == "repeatable")
                    honest.append(
                        {
                            "case": case.id,
                            "repeats": repeats,
                            "status": v.status.value,
                            "seconds": check.seconds,
                            "detail": check.detail,
                        }
                    )
    finally:
        for p in burners:
            p.kill()
    if args.out:
        args.out.write_text(json.dumps({"timed_calls": args.timed, "load": args.load, "races": rows, "honest": honest}))
    print(f"\nraces, {args.runs} evaluations each, timing limited to {args.timed} calls, load {args.load}:")
    print(f"{'case':36} {'repeats':>7} {'escaped':>7} {'past repeatable':>15}  caught by")
    for r in rows:
        out = dict(r["outcomes"])
        escaped = out.pop("escaped", 0)
        later = escaped + sum(n for check, n in out.items() if check in LATER)
        print(f"{r['case']:36} {r['repeats']:>7} {escaped:>7} {later:>15}  {out}")
    for repeats in (2, default):
        mine = [h for h in honest if h["repeats"] == repeats]
        secs = [h["seconds"] for h in mine if h["seconds"] is not None]
        wrong = [h["case"] for h in mine if h["status"] != "correct"]
        print(
            f"honest candidates, repeats={repeats}: {len(mine)}, `repeatable` median "
            f"{1e3 * statistics.median(secs):.1f} ms, max {1e3 * max(secs):.1f} ms; not correct: {wrong or 'none'}"
        )


if __name__ == "__main__":
    main()
