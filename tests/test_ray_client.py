"""`forge eval --executor ray://HOST:PORT` through the Ray Client, against a Ray head started for the test: 127.0.0.1
only, 2 CPUs, its files in the test area, its ports free ones; the verdicts are the local pool's. The head is
`ray start --head --block` in a session of its own, stopped by signalling that process (which ends what it
started) and then its process group — never `ray stop`, which would end every Ray instance of the machine."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import candidates as C
import pytest
from conftest import FIXTURES, short_tmp

from forge_lsp.engine import Status

pytest.importorskip("ray")
pytest.importorskip("grpc", reason="the Ray Client needs ray[client] (grpcio)")

pytestmark = pytest.mark.slow

#: no usage reports, no token, and Ray's single-machine mode: 127.0.0.1 stays 127.0.0.1 (else Ray swaps it for
#: the machine's network address) and every server of the head listens on the loopback address only
RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


#: the head's processes only. Its Ray Client server starts each client's session server with `Popen(preexec_fn=...)`,
#: a plain fork; with gRPC's fork support on (grpcio's default) the fork runs gRPC's handlers, and while the server's
#: gRPC threads are busy they are skipped and the child dies at once now and then ("Starting Ray client server
#: failed"; 1 connection in 15 on 2 cores with 3 busy loops beside it, 0 in 40 with fork support off)
HEAD_ENV = {"GRPC_ENABLE_FORK_SUPPORT": "0"}


def env() -> dict[str, str]:
    out = os.environ | RAY_ENV
    out.pop("RAY_ADDRESS", None)  # the address is the one given, never a cluster from the environment
    return out


@pytest.fixture()
def ray_head():
    """A Ray head with a Ray Client server on 127.0.0.1; yields (ray://127.0.0.1:PORT, its temp dir)."""
    temp = short_tmp("forge-rayc-")  # short: Ray's socket paths live under it
    gcs, client = free_ports(2)
    log = (temp / "head.log").open("wb")
    head = subprocess.Popen(
        [str(Path(sys.executable).with_name("ray")), "start", "--head", "--block", "--node-ip-address=127.0.0.1"]
        + [f"--port={gcs}", f"--ray-client-server-port={client}", "--num-cpus=2", "--include-dashboard=false"]
        + [f"--temp-dir={temp}", "--disable-usage-stats"],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env() | HEAD_ENV,
        start_new_session=True,  # its own process group: what it starts is stopped with it, nothing else
    )
    try:
        deadline = time.monotonic() + 60
        while not listening(client):
            assert head.poll() is None, (temp / "head.log").read_text(errors="replace")[-3000:]
            assert time.monotonic() < deadline, "the Ray Client server did not listen within 60 s"
            time.sleep(0.2)
        yield f"ray://127.0.0.1:{client}", temp
    finally:
        head.send_signal(signal.SIGTERM)  # `ray start --block` ends the processes it started
        try:
            head.wait(timeout=30)
        except subprocess.TimeoutExpired:
            head.kill()
            head.wait(timeout=10)
        try:
            os.killpg(head.pid, signal.SIGKILL)  # anything of its group still there
        except ProcessLookupError:
            pass
        log.close()


def client_server_logs(head_dir: Path) -> str:
    """The tails of the head's Ray Client server logs (the proxy's and each session server's), for a failure's
    message."""
    logs = sorted((head_dir / "session_latest" / "logs").glob("ray_client_server*.err"))
    return "\n".join(f"--- {p.name}\n" + p.read_text(errors="replace")[-1500:] for p in logs)


def forge_eval(task_dir: Path, executor: str, cache_dir: Path) -> tuple[subprocess.CompletedProcess, list[dict]]:
    r = subprocess.run(
        [sys.executable, "-m", "forge_lsp.cli.main", "eval", str(task_dir), str(task_dir), "--device", "cpu"]
        + ["--json", "--executor", executor, "--cache-dir", str(cache_dir)],
        capture_output=True,
        text=True,
        timeout=180,
        env=env(),
    )
    assert r.returncode in (0, 1), r.stderr[-3000:]
    return r, json.loads(r.stdout)["results"]  # stdout is the JSON alone: nothing of Ray's on it


def summary(result: dict) -> tuple:
    v = result["verdict"]
    return (
        Path(result["candidate"]).name,
        v["status"],
        v["failed_check"],
        [(c["name"], c["passed"]) for c in v["checks"]],
        v["backend"],
        v["task_sha"],
        v["candidate_sha"],
    )


def test_forge_eval_through_the_ray_client_gives_the_local_pools_verdicts(ray_head, tmp_path, cache_dir):
    address, head_dir = ray_head
    work = tmp_path / "work"
    work.mkdir()
    (work / "softmax_small.py").write_text((FIXTURES / "softmax_small.py").read_text())
    (work / "softmax_small_cpp.py").write_text(C.CPP_CORRECT)
    (work / "softmax_small_wrong.py").write_text(C.CPP_INCORRECT)

    local_run, local = forge_eval(work, "local", cache_dir)
    assert [(Path(r["candidate"]).name, r["verdict"]["status"]) for r in local] == [
        ("softmax_small_cpp.py", Status.correct.value),
        ("softmax_small_wrong.py", Status.incorrect.value),
    ], local_run.stderr[-3000:]

    started = time.monotonic()
    try:
        remote_run, remote = forge_eval(work, address, cache_dir)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{client_server_logs(head_dir)}") from None
    seconds = time.monotonic() - started
    assert [summary(r) for r in remote] == [summary(r) for r in local], remote_run.stderr[-3000:]
    assert remote_run.returncode == local_run.returncode == 1  # one candidate incorrect, either way
    assert remote[1]["verdict"]["mismatch"] is not None and remote[1]["verdict"]["log_excerpt"]  # whole verdicts

    # the evaluations ran in the head's actors: its workers' logs name the actor class, once per actor
    actor_logs = [
        p
        for p in (head_dir / "session_latest" / "logs").glob("worker-*.out")
        if ":actor_name:EvalActor" in p.read_text(errors="replace")
    ]
    assert len(actor_logs) == 2, sorted(p.name for p in (head_dir / "session_latest" / "logs").iterdir())
    print(f"forge eval through {address}: {seconds:.1f} s for {len(remote)} candidates")


def test_a_ray_client_address_with_nothing_behind_it_is_one_clear_line(tmp_path):
    """`--executor ray://HOST:PORT` where no Ray Client server listens: exit 2 and one line naming the executor,
    not a traceback."""
    (port,) = free_ports(1)
    work = tmp_path / "work"
    work.mkdir()
    (work / "softmax_small.py").write_text((FIXTURES / "softmax_small.py").read_text())
    (work / "softmax_small_cpp.py").write_text(C.CPP_CORRECT)
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "forge_lsp.cli.main", "eval", str(work), "--device", "cpu"]
        + ["--executor", f"ray://127.0.0.1:{port}"],
        capture_output=True,
        text=True,
        env=env(),
        timeout=240,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert f"forge eval: executor 'ray://127.0.0.1:{port}': " in proc.stderr, proc.stderr[-2000:]
    print(f"an unreachable Ray Client address said in {time.monotonic() - started:.1f} s: {proc.stderr.strip()}")


