"""Engine speed and timing stability on a GPU (run on the GPU machine; results go in BENCHMARKS.md).

    python benchmarks/eval_speed.py [--out results.json]

1. Triton + NVRTC candidates of corpus/ops/tasks: cold compile cache, evaluated with
   one lane of a `LocalPool` (builds overlap timing; the device worker loads each task and draws its inputs
   ahead, once); per-stage seconds and the median total.
2. The load_inline CUDA candidate: cold (fresh cache, single arch), then cached.
3. Stability: the same candidate timed twice; the two speedups must agree within 3%.
4. What each verification check costs (its `seconds` in the verdict, median and max over the correct
   candidates), and compute-sanitizer's final-acceptance run, reported apart (`--sanitize NAME ...`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from forge_lsp.engine import EvalOptions, load_candidate, load_task  # noqa: E402
from forge_lsp.engine.local_pool import LocalPool  # noqa: E402
from forge_lsp.usecases.evaluate import pair_directory  # noqa: E402

TASKS, CANDS = ROOT / "corpus" / "ops" / "tasks", ROOT / "corpus" / "ops" / "candidates"


def row(name, v):
    s = v.stages
    return {
        "candidate": name,
        "status": v.status.value,
        "backend": v.backend,
        "build": s.get("build", 0.0),
        "prepare": s.get("prepare", 0.0),  # the task's inputs drawn once per batch, overlapped with the builds
        "compile": s.get("compile", 0.0),
        "first_call": s.get("first_call", 0.0),
        "verify": s.get("verify", 0.0),
        "time": s.get("time", 0.0),
        "judge_draw": s.get("judge_draw", 0.0),  # the judge's input sets and reference, once per task
        "judge": s.get("judge", 0.0),  # the judge's comparison of the candidate's outputs
        "device_wait": s.get("device_wait", 0.0),
        "total": s.get("total", 0.0) + s.get("build", 0.0),
        "ref_ms": v.timing.reference.median_ms if v.timing else None,
        "cand_ms": v.timing.candidate.median_ms if v.timing else None,
        "speedup": v.speedup,
        "ci": v.timing.speedup_ci95 if v.timing else None,
        "mode": v.timing.mode if v.timing else None,
        "reason": v.reason[:120],
        "checks": {c.name: c.seconds for c in v.checks if c.seconds is not None},
        "stages": dict(s),  # every stage, the parent's (worker_start, send, judge) and the worker's
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path)
    ap.add_argument("--skip-inline", action="store_true")
    ap.add_argument("--skip-fast", action="store_true")
    ap.add_argument(
        "--fast-only", action="store_true", help="part 1 only (no stability pairs, load_inline or sanitizer runs)"
    )
    ap.add_argument("--pch", nargs="*", default=["1", "0"], help="FORGE_LOAD_INLINE_PCH values to try")
    ap.add_argument(
        "--sanitize",
        nargs="*",
        default=["softmax_triton", "softmax_nvrtc"],
        help="candidates to run under compute-sanitizer after their verdict (its time is reported apart)",
    )
    args = ap.parse_args()
    if args.fast_only:
        args.skip_inline, args.sanitize = True, []
    results: dict = {
        "device": None,
        "date": time.strftime("%Y-%m-%d"),
        "fast": [],
        "inline": [],
        "stability": [],
        "sanitize": [],
    }
    opts = EvalOptions(timing_budget_s=0.5)

    # 1. Triton + NVRTC, cold cache, overlapped builds
    with (
        tempfile.TemporaryDirectory() as cache,
        LocalPool("cuda:0", options=opts, cache_dir=Path(cache), lanes=1) as ev,
    ):
        hello = ev.hello()
        results["device"] = hello.device_name
        t_all = time.perf_counter()
        for task_path, cand_paths in [] if args.skip_fast else pair_directory(TASKS, CANDS):
            task = load_task(task_path)
            cands = [load_candidate(p) for p in cand_paths if p.stem.endswith(("_triton", "_nvrtc"))]
            for c, v in zip(cands, ev.evaluate_many(task, cands), strict=False):
                results["fast"].append(row(c.name, v))
                print(
                    f"{c.name:28s} {v.status.value:10s} total {results['fast'][-1]['total']:.2f}s "
                    f"speedup {v.speedup or 0:.3f} {v.reason[:80]}",
                    flush=True,
                )
        results["fast_wall_s"] = time.perf_counter() - t_all

        # 3. stability: same candidate twice (a kernel >= 50 us)
        for name in (
            ()
            if args.fast_only
            else (
                "softmax_triton",
                "softmax_nvrtc",
                "layernorm_nvrtc",
                "layernorm_triton",
                "row_sum_triton",
                "bias_gelu_nvrtc",
                "rmsnorm_triton",
            )
        ):
            path = CANDS / f"{name}.py"
            if not path.exists():
                continue
            task = load_task(TASKS / f"{name.rsplit('_', 1)[0]}.py")
            a = ev.evaluate(task, load_candidate(path))
            b = ev.evaluate(task, load_candidate(path))
            if a.timing and b.timing:
                results["stability"].append(
                    {
                        "candidate": name,
                        "cand_ms": a.timing.candidate.median_ms,
                        "speedup_1": a.speedup,
                        "speedup_2": b.speedup,
                        "diff_pct": abs(a.speedup - b.speedup) / a.speedup * 100,
                        "runs": [v.timing.model_dump() for v in (a, b)],
                    }
                )

        # 4. compute-sanitizer, as in final acceptance: reported apart from the verdict's own cost
        for name in args.sanitize:
            path = CANDS / f"{name}.py"
            task = load_task(TASKS / f"{name.rsplit('_', 1)[0]}.py")
            cand = load_candidate(path)
            v = ev.evaluate(task, cand)
            t0 = time.perf_counter()
            ev.evaluators[ev.device].sanitize_into(v, task, cand)  # the lane's own Evaluator
            check = next(c for c in v.checks if c.name == "sanitizer")
            results["sanitize"].append(
                {
                    "candidate": name,
                    "wall_s": time.perf_counter() - t0,
                    "tools_s": check.seconds,
                    "passed": check.passed,
                    "detail": check.detail[:300],
                }
            )

    # 2. load_inline CUDA, single arch (the worker sets TORCH_CUDA_ARCH_LIST), fresh cache:
    #    first build on this machine (may include building the precompiled header), then a
    #    different source (a true cold build with the PCH present), then the same again (cached).
    inline = CANDS / "softmax_load_inline.py"
    if inline.exists() and not args.skip_inline:
        task = load_task(TASKS / "softmax.py")
        base = load_candidate(inline)
        for pch in args.pch:
            os.environ["FORGE_LOAD_INLINE_PCH"] = pch
            with (
                tempfile.TemporaryDirectory() as cache,
                LocalPool("cuda:0", options=opts, cache_dir=Path(cache), lanes=1) as ev,
            ):
                runs = {}
                for label, src in (
                    ("first", base.source),
                    (
                        "cold",
                        base.source.replace(
                            "cudaStream_t stream = at::cuda::getCurrentCUDAStream();",
                            "cudaStream_t stream = at::cuda::getCurrentCUDAStream();  // variant",
                        ),
                    ),
                    ("cached", base.source),
                ):
                    t0 = time.perf_counter()
                    v = ev.evaluate(task, base.model_copy(update={"source": src}))
                    runs[label] = dict(row(base.name, v), wall=time.perf_counter() - t0)
                steps = {}
                for log in Path(cache).glob("torch_extensions/*/.ninja_log"):
                    for line in log.read_text().splitlines()[1:]:
                        start, end, _, target, _ = line.split("\t")
                        steps[f"{log.parent.name[-6:]}:{target}"] = (int(end) - int(start)) / 1000
            results["inline"].append({"pch": pch, **runs, "ninja_steps_s": steps})

    if args.out:
        args.out.write_text(json.dumps(results, indent=2))

    fast = results["fast"]
    totals = [r["total"] for r in fast if r["status"] == "correct"]
    sealed = "pipes" if os.environ.get("FORGE_JUDGE_SEALED") == "0" else "sealed file where supported"
    print(f"\n== forge eval speed on {results['device']} ({results['date']}; judge's sets: {sealed}) ==")
    print(
        f"{'candidate':28s} {'status':9s} {'prep':>5s} {'build':>6s} {'compile':>7s} {'1stcall':>7s} {'verify':>6s} "
        f"{'time':>5s} {'jdraw':>5s} {'judge':>5s} {'total':>6s} {'ref ms':>8s} {'cand ms':>8s} {'speedup':>7s}"
    )
    for r in fast:
        print(
            f"{r['candidate']:28s} {r['status'][:9]:9s} {r['prepare']:5.2f} {r['build']:6.2f} {r['compile']:7.2f} {r['first_call']:7.2f} "
            f"{r['verify']:6.2f} {r['time']:5.2f} {r.get('judge_draw', 0):5.2f} {r.get('judge', 0):5.2f} {r['total']:6.2f} "
            f"{r['ref_ms'] or 0:8.4f} {r['cand_ms'] or 0:8.4f} "
            f"{r['speedup'] or 0:7.3f}"
        )
        parts = sorted(((k, x) for k, x in r["stages"].items() if k != "total" and x >= 0.02), key=lambda kv: -kv[1])
        print("    " + "  ".join(f"{k} {x:.2f}" for k, x in parts))
    if totals:
        print(
            f"median total per candidate (Triton+NVRTC, {len(totals)} correct): {statistics.median(totals):.2f} s; "
            f"batch wall {results['fast_wall_s']:.1f} s"
        )
    costs: dict[str, list[float]] = {}
    for r in fast:
        if r["status"] == "correct":
            for name, sec in r["checks"].items():
                costs.setdefault(name, []).append(sec)
    if costs:
        print(
            "check cost per candidate (s):  "
            + "  ".join(f"{n} {statistics.median(x):.3f}/{max(x):.3f}" for n, x in sorted(costs.items()))
            + "   (median/max)"
        )
    for r in results["sanitize"]:
        print(
            f"sanitizer {r['candidate']:18s}: {r['wall_s']:.1f} s wall (tools {r['tools_s']} s), "
            f"{'passed' if r['passed'] else 'FAILED'}: {r['detail'][:160]}"
        )
    for r in results["inline"]:
        print(
            f"load_inline pch={r['pch']}: "
            + "; ".join(
                f"{k} compile {r[k]['compile']:.1f}s total {r[k]['total']:.2f}s ({r[k]['status']})"
                for k in ("first", "cold", "cached")
            )
        )
        print("  ninja steps: " + ", ".join(f"{k} {v:.1f}s" for k, v in r["ninja_steps_s"].items()))
    for r in results["stability"]:
        a, b = r["runs"]
        print(
            f"stability {r['candidate']:18s}: cand {a['candidate']['median_ms'] * 1000:.1f}/{b['candidate']['median_ms'] * 1000:.1f} us"
            f" ref {a['reference']['median_ms'] * 1000:.1f}/{b['reference']['median_ms'] * 1000:.1f} us, speedups "
            f"{r['speedup_1']:.4f} / {r['speedup_2']:.4f}, diff {r['diff_pct']:.2f}% (n={a['candidate']['n']}, {a['mode']})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
