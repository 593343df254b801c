"""The figures the README states, measured the way a user meets them (CPU machine).

* the fast loop: `./dev test --fast -q`, its wall time and how many tests it ran (several runs);
* the bundled example: `forge eval forge_lsp/examples/bias_act_task.py forge_lsp/examples/bias_act_cpp.py
  --device cpu --json`, run a few times from the command line, each run's speedup and 95% interval, after
  one untimed run on an empty compile cache, which builds the extension (the "first run").

    python benchmarks/readme_figures.py [--fast-runs 2] [--example-runs 5] [--out FILE]

The JSON (default `benchmarks/results/<date>-cpu-readme-figures.json`) is what `tests/test_readme_figures.py`
holds the README to: the README's figures must be this file's, for the example files this file measured
(their hashes are in it). Run it on a quiet machine and copy its last table into the README and BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE_TASK = ROOT / "forge_lsp" / "examples" / "bias_act_task.py"
EXAMPLE_CANDIDATE = ROOT / "forge_lsp" / "examples" / "bias_act_cpp.py"
FORGE = ROOT / ".venv" / "bin" / "forge"


def file_sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def machine() -> dict:
    model = ""
    try:
        model = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
    except (OSError, StopIteration):
        pass
    return {"cores": os.cpu_count(), "cpu": model, "python": platform.python_version(), "load_1min": os.getloadavg()[0]}


def fast_loop(runs: int) -> dict:
    walls, counts = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        r = subprocess.run([str(ROOT / "dev"), "test", "--fast", "-q"], cwd=ROOT, capture_output=True, text=True)
        walls.append(time.perf_counter() - t0)
        m = re.search(r"(\d+) passed", r.stdout)
        failed = re.findall(r"^FAILED (\S+)", r.stdout, re.M)
        # the README's own figure tests fail until the README carries this run's figures: they still count
        if not m or any(not f.startswith("tests/test_readme_figures.py::") for f in failed):
            sys.exit(f"the fast loop failed (exit {r.returncode}):\n{r.stdout[-3000:]}\n{r.stderr[-2000:]}")
        counts.append(int(m.group(1)) + len(failed))
    return {
        "runs": runs,
        "wall_s": [round(w, 1) for w in walls],
        "median_s": round(statistics.median(walls)),
        "tests": counts[-1],
    }


def example(runs: int, cache: Path) -> dict:
    cmd = [str(FORGE), "eval", str(EXAMPLE_TASK), str(EXAMPLE_CANDIDATE), "--device", "cpu", "--json"]
    cmd += ["--cache-dir", str(cache)]  # empty at first: the first run builds the extension, as a new user's does
    t0 = time.perf_counter()
    first = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    first_s = time.perf_counter() - t0
    rows = []
    for _ in range(runs):
        r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"forge eval failed (exit {r.returncode}): {r.stderr[-2000:]}")
        v = json.loads(r.stdout)["verdict"]
        t = v["timing"]
        if t is None:  # withheld (inconclusive): kept as such, never left out
            rows.append({"status": v["status"], "reason": v["reason"], "speedup": None})
            continue
        rows.append(
            {
                "status": v["status"],
                "speedup": round(t["speedup"], 2),
                "ci95": [round(x, 2) for x in t["speedup_ci95"]],
                "reference_ms": round(t["reference"]["median_ms"], 3),
                "candidate_ms": round(t["candidate"]["median_ms"], 3),
            }
        )
    timed = [r for r in rows if r["speedup"] is not None]
    speedups = [r["speedup"] for r in timed]
    return {
        "task_sha": file_sha(EXAMPLE_TASK),
        "candidate_sha": file_sha(EXAMPLE_CANDIDATE),
        "first_run_s": round(first_s, 1),
        "first_run_status": json.loads(first.stdout)["verdict"]["status"] if first.returncode == 0 else "failed",
        "runs": rows,
        "speedup_min": min(speedups),
        "speedup_max": max(speedups),
        "withheld": len(rows) - len(timed),
        "reference_ms": [min(r["reference_ms"] for r in timed), max(r["reference_ms"] for r in timed)],
        "candidate_ms": [min(r["candidate_ms"] for r in timed), max(r["candidate_ms"] for r in timed)],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fast-runs", type=int, default=2)
    ap.add_argument("--example-runs", type=int, default=5)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    today = dt.date.today().isoformat()
    out = args.out or ROOT / "benchmarks" / "results" / f"{today}-cpu-readme-figures.json"
    result = {"date": today, "machine": machine()}
    with tempfile.TemporaryDirectory(prefix="forge-readme-figures-") as cache:
        result["example"] = example(args.example_runs, Path(cache))
    result["fast_loop"] = fast_loop(args.fast_runs)
    result["machine"]["load_1min_after"] = os.getloadavg()[0]
    out.write_text(json.dumps(result, indent=2) + "\n")
    ex, fl = result["example"], result["fast_loop"]
    print(f"wrote {out.relative_to(ROOT)}")
    print(f"{'figure':<34} {'value'}")
    print(f"{'fast loop (./dev test --fast)':<34} {fl['median_s']} s, {fl['tests']} tests (runs: {fl['wall_s']})")
    print(f"{'example first run (builds)':<34} {ex['first_run_s']} s, {ex['first_run_status']}")
    for i, r in enumerate(ex["runs"], 1):
        if r.get("speedup") is None:  # the timing withheld as inconclusive: its reason says why
            print(f"{'example run ' + str(i):<34} withheld ({r['status']}): {r.get('reason', '')[:160]}")
            continue
        print(
            f"{'example run ' + str(i):<34} {r['speedup']:.2f}x ({r['ci95'][0]:.2f}-{r['ci95'][1]:.2f}) {r['status']}"
        )
    print(f"{'example speedup range':<34} {ex['speedup_min']:.2f}-{ex['speedup_max']:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
