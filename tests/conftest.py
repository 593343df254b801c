from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

# Ray reads these when it is imported, and a test module may import it at collection: set before any does. No usage
# reports, no token, and Ray's single-machine mode (every server of a Ray instance on 127.0.0.1, none on the network).
os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
os.environ["RAY_AUTH_MODE"] = "disabled"
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
sys.path.insert(0, str(Path(__file__).resolve().parent))


def _cuda_available() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except Exception:  # noqa: BLE001
        return False


@pytest.hookimpl(trylast=True)  # after `-m "not gpu"` deselected: no torch import at collection unless a GPU test stays
def pytest_collection_modifyitems(config, items):
    if not any("gpu" in item.keywords for item in items) or _cuda_available():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU (run `pytest -m gpu` on the GPU machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> Path:
    """The compile cache of the session's evaluators. With pytest-xdist, one for all the workers of the run (the
    cache's build locks let one build a source while the others wait), so no build is repeated per worker."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return tmp_path_factory.mktemp("forge-cache")
    shared = tmp_path_factory.getbasetemp().parent / "forge-cache"
    shared.mkdir(exist_ok=True)
    return shared


@pytest.fixture(scope="session")
def fast_options():
    from forge_lsp.engine import EvalOptions, StageTimeouts

    return EvalOptions(
        timing_budget_s=0.2,
        min_reps=5,
        max_reps=30,
        warmup=1,
        timeouts=StageTimeouts(compile=300, first_call=60, verify=60, time=60),
    )


@pytest.fixture(scope="session")
def cpu_evaluator(cache_dir, fast_options):
    from forge_lsp.engine import Evaluator

    ev = Evaluator("cpu", options=fast_options, cache_dir=cache_dir)
    yield ev
    ev.close()


@pytest.fixture()
def softmax_task():
    from forge_lsp.engine import load_task

    return load_task(FIXTURES / "softmax_small.py")


def short_tmp(prefix: str) -> Path:
    """A new folder with a short path, removed when the session ends: Ray's AF_UNIX socket paths, made under its
    temp dir, must stay under 107 bytes, which pytest-xdist's per-worker temp folders can pass."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    atexit.register(shutil.rmtree, path, True)
    return path


def start_local_ray(ray, temp_dir: Path) -> None:
    """A local Ray instance for a test: 2 CPUs, no dashboard, its files under `temp_dir`, bound to 127.0.0.1."""
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # again: a test's monkeypatch may have undone it
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        _temp_dir=str(temp_dir),
        _node_ip_address="127.0.0.1",
        log_to_driver=False,
    )


def tool_on_path(tmp_path: Path, monkeypatch, name: str, body: str) -> Path:
    """An executable `name` first on PATH for the test: a Python script whose code is `body`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    exe = bin_dir / name
    exe.write_text(f"#!{sys.executable}\n{body}\n")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return exe


# ----------------------------------------------------------------------------- the unit layer starts no process
#: The markers under which a test may start a process (a worker, a server, a build, a browser, the CLI).
_MAY_START_PROCESSES = ("integration", "slow", "gpu")


class UnitTestStartedAProcess(AssertionError):
    """A test of the unit layer (`./dev test --fast`) started a process: it belongs under `integration`."""


#: What libraries run on their own to learn about the machine, once per process (`platform.processor()` runs
#: `uname -p`, `ctypes.util.find_library` runs `ldconfig -p`, cuda-pathfinder loads libcudart in a Python child to
#: find the CUDA toolkit's headers): not the test's doing, allowed.
_MACHINE_PROBES = ("uname", "ldconfig", "cuda.pathfinder.")


@pytest.fixture(autouse=True)
def _unit_tests_start_no_process(request, monkeypatch):
    """The fast loop is the unit layer: a test without one of `_MAY_START_PROCESSES` that starts a process (through
    subprocess, multiprocessing, os.fork or posix_spawn) fails at once, naming what it started. A library's look at
    the machine (`_MACHINE_PROBES`) is not counted."""
    if any(request.node.get_closest_marker(m) for m in _MAY_START_PROCESSES):
        yield
        return
    import _posixsubprocess
    import subprocess

    started: list[str] = []

    def refuse(what: str, original=None):
        def starts(*args, **kwargs):
            argv = args[0] if args and isinstance(args[0], (list, tuple)) and args[0] else None
            program = os.path.basename(os.fsdecode(argv[0])) if argv else ""
            said = [os.fsdecode(a) for a in argv or ()]
            if original is not None and any(
                p == program or any(a.startswith(p) for a in said) for p in _MACHINE_PROBES
            ):
                return original(*args, **kwargs)
            started.append(f"{what}: {program}" if program else what)
            raise UnitTestStartedAProcess(
                f"{request.node.nodeid} is a unit test (no integration/slow/gpu mark) and started a process "
                f"({started[-1]}): mark it @pytest.mark.integration, or test the logic without the process"
            )

        return starts

    monkeypatch.setattr(_posixsubprocess, "fork_exec", refuse("multiprocessing"))
    # subprocess bound fork_exec when it was imported
    monkeypatch.setattr(subprocess, "_fork_exec", refuse("subprocess", subprocess._fork_exec))
    for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp"):
        if hasattr(os, name):
            monkeypatch.setattr(os, name, refuse(f"os.{name}"))
    yield
    call = getattr(request.node, "_forge_report_call", None)
    if started and (call is None or call.passed):  # the refusal was caught and swallowed inside the test
        pytest.fail(f"{request.node.nodeid} started a process ({', '.join(started)}) though it is a unit test")


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    """Each phase's report kept on the item, for fixtures that look at how the test itself went."""
    report = yield
    setattr(item, f"_forge_report_{report.when}", report)
    return report
