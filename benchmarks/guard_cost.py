"""What the guards cost per call: the guarded rewrite's `_forge_impl` and the model-wide patch's `_shadow`.

    python benchmarks/guard_cost.py [--device cpu|cuda] [--samples 41] [--calls 2000] [--out results.json]

A tiny module (x * scale + 1 on a 16x16 float32 tensor, one elementwise pass) and a candidate of the same torch
ops, so the difference between rows is the guard alone. Median microseconds per call (each sample: `--calls`
calls, then a device synchronize on CUDA), no autograd, for:
- the original module and the candidate called directly;
- the generated guarded class (`reintegrate.rewrite_module`) routing to the candidate, with a domain of any
  layout (no contiguity check), contiguous inputs only, and contiguous plus the default stream only (the stream
  rule: on the CPU it is emitted but skipped, since it is for CUDA tensors);
- a model-wide patch (`hotspots.patching.install`) routing to the candidate: a patch without a domain (shape
  match only), with the contiguous domain, and with the default-stream one.
Prints a short table last.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from forge_lsp.hotspots.patching import install  # noqa: E402
from forge_lsp.reintegrate import VerifiedDomain, rewrite_module  # noqa: E402

USER = textwrap.dedent(
    '''
    import torch
    import torch.nn as nn


    class Model(nn.Module):
        """x * scale + 1, a scale per column."""

        def __init__(self, n=16):
            super().__init__()
            self.scale = nn.Parameter(torch.linspace(0.5, 2.0, n))

        def forward(self, x):
            return x * self.scale + 1.0


    def get_inputs():
        return [torch.randn(16, 16)]


    def get_init_inputs():
        return [16]
    '''
)
CANDIDATE = textwrap.dedent(
    """
    import torch
    import torch.nn as nn


    class ModelNew(nn.Module):
        def __init__(self, n=16):
            super().__init__()
            self.scale = nn.Parameter(torch.ones(n))

        def forward(self, x):
            return x * self.scale + 1.0
    """
)


def load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def per_call_us(fns: list, x, device: str, samples: int, calls: int) -> list[float]:
    """Median microseconds per call of each of `fns`, the samples interleaved (one sample of each in turn), so
    that whatever else the machine does weighs on every row alike."""
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    times: list[list[float]] = [[] for _ in fns]
    for fn in fns:
        for _ in range(max(200, calls // 10)):
            fn(x)
    sync()
    for _ in range(samples):
        for fn, out in zip(fns, times, strict=True):
            t0 = time.perf_counter()
            for _ in range(calls):
                fn(x)
            sync()
            out.append((time.perf_counter() - t0) / calls * 1e6)
    return [statistics.median(t) for t in times]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--samples", type=int, default=41)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    device = args.device
    if device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device here", file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    work = Path(tempfile.mkdtemp(prefix="forge-guard-cost-"))
    sizes: list[list[list[int] | None]] = [[[16], [16]]]
    base = {"device_types": [device], "dtypes": ["float32"], "ranks": [2], "sizes": sizes}
    domains = {
        "any layout": VerifiedDomain(**base, contiguous=False),
        "contiguous": VerifiedDomain(**base, contiguous=True),
        "contiguous + default stream": VerifiedDomain(**base, contiguous=True, default_stream=True),
    }
    original = load(_write(work / "original.py", USER), "guard_cost_original")
    candidate_file = _write(work / "candidate.py", CANDIDATE)
    candidate = load(candidate_file, "guard_cost_candidate")
    x = torch.randn(16, 16, device=device)
    named: list[tuple[str, str, object]] = []
    with torch.no_grad():
        named.append(("original module", "-", original.Model().to(device)))
        named.append(("candidate, called directly", "-", candidate.ModelNew().to(device)))
        for i, (label, domain) in enumerate(domains.items()):
            rw = rewrite_module(USER, "Model", CANDIDATE, domain)
            mod = load(_write(work / f"rewritten_{i}.py", rw.new_text), f"guard_cost_rewritten_{i}")
            m = mod.Model().to(device)
            m(x)
            assert mod.Model._forge_calls["optimized"] == 1, "the guard did not route to the candidate"
            named.append(("guarded rewrite", label, m))
        patch_domains: dict[str, VerifiedDomain | None] = {"no domain (shape only)": None, **domains}
        patch_domains.pop("any layout")
        for label, domain in patch_domains.items():
            host = torch.nn.Sequential(original.Model()).to(device)
            patch = {
                "cls": "Model",
                "instances": ["Sequential.0"],
                "source_file": str(candidate_file),
                "call": [{"name": "x", "how": "pos", "tensor": True, "source": None}],
                "output": "tensor",
            }
            if domain is not None:
                patch["domain"] = domain.model_dump(mode="json")
            install(host, [patch])
            inst = host[0]
            inst(x)
            assert inst.__dict__["_forge_calls"]["optimized"] == 1, "the patch did not route to the candidate"
            named.append(("model-wide patch (_shadow)", label, inst))
        medians = per_call_us([m for _, _, m in named], x, device, args.samples, args.calls)
    rows = [(w, d, us) for (w, d, _), us in zip(named, medians, strict=True)]
    direct = rows[1][2]
    if args.out:
        args.out.write_text(
            json.dumps(
                {
                    "date": time.strftime("%Y-%m-%d %H:%M"),
                    "device": device,
                    "device_name": torch.cuda.get_device_name() if device == "cuda" else "cpu",
                    "torch": torch.__version__,
                    "samples": args.samples,
                    "calls": args.calls,
                    "rows": [
                        {"what": w, "domain": d, "median_us": round(us, 3), "over_direct_us": round(us - direct, 3)}
                        for w, d, us in rows
                    ],
                },
                indent=1,
            )
        )
    print(f"\n== guard cost per call, x * scale + 1 on 16x16 float32, {device} (median us) ==")
    print(f"{'what':28s} {'domain':28s} {'us/call':>8s} {'vs direct':>9s}")
    for w, d, us in rows:
        print(f"{w:28s} {d:28s} {us:8.2f} {us - direct:+9.2f}")
    return 0


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


if __name__ == "__main__":
    raise SystemExit(main())
