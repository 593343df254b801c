"""The device gate (`forge_lsp.engine.harness.gate`): work shares the device, a timing has it alone.

Each `DeviceGate` opens its own files, so two gates in one process exclude each other as two processes' do (flock
locks belong to the open file); threads stand in for the processes here.
"""

from __future__ import annotations

import threading
import time

import pytest

from forge_lsp.engine.devices import device_lanes
from forge_lsp.engine.harness.gate import WAIT_STAGE, DeviceGate, NoGate
from forge_lsp.engine.harness.nvml import own_memory_reader


@pytest.fixture
def folder(tmp_path):
    return tmp_path / "gates"


def _gates(folder, n: int) -> list[DeviceGate]:
    return [DeviceGate("GPU-0000-test", folder) for _ in range(n)]


def test_shared_holders_work_at_once(folder):
    a, b = _gates(folder, 2)
    inside = threading.Event()

    def enter() -> None:
        with b.shared():
            inside.set()

    with a.shared():
        t = threading.Thread(target=enter)
        t.start()
        t.join(5)
        assert inside.is_set()  # b got in while a held it


def test_a_timing_waits_for_work_in_flight_and_new_work_waits_for_the_timing(folder):
    worker, timer, late = _gates(folder, 3)
    log: list[str] = []
    released = threading.Event()

    def time_it() -> None:
        with timer.exclusive():
            log.append("timing starts")
            time.sleep(0.2)
            log.append("timing ends")

    def more_work() -> None:
        with late.shared():
            log.append("late work starts")

    with worker.shared():
        t1 = threading.Thread(target=time_it)
        t1.start()
        time.sleep(0.2)  # the timing now waits on the turnstile's far side
        t2 = threading.Thread(target=more_work)
        t2.start()
        time.sleep(0.2)
        assert log == []  # neither the timing nor the late work ran beside the work in flight
        log.append("work ends")
        released.set()
    t1.join(5)
    t2.join(5)
    # the timing, queued before the late work, ran before it and alone: no starvation by a stream of shared holders
    assert log == ["work ends", "timing starts", "timing ends", "late work starts"]
    assert timer.waited_s >= 0.3 and late.waited_s >= 0.2


def test_exclusive_inside_shared_gives_the_shared_hold_up_and_takes_it_again(folder):
    me, other = _gates(folder, 2)
    with me.shared():
        with me.exclusive():  # would deadlock on itself if it kept the shared hold
            got = threading.Event()
            t = threading.Thread(target=lambda: (other.shared().__enter__(), got.set()))
            t.start()
            time.sleep(0.1)
            assert not got.is_set()  # the device is this timing's alone
        t.join(5)
        assert got.is_set()  # the timing over, others work beside this one's shared hold again


def test_a_wait_is_said_with_the_wait_stage_then_the_stage_again(folder):
    holder, waiter = _gates(folder, 2)
    said: list[str] = []
    waiter.notify, waiter.stage = said.append, "verify"
    with waiter.shared():
        pass
    assert said == []  # no wait, nothing said
    with holder.exclusive():
        t = threading.Thread(target=lambda: waiter.shared().__enter__())
        t.start()
        time.sleep(0.1)
        assert said == [WAIT_STAGE]
    t.join(5)
    assert said == [WAIT_STAGE, "verify"]  # the stage's deadline restarts once the gate is held


def test_a_process_that_dies_holding_the_gate_releases_it(folder):
    dead = DeviceGate("GPU-0000-test", folder)
    cm = dead.exclusive()
    cm.__enter__()
    dead.close()  # what the OS does to a killed process's files
    alive = DeviceGate("GPU-0000-test", folder)
    done = threading.Event()
    t = threading.Thread(target=lambda: (alive.exclusive().__enter__(), done.set()))
    t.start()
    t.join(5)
    assert done.is_set()


def test_the_cpu_runs_one_lane_and_a_gpu_the_lanes_asked(monkeypatch):
    monkeypatch.delenv("FORGE_DEVICE_LANES", raising=False)
    assert device_lanes("cpu") == 1
    assert device_lanes("cpu", 4) == 1  # no gate keeps the host's cores to a timing
    assert device_lanes("cuda:0", 2) == 2
    assert device_lanes("cuda:0") == 3
    monkeypatch.setenv("FORGE_DEVICE_LANES", "1")
    assert device_lanes("cuda:1") == 1


