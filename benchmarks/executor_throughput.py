"""Candidates per minute of `forge eval DIR` with each executor (run on the GPU machine; figures go in BENCHMARKS.md).

    PYTHONPATH=. python3 benchmarks/executor_throughput.py --device cuda:0 [--limit N] [--out results.json]
    PYTHONPATH=. python3 benchmarks/executor_throughput.py --device cpu --small   # the CPU check: 2 C++ candidates

Over a directory of `load_inline` candidates of different tasks (default: corpus/kernelbench, 42 tasks,
one candidate each), each run with a cold compile cache of its own:

1. ``before``: the engine as `forge eval DIR` used it before the executors — one task after the other, each task's
   own model checked alone, then its candidates through `Evaluator.evaluate` (build workers overlap only
   within a task). In this process, through the engine's API.
2. ``local``: ``forge eval DIR --executor local`` — one worker per visible device, the build workers shared by every
   task (every task's candidates build while the device verifies and times those built).
3. ``ray``: ``forge eval DIR --executor ray`` — a single-node Ray instance started by forge (one actor per GPU, each
   with its share of the node's cores as build workers beside its device worker), cold and then warm.
4. ``local`` and ``ray`` again with their caches warm: what Ray adds per evaluation (Ray's start included, and
   without it), builds out of the picture.

Prints a table last: wall seconds, candidates per minute, how many correct, and Ray's overhead per evaluation;
each run's stage seconds summed over its candidates, and its timeline from ``forge eval --events`` (when the builds
and the device's work began and ended, seconds after the launch; builds at once), are printed with it and saved in
the JSON.
The ray runs need `pip install 'forge-lsp[ray]'`; without ray they are reported as not run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from forge_lsp.engine import Evaluator, load_candidate, load_task  # noqa: E402
from forge_lsp.usecases.evaluate import pair_directory  # noqa: E402

BATCH = ROOT / "corpus" / "kernelbench"
EXAMPLES = ROOT / "forge_lsp" / "examples"

#: a C++ (CPU) candidate for forge_lsp/examples/softmax_task.py, for the --small check on the CPU
SOFTMAX_CPP = r'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = r"""
#include <torch/extension.h>
#include <cmath>
#include <algorithm>
torch::Tensor row_softmax(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t rows = xc.size(0), cols = xc.size(1);
    const float* in = xc.data_ptr<float>();
    float* out = y.data_ptr<float>();
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = in + r * cols;
        float* yr = out + r * cols;
        float m = -INFINITY, s = 0.f;
        for (int64_t c = 0; c < cols; ++c) m = std::max(m, xr[c]);
        for (int64_t c = 0; c < cols; ++c) { yr[c] = std::exp(xr[c] - m); s += yr[c]; }
        for (int64_t c = 0; c < cols; ++c) yr[c] /= s;
    }
    return y;
}
"""
ext = load_inline(name="forge_bench_row_softmax", cpp_sources=source, functions=["row_softmax"], extra_cflags=["-O2"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.row_softmax(x)
'''


def small_directory(where: Path) -> Path:
    """Two tasks with one C++ candidate each: the bundled example and the row softmax."""
    where.mkdir(parents=True, exist_ok=True)
    shutil.copy(EXAMPLES / "bias_act_task.py", where / "bias_act_task.py")
    shutil.copy(EXAMPLES / "bias_act_cpp.py", where / "bias_act_task_cpp.py")
    shutil.copy(EXAMPLES / "softmax_task.py", where / "softmax_task.py")
    (where / "softmax_task_cpp.py").write_text(SOFTMAX_CPP)
    return where


def limited(tasks: Path, cands: Path, limit: int | None, where: Path) -> tuple[Path, Path]:
    """The first `limit` pairs of the directories, copied to `where` (all of them when no limit)."""
    if limit is None:
        return tasks, cands
    # two folders: a task and its candidate may have the same file name
    (where / "tasks").mkdir(parents=True, exist_ok=True)
    (where / "candidates").mkdir(parents=True, exist_ok=True)
    for task, cs in pair_directory(tasks, cands)[:limit]:
        shutil.copy(task, where / "tasks" / task.name)
        for c in cs:
            shutil.copy(c, where / "candidates" / c.name)
    return where / "tasks", where / "candidates"


def run_before(device: str, tasks: Path, cands: Path, cache: Path) -> dict:
    """The engine as `forge eval DIR` drove it before the executors: task after task."""
    t0 = time.perf_counter()
    statuses = []
    with Evaluator(device, cache_dir=cache) as ev:
        for task_path, cand_paths in pair_directory(tasks, cands):
            task = load_task(task_path)
            cs = [load_candidate(p) for p in cand_paths]
            ref = ev.check_reference(task)
            if not ref.ok:
                statuses += ["reference_failed"] * len(cs)
                continue
            statuses += [ev.evaluate(task, c).status.value for c in cs]
    return {"wall_s": time.perf_counter() - t0, "statuses": statuses}


def run_cli(executor: str, device: str, tasks: Path, cands: Path, cache: Path, timeout: float) -> dict:
    """`forge eval DIR --executor ...`, timed from outside (the interpreter's start included)."""
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0")
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    if device == "cpu":
        env.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")  # a CPU check: Ray on the loopback address only
    cmd = [sys.executable, "-m", "forge_lsp.cli.main", "eval", str(tasks), str(cands), "--device", device, "--json"]
    events = cache.parent / f"{cache.name}-{executor}-{time.time_ns()}.jsonl"
    cmd += ["--cache-dir", str(cache), "--executor", executor, "--events", str(events)]
    launched = time.time()
    t0 = time.perf_counter()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"wall_s": time.perf_counter() - t0, "statuses": [], "error": f"over {timeout:g} s"}
    wall = time.perf_counter() - t0
    try:
        results = json.loads(r.stdout)["results"]
    except (json.JSONDecodeError, KeyError, TypeError):
        return {"wall_s": wall, "statuses": [], "error": (r.stderr.strip().splitlines() or ["no output"])[-1]}
    stages = [x["verdict"].get("stages") or {} for x in results]
    return {
        "wall_s": wall,
        "statuses": [x["verdict"]["status"] for x in results],
        "rc": r.returncode,
        "stages": stages,  # each candidate's seconds per stage: where a run's time went
        "stage_totals": stage_totals(stages),
        "timeline": timeline(events, launched),
    }


