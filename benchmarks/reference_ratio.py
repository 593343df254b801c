"""How much slower an honest candidate's reference runs beside it than alone in the judge, by the reference's size:
the evidence for `reference_timing`'s floor (below 1 ms on the CPU the two are not compared).

    python benchmarks/reference_ratio.py [--device cpu] [--load N] [--out results.json]

Evaluates the adversarial suite's honest CPU candidates (each on its task) and reads, from each verdict, the
reference's median beside the candidate (the interleaved timing) and alone in the judge (from `reference_timing`'s
detail). `--load N` keeps N busy processes running beside the evaluations (a user's laptop with background load).
Prints a short table last: one row a candidate, sorted by the reference's time alone.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from adversarial.cases import HONEST  # noqa: E402

from forge_lsp.engine import Candidate, Evaluator, load_task  # noqa: E402

_ALONE = re.compile(r"(?:takes|alone in the judge[^(]*\(|timed again \()\s*([0-9.]+) ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--load", type=int, default=0)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.load)]
    rows = []
    try:
        with Evaluator(args.device) as ev:
            for case in HONEST:
                v = ev.evaluate(load_task(case.task_path), Candidate.from_source(case.source, case.id))
                check = next((c for c in v.checks if c.name == "reference_timing"), None)
                detail = check.detail if check is not None else ""
                m = _ALONE.search(detail or "")
                beside = v.timing.reference.median_ms if v.timing is not None else None
                alone = float(m.group(1)) if m else None
                rows.append(
                    {
                        "case": case.id,
                        "status": v.status.value,
                        "alone_ms": alone,
                        "beside_ms": round(beside, 4) if beside is not None else None,
                        "ratio": round(beside / alone, 2) if beside and alone else None,
                        "reference_timing": (detail or "")[:60],
                    }
                )
    finally:
        for b in burners:
            b.kill()
    result = {"device": args.device, "load": args.load, "date": time.strftime("%Y-%m-%d"), "rows": rows}
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"load: {args.load} busy processes")
    print("case | alone ms | beside ms | beside/alone | reference_timing")
    for r in sorted(rows, key=lambda r: r["alone_ms"] or 0):
        print(f"{r['case']} | {r['alone_ms']} | {r['beside_ms']} | {r['ratio']} | {r['reference_timing']}")


if __name__ == "__main__":
    main()
