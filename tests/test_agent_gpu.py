"""`forge optimize --apply` on a real GPU (run with ``pytest -m gpu`` on the GPU machine): the offline
search picks a verified Triton kernel, the class in the user's file is rewritten, and the rewritten
module runs that kernel on CUDA inputs of the verified domain and the original code elsewhere."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU visible to torch"),
]

CHECK = """
import importlib.util, json, sys
import torch


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


new, old = load(sys.argv[1], "rewritten"), load(sys.argv[2], "original")
report = {}
x = torch.randn(4096, 8192, device="cuda") * 3
with torch.no_grad():
    report["cuda_match"] = torch.allclose(new.Model()(x), old.Model()(x), atol=1e-5, rtol=1e-5)
    report["after_cuda"] = dict(new.Model._forge_calls)
    y = torch.randn(64, 100) * 3  # a CPU input: outside the verified domain
    report["cpu_match"] = torch.allclose(new.Model()(y), old.Model()(y))
    report["after_cpu"] = dict(new.Model._forge_calls)
    h = x[:64].half()  # another dtype: outside the verified domain
    report["half_match"] = torch.allclose(new.Model()(h), old.Model()(h))
    report["after_half"] = dict(new.Model._forge_calls)
print("REPORT " + json.dumps(report))
"""


def test_optimize_apply_rewrites_the_class_with_a_triton_kernel_that_runs_on_cuda(tmp_path):
    task = tmp_path / "softmax.py"
    shutil.copy(ROOT / "corpus" / "ops" / "tasks" / "softmax.py", task)
    original = task.read_text()
    # the Triton kernel alone: torch.compile's candidates can win the softmax too (1.55x on the H100 on 2026-12-07),
    # and the rewrite of the class with a compiled forward is the model-wide tests'
    (tmp_path / "forge.toml").write_text("compile_modes = []\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("FORGE_")}
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "forge_lsp.cli.main",
            "optimize",
            str(task),
            "--apply",
            "--device",
            "cuda:0",
            "--cache-dir",
            str(tmp_path / "cache"),
            "--quiet",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=900,
    )
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "no model configured" in (p.stdout + p.stderr).lower()
    rewritten = task.read_text()
    assert rewritten != original and "@triton.jit" in rewritten and "_forge_calls" in rewritten
    (tmp_path / "original.py").write_text(original)
    (tmp_path / "check.py").write_text(textwrap.dedent(CHECK))
    c = subprocess.run(
        [sys.executable, "check.py", str(task), "original.py"],
        capture_output=True,
        text=True,
        env={**env, "TRITON_CACHE_DIR": str(tmp_path / "triton")},
        cwd=tmp_path,
        timeout=300,
    )
    assert c.returncode == 0, c.stdout[-3000:] + c.stderr[-3000:]
    r = json.loads(next(line for line in c.stdout.splitlines() if line.startswith("REPORT "))[len("REPORT ") :])
    assert r["cuda_match"] and r["after_cuda"] == {"optimized": 1, "reference": 0}, r
    assert r["cpu_match"] and r["after_cpu"] == {"optimized": 1, "reference": 1}, r
    assert r["half_match"] and r["after_half"] == {"optimized": 1, "reference": 2}, r
