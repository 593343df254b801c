"""CPU timings on a busy machine: what forge measures with its threads fitted to the cores it gets, against the
code's own time.

    python benchmarks/busy_cpu.py [--rounds 2] [--out results.json]

Linux shares the CPU between sessions (autogroups), and each forge child is a session of its own, as each of a
user's other programs is: on a busy machine a child whose torch threads outnumber the cores it gets spends its
time in OpenMP threads that spin waiting for a core. This script runs, idle and then busy (as many busy processes
as cores, each in a session of its own), `--rounds` times each:

* `forge eval corpus/busy_cpu/sincos.py corpus/busy_cpu/sincos_pieces.py --device cpu --json`: the reference's
  and the candidate's median ms, the speedup, and whether the timing says it fitted the threads;
* `forge hotspots corpus/busy_cpu/mobilenet_script.py --device cpu --json` (a script that runs its model once):
  forge's ms per forward;
* the same model's forward timed plainly in a process of its own session, with torch's threads as they are and
  with one thread (median of 20 after 5 warm-up): the code's own time to compare forge's figures with.

Prints a short table last.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "corpus" / "busy_cpu"
FORGE = [sys.executable, "-m", "forge_lsp.cli.main"]

PLAIN = """
import json, statistics, sys, time, torch
sys.path.insert(0, sys.argv[1])
from mobilenet_script import build
if sys.argv[2] != "as-is":
    torch.set_num_threads(int(sys.argv[2]))
model, (x,) = build()
times = []
with torch.no_grad():
    for i in range(25):
        t0 = time.perf_counter()
        model(x)
        if i >= 5:
            times.append((time.perf_counter() - t0) * 1000)
print(json.dumps({"ms": statistics.median(times), "threads": torch.get_num_threads()}))
"""


@contextlib.contextmanager
def busy(on: bool) -> Iterator[None]:
    hogs = (
        [
            subprocess.Popen(
                [sys.executable, "-c", "while True: pass"], start_new_session=True, stdout=subprocess.DEVNULL
            )
            for _ in range(os.cpu_count() or 2)
        ]
        if on
        else []
    )
    try:
        time.sleep(0.5 if on else 0.0)
        yield
    finally:
        for h in hogs:
            h.kill()
            h.wait()


def _json(cmd: list[str]) -> dict:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=ROOT, start_new_session=True)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr[-1500:]}")
    return json.loads(proc.stdout)


def measure() -> dict:
    v = _json(
        [*FORGE, "eval", str(CORPUS / "sincos.py"), str(CORPUS / "sincos_pieces.py"), "--device", "cpu", "--json"]
    )
    t = v["verdict"]["timing"]
    h = _json([*FORGE, "hotspots", str(CORPUS / "mobilenet_script.py"), "--device", "cpu", "--json"])
    plain = {k: _json([sys.executable, "-c", PLAIN, str(CORPUS), k]) for k in ("as-is", "1")}
    return {
        "status": v["verdict"]["status"],
        "ref_ms": t["reference"]["median_ms"],
        "cand_ms": t["candidate"]["median_ms"],
        "speedup": t["speedup"],
        "eval_fitted": any(n.startswith("the CPU is busy") for n in t.get("notes", [])),
        "hotspots_ms": h["model_ms"],
        "hotspots_notes": h.get("notes", []),
        "plain_ms": plain["as-is"]["ms"],
        "plain_threads": plain["as-is"]["threads"],
        "plain_1_thread_ms": plain["1"]["ms"],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    rows = []
    for state in ("idle", "busy"):
        for r in range(args.rounds):
            with busy(state == "busy"):
                row = {"machine": state, "round": r + 1, **measure()}
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.out:
        args.out.write_text(json.dumps({"host": platform.node(), "cores": os.cpu_count(), "rows": rows}, indent=1))
    print(
        f"\n{'machine':8} {'eval ref ms':>11} {'cand ms':>8} {'speedup':>8} {'fitted':>6} "
        f"{'hotspots ms/fwd':>15} {'plain ms (threads)':>18} {'plain 1 thread':>14}"
    )
    for r in rows:
        print(
            f"{r['machine']:8} {r['ref_ms']:11.2f} {r['cand_ms']:8.2f} {r['speedup']:8.2f} {str(r['eval_fitted']):>6} "
            f"{r['hotspots_ms']:15.2f} {r['plain_ms']:12.2f} ({r['plain_threads']}) {r['plain_1_thread_ms']:14.2f}"
        )
    print(
        f"median speedup idle {statistics.median(r['speedup'] for r in rows if r['machine'] == 'idle'):.2f}, "
        f"busy {statistics.median(r['speedup'] for r in rows if r['machine'] == 'busy'):.2f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