def test_no_gate_and_no_nvml_figure_without_a_gpu():
    with NoGate().shared(), NoGate().exclusive():
        pass
    assert own_memory_reader("GPU-00000000-0000-0000-0000-000000000000") is None


def test_a_checkpoint_lets_a_waiting_timing_go_first(folder):
    worker, timer = _gates(folder, 2)
    log: list[str] = []

    def time_it() -> None:
        with timer.exclusive():
            log.append("timing")

    with worker.shared():
        worker.checkpoint()  # nobody waits: it keeps its hold
        assert log == []
        t = threading.Thread(target=time_it)
        t.start()
        time.sleep(0.1)
        assert log == []
        worker.checkpoint()  # between two steps: the timing runs now, then this work goes on
        assert log == ["timing"]
        log.append("next step")
    t.join(5)
    assert log == ["timing", "next step"]


def test_the_process_s_queued_work_is_drained_before_the_gate_is_given_up(folder):
    worker, timer = _gates(folder, 2)
    drained: list[str] = []
    worker.drain = lambda: drained.append("synchronized")
    with worker.shared():
        worker.checkpoint()
        assert drained == []  # kept: nothing to drain

        def time_it() -> None:
            with timer.exclusive():
                drained.append("timed")

        t = threading.Thread(target=time_it)
        t.start()
        time.sleep(0.1)
        worker.checkpoint()  # gives the gate up to the waiting timing: its kernels finish first
        assert drained == ["synchronized", "timed"]
    t.join(5)


def test_a_paused_hold_lets_a_timing_in_and_is_taken_again_after_it(folder):
    """A worker that waits for another process (the judge drawing its sets, which may time the reference alone)
    gives its shared hold up meanwhile: the timing gets the device, and the worker holds it again once that ended."""
    worker, judge = _gates(folder, 2)
    timed = threading.Event()
    log: list[str] = []

    def time_alone() -> None:
        with judge.exclusive():
            log.append("timing")
            time.sleep(0.2)
            log.append("timing ends")
        timed.set()

    with worker.shared():
        with worker.paused():
            t = threading.Thread(target=time_alone)
            t.start()
            assert timed.wait(5), "the timing waited for a hold given up"
        log.append("worker again")
        t.join(5)
    assert log == ["timing", "timing ends", "worker again"]
    with NoGate().paused():  # the CPU's gate: nothing to give up
        pass


_PROBED_TASK = """
import sys

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 2


def get_inputs():
    sys.modules["forge_gate_probe"].probe()  # asked while the judge draws this set on the host
    return [torch.randn(4, 4)]


def get_init_inputs():
    return []
"""


def test_the_judge_gives_the_gate_up_while_it_draws_inputs_on_the_host(folder, tmp_path, monkeypatch):
    """A judge drawing a task's sets beside a worker's evaluation holds the device's gate only for the reference's
    calls on the device: while `get_inputs()` runs on the host, the worker's timing or stream probe gets the device
    (before, the worker's exclusive hold waited for the judge's whole draw, about a second on the GPU)."""
    import os
    import sys
    import types

    import torch

    from forge_lsp.engine import EvalOptions, load_task
    from forge_lsp.engine.pipe import JudgeRequest
    from forge_lsp.engine.worker.judge import Judge
    from forge_lsp.engine.worker.state import WorkerState

    judge_gate, worker_gate = _gates(folder, 2)
    got: list[bool] = []

    def probe() -> None:
        took = threading.Event()

        def timing() -> None:
            with worker_gate.exclusive():
                took.set()

        t = threading.Thread(target=timing, daemon=True)
        t.start()
        got.append(took.wait(5))
        t.join(5)

    monkeypatch.setitem(sys.modules, "forge_gate_probe", types.SimpleNamespace(probe=probe))
    path = tmp_path / "probed.py"
    path.write_text(_PROBED_TASK)
    state = WorkerState(device=torch.device("cpu"), gate=judge_gate)
    r, w = os.pipe()
    os.set_blocking(w, False)
    try:
        with judge_gate.shared():  # as the judge serves every request
            ready = Judge(state, None).ready(
                JudgeRequest(task=load_task(path), options=EvalOptions(timing=False), sets=2), w
            )
    finally:
        os.close(r)
        os.close(w)
    assert ready.ok, ready.reason
    assert got == [True, True]  # each set's draw: the worker's exclusive hold came through
