"""forge_lsp.sandbox on the CPU: scrubbed environment, process-group kill on timeout and cancel,
bounded output, return codes."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import pytest

from forge_lsp import sandbox
from forge_lsp.sandbox import child_env, is_secret_name, kill_group, run_sandboxed, scrubbed_env

PY = sys.executable

# A child that starts a grandchild `sleep` (same process group), writes "GRANDCHILD_PID PGID", then sleeps.
SPAWN_GRANDCHILD = (
    "import os, subprocess, sys, time\n"
    "p = subprocess.Popen(['sleep', '60'])\n"
    "tmp = sys.argv[1] + '.tmp'\n"
    "open(tmp, 'w').write(f'{p.pid} {os.getpgid(0)}')\n"
    "os.replace(tmp, sys.argv[1])\n"
    "print('grandchild started', flush=True)\n"
    "time.sleep(60)\n"
)


def _alive(pid: int) -> bool:
    """Whether `pid` is a running (not zombie) process."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state != "Z"


def _wait_gone(pid: int, seconds: float = 5.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def _group_members(pgid: int) -> list[int]:
    """Running (not zombie) processes in process group `pgid`, from /proc."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":  # fields: state, ppid, pgrp, ...
            members.append(int(entry.name))
    return members


def _wait_group_gone(pgid: int, seconds: float = 5.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if not _group_members(pgid):
            return True
        time.sleep(0.05)
    return False


def _read_pids(path: Path, seconds: float = 10.0) -> tuple[int, int]:
    """(grandchild pid, process group of child and grandchild) as SPAWN_GRANDCHILD wrote them."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if path.exists():
            pid, pgid = path.read_text().split()
            return int(pid), int(pgid)
        time.sleep(0.02)
    raise AssertionError(f"no pid written to {path}")


def test_secret_looking_names_are_dropped_and_others_kept():
    environ = {
        "OPENAI_API_KEY": "sk-1",
        "ANTHROPIC_API_KEY": "sk-2",
        "GITHUB_TOKEN": "t",
        "AWS_SECRET_ACCESS_KEY": "s",
        "DB_PASSWORD": "p",
        "GOOGLE_APPLICATION_CREDENTIALS": "/c.json",
        "HF_AUTH": "a",
        "my_cookie": "c",
        "SSH_AUTH_SOCK": "/tmp/sock",
        "TMUX_SESSION": "x",
        "GPG_PRIVATE": "k",
        "PATH": "/usr/bin",
        "HOME": "/home/u",
        "CUDA_VISIBLE_DEVICES": "0",
        "PYTHONPATH": "/src",
        "TORCH_CUDA_ARCH_LIST": "9.0",
    }
    env = scrubbed_env(environ)
    assert env == {
        k: environ[k] for k in ("PATH", "HOME", "CUDA_VISIBLE_DEVICES", "PYTHONPATH", "TORCH_CUDA_ARCH_LIST")
    }
    assert is_secret_name("openai_api_key") and not is_secret_name("PATH")


def test_child_env_is_scrubbed_and_carries_forge_settings(monkeypatch, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak")
    monkeypatch.setenv("FORGE_SOME_TOKEN", "tok")
    monkeypatch.setenv("FORGE_KEEP_ME", "yes")
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    cpu = child_env("cpu", tmp_path, {"EXTRA": "1"})
    assert "OPENAI_API_KEY" not in cpu and "FORGE_SOME_TOKEN" not in cpu and cpu["FORGE_KEEP_ME"] == "yes"
    assert cpu["FORGE_CACHE_DIR"] == str(tmp_path) and cpu["TRITON_CACHE_DIR"] == str(tmp_path / "triton")
    assert cpu["TORCH_EXTENSIONS_DIR"] == str(tmp_path / "torch_extensions") and cpu["PYTHONUNBUFFERED"] == "1"
    assert cpu["TRITON_INTERPRET"] == "1" and cpu["EXTRA"] == "1"
    root = str(Path(sandbox.__file__).resolve().parents[1])
    assert cpu["PYTHONPATH"] == root + os.pathsep + "/elsewhere"
    assert (Path(root) / "forge_lsp" / "sandbox.py").is_file()
    assert "TRITON_INTERPRET" not in child_env("cuda:0", tmp_path)


def test_default_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("FORGE_CACHE_DIR", str(tmp_path))
    assert sandbox.default_cache_dir() == tmp_path
    monkeypatch.delenv("FORGE_CACHE_DIR")
    assert sandbox.default_cache_dir() == Path.home() / ".cache" / "forge-lsp"


def test_old_import_paths_still_work():
    from forge_lsp.engine.worker_client import default_cache_dir, worker_env

    assert worker_env is child_env and default_cache_dir is sandbox.default_cache_dir


@pytest.mark.integration  # starts a process
def test_child_gets_only_the_environment_given(monkeypatch, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak")
    r = run_sandboxed(
        [PY, "-c", "import os; print(sorted(os.environ))"], env=child_env("cpu", tmp_path), cwd=tmp_path, timeout=30
    )
    assert r.returncode == 0 and not r.timed_out and not r.cancelled
    assert "FORGE_CACHE_DIR" in r.output and "OPENAI_API_KEY" not in r.output


@pytest.mark.integration
def test_return_codes_and_output_come_through(tmp_path):
    env = scrubbed_env()
    ok = run_sandboxed([PY, "-c", "print('hello')"], env=env, cwd=tmp_path, timeout=30)
    assert ok == sandbox.SandboxResult(0, "hello\n")
    bad = run_sandboxed(
        [PY, "-c", "import sys; sys.stderr.write('oops\\n'); sys.exit(3)"], env=env, cwd=tmp_path, timeout=30
    )
    assert bad.returncode == 3 and "oops" in bad.output and not bad.timed_out
    here = run_sandboxed([PY, "-c", "import os; print(os.getcwd())"], env=env, cwd=tmp_path, timeout=30)
    assert Path(here.output.strip()).resolve() == tmp_path.resolve()
    with pytest.raises(OSError):
        run_sandboxed([str(tmp_path / "no-such-program")], env=env, cwd=tmp_path, timeout=30)


@pytest.mark.integration  # starts a process
def test_child_runs_in_its_own_process_group_with_stdin_closed(tmp_path):
    r = run_sandboxed(
        [
            PY,
            "-c",
            "import os, sys; print(os.getpgid(0) == os.getpid(), os.getsid(0) == os.getpid(), sys.stdin.read())",
        ],
        env=scrubbed_env(),
        cwd=tmp_path,
        timeout=30,
    )
    assert r.returncode == 0 and r.output.split() == ["True", "True"]


@pytest.mark.integration
def test_output_excerpt_is_bounded_to_the_tail(tmp_path):
    script = "import sys\nfor i in range(20000): print(f'line {i:05d}')\nprint('THE END')"
    r = run_sandboxed([PY, "-c", script], env=scrubbed_env(), cwd=tmp_path, timeout=60, excerpt=500)
    assert r.returncode == 0 and len(r.output.encode()) <= 500
    assert r.output.endswith("THE END\n") and "line 00000" not in r.output
    big = run_sandboxed([PY, "-c", script], env=scrubbed_env(), cwd=tmp_path, timeout=60)
    assert len(big.output.encode()) == sandbox.DEFAULT_EXCERPT


@pytest.mark.integration
def test_timeout_kills_the_whole_process_group(tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    t0 = time.monotonic()
    r = run_sandboxed([PY, "-c", SPAWN_GRANDCHILD, str(pid_file)], env=scrubbed_env(), cwd=tmp_path, timeout=2.0)
    assert time.monotonic() - t0 < 15
    assert r.timed_out and not r.cancelled and r.returncode is None
    assert "grandchild started" in r.output
    grandchild, pgid = _read_pids(pid_file)
    assert pgid != os.getpgid(0)  # its own group, not ours
    assert _wait_gone(grandchild), f"grandchild sleep {grandchild} survived the timeout"
    assert _wait_group_gone(pgid), f"processes left in group {pgid}: {_group_members(pgid)}"


@pytest.mark.integration  # starts a process
def test_cancel_event_kills_the_whole_process_group(tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    cancel = threading.Event()
    box: dict[str, sandbox.SandboxResult] = {}

    def run() -> None:
        box["r"] = run_sandboxed(
            [PY, "-c", SPAWN_GRANDCHILD, str(pid_file)], env=scrubbed_env(), cwd=tmp_path, timeout=120, cancel=cancel
        )

    thread = threading.Thread(target=run)
    t0 = time.monotonic()
    thread.start()
    grandchild, pgid = _read_pids(pid_file)
    assert _alive(grandchild) and _group_members(pgid)
    cancel.set()
    thread.join(15)
    assert not thread.is_alive() and time.monotonic() - t0 < 20
    r = box["r"]
    assert r.cancelled and not r.timed_out and r.returncode is None
    assert _wait_gone(grandchild), f"grandchild sleep {grandchild} survived the cancel"
    assert _wait_group_gone(pgid), f"processes left in group {pgid}: {_group_members(pgid)}"


@pytest.mark.integration
def test_cancel_event_that_is_never_set_changes_nothing(tmp_path):
    r = run_sandboxed(
        [PY, "-c", "import time; time.sleep(0.3); raise SystemExit(7)"],
        env=scrubbed_env(),
        cwd=tmp_path,
        timeout=30,
        cancel=threading.Event(),
    )
    assert r.returncode == 7 and not r.cancelled and not r.timed_out
    late = run_sandboxed(
        [PY, "-c", "import time; time.sleep(60)"],
        env=scrubbed_env(),
        cwd=tmp_path,
        timeout=0.5,
        cancel=threading.Event(),
    )
    assert late.timed_out and not late.cancelled and late.returncode is None


@pytest.mark.integration  # starts a process
def test_kill_group_kills_a_popen_child_and_its_grandchildren(tmp_path):
    import subprocess

    pid_file = tmp_path / "grandchild.pid"
    proc = subprocess.Popen(
        [PY, "-c", SPAWN_GRANDCHILD, str(pid_file)],
        stdout=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        env=scrubbed_env(),
        start_new_session=True,
    )
    grandchild, pgid = _read_pids(pid_file)
    assert pgid == proc.pid
    kill_group(proc, wait=10)
    assert proc.returncode is not None and proc.returncode < 0
    assert _wait_gone(grandchild) and _wait_group_gone(pgid)
    kill_group(proc, wait=1)  # a dead child: nothing to do, no error


@pytest.mark.integration  # starts a process
def test_an_exception_while_waiting_kills_the_whole_process_group(tmp_path):
    pid_file = tmp_path / "grandchild.pid"

    class Interrupting(threading.Event):
        """Raises (as a KeyboardInterrupt would) once the grandchild runs."""

        def is_set(self) -> bool:
            if pid_file.exists():
                raise RuntimeError("interrupted")
            return False

    with pytest.raises(RuntimeError, match="interrupted"):
        run_sandboxed(
            [PY, "-c", SPAWN_GRANDCHILD, str(pid_file)],
            env=scrubbed_env(),
            cwd=tmp_path,
            timeout=120,
            cancel=Interrupting(),
        )
    grandchild, pgid = _read_pids(pid_file)
    assert _wait_gone(grandchild) and _wait_group_gone(pgid), f"processes left in group {pgid}: {_group_members(pgid)}"
