"""The device/host split of load_inline CUDA candidates, compiled with the real compilers on a CPU-only machine.

    PYTHONPATH=. .venv/bin/python benchmarks/split_check.py [DIR_OR_FILE ...] [--jobs 2] [--out split.json]

For each `load_inline` CUDA candidate (default: `corpus/model_style/candidates`, `corpus/kernelbench/
candidates`), its module is executed with `load_inline` recorded instead of built, and the engine's first build tier
(`forge_lsp.engine.harness.cudasplit`) is made from the recorded call. Then:
- the device source is compiled by nvcc (`-c`, the flags `loading.device_object` gives, sm_90), and
- main.cpp (the split's host sources and the bindings load_inline writes) by g++ against this torch's headers.
Each is timed. The table says how many candidates split, how many of those compile on both sides, and the seconds:
what a build worker spends per candidate on this tier, against the slim tier's two compiles (`--slim`: compiled too,
for the comparison). What it cannot say: linking against CUDA torch, and running (the GPU machine's part).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DIRS = [ROOT / "corpus" / "model_style" / "candidates", ROOT / "corpus" / "kernelbench" / "candidates"]
WORK = Path(tempfile.gettempdir()) / "forge_split_check"

CHILD = r"""
import json, sys, types
from pathlib import Path
import torch
from torch.utils import cpp_extension
calls = []
def fake(name, cpp_sources, cuda_sources=None, *args, **kw):
    calls.append({"name": name, "cpp": cpp_sources, "cuda": cuda_sources, "args": list(args), "kw": kw})
    return types.SimpleNamespace(**{f: (lambda *a, **k: None) for f in (kw.get("functions") or [])})
cpp_extension.load_inline = fake
src = Path(sys.argv[1]).read_text()
try:
    exec(compile(src, sys.argv[1], "exec"), {"__name__": "forge_split_check_candidate"})
except Exception as e:
    print(json.dumps({"error": f"{type(e).__name__}: {e}"[:300]}))
    sys.exit(0)
