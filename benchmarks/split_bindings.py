"""What a split build's main.cpp costs with its bindings inline and with them as a shared object, on the CPU machine.

    PYTHONPATH=. .venv/bin/python benchmarks/split_bindings.py [FILES ...] [--sample 12] [--out bindings.json]

For each `load_inline` CUDA candidate (default: every `--sample`-th of `corpus/model_style/candidates` and
`corpus/kernelbench/candidates`), its load_inline call is recorded (no build), split as the engine's first
build tier splits it, and its main.cpp compiled by g++ two ways, each with its prelude precompiled beforehand (once per
flag set, not timed):
- **inline**: the full split prelude (pybind11 and torch's Python headers) and the bindings load_inline writes;
- **shared**: the prelude without pybind11 and `cudasplit.bindings_tail`, linking a bindings object compiled once per
  set of bound function types (`cudasplit.bindings_source`; each compile timed and counted once).
Also over every candidate given: how many bind through a shared object and how many distinct sets of types they
need. What it cannot say: nvcc, linking against CUDA torch and running (the GPU machine's `batch_throughput.py`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import split_check  # noqa: E402 - the recording child and the include flags

from forge_lsp.engine.harness.cudasplit import (  # noqa: E402
    binding_signatures,
    bindings_source,
    bindings_tag,
    bindings_tail,
    split_cuda_source,
    split_prelude,
)
from forge_lsp.engine.harness.loading import torch_include_dir  # noqa: E402

WORK = split_check.WORK / "bindings"
BASE = ["-DTORCH_API_INCLUDE_EXTENSION_H", "-D_GLIBCXX_USE_CXX11_ABI=1", "-fPIC", "-std=c++17"]


def record(path: Path) -> dict | None:
    r = subprocess.run([sys.executable, "-c", split_check.CHILD, str(path)], capture_output=True, text=True)
    try:
        got = json.loads(r.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None
    calls = [c for c in got.get("calls", []) if c.get("cuda")]
    return calls[0] if calls else None


def gxx(args: list[str], cwd: Path) -> tuple[bool, float]:
    t0 = time.perf_counter()
    done = subprocess.run(["g++", *args], cwd=cwd, capture_output=True, text=True)
    return done.returncode == 0, time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*", type=Path)
    ap.add_argument("--sample", type=int, default=12, help="time every n-th candidate (all are counted)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    files: list[Path] = []
    for p in args.paths or split_check.DIRS:
        files += sorted(p.glob("*.py")) if p.is_dir() else [p]
    WORK.mkdir(parents=True, exist_ok=True)
    inc, _ = split_check.flags_common()
    headers = {}
    for lite in (False, True):
        h = WORK / ("lite" if lite else "full") / "forge_split_prelude.h"
        h.parent.mkdir(exist_ok=True)
        h.write_text(split_prelude(torch_include_dir(), lite=lite) + "\n")
        headers[lite] = h
    pch_done: dict[tuple[bool, str], float] = {}
    bind_done: dict[str, float] = {}
    rows, sets, planned = [], set(), 0
    for n, path in enumerate(files):
        call = record(path)
        if call is None:
            continue
        kw = call["kw"]
        cpp = [call["cpp"]] if isinstance(call["cpp"], str) else list(call["cpp"] or [])
        functions = kw.get("functions") or []
        functions = [functions] if isinstance(functions, str) else list(functions)
        sigs = binding_signatures(cpp, functions)
        if sigs is None:
            continue
        planned += 1
        distinct = sorted(set(sigs))
        sets.add(tuple(distinct))
        if n % args.sample:
            continue
        split = split_cuda_source(
            cpp,
            call["cuda"],
            torch_include_dir(),
            str(path),
            list(kw.get("extra_cuda_cflags") or []) + ["-lineinfo"],
            functions,
            prelude_include=str(headers[False]),
        )
        if split is None:
            continue
        cflags = [f for f in kw.get("extra_cflags") or [] if f.strip() and not f.startswith("-O")] + split.host_flags
        flags = [*inc, *BASE, *cflags]
        key = " ".join(cflags)
        for lite in (False, True):  # each prelude precompiled for these flags, once, untimed
            if (lite, key) not in pch_done:
                gch = headers[lite].with_name(headers[lite].name + ".gch")
                gch.mkdir(exist_ok=True)
                out = gch / f"{hashlib.sha256(key.encode()).hexdigest()[:12]}.gch"
                ok, s = gxx([*flags, "-x", "c++-header", str(headers[lite]), "-o", str(out)], WORK)
                pch_done[(lite, key)] = s
        folder = WORK / path.stem
        folder.mkdir(exist_ok=True)
        bindings = "\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n" + "".join(
            f'm.def("{f}", torch::wrap_pybind_function({f}), "{f}");\n' for f in functions
        )
        (folder / "inline.cpp").write_text("\n".join(split.host) + bindings + "}\n")
        tag = bindings_tag(sigs, True)
        lite_host = [split.host[0].replace(str(headers[False]), str(headers[True]), 1), *split.host[1:]]
        (folder / "shared.cpp").write_text(
            "\n".join(lite_host) + "\n" + bindings_tail({f: f for f in functions}, sigs, tag)
        )
        name = ["-DTORCH_EXTENSION_NAME=check"]
        ok_inline, s_inline = gxx([*flags, *name, "-c", "inline.cpp", "-o", "inline.o"], folder)
        ok_shared, s_shared = gxx([*flags, *name, "-c", "shared.cpp", "-o", "shared.o"], folder)
        bind_s = 0.0
        if (tag, key) not in bind_done:
            (folder / "bind.cpp").write_text(bindings_source(str(headers[False]), distinct, tag, True))
            ok_bind, bind_s = gxx([*flags, "-c", "bind.cpp", "-o", "bind.o"], folder)
            bind_done[(tag, key)] = bind_s if ok_bind else float("nan")
        rows.append(
            {
                "candidate": path.stem,
                "flags": key,
                "inline_s": round(s_inline, 2),
                "shared_s": round(s_shared, 2),
                "bindings_s": round(bind_s, 2),
                "ok": ok_inline and ok_shared,
            }
        )
        print(
            f"{path.stem:<70} inline {s_inline:5.2f} s  shared {s_shared:5.2f} s  {'' if rows[-1]['ok'] else 'FAILED'}"
        )
    if args.out:
        args.out.write_text(json.dumps({"rows": rows, "planned": planned, "sets": len(sets)}, indent=1))
    ok = [r for r in rows if r["ok"]]
    print(f"{len(files)} candidates: {planned} bind through a shared object, {len(sets)} distinct sets of types")
    if ok:
        inline, shared = [r["inline_s"] for r in ok], [r["shared_s"] for r in ok]
        binds = [s for s in bind_done.values() if s == s]
        print(
            f"{len(ok)} timed: main.cpp median {statistics.median(inline):.2f} s inline, "
            f"{statistics.median(shared):.2f} s shared; bindings objects {len(binds)} "
            f"(median {statistics.median(binds):.2f} s each, compiled once per set of types and flags)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
