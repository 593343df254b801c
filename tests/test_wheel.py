"""The wheel: built from this checkout and installed in a fresh venv that cannot see the source tree.

The installed `forge optimize` loads forge's prompt templates from the package (`forge_lsp.prompts`)
and, with a scripted model, renders the Coder's prompt from them; the installed `forge-lsp` answers
initialize → shutdown → exit over stdio. Slow: a venv, CPU torch and the dependencies from the
package index (about 1-2 minutes here).
"""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import subprocess
import sys
import threading
import tomllib
import zipfile
from pathlib import Path

import pytest
from setuptools import find_namespace_packages

pytest_plugins = ["fake_openai"]

ROOT = Path(__file__).resolve().parents[1]
#: The CPU wheel on this machine's disk. Installed first, and pinned while the wheel's dependencies
#: are resolved: an open `torch` requirement would pull a multi-GB CUDA build.
TORCH = "torch==2.13.0"

FAST_SOFTMAX = (
    "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
    "        return torch.softmax(x, dim=1)\n"
)


def test_every_subpackage_is_in_the_wheel_list():
    """pyproject.toml lists the packages (prompts/ is mapped in, so discovery cannot be used): none is missing."""
    listed = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    found = [  # folders with Python in them: a data folder (the report's vendored scripts) ships as package data
        p
        for p in find_namespace_packages(where=str(ROOT), include=["forge_lsp", "forge_lsp.*"])
        if any((ROOT / p.replace(".", "/")).glob("*.py"))
    ]
    data = [
        "forge_lsp.report.vendor",
        "forge_lsp.report.vendor.LICENSES",
    ]  # listed so that setuptools ships them quietly
    assert all((ROOT / d.replace(".", "/")).is_dir() for d in data)
    assert sorted(listed) == sorted({*found, "forge_lsp.prompts", *data}), (
        "add new subpackages of forge_lsp to [tool.setuptools] packages in pyproject.toml"
    )