def test_children_forked_while_connected_through_the_ray_client_skip_no_grpc_fork_handlers(ray_head, tmp_path):
    """forge starts every child with a `preexec_fn` (a plain fork). In a process connected through the Ray Client,
    gRPC's busy threads make such a fork skip gRPC's fork handlers, and the child dies now and then. After making
    the Ray executor, forge's children start with gRPC's fork support off: gRPC says nothing of the forks (at
    GRPC_VERBOSITY=INFO it names each one it handles) and every child runs."""
    address, _ = ray_head
    code = (
        "import os, subprocess, sys\n"
        "from forge_lsp.engine.executors import make_executor\n"
        "from forge_lsp.sandbox import kill_tree, spawn\n"
        f"ex = make_executor({address!r}, 'cpu', build_workers=1)\n"
        "codes = []\n"
        "for _ in range(20):\n"
        "    p = spawn(['true'], env={'PATH': os.environ['PATH']}, cwd='.')\n"
        "    codes.append(p.wait(timeout=30))\n"
        "    kill_tree(p)\n"
        "ex.close()\n"
        "print(codes, os.environ.get('GRPC_ENABLE_FORK_SUPPORT'))\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env() | {"GRPC_VERBOSITY": "INFO"},
        cwd=tmp_path,
        timeout=180,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    forks = [line for line in r.stderr.splitlines() if "fork_posix" in line]
    assert forks == [], forks[:3]
    assert r.stdout.strip() == f"{[0] * 20} 0", r.stdout  # every child ran; fork support off in forge's process
