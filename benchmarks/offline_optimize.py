"""Offline `forge optimize` on the GPU machine: built-in library and torch.compile vs torch eager.

    python benchmarks/offline_optimize.py [--out results.json]

Runs the optimizer with no model configured (offline candidates only) on
corpus/ops/tasks/softmax.py (4096x8192 fp32) and corpus/agent_tasks/groupnorm_sd.py
(GroupNorm(32, 320) on 2x320x64x64). Every candidate goes through the engine (verified,
timed against eager). For each task the table gives: each candidate's time and speedup vs eager,
its speedup vs the torch.compile default candidate, and its share of the measured DRAM roofline
(minimum bytes: every input read once, every output written once). Prints a short table last.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from forge_lsp.agent.offline import offline_candidates  # noqa: E402
from forge_lsp.agent.optimize import OptimizeOptions, Optimizer  # noqa: E402
from forge_lsp.agent.store import RunStore  # noqa: E402
from forge_lsp.engine import EvalOptions, StageTimeouts, load_task  # noqa: E402
from forge_lsp.engine.local_pool import LocalPool  # noqa: E402
from forge_lsp.profiler.ncu import device_peaks  # noqa: E402

TASKS = {
    "softmax 4096x8192 fp32": (ROOT / "corpus" / "ops" / "tasks" / "softmax.py", 2 * 4096 * 8192 * 4),
    "groupnorm 2x320x64x64 fp32": (
        ROOT / "corpus" / "agent_tasks" / "groupnorm_sd.py",
        2 * 2 * 320 * 64 * 64 * 4 + 2 * 320 * 4,
    ),
}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path)
    ap.add_argument("--only", help="run only tasks whose label contains this")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp())
    results, rows = {}, []
    # torch.compile's max-autotune benchmarks many Triton configs on its first call and during
    # verification (new sizes): give those stages room
    options = EvalOptions(timeouts=StageTimeouts(first_call=900, verify=600, time=300))
    with LocalPool("cuda:0", options=options, cache_dir=work / "cache", lanes=1) as ev:
        name = ev.hello().device_name
        peaks, note = device_peaks("cuda:0", name, cache_dir=work / "cache")
        print(f"{name}: DRAM roof {peaks.dram_bytes_per_s / 1e12:.2f} TB/s ({note})")
        for label, (path, min_bytes) in TASKS.items():
            if args.only and args.only not in label:
                continue
            task = load_task(path)
            store = RunStore(work / f"{path.stem}.sqlite")
            opt = Optimizer(
                task,
                store=store,
                evaluator=ev,
                options=OptimizeOptions(final_retime=True),
                offline=lambda t: offline_candidates(t, device="cuda"),
            )
            result = opt.run()
            cands = store.candidates(result.run_id)
            compiled = next((c for c in cands if c.origin == "offline:torch.compile:default" and c.correct), None)
            compiled_ms = compiled.verdict.timing.candidate.median_ms if compiled and compiled.verdict.timing else None
            for c in cands:
                t = c.verdict.timing if c.verdict else None
                ms = t.candidate.median_ms if t else None
                row = {
                    "task": label,
                    "candidate": c.origin.removeprefix("offline:"),
                    "status": c.verdict.status.value if c.verdict else c.status,
                    "eager_ms": t.reference.median_ms if t else None,
                    "ms": ms,
                    "speedup": c.speedup,
                    "vs_compile": (compiled_ms / ms) if (compiled_ms and ms and c.correct) else None,
                    "roofline_pct": 100 * min_bytes / (ms * 1e-3) / peaks.dram_bytes_per_s
                    if ms and c.correct
                    else None,
                    "reason": c.verdict.reason[:100] if c.verdict else "",
                }
                rows.append(row)
            results[label] = {
                "run": result.run_id,
                "notes": result.notes,
                "best": result.best.origin if result.best else None,
            }
            print(f"{label}: {result.notes}")
    if args.out:
        args.out.write_text(
            json.dumps({"device": name, "peaks": peaks.model_dump(), "rows": rows, "runs": results}, indent=2)
        )
    print("\n== offline forge optimize (speedup vs torch eager; vs torch.compile default; % of DRAM roof) ==")
    print(
        f"{'task':28s} {'candidate':36s} {'status':14s} {'eager µs':>9s} {'µs':>9s} {'speedup':>8s} "
        f"{'vs compile':>10s} {'roof %':>7s}"
    )
    for r in rows:
        fmt = lambda v, f: (f % v) if v is not None else "-"  # noqa: E731
        print(
            f"{r['task']:28s} {r['candidate'][:36]:36s} {r['status'][:14]:14s} {fmt(r['eager_ms'] and r['eager_ms'] * 1e3, '%.1f'):>9s} "
            f"{fmt(r['ms'] and r['ms'] * 1e3, '%.1f'):>9s} {fmt(r['speedup'], '%.2fx'):>8s} "
            f"{fmt(r['vs_compile'], '%.2fx'):>10s} {fmt(r['roofline_pct'], '%.0f'):>7s}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
