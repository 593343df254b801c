"""Hot spots of real models on the GPU machine: `forge hotspots` on the example models, and its overhead.

    PYTHONPATH=. python3 benchmarks/hotspots_models.py --device cuda:0 --out results.json [--models resnet,vit,gpt2]

For each model (full size) and dtype: `forge hotspots ENTRY --json` as a user runs it (its own process,
capture included), the entry's own run time for the same forwards without forge (a fresh interpreter that
imports, builds, runs warm-up + profiled forwards, synchronizes), and the report's top classes and ops.
Target (issue): forge hotspots <= 2x the entry's own run time + 15 s. Prints a short table last.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CONFIGS = {
    # model: batch for the reference sizes (ResNet-50 and ViT-B/16 batch 32, GPT-2 small 8 x 512)
    "resnet": 32,
    "vit": 32,
    "gpt2": 8,
    "unet_block": 8,
}

OWN = """
import sys, time, importlib.util, torch
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
t0 = time.perf_counter()
spec = importlib.util.spec_from_file_location("m", sys.argv[1]); m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
model, args = m.build(size=sys.argv[5], dtype=sys.argv[2], device=sys.argv[3])
sync = torch.cuda.synchronize if sys.argv[3].startswith("cuda") else (lambda: None)
with torch.no_grad():
    for _ in range(int(sys.argv[4])):
        model(*args)
    sync()
    t1 = time.perf_counter()
    n = 30
    for _ in range(n):
        model(*args)
    sync()
print(time.perf_counter() - t0, (time.perf_counter() - t1) / n * 1000)
"""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--models", default="resnet,vit,gpt2")
    ap.add_argument("--dtypes", default="bfloat16,float32")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--size", default="full", help="full (the issue's sizes) or tiny (a smoke test on the CPU)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    rows = []
    for model in args.models.split(","):
        for dtype in args.dtypes.split(","):
            entry = f"examples/models/{model}.py:build(size='{args.size}', dtype='{dtype}')"
            t0 = time.perf_counter()
            proc = subprocess.run(
                [sys.executable, "-m", "forge_lsp.cli.main", "hotspots", entry, "--device", args.device, "--json"]
                + ["--warmup", str(args.warmup), "--iters", str(args.iters), "--extract"],
                capture_output=True,
                text=True,
                cwd=ROOT,
                timeout=900,
            )
            forge_s = time.perf_counter() - t0
            if proc.returncode != 0:
                rows.append({"model": model, "dtype": dtype, "error": proc.stderr[-1500:]})
                print(f"{model} {dtype}: failed: {proc.stderr[-800:]}", flush=True)
                continue
            report = json.loads(proc.stdout)
            own = subprocess.run(
                [sys.executable, "-c", OWN, str(ROOT / f"examples/models/{model}.py"), dtype, args.device]
                + [str(args.warmup + args.iters), args.size],
                capture_output=True,
                text=True,
                cwd=ROOT,
                timeout=900,
            )
            own_s, eager_ms = (float(x) for x in own.stdout.split()) if own.returncode == 0 else (None, None)
            classes = sorted(report["classes"], key=lambda c: -c["total_pct"])
            row = {
                "model": model,
                "dtype": dtype,
                "batch": CONFIGS[model],
                "device_name": report["device_name"],
                "model_ms_profiled": report["model_ms"],
                "eager_ms_per_forward": eager_ms,
                "forge_hotspots_s": round(forge_s, 1),
                "entry_own_s": round(own_s, 1) if own_s else None,
                "within_target": own_s is not None and forge_s <= 2 * own_s + 15,
                "targets": report["targets"],
                "top_classes": [
                    {k: c[k] for k in ("name", "total_pct", "self_pct", "instances", "calls")}
                    | {"inputs": [t["shape"] + [t["dtype"]] for t in c["inputs"][:2]]}
                    for c in classes[:8]
                ],
                "top_ops": [{k: o[k] for k in ("name", "pct", "calls", "self_ms")} for o in report["ops"][:8]],
                "extracted": report.get("extracted", []),
                "not_extracted": report.get("not_extracted", []),
                "notes": report["notes"],
            }
            rows.append(row)
            print(json.dumps(row)[:600], flush=True)
    if args.out:
        args.out.write_text(json.dumps({"date": time.strftime("%Y-%m-%d %H:%M"), "rows": rows}, indent=1))
    print(
        "\n| model | dtype | ms/forward (eager, 30 runs) | attributed ms | forge hotspots s | entry alone s | top classes (% of model time) |"
    )
    for r in rows:
        if "error" in r:
            print(f"| {r['model']} | {r['dtype']} | failed | | | | |")
            continue
        top = ", ".join(f"{c['name']} {c['total_pct']:.0f}%" for c in r["top_classes"][1:5])
        print(
            f"| {r['model']} | {r['dtype']} | {r['eager_ms_per_forward'] or 0:.2f} | {r['model_ms_profiled']:.2f} | "
            f"{r['forge_hotspots_s']} | {r['entry_own_s']} | {top} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