def _run(cmd: list[str], *, cwd: Path, env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def _ok(r: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert r.returncode == 0, f"{r.args}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r


def _clean_env(**extra: str) -> dict[str, str]:
    """No path into the source tree, no model, no prompt override."""
    drop = ("PYTHONPATH", "VIRTUAL_ENV", "OPENAI_API_KEY", "FORGE_MODEL", "FORGE_PROMPTS_DIR", "PYTHONSTARTUP")
    return {k: v for k, v in os.environ.items() if k not in drop} | {"OMP_NUM_THREADS": "1"} | extra


def _build_wheel(tmp_path: Path) -> Path:
    """`pip wheel` of a copy of the project files (no build/ or egg-info of the checkout can leak in)."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    junk = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in ("forge_lsp", "prompts"):
        shutil.copytree(ROOT / name, src / name, ignore=junk)
    dist = tmp_path / "dist"
    # the build backend of this venv: offline, and the same setuptools that made the editable install
    _ok(
        _run(
            [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", dist, src],
            cwd=tmp_path,
            env=_clean_env(),
        )
    )
    (wheel,) = dist.glob("forge_lsp-*.whl")
    return wheel


def _frame(message: dict) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def _read_frames(stream, out: queue.Queue) -> None:
    """Raw LSP framing: headers up to a blank line, then Content-Length bytes of JSON."""
    while True:
        length = None
        while True:
            line = stream.readline()
            if not line:
                out.put(None)
                return
            if line in (b"\r\n", b"\n"):
                break
            name, _, value = line.decode("ascii").partition(":")
            if name.strip().lower() == "content-length":
                length = int(value.strip())
        assert length is not None, "a frame without Content-Length"
        out.put(json.loads(stream.read(length)))


def _response(frames: queue.Queue, request_id: int, timeout: float = 120) -> dict:
    while True:
        message = frames.get(timeout=timeout)
        assert message is not None, "forge-lsp closed its stdout before answering"
        if message.get("id") == request_id and "method" not in message:
            return message


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_installed_wheel_runs_without_the_source_tree(tmp_path, fake_openai):
    wheel = _build_wheel(tmp_path)
    venv = tmp_path / "venv"
    env = _clean_env()
    _ok(_run([sys.executable, "-m", "venv", venv], cwd=tmp_path, env=env))
    py, bindir = venv / "bin" / "python", venv / "bin"
    _ok(_run([py, "-m", "pip", "install", "-q", TORCH], cwd=tmp_path, env=env, timeout=900))
    pin = tmp_path / "constraints.txt"
    pin.write_text(TORCH + "\n")
    _ok(_run([py, "-m", "pip", "install", "-q", "-c", pin, wheel], cwd=tmp_path, env=env, timeout=900))

    where = _ok(
        _run(
            [py, "-c", "import forge_lsp, pathlib; print(pathlib.Path(forge_lsp.__file__).parent / 'examples')"],
            cwd=tmp_path,
            env=env,
        )
    )
    examples = Path(where.stdout.strip())
    site = venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    assert examples == site / "forge_lsp" / "examples"

    # (a) `forge optimize` without a model: offline candidates only (none here), the templates are loaded
    ws = tmp_path / "ws"
    ws.mkdir()
    cache = tmp_path / "cache"
    opt = [bindir / "forge", "optimize", "--device", "cpu", "--no-offline", "--cache-dir", cache]
    r = _run([*opt, examples / "softmax_task.py", "--workspace", ws], cwd=ws, env=env)
    out = r.stdout + r.stderr
    assert "prompt templates are missing" not in out and "Traceback" not in out, out[-4000:]
    assert "No model configured" in r.stderr and r.returncode == 1, out[-4000:]  # 1: nothing to evaluate
    runs = _ok(_run([bindir / "forge", "runs", "--workspace", ws, "--json"], cwd=ws, env=env))
    (run,) = json.loads(runs.stdout)
    assert run["status"] == "done" and run["candidates"] == 0

    # ... and with a (scripted) model: the Coder's prompt is rendered from the installed templates
    ws2 = tmp_path / "ws2"
    ws2.mkdir()
    task = ws2 / "softmax_task.py"
    shutil.copy2(examples / "softmax_task.py", task)
    (ws2 / "forge.toml").write_text(f'model = "scripted"\nbase_url = "{fake_openai.base_url}"\n')
    fake_openai.script(json.dumps({"summary": "torch.softmax", "source": FAST_SOFTMAX}))
    r = _run([*opt, task, "--rounds", "1", "--search", "linear"], cwd=ws2, env=env)
    out = r.stdout + r.stderr
    assert r.returncode in (0, 1) and "Traceback" not in out, out[-4000:]  # 1: verified, but not faster
    assert re.search(r"correct c\d+", r.stderr), out[-4000:]
    (request,) = fake_openai.chat_requests
    system, user = (m["content"] for m in request.messages[:2])
    assert system.startswith("You are the Coder of forge") and "How forge checks a candidate" in system
    assert f"## Reference ({task})" in user and "return torch.softmax(x, dim=1)" in user
    # the run's report from the installed package: its template and vendored scripts are in the wheel
    page = ws2 / "report.html"
    _ok(_run([bindir / "forge", "report", "latest", "-o", page], cwd=ws2, env=env))
    html = page.read_text()
    assert "uPlot" in html and "hljs" in html and len(html) > 100_000, html[:2000]

    # the wheel carries every template, and the public loader reads the installed files (not the checkout's)
    names = zipfile.ZipFile(wheel).namelist()
    for template in sorted(p.name for p in (ROOT / "prompts").glob("*.j2")):
        assert f"forge_lsp/prompts/{template}" in names
    probe = (
        "import json; from forge_lsp.agent.roles import Prompts, RepairAdvice, coder_messages, instruction_from\n"
        "p = Prompts()\n"
        "m = coder_messages(p, {'reference_source': 'x'}, parent=None, instruction=None, failed_siblings=[], examples=[])\n"
        "a = instruction_from(RepairAdvice(critical_issue='off by one', fix='use <='))\n"
        "print(json.dumps({'coder': str(p.source_of('coder.j2')), 'system': m[0]['content'], 'instruction': a}))"
    )
    shown = json.loads(_ok(_run([py, "-c", probe], cwd=tmp_path, env=env)).stdout)
    assert shown["coder"] == str(site / "forge_lsp" / "prompts" / "coder.j2")
    assert "How forge checks a candidate" in shown["system"]
    assert shown["instruction"] == "Fix this problem: off by one\nMinimal fix: use <="

    # (b) the installed `forge-lsp`: initialize → shutdown → exit over stdio, raw Content-Length frames
    with (tmp_path / "lsp.stderr").open("wb") as err:
        proc = subprocess.Popen(
            [bindir / "forge-lsp"], cwd=ws, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err
        )
        try:
            frames: queue.Queue = queue.Queue()
            threading.Thread(target=_read_frames, args=(proc.stdout, frames), daemon=True).start()
            init = {"processId": os.getpid(), "rootUri": ws.as_uri(), "capabilities": {}}
            proc.stdin.write(_frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}))
            proc.stdin.flush()
            reply = _response(frames, 1)
            assert "capabilities" in reply["result"], reply
            proc.stdin.write(_frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
            proc.stdin.write(_frame({"jsonrpc": "2.0", "id": 2, "method": "shutdown"}))
            proc.stdin.flush()
            reply = _response(frames, 2)
            assert "error" not in reply and reply.get("result") is None, reply
            proc.stdin.write(_frame({"jsonrpc": "2.0", "method": "exit"}))
            proc.stdin.flush()
            assert proc.wait(timeout=60) == 0, (tmp_path / "lsp.stderr").read_text()[-3000:]
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
