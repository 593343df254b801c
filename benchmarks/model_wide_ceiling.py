"""What replacing a model's hot module class can reach, before forge's search: on the GPU machine.

    PYTHONPATH=. python3 benchmarks/model_wide_ceiling.py --models resnet,vit,gpt2 --dtype bfloat16

For each model (examples/models, full size, random weights, TF32 off, no_grad), in a fresh process per
variant: the forward's median time over 30 CUDA-event-timed forwards after warm-up, and the largest
absolute difference of the output from eager's, for
  eager                     the model as built;
  compile(model)            torch.compile(model) (mode "default");
  <Class> x N: MODE         every instance of the hot class (ResNet-50 Bottleneck, ViT EncoderBlock,
                            GPT-2 GPT2Block) with its forward compiled by torch.compile(mode=MODE) the way
                            forge's offline candidates do it (reduce-overhead: outputs cloned).
Prints a short table last. This bounds what `forge optimize --model-wide` can reach with its offline
candidates on these models; `benchmarks/model_wide.py` measures forge itself.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HOT = {"resnet": "Bottleneck", "vit": "EncoderBlock", "gpt2": "GPT2Block"}

CHILD = r"""
import importlib.util, json, statistics, sys, time, torch
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch._dynamo.config.recompile_limit = 64
path, dtype, device, variant, hot = sys.argv[1:6]
spec = importlib.util.spec_from_file_location("m", path); m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
model, args = m.build(size="full", dtype=dtype, device=device)

def flat(out):
    if isinstance(out, torch.Tensor):
        return out
    if hasattr(out, "logits"):
        return out.logits
    return out[0]

with torch.no_grad():
    ref = flat(model(*args)).float().clone()
t0 = time.perf_counter()
n = 0
if variant == "eager":
    f = model
elif variant == "compile(model)":
    f = torch.compile(model)
else:
    mode = variant
    f = model
    for inst in model.modules():
        if type(inst).__name__ != hot:
            continue
        n += 1
        compiled = torch.compile(inst.forward, mode=mode)
        if mode == "reduce-overhead":
            def fwd(*a, _c=compiled, **k):
                torch.compiler.cudagraph_mark_step_begin()
                out = _c(*a, **k)
                return torch.utils._pytree.tree_map_only(torch.Tensor, torch.clone, out)
        else:
            fwd = compiled
        inst.forward = fwd
times = []
with torch.no_grad():
    for _ in range(3):
        out = f(*args)
    torch.cuda.synchronize()
    warm_s = time.perf_counter() - t0
    for _ in range(30):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); out = f(*args); e.record(); e.synchronize(); times.append(s.elapsed_time(e))
err = (flat(out).float() - ref).abs().max().item()
print("RESULT " + json.dumps({"ms": statistics.median(times), "max_abs": err, "instances": n, "warm_s": warm_s}))
"""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--models", default="resnet,vit,gpt2")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--variants", default="eager,compile(model),default,reduce-overhead")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    rows = []
    for model in args.models.split(","):
        for variant in args.variants.split(","):
            t0 = time.perf_counter()
            proc = subprocess.run(
                [sys.executable, "-c", CHILD, str(ROOT / f"examples/models/{model}.py"), args.dtype, args.device]
                + [variant, HOT[model]],
                capture_output=True,
                text=True,
                timeout=900,
            )
            row = {
                "model": model,
                "dtype": args.dtype,
                "variant": variant,
                "wall_s": round(time.perf_counter() - t0, 1),
            }
            line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
            if line is None:
                row["error"] = proc.stderr[-600:]
            else:
                row |= json.loads(line[7:])
            rows.append(row)
            print(json.dumps(row)[:800], flush=True)
    if args.out:
        args.out.write_text(json.dumps({"date": time.strftime("%Y-%m-%d %H:%M"), "rows": rows}, indent=1))
    print("\n| model | dtype | variant | ms | vs eager | max abs vs eager | wall s |")
    eager = {r["model"]: r.get("ms") for r in rows if r["variant"] == "eager"}
    for r in rows:
        if "ms" not in r:
            print(f"| {r['model']} | {r['dtype']} | {r['variant']} | error: {r['error'][-160:]!r} |")
            continue
        x = eager.get(r["model"]) / r["ms"] if eager.get(r["model"]) else 0.0
        print(
            f"| {r['model']} | {r['dtype']} | {r['variant']} | {r['ms']:.2f} | {x:.2f}x | {r['max_abs']:.3g} "
            f"| {r['wall_s']} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
