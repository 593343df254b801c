"""The test suite's own layering: the fast loop (`./dev test --fast`) is the unit layer, and a test in it that starts a
process fails, naming what it started (tests/conftest.py `_unit_tests_start_no_process`)."""

from __future__ import annotations

import pytest
from conftest import ROOT

pytest_plugins = ["pytester"]

_TESTS = """
import multiprocessing
import os
import platform
import subprocess

import pytest


def test_unmarked_starts_a_process():
    subprocess.run(["true"], check=True)


def test_unmarked_swallows_the_refusal():
    try:
        subprocess.run(["true"], check=True)
    except Exception:
        pass


def test_unmarked_forks():
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)


def test_unmarked_multiprocessing():
    p = multiprocessing.get_context("spawn").Process(target=print)
    p.start()
    p.join()


def test_unmarked_pure_logic_and_a_machine_probe():
    platform.uname().processor  # runs `uname -p`
    assert 1 + 1 == 2


@pytest.mark.integration
def test_marked_starts_a_process():
    subprocess.run(["true"], check=True)
"""


@pytest.mark.integration  # runs pytest in a child process
def test_a_unit_test_that_starts_a_process_fails_and_a_marked_one_passes(pytester):
    """Through subprocess, os.fork and multiprocessing alike, and also when the test swallows the refusal; a
    library's look at the machine (`uname -p`) and a test marked integration pass."""
    pytester.makeconftest((ROOT / "tests" / "conftest.py").read_text())
    pytester.makeini("[pytest]\nmarkers =\n    integration: x\n    slow: x\n    gpu: x\n")
    pytester.makepyfile(test_layers=_TESTS)
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider", "-rA")
    result.assert_outcomes(passed=3, failed=3, errors=1)  # the swallowed refusal passes its call, errs after
    text = result.stdout.str()
    for name, what in (("starts_a_process", "subprocess: true"), ("forks", "os.fork"), ("multiprocessing", "multi")):
        assert f"FAILED test_layers.py::test_unmarked_{name} " in text, text
        assert (
            f"test_layers.py::test_unmarked_{name} is a unit test (no integration/slow/gpu mark) and started a "
            f"process ({what}" in text
        ), text
    assert "ERROR test_layers.py::test_unmarked_swallows_the_refusal" in text
    assert "started a process (subprocess: true) though it is a unit test" in text
    for name in ("test_unmarked_pure_logic_and_a_machine_probe", "test_marked_starts_a_process"):
        assert f"PASSED test_layers.py::{name}" in text, text
