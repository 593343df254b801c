"""Whole-model optimization on the GPU machine: `forge optimize ENTRY --model-wide` against eager and against
`torch.compile(model)`, on the same inputs, one model at a time.

    PYTHONPATH=. python3 benchmarks/model_wide.py --device cuda:0 --models resnet --dtypes bfloat16 --top 1 \
        --out results.json

For each model and dtype: (1) `torch.compile(model)` vs eager in a fresh process (median of 30 forwards each,
after warm-up; TF32 off), (2) `forge optimize ENTRY --model-wide --top N` (offline candidates, no model
configured) with its end-to-end check (outputs against the original's, the forward timed with and without
the kept replacements, alternating), (3) head to head in one fresh process: eager, `torch.compile(model)` and
the model with forge's `forge_patch.apply` (eager when forge kept nothing), each on its own copy, timed in turn
for 40 rounds; forge's time over torch.compile's per round, its median with a bootstrap 95% interval. Prints a
short table last.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from forge_lsp.usecases.model_wide import load_model_wide_results  # noqa: E402

COMPILED = """
import sys, statistics, importlib.util, torch
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
spec = importlib.util.spec_from_file_location("m", sys.argv[1]); m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
model, args = m.build(size=sys.argv[4], dtype=sys.argv[2], device=sys.argv[3])
def timed(f, n=30):
    out = []
    with torch.no_grad():
        for _ in range(3):
            f(*args)
        for _ in range(n):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record(); f(*args); e.record(); e.synchronize(); out.append(s.elapsed_time(e))
    return statistics.median(out)
eager = timed(model)
compiled = torch.compile(model)
c = timed(compiled)
print(eager, c)
"""

HEAD_TO_HEAD = """
import sys, json, random, statistics, time, importlib.util, torch
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path); m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m); return m
m = load(sys.argv[1], "m")
build = lambda: m.build(size=sys.argv[4], dtype=sys.argv[2], device=sys.argv[3])
eager, args = build()
compiled = torch.compile(build()[0])
forge = build()[0]
if sys.argv[5] != "-":
    load(sys.argv[5], "forge_patch").apply(forge)
ways = {"eager": eager, "compile": compiled, "forge": forge}
def once(f):
    if not torch.cuda.is_available():
        t = time.perf_counter(); f(*args); return (time.perf_counter() - t) * 1e3
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record(); f(*args); e.record(); e.synchronize(); return s.elapsed_time(e)
ms = {k: [] for k in ways}
with torch.no_grad():
    for f in ways.values():
        for _ in range(5):
            f(*args)
    for r in range(40):
        order = list(ways) if r % 2 == 0 else list(reversed(ways))
        for k in order:
            ms[k].append(once(ways[k]))
ratio = [c / f for c, f in zip(ms["compile"], ms["forge"])]
rng = random.Random(0)
boot = sorted(statistics.median(rng.choices(ratio, k=len(ratio))) for _ in range(2000))
print(json.dumps({"ms": {k: statistics.median(v) for k, v in ms.items()},
                  "forge_over_compile": statistics.median(ratio), "ci95": [boot[50], boot[1949]]}))
