"""Every process forge starts dies with what started it: `forge` ended by SIGTERM, SIGHUP or SIGKILL, an
Evaluator cancelled or closed, an optimization cancelled during the graph probe. Real process trees
(workers, the candidates' own children, compilers), read from /proc before the blow; no mocks."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import candidates as C
import pytest
from conftest import FIXTURES, ROOT
from proctree import descendants, running, seconds_until_gone

from forge_lsp.engine import Candidate, EvalOptions, Evaluator, StageTimeouts, load_task
from forge_lsp.engine.local_pool import LocalPool
from forge_lsp.engine.worker_client import EvaluationCancelled

pytestmark = pytest.mark.integration  # real processes end to end: left out of the fast loop (./dev test --fast)

#: How soon a whole tree must be gone (the requirement is 1 s; the margin is for a loaded machine).
GONE_WITHIN_S = 2.0

# A candidate whose forward starts processes — a child, a child in a session of its own, a child with a
# child — writes their pids, then blocks in C holding the GIL: no Python code runs in the worker again.
HANG_WITH_CHILDREN = """
import ctypes, os, subprocess, sys
import torch
import torch.nn as nn

MARK = {mark!r}


class ModelNew(nn.Module):
    def forward(self, x):
        kids = [
            subprocess.Popen(["sleep", "600"]),
            subprocess.Popen(["sleep", "601"], start_new_session=True),
            subprocess.Popen([sys.executable, "-c", "import subprocess, time; subprocess.Popen(['sleep', '602']); time.sleep(600)"]),
        ]
        with open(MARK + ".tmp", "w") as f:
            f.write(" ".join(str(k.pid) for k in kids))
        os.replace(MARK + ".tmp", MARK)
        ctypes.PyDLL(None).pause()
        return x
"""

# A C++ candidate whose compiler never finishes: its source includes a FIFO nobody writes to (the
# compiler blocks opening it), so worker → ninja → c++ → cc1plus stays up.
COMPILE_FOREVER = """
import os
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

FIFO = {fifo!r}
if not os.path.exists(FIFO):
    os.mkfifo(FIFO)
ext = load_inline(name="forge_fifo", cpp_sources='#include "' + FIFO + '"\\nint forge_fifo_answer() {{ return 42; }}',
                  functions=["forge_fifo_answer"])


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=1)
"""

# A task whose forward hangs only while torch.fx traces it (the graph probe), after starting a child: the
# worker's reference check (real tensors) passes, the probe hangs.
TASK_HANGS_UNDER_TRACING = """
import os, subprocess, time
import torch
import torch.nn as nn

MARK = {mark!r}
batch_size = 4
dim = 8


class Model(nn.Module):
    def forward(self, x):
        if isinstance(x, torch.fx.Proxy):
            child = subprocess.Popen(["sleep", "603"])
            with open(MARK + ".tmp", "w") as f:
                f.write(str(child.pid))
            os.replace(MARK + ".tmp", MARK)
            time.sleep(600)
        return torch.relu(x)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
