"""Harness overhead per optimization round, with an instant scripted model (GPU machine).

    python benchmarks/round_overhead.py [--rounds 8] [--no-profile] [--out results.json]

A chat-completions server on 127.0.0.1 (tests/fake_openai.py) answers instantly: the Judge with
a fixed plan, the Coder with the softmax Triton candidate of corpus/ops/candidates (a new
comment each round, so every round evaluates a new candidate). The optimizer runs `linear`
search on corpus/ops/tasks/softmax.py with the product's defaults. Those include Nsight
Compute profiling for the Judge unless --no-profile.

Overhead of a round = its wall time minus the model's own latency (the calls' latency_s).
Prints a short table last.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from fake_openai import FakeOpenAI  # noqa: E402

from forge_lsp.agent.config import ModelSettings  # noqa: E402
from forge_lsp.agent.optimize import OptimizeOptions, Optimizer  # noqa: E402
from forge_lsp.agent.provider import ChatModel  # noqa: E402
from forge_lsp.agent.store import RunStore  # noqa: E402
from forge_lsp.engine import load_task  # noqa: E402
from forge_lsp.engine.local_pool import LocalPool  # noqa: E402
from forge_lsp.usecases.explain import judge_feedback as make_profile_fn  # noqa: E402

PLAN = json.dumps({"bottleneck": "DRAM bandwidth", "method": "single pass", "plan": "keep the row in registers"})


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--no-profile", action="store_true")
    ap.add_argument("--out", type=Path)
    ap.add_argument(
        "--device", default="cuda:0", help="cpu: a dry run of the script on tests/fixtures/softmax_small.py"
    )
    args = ap.parse_args()
    task_file = ROOT / ("tests/fixtures/softmax_small.py" if args.device == "cpu" else "corpus/ops/tasks/softmax.py")
    source = (ROOT / "corpus" / "ops" / "candidates" / "softmax_triton.py").read_text()
    work = Path(tempfile.mkdtemp())
    counter = iter(range(10_000))

    def reply(request: dict) -> str:
        if "You are the Judge" in request["messages"][0]["content"]:
            return PLAN
        n = next(counter)
        return json.dumps({"summary": f"variant {n}", "source": source + f"\n# variant {n}\n"})

    with FakeOpenAI() as server, LocalPool(args.device, cache_dir=work / "cache", lanes=1) as ev:
        server.script(*[reply] * (4 * args.rounds + 4))
        model = ChatModel(ModelSettings(model="instant", base_url=server.base_url), api_key="unused-key-0000")
        store = RunStore(work / "runs.sqlite")
        opt = Optimizer(
            load_task(task_file),
            store=store,
            evaluator=ev,
            options=OptimizeOptions(search="linear", rounds=args.rounds, offline=False, final_retime=False),
            coder=model,
            judge=model,
            profile=None if args.no_profile else make_profile_fn(args.device, work / "cache"),
        )
        result = opt.run()
    events = store.events(result.run_id)
    starts = [e.ts for e in events if e.kind == "round"] + [next(e.ts for e in events if e.kind == "run_finished")]
    calls = store.calls(result.run_id)
    rows = []
    for i in range(len(starts) - 1):
        in_round = [c for c in calls if starts[i] <= c.created < starts[i + 1]]
        model_s = sum(c.latency_s for c in in_round)
        rows.append(
            {
                "round": i + 1,
                "wall_s": starts[i + 1] - starts[i],
                "model_s": model_s,
                "overhead_s": starts[i + 1] - starts[i] - model_s,
            }
        )
    med = statistics.median(r["overhead_s"] for r in rows)
    if args.out:
        args.out.write_text(
            json.dumps({"rows": rows, "median_overhead_s": med, "profile": not args.no_profile}, indent=2)
        )
    print(f"\n== harness overhead per round ({'with' if not args.no_profile else 'without'} profiling) ==")
    print(f"{'round':>5s} {'wall s':>7s} {'model s':>8s} {'overhead s':>10s}")
    for r in rows:
        print(f"{r['round']:5d} {r['wall_s']:7.2f} {r['model_s']:8.3f} {r['overhead_s']:10.2f}")
    print(f"median overhead: {med:.2f} s over {len(rows)} rounds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