print(json.dumps({"calls": calls}, default=str))
"""


def flags_common() -> tuple[list[str], list[str]]:
    from torch.utils import cpp_extension

    stub = WORK / "stub" / "c10" / "cuda" / "impl"
    stub.mkdir(parents=True, exist_ok=True)
    # generated only in CUDA builds of torch; this is its content there
    (stub / "cuda_cmake_macros.h").write_text("#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n")
    inc = [f"-I{WORK / 'stub'}"] + [f"-isystem{d}" for d in cpp_extension.include_paths()]
    inc += [f"-isystem{sysconfig.get_paths()['include']}", "-isystem/usr/local/cuda/include"]
    return inc, list(cpp_extension.COMMON_NVCC_FLAGS)


def check(path: Path, slim: bool) -> dict:
    from forge_lsp.engine.harness import loading
    from forge_lsp.engine.harness.cudasplit import split_cuda_source

    r = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, timeout=120)
    try:
        got = json.loads(r.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"candidate": path.stem, "status": "no_record", "message": r.stderr[-300:]}
    if "error" in got:
        return {"candidate": path.stem, "status": "no_record", "message": got["error"]}
    calls = [c for c in got["calls"] if c["cuda"]]
    if not calls:
        return {"candidate": path.stem, "status": "no_cuda"}
    c = calls[0]
    kw = c["kw"]
    cuda = c["cuda"] if isinstance(c["cuda"], str) else "\n".join(c["cuda"])
    cpp = [c["cpp"]] if isinstance(c["cpp"], str) else list(c["cpp"] or [])
    functions = kw.get("functions") or []
    functions = [functions] if isinstance(functions, str) else list(functions)
    cuda_flags = list(kw.get("extra_cuda_cflags") or []) + ["-lineinfo"]
    folder = WORK / path.stem
    folder.mkdir(parents=True, exist_ok=True)
    origin = folder / "source.cu"
    origin.write_text(cuda)
    split = split_cuda_source(cpp, cuda, loading.torch_include_dir(), str(origin), cuda_flags, functions)
    row: dict = {"candidate": path.stem}
    if split is None:
        row["status"] = "not_split"
        return row
    inc, nvcc_common = flags_common()
    (folder / "device.cu").write_text(split.device)
    cmd = ["nvcc", *nvcc_common, "-gencode=arch=compute_90,code=sm_90", "--compiler-options", "-fPIC"]
    cmd += (
        [a for f in cuda_flags for a in f.split()]
        + split.device_flags
        + ["-std=c++20", "-c", "device.cu", "-o", "device.o"]
    )
    t0 = time.perf_counter()
    d = subprocess.run(cmd, cwd=folder, capture_output=True, text=True)
    row["device_s"] = round(time.perf_counter() - t0, 2)
    main = "\n".join(split.host) + "\n\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n"
    main += "".join(f'm.def("{f}", torch::wrap_pybind_function({f}), "{f}");\n' for f in functions) + "}\n"
    (folder / "main.cpp").write_text(main)
    cflags = [f for f in (kw.get("extra_cflags") or []) if f.strip() and not f.startswith("-O")] + split.host_flags
    cmd = ["g++", "-DTORCH_EXTENSION_NAME=check", "-DTORCH_API_INCLUDE_EXTENSION_H", *inc, "-fPIC", "-std=c++20"]
    cmd += [*cflags, "-c", "main.cpp", "-o", "main.o"]
    t0 = time.perf_counter()
    h = subprocess.run(cmd, cwd=folder, capture_output=True, text=True)
    row["host_s"] = round(time.perf_counter() - t0, 2)
    errs = [ln for ln in (d.stdout + d.stderr + h.stdout + h.stderr).splitlines() if "error" in ln]
    row["status"] = "ok" if d.returncode == 0 and h.returncode == 0 else "failed"
    row["device_ok"], row["host_ok"] = d.returncode == 0, h.returncode == 0
    row["message"] = "\n".join(errs[:6])
    if row["status"] == "ok":
        # the kernels the host declares are the ones the device object defines, under the same symbols
        nm = subprocess.run(["nm", "-C", "device.o"], cwd=folder, capture_output=True, text=True).stdout
        nm_host = subprocess.run(["nm", "-C", "-u", "main.o"], cwd=folder, capture_output=True, text=True).stdout
        wanted = [ln.split(" U ", 1)[-1].strip() for ln in nm_host.splitlines()]
        defined = {ln[19:].strip() for ln in nm.splitlines() if ln[17:19] in ("T ", "W ")}
        missing = [w for w in wanted if re.sub(r"^void |<.*$|\(.*$", "", w) in split.kernels and w not in defined]
        if missing:
            row["status"] = "failed"
            row["message"] = f"kernel symbols not in device.o: {missing}"
    if slim:
        from torch.utils import cpp_extension

        s = loading.slim_build_args(cpp, cuda, cpp_extension.load_inline)
        if s is not None:
            (folder / "slim.cu").write_text("\n".join(s[1]))
            cmd = ["nvcc", *nvcc_common, "-gencode=arch=compute_90,code=sm_90", "--compiler-options", "-fPIC"]
            cmd += [a for f in cuda_flags for a in f.split()] + ["-std=c++20", *inc, "-DTORCH_EXTENSION_NAME=check"]
            cmd += ["-c", "slim.cu", "-o", "slim.o", "-w"]
            t0 = time.perf_counter()
            subprocess.run(cmd, cwd=folder, capture_output=True, text=True)
            row["slim_cu_s"] = round(time.perf_counter() - t0, 2)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*", type=Path)
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2)))
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--slim", action="store_true", help="also compile the slim tier's .cu, for the seconds")
    args = ap.parse_args()
    files: list[Path] = []
    for p in args.paths or DIRS:
        files += sorted(p.glob("*.py")) if p.is_dir() else [p]
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")
    with ThreadPoolExecutor(args.jobs) as pool:
        rows = list(pool.map(lambda f: check(f, args.slim), files))
    for r in rows:
        if r["status"] in ("failed", "no_record"):
            print(f"{r['candidate']}: {r['status']}: {r.get('message', '')[:400]}")
    by = {s: sum(r["status"] == s for r in rows) for s in ("ok", "failed", "not_split", "no_cuda", "no_record")}
    ok = [r for r in rows if r["status"] == "ok"]
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))
    if ok:
        dev = [r["device_s"] for r in ok]
        host = [r["host_s"] for r in ok]
        print(f"device .cu: median {statistics.median(dev):.2f} s, main.cpp: median {statistics.median(host):.2f} s")
        slim_s = [r["slim_cu_s"] for r in ok if "slim_cu_s" in r]
        if slim_s:
            print(f"slim tier's .cu: median {statistics.median(slim_s):.2f} s")
    print(f"{len(rows)} candidates: " + ", ".join(f"{k} {v}" for k, v in by.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