"""


# ----------------------------------------------------------------------------- waiting
def wait_for(predicate, limit: float, what: str):
    end = time.monotonic() + limit
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def read_pids(mark: Path, limit: float = 120.0) -> list[int]:
    return wait_for(lambda: mark.exists() and [int(p) for p in mark.read_text().split()], limit, f"{mark}")


def forge_eval(task: Path, cand: Path, cache: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "forge_lsp.cli.main", "eval", str(task), str(cand), "--device", "cpu"]
        + ["--cache-dir", str(cache), "--no-timing"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # signals go to forge alone, never to the test's group
    )


# ----------------------------------------------------------------------------- the forge CLI
@pytest.mark.parametrize(
    "signo",
    [signal.SIGTERM, pytest.param(signal.SIGHUP, marks=pytest.mark.slow), signal.SIGKILL],  # HUP: TERM's path
    ids=lambda s: s.name,
)
def test_forge_ended_by_a_signal_leaves_no_process_behind(tmp_path, cache_dir, signo):
    mark = tmp_path / "pids"
    cand = tmp_path / "hang.py"
    cand.write_text(HANG_WITH_CHILDREN.format(mark=str(mark)))
    forge = forge_eval(FIXTURES / "softmax_small.py", cand, cache_dir)
    try:
        kids = read_pids(mark)
        time.sleep(0.3)  # into pause()

        # the third child starts its own child once its Python is up: on a loaded machine, after the mark
        def with_three_sleeps() -> dict | None:
            tree = descendants(forge.pid)
            return tree if sum("sleep 60" in c for c in tree.values()) == 3 else None

        tree = wait_for(with_three_sleeps, 30.0, "the candidate's three sleeps among forge's descendants")
        assert set(kids) <= set(tree), tree
        assert any("forge_lsp.engine.worker" in c for c in tree.values())
        os.kill(forge.pid, signo)
        gone = seconds_until_gone(tree)
        print(f"\n{signo.name}: {len(tree)} descendants of forge gone in {gone * 1000:.0f} ms")
        assert gone < GONE_WITHIN_S, f"still running after {signo.name}: {running(tree)} of {tree}"
        out = forge.communicate(timeout=10)[0].decode(errors="replace")
        if signo is signal.SIGKILL:
            assert forge.returncode == -signal.SIGKILL
        else:
            assert forge.returncode == 128 + signo, out
            assert f"terminated by {signo.name}" in out
    finally:
        if forge.poll() is None:
            forge.kill()
            forge.wait()


@pytest.mark.slow
def test_forge_killed_while_a_candidate_compiles_leaves_no_compiler(tmp_path, cache_dir):
    cand = tmp_path / "compile_forever.py"
    cand.write_text(COMPILE_FOREVER.format(fifo=str(tmp_path / "never.h")))
    forge = forge_eval(FIXTURES / "softmax_small.py", cand, cache_dir)
    try:
        tree = wait_for(
            lambda: (t := descendants(forge.pid)) and any("cc1plus" in c for c in t.values()) and t,
            180,
            "the compiler",
        )
        assert any(re.search(r"\bninja\b", c) for c in tree.values()), tree
        os.kill(forge.pid, signal.SIGKILL)
        gone = seconds_until_gone(tree)
        print(f"\nSIGKILL while compiling: {len(tree)} descendants gone in {gone * 1000:.0f} ms")
        assert gone < GONE_WITHIN_S, f"still running: {running(tree)} of {tree}"
    finally:
        if forge.poll() is None:
            forge.kill()
        forge.wait()


# ----------------------------------------------------------------------------- the engine
def _hang_in_thread(ev: Evaluator, cand: Candidate) -> tuple[threading.Thread, dict]:
    task = load_task(FIXTURES / "softmax_small.py")
    box: dict = {}

    def run() -> None:
        try:
            box["verdict"] = ev.evaluate(task, cand)
        except EvaluationCancelled:
            box["cancelled"] = time.monotonic()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, box


def test_cancelling_or_closing_an_evaluator_kills_its_workers_and_their_children(tmp_path, cache_dir):
    opts = EvalOptions(timing=False, timeouts=StageTimeouts(first_call=120))
    with Evaluator("cpu", options=opts, cache_dir=cache_dir) as ev:
        for end in ("cancel", "close"):
            mark = tmp_path / f"pids-{end}"
            thread, box = _hang_in_thread(ev, Candidate.from_source(HANG_WITH_CHILDREN.format(mark=str(mark)), end))
            read_pids(mark)
            time.sleep(0.2)
            assert ev.worker.proc is not None
            tree = {ev.worker.proc.pid: "worker"} | descendants(ev.worker.proc.pid)
            assert len(tree) == 5, tree  # the worker, its three children, one grandchild
            t0 = time.monotonic()
            ev.cancel() if end == "cancel" else ev.close()
            gone = seconds_until_gone(tree)
            print(f"\nEvaluator.{end}: {len(tree)} processes gone in {gone * 1000:.0f} ms")
            assert gone < GONE_WITHIN_S, f"still running after {end}: {running(tree)}"
            thread.join(10)
            assert "cancelled" in box and box["cancelled"] - t0 < GONE_WITHIN_S
        # closed or cancelled, the evaluator starts a new worker when asked again
        assert ev.evaluate(
            load_task(FIXTURES / "softmax_small.py"), Candidate.from_source(C.TORCH_CORRECT, "ok")
        ).correct


def test_a_cancel_between_evaluations_starts_the_next_one_in_a_new_worker(cache_dir):
    """A cancel kills the worker's process (and its judge's) whether or not a request is in flight. The next evaluation
    goes to a new process, not to the killed one that its parent may not yet have seen end: sent there, the request
    met a broken pipe (an exception out of `evaluate`, once in the whole suite) or a worker dying in `load_task`
    (then "retried in a fresh worker", 4 times in 15 on this machine)."""
    task = load_task(FIXTURES / "softmax_small.py")
    with Evaluator("cpu", options=EvalOptions(timing=False), cache_dir=cache_dir) as ev:
        assert ev.evaluate(task, Candidate.from_source(C.TORCH_CORRECT, "first")).correct
        for i in range(15):
            ev.cancel()
            v = ev.evaluate(task, Candidate.from_source(C.TORCH_CORRECT, f"after_cancel_{i}"))
            assert v.correct and not (v.memory and v.memory.retried), (i, v.status, v.reason)


@pytest.mark.slow
def test_cancelling_a_batch_kills_the_build_workers_compilers(tmp_path, cache_dir):
    task = load_task(FIXTURES / "softmax_small.py")
    fifo = str(tmp_path / "never.h")
    cands = [
        Candidate.from_source(COMPILE_FOREVER.format(fifo=fifo), "compile_forever"),
        Candidate.from_source(C.TORCH_CORRECT, "torch"),
    ]
    opts = EvalOptions(timing=False)
    before = set(descendants(os.getpid()))  # other tests' session-wide workers are not this batch's
    with LocalPool("cpu", options=opts, cache_dir=cache_dir, build_workers=1) as ev:
        box: dict = {}

        def run() -> None:
            try:
                box["verdicts"] = ev.evaluate_many(task, cands)
            except EvaluationCancelled:
                box["cancelled"] = True

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        tree = wait_for(
            lambda: (t := descendants(os.getpid())) and any("cc1plus" in c for c in t.values()) and t,
            180,
            "the compiler",
        )
        tree = {p: c for p, c in tree.items() if "-I -S -c" not in c and p not in before}  # the guardian stays
        ev.cancel()
        gone = seconds_until_gone(tree)
        print(f"\nEvaluator.cancel while building: {len(tree)} processes gone in {gone * 1000:.0f} ms")
        assert gone < GONE_WITHIN_S, f"still running: {running(tree)} of {tree}"
        thread.join(30)
        assert not thread.is_alive()


# ----------------------------------------------------------------------------- the offline graph probe
def _probe_tree() -> dict[int, str]:
    tree = descendants(os.getpid())
    probe = [p for p, c in tree.items() if "forge_lsp.agent.offline.probe" in c]
    if not probe:
        return {}
    return {probe[0]: tree[probe[0]]} | descendants(probe[0])


def test_cancel_during_the_offline_probe_kills_the_probe(tmp_path, cache_dir):
    from forge_lsp.agent.offline import probe_task

    mark = tmp_path / "probe-child"
    task_file = tmp_path / "hangs_under_tracing.py"
    task_file.write_text(TASK_HANGS_UNDER_TRACING.format(mark=str(mark)))
    cancel = threading.Event()
    box: dict = {}
    thread = threading.Thread(
        target=lambda: box.setdefault(
            "report", probe_task(load_task(task_file), device="cpu", cache_dir=cache_dir, timeout=300, cancel=cancel)
        ),
        daemon=True,
    )
    thread.start()
    read_pids(mark)
    tree = _probe_tree()
    assert len(tree) == 2, tree  # the probe and the child its traced forward started
    t0 = time.monotonic()
    cancel.set()
    gone = seconds_until_gone(tree)
    print(f"\nprobe cancelled: {len(tree)} processes gone in {gone * 1000:.0f} ms")
    assert gone < GONE_WITHIN_S, f"still running: {running(tree)}"
    thread.join(10)
    assert box["report"].error == "the graph probe was cancelled" and time.monotonic() - t0 < 5


@pytest.mark.slow
def test_cancelling_an_optimization_during_the_probe_kills_the_probe(tmp_path, cache_dir):
    from forge_lsp.usecases.optimize import ModuleOptimization, OptimizeRequest

    mark = tmp_path / "probe-child"
    task_file = tmp_path / "hangs_under_tracing.py"
    task_file.write_text(TASK_HANGS_UNDER_TRACING.format(mark=str(mark)))
    run = ModuleOptimization(
        OptimizeRequest(
            task_file=task_file,
            workspace=tmp_path,
            device="cpu",
            profile=False,
            cache_dir=cache_dir,
            overrides={"offline_library": True},  # the graph probe runs on the CPU too
        )
    )
    box: dict = {}
    before = set(descendants(os.getpid()))  # other tests' session-wide workers are not this run's
    thread = threading.Thread(target=lambda: box.setdefault("result", run.run()), daemon=True)
    thread.start()
    read_pids(mark, 180)
    tree = _probe_tree()
    assert len(tree) == 2, tree
    run.cancel()
    gone = seconds_until_gone(tree)
    print(f"\noptimization cancelled during the probe: {len(tree)} processes gone in {gone * 1000:.0f} ms")
    assert gone < GONE_WITHIN_S, f"still running: {running(tree)}"
    thread.join(60)
    assert box["result"].outcome.status == "cancelled"
    left = {p: c for p, c in descendants(os.getpid()).items() if "forge_lsp" in c and p not in before}
    assert not {p: c for p, c in left.items() if "zygote_child" not in c}  # the zygote serves the whole process


# ----------------------------------------------------------------------------- one way to start a child
#: Modules that may start processes without `forge_lsp.sandbox`, and why.
OUTSIDE_THE_SANDBOX = {
    # runs inside the worker: its children die with the worker (sandbox.children_die_with_this_process) and
    # are in the worker's process group and session
    "forge_lsp/runtime/nvcc.py",
    # the split build's nvcc and the prelude's precompile, beside torch's own ninja: inside build workers
    "forge_lsp/engine/harness/loading.py",
    # the zygote forks each worker, which then sets itself up as `sandbox.spawn` would (session, PDEATHSIG, its
    # environment); the zygote itself is started through the sandbox (tests/test_zygote.py)
    "forge_lsp/engine/zygote_child.py",
}


def test_every_child_process_starts_through_the_sandbox():
    starts = re.compile(
        r"subprocess\.(Popen|run|call|check_call|check_output)\(|os\.(fork|spawn\w*|posix_spawn\w*|system|popen)\(|multiprocessing"
    )
    found = set()
    for path in (ROOT / "forge_lsp").rglob("*.py"):
        rel = path.relative_to(ROOT).as_posix()
        if rel == "forge_lsp/sandbox.py":
            continue
        if starts.search(path.read_text()):
            found.add(rel)
    assert found <= OUTSIDE_THE_SANDBOX, f"start these through forge_lsp.sandbox: {sorted(found - OUTSIDE_THE_SANDBOX)}"


def test_a_cancel_during_the_final_recheck_ends_the_run_as_cancelled(tmp_path, cache_dir):
    """The final re-check (re-timing, and compute-sanitizer on CUDA) is part of the run: a cancel while it is in
    flight kills it and the run ends "cancelled", not with the worker's exception."""
    from forge_lsp.usecases.optimize import ModuleOptimization, OptimizeRequest

    task_file = tmp_path / "softmax_task.py"
    task_file.write_text((ROOT / "forge_lsp/examples/softmax_task.py").read_text())
    box: dict = {}

    def on_event(event) -> None:
        if event.kind == "final_retime":
            box["at"] = time.monotonic()
            threading.Timer(0.3, box["run"].cancel).start()

    box["run"] = run = ModuleOptimization(
        OptimizeRequest(task_file=task_file, workspace=tmp_path, device="cpu", profile=False, cache_dir=cache_dir),
        on_event=on_event,
    )
    result = run.run()
    assert "at" in box, "the run never reached its final re-check"
    assert result.outcome.status == "cancelled" and result.answer is None, result.outcome
    assert time.monotonic() - box["at"] < 30
