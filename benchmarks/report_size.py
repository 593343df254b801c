"""How big and how fast `forge report` is on a large run: a synthetic 500-candidate run.

    .venv/bin/python benchmarks/report_size.py [--candidates 500] [--browser] [--keep DIR]

The run is written through the real `RunStore` API into a temporary workspace, shaped like a long MCTS run on
a GPU: 20 rounds, each candidate a child of an earlier one (failed ones get repair children), every candidate
with a Judge call and a Coder call whose prompts carry the task's source, the parent's source and the Judge's
advice, as the agent's prompts do, and a few failed model calls. Sources are the CUDA (NVRTC) and Triton
candidates of `corpus/ops/candidates/` (3-5 KB each), each made distinct (a tuned constant, a comment, a
changed line). Verdicts: about half correct (timing with its interval, the engine's checks), the others compile
errors with a log excerpt, wrong results with their worst mismatch, runtime errors with a traceback, timeouts,
crashes; 30 candidates are left queued (never evaluated). One correct candidate in ten has profiler findings
with source lines, and its `profiled` event carries a roofline placement (the shape `forge report` reads;
the agent itself records the percentage of the roof only).

Measured: the use case's time to gather and render (`usecases.report.write_run_report`, best of 3), the
file's size, and with `--browser` the time headless Chromium (Debian's, driven by Playwright) takes from
navigation to the page being drawn. Targets (issue 16): <= 2 s to render, <= 5 MB.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from forge_lsp.agent.run_events import (  # noqa: E402
    CandidateFailed,
    CandidateQueued,
    CandidateTimed,
    CandidateVerified,
    ModelCall,
    NewBest,
    Profiled,
    Round,
    RunFinished,
    RunStarted,
)
from forge_lsp.agent.store import RunStore  # noqa: E402
from forge_lsp.engine.verdict import Check, Mismatch, Status, Timing, TimingStats, Verdict  # noqa: E402

TASK = (ROOT / "corpus" / "ops" / "candidates" / "softmax_nvrtc.py").read_text()
POOL = [p.read_text() for p in sorted((ROOT / "corpus" / "ops" / "candidates").glob("*.py"))]
PROMPTS = ROOT / "prompts"
CHECKS = [
    "checkpoint_compatible",
    "outputs_match",
    "varied_shapes",
    "trained_parameters",
    "noncontiguous_inputs",
    "input_range",
    "inputs_unchanged",
    "no_output_aliasing",
    "no_monkeypatching",
    "uninitialized_memory",
    "timed_outputs_match",
    "deterministic",
]


def distinct(source: str, i: int, rng: random.Random) -> str:
    lines = source.splitlines()
    for _ in range(3):
        j = rng.randrange(len(lines))
        lines.insert(
            j,
            f"    # tuning note {i}-{j}: BLOCK={rng.choice([64, 128, 256, 512, 1024])}"
            if lines[j].startswith(" ")
            else f"# candidate {i}, variant {j}",
        )
    return "\n".join(lines) + f"\nFORGE_VARIANT = {i}\n"


def stats(ms: float, rng: random.Random) -> TimingStats:
    return TimingStats(
        median_ms=ms, mean_ms=ms * 1.01, min_ms=ms * 0.97, p10_ms=ms * 0.98, p90_ms=ms * 1.04, n=rng.randint(60, 200)
    )


def verdict_for(state: str, i: int, rng: random.Random) -> Verdict:
    checks = [Check(name=n, passed=True, detail="ok", seconds=rng.uniform(0.01, 0.4)) for n in CHECKS]
    common = {
        "device": "cuda:0",
        "device_name": "NVIDIA H200",
        "backend": "nvrtc",
        "stages": {
            "compile": rng.uniform(0.05, 2.0),
            "first_call": 0.1,
            "verify": rng.uniform(0.3, 1.5),
            "time": rng.uniform(0.5, 3.0),
        },
    }
    if state == "correct":
        ref = 0.143
        cand = ref / rng.uniform(0.6, 2.4)
        sp = ref / cand
        timing = Timing(
            mode="events",
            reference=stats(ref, rng),
            candidate=stats(cand, rng),
            speedup=sp,
            speedup_ci95=(sp * 0.96, sp * 1.04),
            l2_flush=True,
        )
        return Verdict(status=Status.correct, checks=checks, timing=timing, checkpoint_compatible=True, **common)
    if state == "compile_error":
        log = "\n".join(f'nvrtc: candidate.cu({40 + k}): error: identifier "blockDimx" is undefined' for k in range(30))
        return Verdict(
            status=Status.compile_error,
            reason='NVRTC compilation failed: identifier "blockDimx" is undefined',
            failed_check="compile",
            log_excerpt=log,
            **common,
        )
    if state == "incorrect":
        checks[1] = Check(name="outputs_match", passed=False, detail="values differ at 1.2% of elements")
        mismatch = Mismatch(
            input_set="seed 0",
            output="out",
            problem="values",
            detail="max abs error 0.031 > atol 1e-4",
            max_abs_error=0.031,
            max_rel_error=0.2,
            index=[17, 4093],
            expected=0.00123,
            actual=0.0321,
            bad_fraction=0.012,
        )
        return Verdict(
            status=Status.incorrect,
            reason="outputs differ from the reference",
            failed_check="outputs_match",
            checks=checks[:2],
            mismatch=mismatch,
            **common,
        )
    if state == "runtime_error":
        tb = (
            "Traceback (most recent call last):\n"
            + "\n".join(
                f'  File "candidate.py", line {30 + k}, in forward\n    y = kernel(grid=grid, block=block, args=(x, out, n))'
                for k in range(12)
            )
            + "\nRuntimeError: CUDA error: an illegal memory access was encountered"
        )
        return Verdict(
            status=Status.runtime_error,
            reason="CUDA error: an illegal memory access was encountered",
            failed_check="first_call",
            traceback=tb,
            **common,
        )
    if state == "timeout":
        return Verdict(
            status=Status.timeout,
            reason="the verify stage ran over 120 s and was killed",
            failed_check="verify",
            **common,
        )
    return Verdict(status=Status.crashed, reason="the worker died with SIGSEGV", failed_check="first_call", **common)


def findings(rng: random.Random) -> list[dict]:
    return [
        {
            "rule": rule,
            "title": title,
            "severity": rng.uniform(0.2, 0.9),
            "evidence": {"l2_sectors_per_request": rng.uniform(4, 16), "ideal": 4.0},
            "suggestion": "load a row's elements with consecutive threads (coalesced), or stage the tile through shared memory",
            "lines": [
                {
                    "file": "candidate.py",
                    "line": 40 + k,
                    "stall_pct": rng.uniform(2, 30),
                    "dominant_stall": "long_scoreboard",
                    "source": "float v = x[row * n + col];",
                }
                for k in range(3)
            ],
        }
        for rule, title in (
            ("uncoalesced_global_access", "Uncoalesced global loads"),
            ("low_occupancy", "Low occupancy: 24 registers spill"),
        )
    ]


def build(workspace: Path, n: int, seed: int = 0) -> str:
    rng = random.Random(seed)
    store = RunStore.for_workspace(workspace)
    system_coder = (
        (PROMPTS / "coder_system.j2").read_text()
        + (PROMPTS / "engine_rules.j2").read_text()
        + (PROMPTS / "reply_format.j2").read_text()
    )
    system_judge = (PROMPTS / "judge_system.j2").read_text()
    run = store.create_run(
        workspace / "softmax.py",
        "Model",
        TASK,
        {
            "device": "cuda:0",
            "coder": "gpt-5",
            "judge": "gpt-5",
            "options": {"search": "mcts", "rounds": 20, "concurrency": 25, "offline": True},
        },
    )
    store.add_event(run, RunStarted(resumed=False, task="softmax.py", model_configured=True))
    ids: list[str] = []
    state_of: dict[str, str] = {}
    per_round = max(1, n // 20)
    best = 0.0
    for i in range(n):
        rnd = i // per_round + 1
        if i % per_round == 0:
            store.add_event(run, Round(round=rnd, of=20, targets=[], best_speedup=best or None))
        parent = rng.choice(ids) if ids and rng.random() < 0.9 else None
        origin = "repair" if parent and state_of[parent] != "correct" else "coder"
        source = distinct(rng.choice(POOL), i, rng)
        parent_source = store.get_candidate(parent).source if parent else TASK
        advice = f"Bottleneck: one pass per row re-reads the input. Method: fuse the max and the sum. Plan {i}: keep the row in registers; BLOCK={rng.choice([128, 256, 512])}."
        judge_msgs = [
            {"role": "system", "content": system_judge},
            {
                "role": "user",
                "content": f"Task:\n{TASK}\n\nCandidate:\n{parent_source}\n\nTiming: 0.143 ms reference.\nFindings: uncoalesced loads at line 41.",
            },
        ]
        failed = rng.random() < 0.04
        store.add_call(
            run,
            role="judge",
            model="gpt-5",
            messages=judge_msgs,
            reply_text=""
            if failed
            else json.dumps({"bottleneck": "one pass per row", "method": "fuse", "plan": advice}),
            parsed=None if failed else {"plan": advice},
            prompt_tokens=3000 + rng.randint(0, 900),
            completion_tokens=200 + rng.randint(0, 100),
            cost_usd=0.004,
            latency_s=rng.uniform(2, 9),
            error="rate_limit: 429 Too Many Requests" if failed else None,
            candidate_id=parent,
        )
        store.add_event(
            run, ModelCall(role="judge", ok=not failed, prompt_tokens=3000, completion_tokens=250, cost_usd=0.004)
        )
        coder_msgs = [
            {"role": "system", "content": system_coder},
            {"role": "user", "content": f"Task:\n{TASK}\n\nParent:\n{parent_source}\n\nInstruction:\n{advice}"},
        ]
        store.add_call(
            run,
            role="coder",
            model="gpt-5",
            messages=coder_msgs,
            reply_text=json.dumps({"summary": f"variant {i}", "source": source}),
            parsed={"summary": f"variant {i}"},
            prompt_tokens=4000 + rng.randint(0, 1500),
            completion_tokens=1200 + rng.randint(0, 600),
            cost_usd=0.02,
            latency_s=rng.uniform(10, 40),
            candidate_id=parent,
        )
        store.add_event(
            run, ModelCall(role="coder", ok=True, prompt_tokens=4500, completion_tokens=1500, cost_usd=0.02)
        )
        rec = store.add_candidate(
            run,
            source,
            parent_id=parent,
            origin=origin,
            summary=f"{'repair' if origin == 'repair' else 'variant'} {i}: fused max/sum, BLOCK tuned",
            instruction=advice,
        )
        store.add_event(run, CandidateQueued(candidate=rec.id, parent=parent, origin=origin))
        ids.append(rec.id)
        if i >= n - 30:
            state_of[rec.id] = "queued"
            continue
        state = rng.choices(
            ["correct", "compile_error", "incorrect", "runtime_error", "timeout", "crashed"], [55, 15, 12, 10, 5, 3]
        )[0]
        state_of[rec.id] = state
        v = verdict_for(state, i, rng)
        store.set_verdict(rec.id, v, correct=state == "correct", speedup=v.speedup if state == "correct" else None)
        if state == "correct":
            store.add_event(run, CandidateVerified(candidate=rec.id))
            store.add_event(run, CandidateTimed(candidate=rec.id, speedup=v.speedup))
            if (v.speedup or 0) > best:
                best = v.speedup or 0
                store.add_event(run, NewBest(candidate=rec.id, speedup=best))
            if rng.random() < 0.1:
                store.set_findings(rec.id, findings(rng))
                ai = rng.uniform(0.2, 2.0)
                store.add_event(
                    run,
                    Profiled(
                        candidate=rec.id,
                        phase="done",
                        pct_of_roof=rng.uniform(20, 80),
                        roofline={
                            "arithmetic_intensity": ai,
                            "achieved_flops_per_s": ai * 4.8e12 * rng.uniform(0.2, 0.8),
                            "achieved_bytes_per_s": 3e12,
                            "bound": "memory",
                            "pct_of_roof": 55.0,
                        },
                    ),
                )
        else:
            store.add_event(run, CandidateFailed(candidate=rec.id, status=state, reason=v.reason))
    best_rec = max((store.get_candidate(c) for c in ids if state_of[c] == "correct"), key=lambda r: r.speedup or 0)
    store.set_run_status(run, "done", "rounds", best_rec.id)
    store.add_event(run, RunFinished(status="done", best=best_rec.id))
    store.close()
    return run


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--candidates", type=int, default=500)
    ap.add_argument("--browser", action="store_true", help="also time headless Chromium drawing the page")
    ap.add_argument("--keep", type=Path, help="write the workspace here instead of a temporary folder")
    args = ap.parse_args()
    from forge_lsp.usecases.report import write_run_report

    with tempfile.TemporaryDirectory() as tmp:
        workspace = args.keep or Path(tmp)
        workspace.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        run = build(workspace, args.candidates)
        built = time.perf_counter() - t0
        times = []
        for _ in range(3):
            result = write_run_report(workspace, run)
            times.append(result.seconds)
        db = (workspace / ".forge" / "runs.sqlite").stat().st_size
        browser = None
        if args.browser:
            browser = open_in_chromium(result.path)
        print(f"run {run}: {args.candidates} candidates written in {built:.1f} s; database {db / 1e6:.1f} MB")
        print(f"report: {result.path}")
        print()
        print("| candidates | render (best of 3) | file size | database | Chromium: page drawn |")
        print("| --- | --- | --- | --- | --- |")
        print(
            f"| {result.candidates} | {min(times):.2f} s | {result.bytes / 1e6:.2f} MB | {db / 1e6:.1f} MB | "
            f"{f'{browser:.2f} s' if browser is not None else '-'} |"
        )
    return 0


def open_in_chromium(path: Path) -> float:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        t0 = time.perf_counter()
        page.goto(path.resolve().as_uri())
        page.wait_for_selector("body[data-ready]", timeout=60_000)
        seconds = time.perf_counter() - t0
        browser.close()
    return seconds


if __name__ == "__main__":
    sys.exit(main())
