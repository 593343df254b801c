"""What the in-process profile's counters pass costs, by metric group (GPU machine): for each group of the range
profiler's metrics (`profiler.inprocess.RANGE_METRICS`), the replay passes it needs, the seconds to prepare its host
side, and the seconds of one profiled call (kernel replay), twice, on two forwards: an elementwise op over 256 MiB
(memory-bound; kernel replay saves and restores what it writes) and a small softmax + matmul.

    PYTHONPATH=. python3 benchmarks/counter_passes.py --out counter-passes.json

The table last: group, metrics, passes, host s, call s (first / second) per forward.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

GROUPS = {
    "all": lambda m: True,
    "no_sass": lambda m: "__sass_" not in m,
    "sass_only": lambda m: "__sass_" in m,
    "speed_of_light": lambda m: m.startswith(("gpu__", "sm__cycles", "sm__throughput", "dram__", "lts__")),
    "access": lambda m: m.startswith("l1tex__"),
    "pipes": lambda m: "pipe_" in m and "__sass_" not in m and not m.startswith("l1tex__"),
    "warps": lambda m: m.startswith(("smsp__average", "smsp__issue", "sm__warps", "smsp__thread_inst")),
}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    import torch

    from forge_lsp.profiler import cupti
    from forge_lsp.profiler.inprocess import RANGE_METRICS

    torch.cuda.init()
    x = torch.randn(64 * 1024 * 1024, device="cuda")
    a, b = torch.randn(2048, 2048, device="cuda"), torch.randn(2048, 2048, device="cuda")
    forwards = {
        "elementwise_256MiB": lambda: x.mul(2.0).add_(1.0),
        "softmax_matmul": lambda: torch.softmax(a, dim=-1) @ b,
    }
    for f in forwards.values():
        f()
    torch.cuda.synchronize()
    ctx = cupti.current_context()
    rows = []
    for group, keep in GROUPS.items():
        metrics = [m for m in RANGE_METRICS if keep(m)]
        row: dict = {"group": group, "metrics": len(metrics)}
        try:
            t0 = time.perf_counter()
            host = cupti.HostConfig(ctx, 0, metrics)
            row |= {"host_s": time.perf_counter() - t0, "passes": host.passes, "unsupported": host.unsupported}
            for name, forward in forwards.items():
                seconds = []
                for _ in range(2):
                    t0 = time.perf_counter()
                    profiler = cupti.RangeProfiler(ctx, host)
                    try:
                        profiler.start()
                        forward()
                        torch.cuda.synchronize()
                        ranges = profiler.stop()
                    finally:
                        profiler.close()
                    seconds.append(time.perf_counter() - t0)
                row[name] = {"seconds": seconds, "ranges": len(ranges)}
        except cupti.CuptiError as exc:
            row["error"] = str(exc)
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.out:
        args.out.write_text(json.dumps({"device": torch.cuda.get_device_name(), "rows": rows}, indent=1))
    print(f"\n== counters pass by metric group on {torch.cuda.get_device_name()} ==")
    print(f"{'group':16s} {'metrics':>7s} {'passes':>6s} {'host s':>7s}  " + "  ".join(f"{n:>22s}" for n in forwards))
    for r in rows:
        if "error" in r:
            print(f"{r['group']:16s} {r['metrics']:7d}  error: {r['error'][:100]}")
            continue
        cells = "  ".join(f"{r[n]['seconds'][0]:10.3f} / {r[n]['seconds'][1]:9.3f}" for n in forwards)
        print(f"{r['group']:16s} {r['metrics']:7d} {r['passes']:6d} {r['host_s']:7.3f}  {cells}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
