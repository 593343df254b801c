"""Run a task's reference or a candidate under Nsight Compute, isolated like evaluation workers.

The profiled process (`forge_lsp.profiler.target`) gets the same scrubbed environment and its
own process group as an evaluation worker, and a timeout. Only kernels inside the NVTX range
``forge_profile`` are profiled (optionally filtered by kernel name); clocks are never changed
(``--clock-control none``). Where ncu is missing or hardware counters are not permitted, the
profile degrades to event timing plus torch.profiler's kernel breakdown, and says why.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ..engine.candidate import Candidate
from ..engine.pool import default_cache_dir, worker_env
from ..engine.task import Task
from .metrics import METRICS
from .model import OpTime, ProfileResult
from .target import NVTX_RANGE

_EXCERPT = 6000
PERMISSION_HELP = (
    "GPU performance counters are not permitted for this user (ERR_NVGPUCTRPERM). Enable them "
    "with the driver option NVreg_RestrictProfilingToAdminUsers=0 (see "
    "https://developer.nvidia.com/ERR_NVGPUCTRPERM), run as root, or in a container grant "
    "CAP_SYS_ADMIN (docker run --cap-add=SYS_ADMIN)."
)


def find_ncu() -> str | None:
    """ncu from $NCU, PATH, the CUDA toolkit, or the newest /opt/nvidia/nsight-compute install."""
    for cand in (os.environ.get("NCU"), shutil.which("ncu"),
                 os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "ncu"),
                 *sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu"), reverse=True)):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    return None


def ncu_command(ncu: str, report: Path, target_args: list[str], *, kernel: str | None = None,
                full: bool = False) -> list[str]:
    cmd = [ncu, "--clock-control", "none", "--target-processes", "all",
           "--nvtx", "--nvtx-include", f"{NVTX_RANGE}/", "--import-source", "yes", "-f", "-o", str(report)]
    if kernel:
        cmd += ["-k", f"regex:{kernel}"]
    if full:
        cmd += ["--set", "full"]
    else:
        cmd += ["--section", "SourceCounters", "--section", "LaunchStats", "--section", "Occupancy",
                "--metrics", ",".join(METRICS)]
    return cmd + target_args


def _run(cmd: list[str], env: dict[str, str], timeout: float, cwd: Path) -> tuple[int | None, str, bool]:
    """Run in its own process group; (returncode or None on timeout, output tail, timed_out)."""
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=env, cwd=str(cwd), start_new_session=True)
        try:
            code: int | None = proc.wait(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            code, timed_out = None, True
        out.seek(0, os.SEEK_END)
        size = out.tell()
        out.seek(max(0, size - _EXCERPT))
        return code, out.read().decode("utf-8", errors="replace"), timed_out


def profile(task: Task, candidate: Candidate | None = None, *, device: str = "cuda:0",
            kernel: str | None = None, full: bool = False, timeout: float = 300.0,
            cache_dir: Path | None = None, python: str | None = None) -> ProfileResult:
    """Profile the candidate (or the task's reference) on `device`. Never raises for user code."""
    cache = Path(cache_dir or default_cache_dir())
    work = Path(tempfile.mkdtemp(prefix="profile-", dir=_mkdir(cache / "profiles")))
    request = {"device": device, "task_source": task.source, "model_class": task.model_class,
               "seed": task.seed, "candidate_source": candidate.source if candidate else None,
               "class_name": candidate.class_name if candidate else "ModelNew"}
    env = worker_env(device, cache)
    python = python or sys.executable
    t0 = time.perf_counter()
    ncu = find_ncu() if device != "cpu" else None
    if ncu is None:
        why = ("profiling on the CPU: no GPU counters" if device == "cpu" else
               "Nsight Compute (ncu) was not found: install it (it ships with the CUDA toolkit) or set NCU=/path/to/ncu")
        return _degraded(request, work, env, python, timeout, why, t0)
    req = work / "request.json"
    req.write_text(json.dumps(request))
    report = work / "profile.ncu-rep"
    cmd = ncu_command(ncu, report, [python, "-m", "forge_lsp.profiler.target", str(req)], kernel=kernel, full=full)
    code, log, timed_out = _run(cmd, env, timeout, work)
    if timed_out:
        return ProfileResult(mode="degraded", reason=f"ncu did not finish within {timeout:g} s; nothing was profiled",
                             seconds=time.perf_counter() - t0, log_excerpt=log)
    if "ERR_NVGPUCTRPERM" in log:
        return _degraded(request, work, env, python, timeout, PERMISSION_HELP, t0, log)
    if code != 0 or not report.exists():
        return ProfileResult(mode="degraded", reason=f"ncu exited with code {code}; see the log excerpt",
                             seconds=time.perf_counter() - t0, log_excerpt=log)
    from .report import read_report

    kernels = read_report(report, ncu=ncu)
    result_file = req.with_suffix(".result.json")
    device_name = json.loads(result_file.read_text()).get("device_name", "") if result_file.exists() else ""
    if not kernels:
        return ProfileResult(mode="degraded", device_name=device_name, report_path=str(report),
                             reason=f"no kernel ran inside the '{NVTX_RANGE}' range"
                             + (f" matching {kernel!r}" if kernel else ""),
                             seconds=time.perf_counter() - t0, log_excerpt=log)
    return ProfileResult(mode="ncu", device_name=device_name, kernels=kernels, report_path=str(report),
                         seconds=time.perf_counter() - t0, log_excerpt=log if code else "")


def _mkdir(p: Path) -> Path:
    p.mkdir(parents=True, exist_ok=True)
    return p


def _degraded(request: dict, work: Path, env: dict[str, str], python: str, timeout: float, why: str,
              t0: float, log: str = "") -> ProfileResult:
    req = work / "request.json"
    req.write_text(json.dumps(dict(request, mode="degraded")))
    code, out, timed_out = _run([python, "-m", "forge_lsp.profiler.target", str(req)], env, timeout, work)
    result_file = req.with_suffix(".result.json")
    if timed_out or code != 0 or not result_file.exists():
        failure = "timed out" if timed_out else f"exited with code {code}"
        return ProfileResult(mode="degraded", reason=f"{why}; the timing fallback also failed ({failure})",
                             seconds=time.perf_counter() - t0, log_excerpt=(log + out)[-_EXCERPT:])
    data = json.loads(result_file.read_text())
    times = data.get("times_ms") or []
    return ProfileResult(
        mode="degraded", reason=why, device_name=data.get("device_name", ""),
        wall_ms=times[len(times) // 2] if times else None,
        ops=[OpTime(**row) for row in data.get("ops", [])],
        seconds=time.perf_counter() - t0, log_excerpt=log[-_EXCERPT:],
    )


