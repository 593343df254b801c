"""Speed of the language server's workspace index (forge_lsp.workspace), CPU only.

Generates a synthetic workspace in a temporary folder (default 1,000 files: Python files with
nn.Modules, KernelBench-style task files, plain Python, .cu and .cuh files, a pyproject.toml with
[tool.forge.modules] entries, and a .venv that must be skipped), then measures:

* ``scan()`` of the whole workspace (best and median of a few runs);
* ``update()`` + ``module_at()`` per edit of one file (what a didChange costs), p50/p99/max over a
  few hundred calls, for ordinary edits, edits that leave a syntax error (mid-typing), CUDA files
  (``update()`` + ``kernel_at()``), and one large (5,000-line) Python file.

    python benchmarks/index_speed.py [--files 1000] [--calls 300] [--json out.json]

The table is printed last.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from forge_lsp.workspace import WorkspaceIndex  # noqa: E402
from forge_lsp.workspace.index import _chunk_facts, content_hash  # noqa: E402

MODULE_FILE = '''"""Layers, generated for the index benchmark ({i})."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def helper_{i}(x, scale=1.0):
    return x * scale / math.sqrt(x.shape[-1])


class Norm{i}(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        var = x.pow(2).mean(-1, keepdim=True)
        return x * torch.rsqrt(var + self.eps) * self.weight


class Attention{i}(nn.Module):
    def __init__(self, dim: int, heads: int = 8, dropout: float = 0.0):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        b, t, d = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q = q.view(b, t, self.heads, -1).transpose(1, 2)
        k = k.view(b, t, self.heads, -1).transpose(1, 2)
        v = v.view(b, t, self.heads, -1).transpose(1, 2)
        att = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
        if mask is not None:
            att = att.masked_fill(mask, float("-inf"))
        att = self.drop(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).reshape(b, t, d)
        return self.proj(y)


class Block{i}(Norm{i}):
    def __init__(self, dim: int, hidden: int):
        super().__init__(dim)
        self.attn = Attention{i}(dim)
        self.up = nn.Linear(dim, hidden)
        self.down = nn.Linear(hidden, dim)

    def forward(self, x):
        x = x + self.attn(super().forward(x))
        return x + self.down(F.gelu(self.up(x)))


class Settings{i}:
    depth = 4
    width = 256

    def describe(self):
        return f"{{self.depth}}x{{self.width}}"
'''

TASK_FILE = '''"""Task {i}."""
import torch
import torch.nn as nn

batch_size = {i} % 7 + 16
features = {features}


class Model(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.fc = nn.Linear(features, features)
        self.norm = nn.LayerNorm(features)

    def forward(self, x):
        return torch.relu(self.norm(self.fc(x)))


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features]
'''

PLAIN_FILE = '''"""Utilities ({i}): no modules here."""

import json
import os
from dataclasses import dataclass


@dataclass
class Record{i}:
    name: str
    value: float


def load_{i}(path):
    with open(path) as fh:
        return [Record{i}(**r) for r in json.load(fh)]


def save_{i}(path, records):
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump([r.__dict__ for r in records], fh)
    os.replace(tmp, path)
'''

CUDA_FILE = """#include <cuda_runtime.h>

// kernels generated for the index benchmark ({i})

__device__ __forceinline__ float warp_sum(float v) {{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
    return v;
}}

extern "C" __global__ void __launch_bounds__(256) row_sum_{i}(const float* __restrict__ x, float* y, int cols) {{
    float acc = 0.f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) acc += x[blockIdx.x * cols + c];
    acc = warp_sum(acc);
    if ((threadIdx.x & 31) == 0) atomicAdd(&y[blockIdx.x], acc);
}}

template <int BLOCK>
__global__ void
scale_{i}(float* y, float s, int n)
{{
    int i = blockIdx.x * BLOCK + threadIdx.x;
    if (i < n) {{
        y[i] *= s;   /* "}}" in a comment */
    }}
}}

__global__ void add_{i}(const float* a, const float* b, float* c, int n) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}}
"""

HEADER_FILE = """#pragma once
__global__ void fill_{i}(float* out, float value, int n);
__device__ float clampf_{i}(float v, float lo, float hi);
"""


def make_workspace(root: Path, n_files: int, rng: random.Random) -> dict[str, list[Path]]:
    kinds = {"modules": 0.40, "tasks": 0.20, "plain": 0.20, "cuda": 0.15, "headers": 0.05}
    made: dict[str, list[Path]] = {k: [] for k in kinds}
    counts = {k: int(n_files * share) for k, share in kinds.items()}
    counts["modules"] += n_files - sum(counts.values())
    for kind, count in counts.items():
        for i in range(count):
            folder = root / f"pkg{i % 25}" / kind
            folder.mkdir(parents=True, exist_ok=True)
            if kind == "modules":
                path, text = folder / f"layers_{i}.py", MODULE_FILE.format(i=i)
            elif kind == "tasks":
                path, text = folder / f"task_{i}.py", TASK_FILE.format(i=i, features=rng.choice([256, 512, 1024]))
            elif kind == "plain":
                path, text = folder / f"util_{i}.py", PLAIN_FILE.format(i=i)
            elif kind == "cuda":
                path, text = folder / f"kernels_{i}.cu", CUDA_FILE.format(i=i)
            else:
                path, text = folder / f"common_{i}.cuh", HEADER_FILE.format(i=i)
            path.write_text(text)
            made[kind].append(path)
    venv = root / ".venv" / "lib" / "python3.11" / "site-packages" / "torch"
    venv.mkdir(parents=True)
    for i in range(300):  # must be skipped
        (venv / f"skipped_{i}.py").write_text(MODULE_FILE.format(i=i))
    entries = "".join(
        f'\n[[tool.forge.modules]]\nmodule = "{p.relative_to(root).as_posix()}::Attention{p.stem.split("_")[1]}"\n'
        f'task = "{made["tasks"][k % len(made["tasks"])].relative_to(root).as_posix()}"\n'
        for k, p in enumerate(made["modules"][:20])
    )
    (root / "pyproject.toml").write_text('[project]\nname = "bench"\n\n[tool.forge]\nmodel = "m"\n' + entries)
    return made


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


_VERSIONS = itertools.count(1)  # editor versions only grow (an older one is ignored as stale)


def time_updates(index: WorkspaceIndex, paths: list[Path], calls: int, rng: random.Random, edit, lookup) -> list[float]:
    texts = {p: p.read_text() for p in paths}
    out = []
    for n in range(calls):
        path = rng.choice(paths)
        text = edit(texts[path], n)
        line = rng.randrange(max(1, text.count("\n")))
        version = next(_VERSIONS)
        t0 = time.perf_counter()
        got = index.update(path, text, version=version)
        lookup(path, line)
        out.append(time.perf_counter() - t0)
        assert got.version == version and got.content_hash == content_hash(text), "the update was not applied"
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--scans", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, help="also write the results here")
    args = ap.parse_args()
    rng = random.Random(args.seed)

    with tempfile.TemporaryDirectory(prefix="forge-index-bench-") as tmp:
        root = Path(tmp)
        made = make_workspace(root, args.files, rng)
        big = root / "big_model.py"
        big.write_text("".join(MODULE_FILE.format(i=1000 + i) for i in range(70)))  # ~5,000 lines
        n_lines_big = big.read_text().count("\n")

        scans = []
        for _ in range(args.scans):
            _chunk_facts.cache_clear()  # cold: nothing parsed before
            index = WorkspaceIndex(root)
            t0 = time.perf_counter()
            index.scan()
            scans.append(time.perf_counter() - t0)
        n_indexed = len(index.files())
        n_modules = len(index.modules())
        n_kernels = len(index.kernels())
        with_inputs = sum(1 for _, m in index.modules() if m.inputs is not None)
        skipped_venv = not any(".venv" in p for p in index.files())

        py = made["modules"] + made["tasks"] + made["plain"]
        cu = made["cuda"] + made["headers"]

        def nth_return(text: str, n: int) -> int:  # the offset of some `return ` (spread over the file), or -1
            found = [m.start() for m in re.finditer("return ", text)]
            return found[(n * 7919) % len(found)] if found else -1

        def touch(text: str, n: int) -> str:  # a small edit inside a function body, or a new last line
            at = nth_return(text, n) if n % 2 else -1
            return text[:at] + f"return {n + 1} * " + text[at + 7 :] if at >= 0 else text + f"\n# edit {n}\n"

        def mid_typing(text: str, n: int) -> str:  # an unclosed bracket: the file does not parse right now
            at = nth_return(text, n)
            return text[:at] + "return (" + text[at + 7 :] if at >= 0 else text + "\nx = (\n"

        def cu_edit(text: str, n: int) -> str:
            return text + f"\n// edit {n}\n"

        results = {
            "update+module_at (.py edit)": time_updates(index, py, args.calls, rng, touch, index.module_at),
            "update+module_at (syntax error)": time_updates(index, py, args.calls, rng, mid_typing, index.module_at),
            "update+kernel_at (.cu/.cuh edit)": time_updates(index, cu, args.calls, rng, cu_edit, index.kernel_at),
            f"update+module_at ({n_lines_big}-line .py)": time_updates(
                index, [big], max(20, args.calls // 10), rng, touch, index.module_at
            ),
            f"update+module_at ({n_lines_big}-line, error)": time_updates(
                index, [big], max(20, args.calls // 10), rng, mid_typing, index.module_at
            ),
        }

    rows = [
        ("scan() best", min(scans) * 1e3, None, None),
        ("scan() median", statistics.median(scans) * 1e3, None, None),
    ]
    for name, values in results.items():
        rows.append((name, percentile(values, 50) * 1e3, percentile(values, 99) * 1e3, max(values) * 1e3))
    summary = {
        "files": args.files,
        "indexed": n_indexed,
        "modules": n_modules,
        "modules_with_inputs": with_inputs,
        "kernels": n_kernels,
        "venv_skipped": skipped_venv,
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "rows": [{"what": r[0], "p50_ms": r[1], "p99_ms": r[2], "max_ms": r[3]} for r in rows],
    }
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2) + "\n")
    print(
        f"workspace: {args.files} files generated (+300 in .venv, skipped: {skipped_venv}), {n_indexed} indexed, "
        f"{n_modules} modules ({with_inputs} with example inputs), {n_kernels} kernels; "
        f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}"
    )
    print()
    print(f"{'measurement':<40} {'p50 / time ms':>14} {'p99 ms':>9} {'max ms':>9}")

    def fmt(v):
        return f"{v:9.2f}" if v is not None else f"{'':>9}"

    for name, p50, p99, mx in rows:
        print(f"{name:<40} {p50:14.2f} {fmt(p99)} {fmt(mx)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
