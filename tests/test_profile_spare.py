"""Spare profiled processes (`profiler/spare.py`): started ahead, used by one profile each, replaced behind it, and
ended with their keeper. On this CPU-only machine a spare for ``cuda:0`` starts, finds no CUDA, and says so when its
request comes: the in-process path falls back with that reason, as it would on a machine whose CUPTI is missing."""

from __future__ import annotations

import time

import pytest
from conftest import FIXTURES

from forge_lsp.engine import load_task
from forge_lsp.profiler.ncu import profile
from forge_lsp.profiler.spare import Spares

pytestmark = pytest.mark.integration  # real processes


@pytest.fixture
def no_ncu(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.delenv("NCU", raising=False)
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    import forge_lsp.profiler.ncu as ncu_mod

    monkeypatch.setattr(ncu_mod.glob, "glob", lambda pattern: [])


def waiting(spares: Spares):
    (spare,) = spares._waiting.values()
    return spare


def test_a_profile_takes_the_waiting_spare_and_a_new_one_waits_behind_it(cache_dir, no_ncu):
    spares = Spares()
    try:
        spares.warm("cuda:0", cache_dir)
        first = waiting(spares)
        spares.warm("cuda:0", cache_dir)  # one spare per device and cache
        assert waiting(spares) is first
        result = profile(load_task(FIXTURES / "softmax_small.py"), device="cuda:0", cache_dir=cache_dir, spares=spares)
        assert result.mode == "degraded"
        assert "in-process profile (CUPTI) was unavailable: CUDA did not start here" in result.reason
        assert "Nsight Compute (ncu) was not found" in result.reason
        assert first.proc.returncode == 3  # it ran the request: no CUDA here, said in its result
        second = waiting(spares)
        assert second is not first and second.alive()
    finally:
        spares.close()
    assert second.proc.returncode is not None  # ended with its keeper


def test_a_spare_whose_keeper_closes_its_pipe_ends_without_running_anything(cache_dir):
    spares = Spares()
    spares.warm("cuda:0", cache_dir)
    spare = waiting(spares)
    spare.proc.stdin.close()
    deadline = time.monotonic() + 60
    while spare.alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert spare.proc.returncode == 0
    spares.close()


def test_spares_are_off_with_forge_profile_spare_0_and_never_on_the_cpu(cache_dir, monkeypatch):
    spares = Spares()
    spares.warm("cpu", cache_dir)
    assert spares._waiting == {}
    monkeypatch.setenv("FORGE_PROFILE_SPARE", "0")
    spares.warm("cuda:0", cache_dir)
    assert spares._waiting == {} and spares.take("cuda:0", cache_dir) is None
