"""What an explanation costs today: `forge explain`'s use case on the profiler's flawed kernels and on model-written
load_inline kernels, and the Judge's profile inside a round, each timed on the GPU machine.

    python benchmarks/explain_speed.py [--budget S] [--out FILE.json]

For each case and each profiling path asked for (CUPTI in the profiled process, then ncu): `explain` twice (the first
builds the candidate; the second finds it built: the figure "not counting the build"), with the path that ran, top finding, hot line and the profiled process's own stages;
then the Judge's profile (`judge_feedback`) for the first cases. No case starts past --budget seconds. Prints a short
table last.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "corpus" / "profiler"))

from candidates import CASES  # noqa: E402

from forge_lsp.engine import Candidate, load_task  # noqa: E402
from forge_lsp.profiler.spare import shared  # noqa: E402
from forge_lsp.usecases.explain import ProfileRequest, explain, judge_feedback  # noqa: E402

BATCH = ROOT / "corpus" / "kernelbench"
#: model-written load_inline kernels of the KernelBench-style batch (their tasks share the file name)
LOAD_INLINE = ["level1_19_ReLU", "level1_23_Softmax", "level1_36_RMSNorm_", "level2_76_Gemm_Add_ReLU"]


def cases(work: Path) -> list[tuple[str, Path, Path, str]]:
    """(name, task file, candidate file, expected top finding or "")."""
    flawed = []
    for task_file, name, expected, _marker, source in CASES:
        cand = work / f"{name}.py"
        cand.write_text(source)
        flawed.append((name, ROOT / "corpus" / "profiler" / task_file, cand, expected))
    inline = [(s, BATCH / "tasks" / f"{s}.py", BATCH / "candidates" / f"{s}.py", "") for s in LOAD_INLINE]
    # one of each in turn: a run cut by its budget still has both kinds
    return [case for pair in zip(flawed, inline, strict=True) for case in pair]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--budget", type=float, default=300.0, help="seconds: no case starts past it")
    ap.add_argument("--judge-cases", type=int, default=2, help="cases whose Judge profile is timed too")
    ap.add_argument(
        "--paths", default="cupti,cold,ncu", help="the profiling paths to time, in order (cupti, cold, ncu)"
    )
    ap.add_argument("--cases", default="", help="only the cases whose name contains one of these (comma-separated)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    wanted = [w for w in args.cases.split(",") if w]
    work = Path(tempfile.mkdtemp(prefix="explain-speed-"))
    cache = work / "cache"
    t_start = time.perf_counter()
    rows: list[dict] = []
    chosen = [c for c in cases(work) if not wanted or any(w in c[0] for w in wanted)]
    for i, (name, task_file, cand_file, expected) in enumerate(chosen):
        if time.perf_counter() - t_start > args.budget:
            print(f"{name}: not started (past the {args.budget:g} s budget)")
            continue
        row: dict = {"case": name, "expected": expected}
        for path in args.paths.split(","):
            row[path] = explain_case(task_file, cand_file, args.device, cache, path)
        if i < args.judge_cases:
            feedback = judge_feedback(args.device, cache_dir=cache)
            assert feedback is not None
            row["judge_spare_ready"] = shared().wait_ready(args.device, cache)  # a round's Coder call gives it time
            t0 = time.perf_counter()
            fb = feedback(load_task(task_file), Candidate.from_source(cand_file.read_text(), cand_file.stem))
            row["judge_s"] = round(time.perf_counter() - t0, 2)
            row["judge_mode"] = (fb or {}).get("mode")
            row["judge_top"] = ((fb or {}).get("findings") or [{}])[0].get("rule", "-")
        rows.append(row)
        print(json.dumps(row), flush=True)
    summary = {}
    for path in args.paths.split(","):
        built = [r[path]["built_s"] for r in rows if "built_s" in r.get(path, {})]
        first = [r[path]["first_s"] for r in rows if "first_s" in r.get(path, {})]
        summary[path] = {
            "median_built_s": statistics.median(built) if built else None,
            "median_first_s": statistics.median(first) if first else None,
        }
    summary["judge_s"] = [r["judge_s"] for r in rows if "judge_s" in r]
    if args.out:
        args.out.write_text(json.dumps({"rows": rows, "summary": summary}, indent=1))
    for path in args.paths.split(","):
        print(f"\n== explain, {path} path asked for (seconds wall; 'built': the candidate already built) ==")
        print(f"{'case':30s} {'ran':6s} {'first':>6s} {'built':>6s}  {'top finding':26s} {'line':22s} expected")
        for r in rows:
            c = r.get(path, {})
            print(
                f"{r['case'][:30]:30s} {c.get('mode', '-')[:6]:6s} {c.get('first_s', 0):6.1f} {c.get('built_s', 0):6.1f}"
                f"  {c.get('top', c.get('error', '-'))[:26]:26s} {c.get('line', '')[:22]:22s} {r['expected'] or '-'}"
            )
        print(f"{path}: median built {summary[path]['median_built_s']} s, first {summary[path]['median_first_s']} s")
    print(
        "judge:",
        [(r["case"], r.get("judge_s"), r.get("judge_mode"), r.get("judge_top")) for r in rows if "judge_s" in r],
    )
    return 0


def explain_case(task_file: Path, cand_file: Path, device: str, cache: Path, path: str) -> dict:
    """`explain` twice on one path (the first builds the candidate; the second finds it built): the seconds of
    each, the path that ran, the top finding and its line, the profiled process's stages. Paths: ``ncu``;
    ``cold`` (in the process, a new process each time, as the one-shot CLI does); ``cupti`` (in the process, in a
    spare started ahead, as the language server and the Judge do: the spare is ready before the clock starts)."""
    out: dict = {}
    req = ProfileRequest(
        target=task_file, candidate=cand_file, device=device, cache_dir=cache, in_process=path != "ncu"
    )
    for label in ("first", "built"):
        if path == "cupti":
            out[f"{label}_spare_ready"] = shared().wait_ready(device, cache)
        t0 = time.perf_counter()
        try:
            res = explain(req, keep_spare=path == "cupti")
        except Exception as exc:  # noqa: BLE001 - said in the row
            out[f"{label}_s"] = round(time.perf_counter() - t0, 2)
            out["error"] = f"{type(exc).__name__}: {exc}"[:300]
            break
        out[f"{label}_s"] = round(time.perf_counter() - t0, 2)
        top = res.top
        out.update(
            mode=res.result.mode,
            reason=res.result.reason[:300],
            kernels=len(res.result.kernels),
            stages=res.result.stages_s,
            profile_s=round(res.result.seconds, 2),
            top=(top.findings[0].rule if top and top.findings else "-"),
            line=(
                f"{Path(top.findings[0].lines[0].file).name}:{top.findings[0].lines[0].line}"
                if top and top.findings and top.findings[0].lines
                else ""
            ),
            log=res.result.log_excerpt[-1500:] if res.result.mode == "degraded" else "",
        )
    return out


if __name__ == "__main__":
    sys.exit(main())
