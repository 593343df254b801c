"""What the worker's watches cost per candidate call, on this machine: the process-wide state read after every call
(`global_state`, with its thread scheduling, signal handlers and timers, and the dispatcher's kernels for the
reference's operators), what the dispatcher watch costs apart (its snapshot, the recording, the end-of-evaluation
comparison of every operator), and the threads-and-processes watch around
each call (`ThreadWatch`: CPU of the candidate's threads and descendant processes before and after, and the threads
still in the candidate's code right after it returns).

    python benchmarks/watch_cost.py [--calls 2000] [--children 0,4,16] [--out results.json]

Each row: median microseconds per call over 9 samples of `--calls` calls, with N idle child processes alive (as a
torch.compile candidate's compile workers would be) and the threads torch's pools have after a warm-up. Prints a
short table last.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from forge_lsp.engine.harness.checks import (  # noqa: E402
    ThreadWatch,
    descendants,
    global_state,
    kernel_changes,
    scheduling,
    snapshot_kernels,
    watch_reference_ops,
)
from forge_lsp.sandbox import adopt_orphans  # noqa: E402


def per_call_us(fn, calls: int, samples: int = 9) -> float:
    out = []
    for _ in range(samples):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        out.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--children", default="0,4,16")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    adopt_orphans()
    t0 = time.perf_counter()
    snapshot_kernels()
    snapshot_ms = (time.perf_counter() - t0) * 1e3
    # a transformer block's MLP and norm as the reference: the operators the dispatcher watch then reads per call
    block = torch.nn.Sequential(
        torch.nn.LayerNorm(256), torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 256)
    )
    x = torch.randn(64, 256)
    t0 = time.perf_counter()
    with torch.no_grad():
        ops = watch_reference_ops(lambda: torch.softmax(block(x), dim=-1))
    record_ms = (time.perf_counter() - t0) * 1e3
    dispatcher = {
        "snapshot of every operator ms (worker start)": round(snapshot_ms, 1),
        "recording the reference's operators ms (once per task)": round(record_ms, 1),
        "operators watched": len(ops),
        "their kernels read us (after 3 calls, then 1 in 4, every timed check)": round(
            per_call_us(lambda: kernel_changes(ops), 200), 1
        ),
        "every operator compared ms (end of each evaluation)": round(per_call_us(kernel_changes, 3, 3) / 1e3, 1),
    }
    torch.softmax(torch.randn(512, 512), dim=1)  # torch's thread pools up, as in a worker after the reference ran
    harness = {t.ident for t in threading.enumerate() if t.ident is not None}
    rows = []
    for n in [int(x) for x in args.children.split(",")]:
        kids = [
            subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
            for _ in range(n)
        ]
        try:
            time.sleep(0.5)  # the children's interpreters up and idle
            watch = ThreadWatch(harness)

            def around_call(watch: ThreadWatch = watch) -> None:
                watch.call_begins()
                watch.call_ends()
                watch.returned()

            rows.append(
                {
                    "idle children": n,
                    "threads": len(os.listdir("/proc/self/task")),
                    "global_state us": round(per_call_us(lambda: global_state(), args.calls), 1),
                    "of which scheduling us": round(per_call_us(scheduling, args.calls), 1),
                    "descendants us": round(per_call_us(descendants, max(50, args.calls // 10)), 1),
                    "ThreadWatch around a call us": round(per_call_us(around_call, max(50, args.calls // 10)), 1),
                }
            )
        finally:
            for k in kids:
                k.stdin.close()
                k.wait()
    result = {
        "machine": platform.node(),
        "cpus": os.cpu_count(),
        "torch": torch.__version__,
        "date": time.strftime("%Y-%m-%d"),
        "rows": rows,
        "dispatcher": dispatcher,
    }
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    keys = list(rows[0])
    print(" | ".join(keys))
    for r in rows:
        print(" | ".join(str(r[k]) for k in keys))
    for k, v in dispatcher.items():
        print(f"{k}: {v}")


if __name__ == "__main__":
    main()
