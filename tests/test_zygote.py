"""CPU workers forked from a zygote that imported torch once (`FORGE_ZYGOTE=1`, `engine/zygote.py`): each forked
worker is what a started one is (its own session, its cache and working folder, its whole environment and no secret,
its pipes), its verdicts are a started worker's, its tree ends with forge's, and without a zygote the worker is
started the usual way, saying why."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from conftest import FIXTURES

from forge_lsp.engine import Candidate, EvalOptions, Evaluator, StageTimeouts, Status, load_task, zygote

pytestmark = pytest.mark.integration

_CHECKS_ITS_PROCESS = """
import os
import torch
import torch.nn as nn

CACHE = {cache!r}


class ModelNew(nn.Module):
    def forward(self, x):
        environ = open("/proc/self/environ", "rb").read()
        ok = (
            os.environ.get("FORGE_CACHE_DIR") == CACHE
            and os.getcwd() == CACHE
            and "FORGE_TEST_SECRET_TOKEN" not in os.environ
            and b"FORGE_TEST_SECRET_TOKEN" not in environ
            and os.getsid(0) == os.getpid()
        )
        y = torch.softmax(x, dim=1)
        return y if ok else y + 1.0
"""

_CRASHES = """
import os
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        os.abort()
"""


def _options() -> EvalOptions:
    return EvalOptions(
        timing_budget_s=0.1, min_reps=3, max_reps=10, warmup=1, timeouts=StageTimeouts(compile=120, first_call=60)
    )


def _ppid(pid: int) -> int:
    with open(f"/proc/{pid}/stat", "rb") as f:
        return int(f.read().rsplit(b")", 1)[1].split()[1])


def test_a_forked_worker_is_a_started_workers_equal_and_its_crash_a_verdict(tmp_path, monkeypatch):
    monkeypatch.setenv("FORGE_ZYGOTE", "1")
    monkeypatch.setenv("FORGE_TEST_SECRET_TOKEN", "sk-never-in-a-worker")
    cache = tmp_path / "cache"
    task = load_task(FIXTURES / "softmax_small.py")
    with Evaluator("cpu", options=_options(), cache_dir=cache) as ev:
        checked = ev.evaluate(task, Candidate.from_source(_CHECKS_ITS_PROCESS.format(cache=str(cache)), "own"))
        assert checked.status is Status.correct, checked.reason
        z = zygote.get_zygote(ev.worker.python, cache)
        assert ev.worker.proc is not None and _ppid(ev.worker.proc.pid) == z.proc.pid  # forked, not started
        title = Path(f"/proc/{ev.worker.proc.pid}/cmdline").read_bytes().rstrip(b"\0").decode()
        assert title.startswith(f"{ev.worker.python} -m forge_lsp.engine.worker --device cpu"), title  # as ps shows it
        assert b"FORGE_" not in Path(f"/proc/{ev.worker.proc.pid}/environ").read_bytes()  # blank, not the zygote's
        crashed = ev.evaluate(task, Candidate.from_source(_CRASHES, "aborts"))
        assert crashed.status is Status.crashed and "SIGABRT" in crashed.reason, crashed.reason
        again = ev.evaluate(task, Candidate.from_source(_CHECKS_ITS_PROCESS.format(cache=str(cache)), "own2"))
        assert again.status is Status.correct, again.reason  # a new worker, forked again
        pid = ev.worker.proc.pid
    deadline = time.monotonic() + 10
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not os.path.exists(f"/proc/{pid}")  # closed with its evaluator


_COUNTS_ITS_THREADS = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.softmax(x, dim=1)
        return y if torch.get_num_threads() == {threads} else y + 1.0
"""