"""


def _text(b: bytes | str | None) -> str:
    return b.decode(errors="replace") if isinstance(b, bytes) else (b or "")


def _run_logged(cmd: list[str], timeout: float, log_dir: Path | None, name: str) -> tuple[object, str, str]:
    """Run forge; its stderr (the progress lines) also goes to LOG_DIR/NAME.log as it comes, with the seconds
    since the start, so a run cut by the timeout still says where its time went."""
    import threading

    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    log = None
    if log_dir:
        log_dir.mkdir(parents=True, exist_ok=True)
        log = (log_dir / f"{name}.log").open("w", buffering=1)

    def pump() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            stamped = f"[{time.perf_counter() - t0:6.1f}] {line}"
            lines.append(stamped)
            if log:
                log.write(stamped)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        stdout, _ = proc.communicate(timeout=timeout)
        code: object = proc.returncode
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, _ = proc.communicate()
        code = "timeout"
    reader.join(5)
    if log:
        log.close()
    return code, stdout or "", "".join(lines)


def _stages(run_id: str) -> dict:
    """A module's run as the store has it: each candidate's origin, verdict and stage seconds."""
    from forge_lsp.agent.store import RunStore

    store = RunStore.for_workspace(ROOT)
    try:
        cands = store.candidates(run_id)
        return {
            "run_id": run_id,
            "candidates": [
                {
                    "id": c.id,
                    "origin": c.origin,
                    "status": c.verdict.status.value if c.verdict else c.status,
                    "speedup": c.speedup,
                    "reason": (c.verdict.reason or "")[:200] if c.verdict else "",
                    "stages": c.verdict.stages if c.verdict else {},
                }
                for c in cands
            ],
            "events": [
                [e.kind, round(e.ts, 1), getattr(e.event, "stage", None) or getattr(e.event, "candidate", None)]
                for e in store.events(run_id)
            ],
        }
    except Exception as exc:  # noqa: BLE001 - the benchmark's own record; the table is what matters
        return {"run_id": run_id, "error": str(exc)}
    finally:
        store.close()


def _head_to_head(model: str, dtype: str, args: argparse.Namespace, patch_file: str | None) -> dict:
    """Eager, `torch.compile(model)` and forge's answer timed in turn in one fresh process (`HEAD_TO_HEAD`)."""
    cmd = [sys.executable, "-c", HEAD_TO_HEAD, str(ROOT / f"examples/models/{model}.py"), dtype, args.device]
    try:
        proc = subprocess.run(
            cmd + [args.size, patch_file or "-"], capture_output=True, text=True, timeout=600, cwd=ROOT
        )
    except subprocess.TimeoutExpired:
        return {"error": "timed out after 600 s"}
    if proc.returncode != 0:
        return {"error": proc.stderr[-800:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--models", default="resnet")
    ap.add_argument("--dtypes", default="bfloat16")
    ap.add_argument("--size", default="full")
    ap.add_argument("--top", type=int, default=1)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--forge-timeout", type=float, default=1800.0, help="seconds for each forge run")
    ap.add_argument("--module-budget", type=float, help="forge's --module-budget (seconds for each hot module's run)")
    ap.add_argument("--log-dir", type=Path, help="write each forge run's output there as it comes (kept if cut)")
    ap.add_argument("--model-modes", help="forge's --model-modes (whole-model modes to try; default: forge's own)")
    args = ap.parse_args()
    rows = []
    for model in args.models.split(","):
        for dtype in args.dtypes.split(","):
            row: dict = {"model": model, "dtype": dtype}
            comp = subprocess.run(
                [
                    sys.executable,
                    "-c",
                    COMPILED,
                    str(ROOT / f"examples/models/{model}.py"),
                    dtype,
                    args.device,
                    args.size,
                ],
                capture_output=True,
                text=True,
                timeout=900,
            )
            if comp.returncode == 0:
                eager, compiled = (float(x) for x in comp.stdout.split()[-2:])
                row |= {"eager_ms": eager, "compiled_ms": compiled, "compile_speedup": eager / compiled}
            else:
                row["compile_error"] = comp.stderr[-800:]
            entry = f"examples/models/{model}.py:build(size='{args.size}', dtype='{dtype}')"
            t0 = time.perf_counter()
            t0_wall = time.time()
            cmd = [sys.executable, "-m", "forge_lsp.cli.main", "optimize", entry, "--model-wide"]
            cmd += ["--device", args.device, "--top", str(args.top)]
            if args.module_budget:
                cmd += ["--module-budget", str(args.module_budget)]
            if args.model_modes:
                cmd += ["--model-modes", args.model_modes]
            code, stdout, stderr = _run_logged(cmd, args.forge_timeout, args.log_dir, f"{model}-{dtype}")
            row["forge_s"] = round(time.perf_counter() - t0, 1)
            row["forge_exit"] = code
            results = load_model_wide_results(ROOT)
            if results and results[0].created >= t0_wall:
                res = results[0].to_json()
                check = res["check"] or {}
                row["modules"] = [
                    {
                        k: m[k]
                        for k in (
                            "name",
                            "total_pct",
                            "status",
                            "reason",
                            "speedup",
                            "instances",
                            "carried",
                            "not_carried",
                        )
                    }
                    for m in res["modules"]
                ]
                row["check"] = {k: v for k, v in check.items() if k != "outputs"}
                row["module_runs"] = [_stages(m["run_id"]) for m in res["modules"] if m.get("run_id")]
                row["outputs"] = check.get("outputs")
                row["patch_file"] = res["patch_file"]
                row["head_to_head"] = _head_to_head(model, dtype, args, res["patch_file"])
            row["forge_stdout"] = stdout[-3000:]
            row["forge_stderr"] = stderr[-3000:]
            rows.append(row)
            if args.out:  # after each model: a run cut short keeps what it measured
                args.out.write_text(json.dumps({"date": time.strftime("%Y-%m-%d %H:%M"), "rows": rows}, indent=1))
            print(json.dumps({k: v for k, v in row.items() if k not in ("forge_stderr",)})[:3000], flush=True)
    if args.out:
        args.out.write_text(json.dumps({"date": time.strftime("%Y-%m-%d %H:%M"), "rows": rows}, indent=1))
    print(
        "\n| model | dtype | eager ms | torch.compile(model) | forge: modules kept | modules alone "
        "| whole forward | forge end to end (95% CI) | outputs | forge s | same process: eager / compile / forge ms "
        "| forge vs torch.compile (95% CI) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        check = r.get("check") or {}
        mods = "; ".join(
            f"{m['name']} {m['status']}"
            + (f" {m['speedup']:.2f}x" if m.get("speedup") else "")
            + (f" +{len(m['carried'])} carried" if m.get("carried") else "")
            for m in r.get("modules", [])
        )
        alone = f"{check['modules_speedup']:.2f}x" if check.get("modules_speedup") else "-"
        modes = ", ".join(
            f"{m['mode']} {m['speedup']:.2f}x"
            if m.get("ok") and m.get("speedup")
            else f"{m['mode']} {'not tried' if str(m.get('why', '')).startswith('not tried') else 'refused'}"
            for m in check.get("model_modes", [])
        )
        chosen = check.get("model_mode")
        e2e = (
            f"{check['speedup']:.2f}x ({check['ci'][0]:.2f}-{check['ci'][1]:.2f})" + (f" [{chosen}]" if chosen else "")
            if check.get("speedup") and check.get("ci")
            else "unchanged (1.00x)"
            if r.get("forge_exit") == 0
            else f"exit {r.get('forge_exit')}"
        )
        outs = r.get("outputs") or []
        match = ("match" if all(o.get("ok") for o in outs) else "DIFFER") + (
            f" (worst {max((o.get('max_abs') or 0.0) for o in outs):.3g})" if outs else ""
        )
        print(
            f"| {r['model']} | {r['dtype']} | {r.get('eager_ms', 0):.2f} | {r.get('compiled_ms', 0):.2f} ms "
            f"({r.get('compile_speedup', 0):.2f}x) | {mods or '-'} | {alone} | {modes or '-'} | {e2e} | {match} "
            f"| {r['forge_s']} | {_h2h_cells(r.get('head_to_head'))} |"
        )
    return 0


def _h2h_cells(h: dict | None) -> str:
    if not h:
        return "- | -"
    if "error" in h:
        return f"failed: {h['error'][-60:]!r} | -"
    ms = h["ms"]
    lo, hi = h["ci95"]
    return (
        f"{ms['eager']:.2f} / {ms['compile']:.2f} / {ms['forge']:.2f} "
        f"| {h['forge_over_compile']:.3f}x ({lo:.3f}-{hi:.3f})"
    )


if __name__ == "__main__":
    sys.exit(main())
