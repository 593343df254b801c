"""Cold load_inline build time of a CUDA candidate with lighter torch headers in its .cu (GPU machine).

    python benchmarks/inline_headers.py [--serial] [--only NAME-FRAGMENT]

Builds corpus/ops/candidates/softmax_load_inline.py's sources cold, single arch, in parallel
subprocesses, once as written and once per header rewrite (including the engine's slim
per-operator prelude); prints wall and ninja step times. Run it sequentially (--serial) for
absolute figures.
"""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = {
    "as written": [],
    "types.h": [("<torch/extension.h>", "<torch/types.h>")],
    "slim prelude (engine default)": "slim",
}

CHILD = r"""
import json, re, sys, time, types
from pathlib import Path
import torch
from torch.utils import cpp_extension
src = Path(sys.argv[1]).read_text()
captured = {}
def fake(name, cpp_sources, cuda_sources=None, **kw):
    captured.update(name=name, cpp=cpp_sources, cuda=cuda_sources, kw=kw)
    return types.SimpleNamespace()
real_load_inline = cpp_extension.load_inline
cpp_extension.load_inline = fake
exec(compile(src, "cand", "exec"), {"__name__": "cand"})
cuda, cpp, extra = captured["cuda"], captured["cpp"], {}
subs = json.loads(sys.argv[3])
if subs == "slim":
    from forge_lsp.engine.harness.loading import slim_build_args
    cpp, cuda, extra = slim_build_args(cpp, cuda, real_load_inline)
else:
    for a, b in subs:
        cuda = cuda.replace(a, b)
t0 = time.perf_counter()
ok = True
try:
    import importlib; importlib.reload(cpp_extension)
    cpp_extension.load_inline(captured["name"] + "_" + sys.argv[4], cpp, cuda, build_directory=sys.argv[2],
                              **{k: v for k, v in captured["kw"].items() if k not in ("verbose", "build_directory")},
                              **extra)
except Exception as e:
    ok = False
    print("FAILED", str(e)[-4000:])
print(json.dumps({"ok": ok, "wall": time.perf_counter() - t0}))
"""


def main():
    env = dict(os.environ, TORCH_CUDA_ARCH_LIST="9.0")
    cand = ROOT / "corpus" / "ops" / "candidates" / "softmax_load_inline.py"
    serial = "--serial" in sys.argv
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
    procs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, subs) in enumerate(VARIANTS.items()):
            if only and only not in name:
                continue
            d = Path(tmp) / f"v{i}"
            d.mkdir()
            procs[name] = (
                d,
                subprocess.Popen(
                    [sys.executable, "-c", CHILD, str(cand), str(d), json.dumps(subs), f"v{i}"],
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                ),
            )
            if serial:
                procs[name][1].wait()
        print("\n== cold load_inline build, TORCH_CUDA_ARCH_LIST=9.0, variants built in parallel ==")
        for name, (d, p) in procs.items():
            out, _ = p.communicate(timeout=400)
            last = json.loads(out.strip().splitlines()[-1])
            steps = {}
            log = d / ".ninja_log"
            if log.exists():
                for line in log.read_text().splitlines()[1:]:
                    s, e, _, target, _ = line.split("\t")
                    steps[target.split("_v")[0] if target.endswith(".so") else target] = (int(e) - int(s)) / 1000
            tail = ""
            if not last["ok"]:
                errors = [ln for ln in out.splitlines() if "error" in ln.lower()]
                print(
                    f"--- {name} failed; error lines:\n" + "\n".join(errors[:30]) + "\n--- output tail:\n" + out[-3000:]
                )
                tail = "(failed: see above)"
            print(
                f"{name:22s} ok={last['ok']!s:5s} wall {last['wall']:6.1f}s  "
                + ", ".join(f"{k} {v:.1f}s" for k, v in steps.items())
                + (f"  {tail}" if tail else "")
            )


if __name__ == "__main__":
    main()