def test_a_worker_given_a_thread_count_runs_with_it_though_a_zygote_without_it_was_started_first(tmp_path, monkeypatch):
    """OpenMP reads OMP_NUM_THREADS once, when torch loads: a worker forked from a zygote started without it would
    keep the zygote's thread pool whatever its own environment says."""
    monkeypatch.setenv("FORGE_ZYGOTE", "1")
    cache = tmp_path / "cache"
    task = load_task(FIXTURES / "softmax_small.py")
    parents = []
    for threads in ("2", "1"):
        monkeypatch.setenv("OMP_NUM_THREADS", threads)
        with Evaluator("cpu", options=_options(), cache_dir=cache) as ev:
            v = ev.evaluate(task, Candidate.from_source(_COUNTS_ITS_THREADS.format(threads=threads), f"t{threads}"))
            assert v.status is Status.correct, f"OMP_NUM_THREADS={threads}: {v.reason}"
            assert ev.worker.proc is not None
            parents.append(_ppid(ev.worker.proc.pid))
    assert os.getpid() not in parents and parents[0] != parents[1]  # both forked, each from a zygote of its own


def test_without_a_zygote_the_worker_is_started_and_its_log_says_why(tmp_path, monkeypatch):
    monkeypatch.setenv("FORGE_ZYGOTE", "1")

    def none(*_a, **_k):
        raise zygote.ZygoteError("the zygote could not import torch: testing")

    monkeypatch.setattr(zygote, "get_zygote", none)
    cache = tmp_path / "cache"
    task = load_task(FIXTURES / "softmax_small.py")
    with Evaluator("cpu", options=_options(), cache_dir=cache) as ev:
        v = ev.evaluate(task, Candidate.from_source(_CHECKS_ITS_PROCESS.format(cache=str(cache)), "own"))
        assert v.status is Status.correct, v.reason
        assert ev.worker.proc is not None and _ppid(ev.worker.proc.pid) == os.getpid()
        logs = Path(ev.worker._log_path).read_text(errors="replace")
    assert "no zygote to fork this worker from (the zygote could not import torch: testing)" in logs


def test_on_by_default_for_the_cpu_off_when_asked_and_never_for_a_gpu(monkeypatch):
    monkeypatch.delenv("FORGE_ZYGOTE", raising=False)
    assert zygote.enabled("cpu") and not zygote.enabled("cuda:0") and not zygote.enabled("cuda")
    for off in ("0", "false", "OFF", "no"):
        monkeypatch.setenv("FORGE_ZYGOTE", off)
        assert not zygote.enabled("cpu")
    monkeypatch.setenv("FORGE_ZYGOTE", "1")
    assert zygote.enabled("cpu") and not zygote.enabled("cuda:0")


def test_the_fork_request_is_typed_and_refuses_what_it_does_not_know():
    from pydantic import ValidationError

    from forge_lsp.engine.zygote_child import ForkRequest

    req = ForkRequest(args=["--device", "cpu"], env={"A": "1"}, cwd="/tmp", fds=[5, 6])
    assert ForkRequest.model_validate_json(req.model_dump_json()) == req
    with pytest.raises(ValidationError):
        ForkRequest.model_validate_json('{"args": [], "env": {}, "cwd": "/", "fds": [], "shell": "sh"}')
    with pytest.raises(ValidationError):
        ForkRequest.model_validate_json('{"args": "--device cpu", "env": {}, "cwd": "/", "fds": []}')


def test_a_malformed_fork_request_is_answered_and_the_zygote_forks_the_next(tmp_path):
    import socket
    import sys

    from forge_lsp.engine.zygote import Zygote

    z = Zygote(sys.executable, zygote.package_env(), tmp_path)
    log = os.open(tmp_path / "log", os.O_WRONLY | os.O_CREAT)
    try:
        with z._lock:  # what a confused parent might send: a field the zygote does not know
            socket.send_fds(z._sock, [b'{"args": [], "env": {}, "cwd": "/", "fds": [], "x": 1}'], [log])
            answer = z._answer(timeout=60)
        assert "pid" not in answer and "ForkRequest" in answer.get("error", ""), answer
        r, w = os.pipe()
        args = ["--device", "cpu", "--in-fd", str(r), "--out-fd", str(w)]
        proc = z.fork(args, env=zygote.package_env(), cwd=tmp_path, log_fd=log, fds=[r, w])
        assert proc.pid > 0 and proc.poll() is None  # forked, and waiting for its first request
        proc.kill()
        proc.wait(timeout=30)
    finally:
        os.close(log)
        z.close()