def timeline(path: Path, launched: float) -> dict[str, float | None]:
    """From `forge eval --events`: when (seconds after the command was launched) the builds and the device's work
    began and ended, and how many builds ran at once on average."""
    try:
        events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except (OSError, json.JSONDecodeError):
        return {}

    def at(kind: str, stage: str | None = None) -> list[float]:
        return [e["t"] - launched for e in events if e["kind"] == kind and (stage is None or e["stage"] == stage)]

    starts, ends = at("build_started"), at("build_finished")
    stages, verdicts = at("stage"), at("verdict")
    span = (max(ends) - min(starts)) if starts and ends else None
    built = sum(ends) - sum(starts)  # build seconds, summed
    return {
        "first_build_s": round(min(starts), 2) if starts else None,
        "last_build_end_s": round(max(ends), 2) if ends else None,
        "builds_at_once": round(built / span, 2) if span else None,
        "first_device_stage_s": round(min(stages), 2) if stages else None,
        "last_verdict_s": round(max(verdicts), 2) if verdicts else None,
        # after the last build: the device's work on what was built last, and the executor's close
        "after_last_build_s": round(max(verdicts) - max(ends), 2) if verdicts and ends else None,
    }


def stage_totals(stages: list[dict]) -> dict[str, float]:
    """Seconds per stage summed over a run's candidates."""
    out: dict[str, float] = {}
    for st in stages:
        for k, v in st.items():
            if isinstance(v, (int, float)):
                out[k] = round(out.get(k, 0.0) + v, 3)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--tasks", type=Path, default=BATCH / "tasks")
    ap.add_argument("--candidates", type=Path, default=BATCH / "candidates")
    ap.add_argument("--limit", type=int, help="only the first N task/candidate pairs")
    ap.add_argument("--small", action="store_true", help="two C++ CPU candidates of two tasks (the CPU check)")
    ap.add_argument("--skip", action="append", default=[], choices=["before", "local", "ray"], help="leave a run out")
    ap.add_argument(
        "--again",
        action="store_true",
        help="last, the local pool cold once more on a new cache (torch's precompiled header, built once per machine, "
        "exists by then)",
    )
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds each run may take")
    ap.add_argument("--out", type=Path, help="write the results as JSON")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="forge-executor-bench-"))
    if args.small:
        tasks = cands = small_directory(work / "pairs")
    else:
        tasks, cands = limited(args.tasks, args.candidates, args.limit, work / "pairs")
    n = sum(len(cs) for _t, cs in pair_directory(tasks, cands))
    print(
        f"{n} candidates of {len(pair_directory(tasks, cands))} tasks on {args.device}; caches under {work}", flush=True
    )

    try:
        import ray  # noqa: F401

        have_ray = True
    except ImportError:
        have_ray = False
    runs: dict[str, dict] = {}
    plan = [
        ("before (task by task)", "before", "cold-before"),
        ("local pool, cold", "local", "cold-local"),
        ("ray, cold", "ray", "cold-ray"),
        ("local pool, warm", "local", "cold-local"),
        ("ray, warm", "ray", "cold-ray"),
    ]
    if args.again:
        plan.append(("local pool, cold, again", "local", "cold-local-again"))
    for label, kind, cache in plan:
        if kind in args.skip:
            continue
        if kind == "ray" and not have_ray:
            runs[label] = {"wall_s": None, "statuses": [], "error": "ray not installed (pip install 'forge-lsp[ray]')"}
            continue
        print(f"-- {label}", flush=True)
        if kind == "before":
            runs[label] = run_before(args.device, tasks, cands, work / cache)
        else:
            runs[label] = run_cli(kind, args.device, tasks, cands, work / cache, args.timeout)
        r = runs[label]
        print(
            f"   {r['wall_s']:.1f} s, {sum(s == 'correct' for s in r['statuses'])}/{n} correct {r.get('error', '')}",
            flush=True,
        )
        if r.get("stage_totals"):
            print("   stage seconds, summed: " + ", ".join(f"{k} {v:.1f}" for k, v in r["stage_totals"].items()))
        if r.get("timeline"):
            print("   timeline, s after launch: " + ", ".join(f"{k} {v}" for k, v in r["timeline"].items()))
        if args.out:  # after each run: a call cut short keeps what it measured
            args.out.write_text(json.dumps({"device": args.device, "candidates": n, "runs": runs}, indent=2))

    if args.out:
        args.out.write_text(json.dumps({"device": args.device, "candidates": n, "runs": runs}, indent=2))
    print()
    print(f"| run ({n} candidates, {args.device}) | wall s | candidates/min | correct |")
    print("| --- | ---: | ---: | ---: |")
    for label, r in runs.items():
        if r.get("wall_s") is None or not r["statuses"]:
            print(f"| {label} | — | — | not run: {r.get('error', '')} |")
            continue
        per_min = 60.0 * len(r["statuses"]) / r["wall_s"]
        print(f"| {label} | {r['wall_s']:.1f} | {per_min:.1f} | {sum(s == 'correct' for s in r['statuses'])}/{n} |")
    warm_local, warm_ray = runs.get("local pool, warm"), runs.get("ray, warm")
    if warm_local and warm_ray and warm_local.get("statuses") and warm_ray.get("statuses"):
        extra = (warm_ray["wall_s"] - warm_local["wall_s"]) / n
        print(f"\nRay's overhead per evaluation (warm caches, Ray's start included): {extra:+.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
