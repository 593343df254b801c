"""The local pool: builds of different tasks overlap, one timing at a time per device, the executor chosen by name."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import candidates as C
import pytest
from conftest import FIXTURES, tool_on_path

from forge_lsp.agent.config import ConfigError, load_config
from forge_lsp.engine import Candidate, Status, load_candidate, load_task
from forge_lsp.engine.devices import local_devices
from forge_lsp.engine.executor import ExecEvent
from forge_lsp.engine.executors import make_executor, parse_executor
from forge_lsp.engine.local_pool import LocalPool
from forge_lsp.engine.pipe import Hello
from forge_lsp.engine.worker_client import Worker

pytestmark = pytest.mark.integration  # real processes end to end: left out of the fast loop (./dev test --fast)

EXAMPLES = FIXTURES.parent.parent / "forge_lsp" / "examples"


def intervals(events: list[ExecEvent], start: str, end: str, stage: str = "") -> dict[int, tuple[float, float, str]]:
    """job -> (start, end, device) from the events: `start` (of `stage`, when given) to `end`."""
    begun: dict[int, tuple[float, str]] = {}
    out = {}
    for e in events:
        if e.kind == start and (not stage or e.stage == stage):
            begun[e.job] = (e.t, e.device)
        elif e.kind == end and e.job in begun:
            t0, device = begun.pop(e.job)
            out[e.job] = (t0, e.t, device or e.device)
    return out


@pytest.mark.slow
def test_builds_of_two_tasks_overlap_and_a_device_never_times_two_at_once(tmp_path, fast_options):
    softmax = load_task(FIXTURES / "softmax_small.py")
    bias_act = load_task(EXAMPLES / "bias_act_task.py")
    work = [
        (softmax, Candidate.from_source(C.CPP_CORRECT, "softmax_cpp")),
        (bias_act, load_candidate(EXAMPLES / "bias_act_cpp.py")),
        (softmax, Candidate.from_source(C.TORCH_CORRECT, "softmax_torch")),
        (softmax, Candidate.from_source(C.CPP_INCORRECT, "softmax_wrong")),
    ]
    events: list[ExecEvent] = []
    # a cold cache of its own: both C++ extensions are really compiled
    with LocalPool("cpu", options=fast_options, cache_dir=tmp_path / "cache", build_workers=2) as pool:
        pool.subscribe(events.append)
        verdicts = pool.evaluate_all(work, reference=True)
    assert [v.status for v in verdicts] == [Status.correct, Status.correct, Status.correct, Status.incorrect]
    assert verdicts[3].failed_check is not None

    builds = intervals(events, "build_started", "build_finished")
    by_task = {}
    for job, (t0, t1, _) in builds.items():
        task = next(e.task for e in events if e.job == job)
        by_task.setdefault(task, []).append((t0, t1))
    assert set(by_task) == {"softmax_small", "bias_act_task"}
    (s0, s1), (b0, b1) = min(by_task["softmax_small"]), by_task["bias_act_task"][0]
    assert max(s0, b0) < min(s1, b1), f"the two tasks' builds did not overlap: {by_task}"

    # one timing at a time per device: from a job's `time` stage to its verdict, no other job's timing on that device
    timings = sorted(intervals(events, "stage", "verdict", stage="time").values())
    assert len(timings) >= 3  # every correct candidate was timed
    for (_a0, a1, da), (b0_, _b1, db) in zip(timings, timings[1:], strict=False):
        assert not (da == db and b0_ < a1), f"two timings at once on {da}: {timings}"


def test_executor_names_and_devices(monkeypatch):
    assert parse_executor(None) == ("local", None)
    assert parse_executor("ray") == ("ray", None)
    assert parse_executor("ray://10.0.0.1:10001") == ("ray", "ray://10.0.0.1:10001")
    for bad in ("slurm", "ray://", "rays"):
        with pytest.raises(ValueError, match="use local, ray or ray://HOST:PORT"):
            parse_executor(bad)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert local_devices("auto") == ["cpu"]
    assert local_devices("cpu") == ["cpu"] and local_devices("cuda:3") == ["cuda:3"]
    pool = make_executor("local", "cpu")
    assert isinstance(pool, LocalPool) and pool.capacity == 1
    pool.close()


def test_executor_is_a_config_key(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.forge]\nexecutor = "ray://head:10001"\n')
    assert load_config(tmp_path).executor == "ray://head:10001"
    assert load_config(tmp_path, {"executor": "local"}).executor == "local"
    assert load_config(tmp_path / "nothing").executor == "local"
    (tmp_path / "pyproject.toml").write_text('[tool.forge]\nexecutor = "slurm"\n')
    with pytest.raises(ConfigError, match="executor"):
        load_config(tmp_path)


def test_an_unknown_executor_is_one_line_and_exit_2(tmp_path):
    cand = tmp_path / "cand.py"
    cand.write_text(C.TORCH_CORRECT)
    r = subprocess.run(
        [sys.executable, "-m", "forge_lsp.cli.main", "eval", str(FIXTURES / "softmax_small.py"), str(cand)]
        + ["--device", "cpu", "--executor", "slurm"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2
    assert r.stderr.strip().splitlines()[-1] == (
        "forge eval: unknown executor 'slurm': use local, ray or ray://HOST:PORT"
    )


def made_without(module: str, before: str, executor: str) -> str:
    """What making `executor` raises, said as "Type message", in a fresh interpreter where `module` cannot be
    imported (after running `before` there)."""
    code = (
        f"import sys; sys.modules[{module!r}] = None\n{before}import forge_lsp.engine.executors as e\n"
        f"try:\n    e.make_executor({executor!r}, 'cpu')\nexcept Exception as exc:\n    print(type(exc).__name__, exc)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_the_ray_executor_without_ray_says_what_to_install():
    """Ray is imported only when the Ray executor is made; without it, the error names the extra to install."""
    said = made_without(
        "ray",  # `import ray` raises ImportError, as where it is not installed
        "import forge_lsp.cli.main, forge_lsp.usecases.optimize, forge_lsp.engine.executors\n"
        "assert 'ray' not in [m for m in sys.modules if sys.modules[m] is not None]\n",
        "ray",
    )
    assert said == (
        "RayNotInstalled the Ray executor needs ray: pip install 'forge-lsp[ray]' (ray==2.60.0), or use --executor local"
    )


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="ray is not installed")
def test_the_ray_client_without_grpcio_says_what_to_install_at_once():
    """``ray://`` needs the Ray Client's transport (grpcio, from ``ray[client]``): without it, forge names its own
    extra to install before any connection is tried (Ray alone would advise a bare ``pip install ray[client]``)."""
    said = made_without("grpc", "", "ray://127.0.0.1:9")  # `import grpc` raises ImportError, as where it is missing
    assert said == (
        "RayNotInstalled the Ray Client (ray://) needs ray[client]: pip install 'forge-lsp[ray]' (ray[client]==2.60.0), "
        "or use --executor ray or local"
    )


def test_a_reason_that_only_introduces_a_traceback_keeps_the_tracebacks_last_line():
    """Ray's client says "Initialization failure from server:" above the server's traceback: the one line forge
    prints keeps the cause (the traceback's last line), where the first line alone said nothing."""
    from forge_lsp.engine.executor import reason_line

    ray_said = ConnectionAbortedError(
        'Initialization failure from server:\nTraceback (most recent call last):\n  File "proxier.py", line 771\n'
        "    raise RuntimeError(\nRuntimeError: Starting Ray client server failed. See ray_client_server_23000.err "
        "for detailed logs.\n"
    )
    assert reason_line(ray_said) == (
        "Initialization failure from server: RuntimeError: Starting Ray client server failed. "
        "See ray_client_server_23000.err for detailed logs."
    )
    assert reason_line(ConnectionError("ray client connection timeout\nretrying")) == "ray client connection timeout"
    assert reason_line(TimeoutError()) == "TimeoutError"
    assert len(reason_line(RuntimeError("x" * 2000))) == 500


@pytest.mark.parametrize(
    ("visible", "listed", "expected"),
    [(None, 2, 2), ("1", 2, 1), ("0,1,2", 2, 2), ("", 2, 0), (None, "fails", None)],
)
def test_the_gpus_are_counted_from_nvidia_smi_where_the_drivers_folder_cannot_be_read(
    tmp_path, monkeypatch, visible, listed, expected
):
    """In a container that shows `nvidia-smi` but not /proc/driver/nvidia, the local pool still gets one worker per
    GPU: the count comes from `nvidia-smi -L`, bounded by CUDA_VISIBLE_DEVICES."""
    from forge_lsp.engine.devices import visible_gpu_count

    if Path("/proc/driver/nvidia/gpus").exists():
        pytest.skip("this machine's driver folder is readable: the count comes from it")
    if listed == "fails":
        tool_on_path(tmp_path, monkeypatch, "nvidia-smi", "import sys\nsys.exit(9)")
    else:
        lines = "".join(f"GPU {i}: NVIDIA H200 (UUID: GPU-{i})\n" for i in range(listed))
        tool_on_path(tmp_path, monkeypatch, "nvidia-smi", f"import sys\nsys.stdout.write({lines!r})")
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert visible_gpu_count() == expected


def test_a_build_compiles_for_the_device_its_request_names(tmp_path):
    """Build workers start before the device's worker has said what the device is: each build request carries it,
    and the candidate's `load_inline` / NVRTC see it as FORGE_CUDA_ARCH and TORCH_CUDA_ARCH_LIST."""
    probe = Candidate.from_source(
        "import json, os\n"
        "with open('seen.json', 'w') as f:\n"
        "    json.dump([os.environ.get('FORGE_CUDA_ARCH'), os.environ.get('TORCH_CUDA_ARCH_LIST')], f)\n",
        "probe",
    )
    h200 = Hello(pid=1, device="cuda:0", device_name="NVIDIA H200", arch="sm_90a", capability=(9, 0), torch_version="x")
    cache = tmp_path / "cache"
    builder = Worker("cpu", cache_dir=cache, env={"CUDA_VISIBLE_DEVICES": ""})
    try:
        assert builder.build(probe, timeout=120).ok
        assert json.loads((cache / "seen.json").read_text()) == [None, None]  # a CPU build: no target
        assert builder.build(probe, timeout=120, target=h200).ok
        assert json.loads((cache / "seen.json").read_text()) == ["sm_90a", "9.0"]
    finally:
        builder.close()


@pytest.mark.slow
# closing a worker that is still starting (its pipes not yet adopted) must not raise in the closing thread
@pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_pool_closed_while_its_build_workers_start_leaves_none_running(tmp_path, fast_options, monkeypatch):
    """The build workers start at the first candidate that builds, beside the device's worker; a pool closed
    before they are up ends them too. Started afresh (as on a GPU): a worker forked from the zygote is up at once."""
    monkeypatch.setenv("FORGE_ZYGOTE", "0")
    pool = LocalPool("cpu", options=fast_options, cache_dir=tmp_path / "cache", build_workers=2)
    future = pool.submit(load_task(FIXTURES / "softmax_small.py"), Candidate.from_source(C.CPP_CORRECT, "cpp"))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not all(b.proc is not None for b in pool._builders):
        time.sleep(0.01)
    procs = [b.proc for b in pool._builders]
    assert len(procs) == 2 and all(p is not None for p in procs), "the build workers did not start"
    assert all(b.hello is None for b in pool._builders)  # still importing torch
    pool.close()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(p.poll() is None for p in procs):
        time.sleep(0.1)
    assert all(p.poll() is not None for p in procs), "a build worker outlived its pool"
    assert future.done()


def test_workers_are_closed_at_once_not_one_after_the_other():
    """Each idle worker has a second to leave when closed: a pool's nine close together, in about one."""
    import threading

    from forge_lsp.engine.worker_client import close_all

    class Leaving:  # a worker that takes its time to leave
        started: list[float] = []
        ended: list[float] = []
        lock = threading.Lock()

        def close(self) -> None:
            with self.lock:
                self.started.append(time.monotonic())
            time.sleep(0.3)
            with self.lock:
                self.ended.append(time.monotonic())

    close_all([Leaving() for _ in range(9)])  # type: ignore[list-item]
    assert len(Leaving.ended) == 9
    assert max(Leaving.started) < min(Leaving.ended), "a worker was closed only after another had left"


def test_build_workers_follow_the_machines_cores_and_memory_and_a_cap_the_user_sets(monkeypatch):
    """One builder per core but the device's, as many as half the available memory holds at 2 GiB each, at least
    one; $FORGE_BUILD_WORKERS caps it."""
    from forge_lsp.engine.devices import default_build_workers

    monkeypatch.delenv("FORGE_BUILD_WORKERS", raising=False)
    assert default_build_workers(cores=16, memory=128 << 30) == 15  # the H200 host: cores bound it
    assert default_build_workers(cores=16, memory=16 << 30) == 4  # memory bounds it
    assert default_build_workers(cores=2, memory=24 << 30) == 1  # the CI machine
    assert default_build_workers(cores=64, memory=1 << 30) == 1  # never none
    monkeypatch.setenv("FORGE_BUILD_WORKERS", "3")
    assert default_build_workers(cores=16, memory=128 << 30) == 3


@pytest.mark.slow
def test_a_build_error_is_answered_without_the_device_or_its_tasks_own_model(tmp_path, fast_options):
    """A candidate whose build fails gets its `compile_error` verdict as soon as the build is done: it waits neither
    for a device nor for its task's own model (here one that takes ten minutes)."""
    slow = tmp_path / "slow_model.py"
    slow.write_text(
        (FIXTURES / "softmax_small.py")
        .read_text()
        .replace(
            "return torch.softmax(x, dim=1)",
            "import time\n        time.sleep(600)\n        return torch.softmax(x, dim=1)",
        )
    )
    events: list[ExecEvent] = []
    pool = LocalPool("cpu", options=fast_options, cache_dir=tmp_path / "cache", build_workers=1)
    pool.subscribe(events.append)
    try:
        t0 = time.monotonic()
        future = pool.submit(load_task(slow), Candidate.from_source(C.CPP_COMPILE_ERROR, "broken"), reference=True)
        # the build alone takes ~30 s (several times that on a loaded machine); the model would take 600
        verdict = future.result(timeout=300)
        assert verdict.status is Status.compile_error and time.monotonic() - t0 < 300
        said = [e for e in events if e.kind == "verdict"]
        assert said and said[0].device == "" and said[0].seconds == 0.0  # no device's time
    finally:
        pool.close()


def test_a_candidate_that_cannot_run_here_is_answered_at_submit(tmp_path, fast_options):
    """CUDA sources on a CPU-only pool: the verdict is there when `submit` returns, before any worker starts."""
    pool = LocalPool("cpu", options=fast_options, cache_dir=tmp_path / "cache", build_workers=1)
    try:
        cuda = Candidate.from_source(
            "from torch.utils.cpp_extension import load_inline\n"
            "ext = load_inline('k', cpp_sources='', cuda_sources='__global__ void k() {}')\n"
            "class ModelNew: pass\n",
            "cuda",
        )
        future = pool.submit(load_task(FIXTURES / "softmax_small.py"), cuda, reference=True)
        assert future.done() and future.result().status is Status.compile_error
        assert "needs an NVIDIA GPU" in future.result().reason
        assert pool.evaluators["cpu"].worker.proc is None  # no worker was started for it
    finally:
        pool.close()


@pytest.mark.slow
def test_a_replaced_worker_keeps_its_next_process_started_and_waiting(tmp_path, fast_options, softmax_task):
    """After a worker's first replacement (a crash), the next process is started ahead: the second crash's
    replacement is the process that was already waiting, and evaluations after it are right."""
    worker = Worker("cpu", cache_dir=tmp_path / "cache", standby=True)
    crash = Candidate.from_source(C.TRITON_CRASH, "crash")
    good = Candidate.from_source(C.TRITON_CORRECT, "good")
    opts = fast_options.model_copy(update={"timing": False})
    try:
        assert worker.evaluate(softmax_task, crash, opts).status is Status.crashed
        assert worker._spare is None  # never replaced yet: no standby
        assert worker.evaluate(softmax_task, crash, opts).status is Status.crashed  # started again, then a standby
        spare = worker._spare
        assert spare is not None
        waiting = spare.result(timeout=120)
        assert waiting.proc.poll() is None
        verdict = worker.evaluate(softmax_task, good, opts)
        assert verdict.status is Status.correct, verdict.reason
        assert worker.hello is not None and worker.hello.pid == waiting.proc.pid
        assert worker.starts == 3 and worker._spare is not None  # and the next one is on its way
    finally:
        worker.close()
    assert worker._spare is None and not worker._starting


@pytest.mark.slow
def test_build_workers_yield_the_cpu_to_the_device_worker(cache_dir, fast_options):
    """Build workers (and the compilers they start) run niced, the device's worker at the caller's priority."""
    from forge_lsp.engine.devices import BUILD_NICE

    pool = LocalPool("cpu", options=fast_options, cache_dir=cache_dir, build_workers=1)
    try:
        pool.submit(load_task(FIXTURES / "softmax_small.py"), Candidate.from_source(C.CPP_CORRECT, "cpp")).result(300)
        builder, device = pool._builders[0], pool.evaluators["cpu"].worker
        assert builder.proc is not None and device.proc is not None
        own = os.getpriority(os.PRIO_PROCESS, 0)
        assert os.getpriority(os.PRIO_PROCESS, builder.proc.pid) == min(19, own + BUILD_NICE)
        assert os.getpriority(os.PRIO_PROCESS, device.proc.pid) == own
    finally:
        pool.close()


def test_a_builds_header_fallback_is_counted_in_its_verdicts_stages():
    from forge_lsp.engine.jobs import build_stages
    from forge_lsp.engine.pipe import BuildResult

    fell_back = BuildResult(
        ok=True, seconds=12.5, attempts=[("slim per-operator headers", 5.0, False), ("x", 7.4, True)]
    )
    assert build_stages(fell_back) == {"build": 12.5, "build_fallback": 5.0}
    first_try = BuildResult(ok=True, seconds=7.4, attempts=[("slim per-operator headers", 7.4, True)])
    assert build_stages(first_try) == {"build": 7.4}


@pytest.mark.slow
def test_a_build_reports_the_load_inline_attempts_it_made(cache_dir):
    builder = Worker("cpu", cache_dir=cache_dir, env={"CUDA_VISIBLE_DEVICES": ""})  # a cached build counts too
    try:
        built = builder.build(Candidate.from_source(C.CPP_CORRECT, "cpp"), timeout=300)
        assert built.ok and [ok for _, _, ok in built.attempts] == [True]
        failed = builder.build(Candidate.from_source(C.CPP_COMPILE_ERROR, "broken"), timeout=300)
        assert not failed.ok and failed.compile_error and [ok for _, _, ok in failed.attempts] == [False]
    finally:
        builder.close()
