"""How often a candidate that hands its last result out again on timed calls escapes, and what looking at every
timed call costs an honest one: `timed_outputs_match` on outputs over 4 MiB.

    python benchmarks/stale_escape.py [--runs 40] [--timed 10] [--out results.json]

Evaluates the adversarial suite's `c15-stage-signals-stale-unchecked-calls` (a 4 MiB affine map; stale on three
timed calls in four after the first few, never on a nudged call) `--runs` times with timing limited to `--timed`
calls (a slow model's timing), and counts the evaluations that end `correct`, with their speedups. Then evaluates
the honest candidate of the same task `--runs` / 4 times and reads `timed_outputs_match`'s seconds and detail.
Run it at two commits (PYTHONPATH) to compare engines. Prints a short table last.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from adversarial.cases import CHEATS  # noqa: E402

from forge_lsp.engine import Candidate, EvalOptions, Evaluator, load_task  # noqa: E402

HONEST = """
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x * 2.0 + 1.0
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--timed", type=int, default=10)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    case = next(c for c in CHEATS if c.id == "c15-stage-signals-stale-unchecked-calls")
    task = load_task(case.task_path)
    outcomes: dict[str, int] = {}
    escaped: list[float] = []
    honest: list[dict] = []
    with Evaluator("cpu", options=EvalOptions(min_reps=args.timed, max_reps=args.timed)) as ev:
        for _ in range(args.runs):
            v = ev.evaluate(task, Candidate.from_source(case.source, case.id))
            key = v.failed_check or v.status.value
            outcomes[key] = outcomes.get(key, 0) + 1
            if v.status.value == "correct" and v.timing is not None:
                escaped.append(round(v.timing.speedup, 2))
        for _ in range(max(1, args.runs // 4)):
            v = ev.evaluate(task, Candidate.from_source(HONEST, "honest"))
            check = next(c for c in v.checks if c.name == "timed_outputs_match")
            honest.append({"status": v.status.value, "seconds": check.seconds, "detail": check.detail})
    if args.out:
        args.out.write_text(
            json.dumps({"timed_calls": args.timed, "outcomes": outcomes, "escaped_speedups": escaped, "honest": honest})
        )
    print(f"\n{case.id}, {args.runs} evaluations, timing limited to {args.timed} calls:")
    print(f"  outcomes: {outcomes}; escaped at speedups {escaped or 'none'}")
    secs = [h["seconds"] for h in honest]
    print(
        f"honest, {len(honest)} evaluations: {sorted({h['status'] for h in honest})}, timed_outputs_match median "
        f"{1e3 * statistics.median(secs):.0f} ms; {honest[-1]['detail']}"
    )


if __name__ == "__main__":
    main()
