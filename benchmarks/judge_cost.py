"""What judging apart costs: the judge's draw per task, its comparison per candidate, the wire between processes,
and the reference object's watch (results go in BENCHMARKS.md; runs on the CPU or, with --device cuda, the GPU).

    python benchmarks/judge_cost.py [--device cpu|cuda] [--rounds 3] [--out results.json]

1. Honest candidates of the adversarial suite and the benchmark tasks' torch candidates, each evaluated `--rounds`
   times with `judged_sets=2` and with `judged_sets=0`, alternating: the median evaluation time of each, their
   paired difference with a 95% bootstrap interval, the judge's draw (`judge_draw`, once per task) and the
   comparison (`clean_judge`'s seconds).
2. The wire: packing, sending through a pipe and unpacking 1, 16 and 64 MiB outputs.
3. `ModuleWatch`: the structure compared after each candidate call, the parameters' values at each stage's end,
   on a 24-layer MLP-mixer-sized model.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))


def bootstrap(diffs: list[float], n: int = 2000) -> tuple[float, float]:
    rng = random.Random(0)
    meds = sorted(statistics.median(rng.choices(diffs, k=len(diffs))) for _ in range(n))
    return meds[int(0.025 * n)], meds[int(0.975 * n)]


def evaluations(device: str, rounds: int) -> dict:
    from adversarial.cases import HONEST

    from forge_lsp.engine import Candidate, EvalOptions, Evaluator, load_task

    cases = [(ROOT / "tests" / c.task, c.source, c.name) for c in HONEST]
    options = EvalOptions(device=device, timing_budget_s=0.3)
    rows, diffs, draws, compares = [], [], [], []
    with Evaluator(device, options=options, cache_dir=Path(tempfile.mkdtemp())) as ev:
        for path, source, name in cases:
            task = load_task(path)
            cand = Candidate.from_source(source, name.replace("-", "_"))
            ev.evaluate(task, cand, options.model_copy(update={"judged_sets": 0}))  # builds and warm caches
            with_j, without = [], []
            for r in range(rounds):
                for sets in (2, 0) if r % 2 == 0 else (0, 2):
                    t0 = time.perf_counter()
                    v = ev.evaluate(task, cand, options.model_copy(update={"judged_sets": sets}))
                    seconds = time.perf_counter() - t0
                    if sets:
                        with_j.append(seconds)
                        check = next((c for c in v.checks if c.name == "clean_judge"), None)
                        if check is not None and check.seconds is not None:
                            compares.append(check.seconds)
                        if "judge_draw" in v.stages:
                            draws.append(v.stages["judge_draw"])
                    else:
                        without.append(seconds)
            diffs += [a - b for a, b in zip(with_j, without, strict=True)]
            rows.append(
                {
                    "candidate": name,
                    "status": v.status.value,
                    "with_judge_s": round(statistics.median(with_j), 3),
                    "without_s": round(statistics.median(without), 3),
                }
            )
    lo, hi = bootstrap(diffs)
    return {
        "rows": rows,
        "median_added_s": round(statistics.median(diffs), 4),
        "added_ci95_s": [round(lo, 4), round(hi, 4)],
        "judge_draw_median_s": round(statistics.median(draws), 4) if draws else None,
        "compare_median_s": round(statistics.median(compares), 4) if compares else None,
        "compare_max_s": round(max(compares), 4) if compares else None,
    }


def wire() -> list[dict]:
    import torch

    from forge_lsp.engine import pipe
    from forge_lsp.engine.harness.wire import pack, unpack
    from forge_lsp.engine.pipe import JudgedOutputs

    out = []
    for mib in (1, 16, 64):
        t = torch.randn(mib << 18)
        r, w = os.pipe()
        rx = pipe.Receiver(r, pipe.REPLY)
        t0 = time.perf_counter()
        data = pack(t)
        t1 = time.perf_counter()
        sender = threading.Thread(target=pipe.send, args=(w, JudgedOutputs(index=0).with_data(data)))
        sender.start()
        got = rx.recv()
        sender.join()
        t2 = time.perf_counter()
        back = unpack(got.data)
        t3 = time.perf_counter()
        assert torch.equal(back, t)
        os.close(r)
        os.close(w)
        out.append({"mib": mib, "pack_ms": (t1 - t0) * 1e3, "pipe_ms": (t2 - t1) * 1e3, "unpack_ms": (t3 - t2) * 1e3})
    return out


def module_watch() -> dict:
    import torch.nn as nn

    from forge_lsp.engine.harness.checks import ModuleWatch

    layers = [
        nn.Sequential(nn.LayerNorm(512), nn.Linear(512, 2048), nn.GELU(), nn.Linear(2048, 512)) for _ in range(24)
    ]
    model = nn.Sequential(*layers)
    watch = ModuleWatch(model)
    params = sum(p.numel() for p in model.parameters())
    n = 200
    t0 = time.perf_counter()
    for _ in range(n):
        assert not watch.changes()
    t1 = time.perf_counter()
    for _ in range(5):
        assert not watch.value_changes()
    t2 = time.perf_counter()
    return {
        "modules": sum(1 for _ in model.modules()),
        "parameters_m": round(params / 1e6, 1),
        "structure_us": round((t1 - t0) / n * 1e6, 1),
        "values_ms": round((t2 - t1) / 5 * 1e3, 2),
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    result = {"device": args.device, "date": time.strftime("%Y-%m-%d")}
    result["module_watch"] = module_watch()
    result["wire"] = wire()
    result["evaluations"] = evaluations(args.device, args.rounds)
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
    e, m = result["evaluations"], result["module_watch"]
    print(f"\n{'candidate':28} {'status':9} {'judged s':>9} {'unjudged s':>10}")
    for r in e["rows"]:
        print(f"{r['candidate']:28} {r['status']:9} {r['with_judge_s']:9.3f} {r['without_s']:10.3f}")
    print(
        f"\nadded per evaluation: median {e['median_added_s']:.4f} s, 95% CI {e['added_ci95_s']}; judge's draw per task "
        f"{e['judge_draw_median_s']} s; comparison per evaluation median {e['compare_median_s']} s "
        f"(max {e['compare_max_s']})"
    )
    for w in result["wire"]:
        print(
            f"wire {w['mib']:3d} MiB: pack {w['pack_ms']:.1f} ms, pipe {w['pipe_ms']:.1f} ms, unpack {w['unpack_ms']:.2f} ms"
        )
    print(
        f"ModuleWatch ({m['modules']} modules, {m['parameters_m']} M parameters): structure {m['structure_us']} us "
        f"per candidate call, values {m['values_ms']} ms per stage end"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
