"""Run a task's reference or a candidate under Nsight Compute, isolated like evaluation workers.

The profiled process (`forge_lsp.profiler.target`) gets the same scrubbed environment and its
own process group as an evaluation worker, and a timeout. Only kernels inside the NVTX range
``forge_profile`` are profiled (optionally filtered by kernel name); clocks are never changed
(``--clock-control none``). Where ncu is missing or hardware counters are not permitted, the
profile degrades to event timing plus torch.profiler's kernel breakdown, and says why.
"""

from __future__ import annotations

import functools
import glob
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, ParamSpec

from ..engine.candidate import Candidate
from ..engine.task import Task
from ..sandbox import child_env, default_cache_dir, run_sandboxed
from .metrics import METRICS
from .model import DevicePeaks, KernelProfile, OpTime, ProfileResult
from .spare import Spare, Spares
from .target import NVTX_RANGE, ProfileCall, ProfileScript

if TYPE_CHECKING:
    from .report import Report

_EXCERPT = 6000
P = ParamSpec("P")
PERMISSION_HELP = (
    "GPU performance counters are not permitted for this user (ERR_NVGPUCTRPERM). Enable them "
    "with the driver option NVreg_RestrictProfilingToAdminUsers=0 (see "
    "https://developer.nvidia.com/ERR_NVGPUCTRPERM), run as root, or in a container grant "
    "CAP_SYS_ADMIN (docker run --cap-add=SYS_ADMIN)."
)


def find_ncu() -> str | None:
    """ncu from $NCU, PATH, the CUDA toolkit, or the newest /opt/nvidia/nsight-compute install."""
    for cand in (
        os.environ.get("NCU"),
        shutil.which("ncu"),
        os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "ncu"),
        *sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu"), reverse=True),
    ):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    return None


def ncu_command(
    ncu: str, report: Path, target_args: list[str], *, kernel: str | None = None, full: bool = False
) -> list[str]:
    cmd = [
        ncu,
        "--clock-control",
        "none",
        "--target-processes",
        "all",
        "--nvtx",
        "--nvtx-include",
        f"{NVTX_RANGE}/",
        "--import-source",
        "yes",
        "-f",
        "-o",
        str(report),
    ]
    if kernel:
        cmd += ["-k", f"regex:{kernel}"]
    if full:
        cmd += ["--set", "full"]
    else:
        cmd += [
            "--section",
            "SourceCounters",
            "--section",
            "LaunchStats",
            "--section",
            "Occupancy",
            "--metrics",
            ",".join(METRICS),
        ]
    return cmd + target_args


class ProfileCancelled(Exception):
    """The profile's `cancel` event was set: its process was killed, and nothing was profiled."""


def _run(
    cmd: list[str], env: dict[str, str], timeout: float, cwd: Path, cancel: threading.Event | None = None
) -> tuple[int | None, str, bool]:
    """`run_sandboxed` as (returncode or None on timeout, output tail, timed_out); `ProfileCancelled` when `cancel`
    was set meanwhile (the process is killed)."""
    r = run_sandboxed(cmd, env=env, cwd=cwd, timeout=timeout, cancel=cancel, excerpt=_EXCERPT)
    if r.cancelled:
        raise ProfileCancelled
    return r.returncode, r.output, r.timed_out


def _cancellable(fn: Callable[P, ProfileResult]) -> Callable[P, ProfileResult]:
    """`fn`'s result, or a degraded one whose reason is "cancelled" when its `cancel` event stopped it."""

    @functools.wraps(fn)
    def run(*args: P.args, **kwargs: P.kwargs) -> ProfileResult:
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        except ProfileCancelled:
            return ProfileResult(mode="degraded", reason="cancelled", seconds=time.perf_counter() - t0)

    return run


@_cancellable
def profile(
    task: Task,
    candidate: Candidate | None = None,
    *,
    device: str = "cuda:0",
    kernel: str | None = None,
    full: bool = False,
    timeout: float = 300.0,
    cache_dir: Path | None = None,
    python: str | None = None,
    in_process: bool = True,
    spares: Spares | None = None,
    cancel: threading.Event | None = None,
) -> ProfileResult:
    """Profile the candidate (or the task's reference) on `device`. Never raises for user code.

    On a GPU, unless `full` asks for ncu's whole set, the call is profiled in its own process by CUPTI
    (`mode="cupti"`: no ncu start-up, no replay of the whole process); where that is unavailable, under Nsight
    Compute, and the result's `reason` says why the in-process path did not run. `in_process=False` goes straight
    to ncu. With `spares`, the in-process profile runs in a spare process started ahead (`spare.py`) when one
    waits, and a spare is started for the next profile. Setting `cancel` kills the profiled process: the result
    is degraded, its reason "cancelled"."""
    cache = Path(cache_dir or default_cache_dir())
    work = Path(tempfile.mkdtemp(prefix="profile-", dir=_mkdir(cache / "profiles")))
    request = ProfileCall(device=device, task=task, candidate=candidate)
    env = child_env(device, cache)
    python = python or sys.executable
    t0 = time.perf_counter()
    fallback = ""
    if device != "cpu" and not full and in_process:
        spare = spares.take(device, cache) if spares is not None and spares.python == python else None
        result, fallback = _in_process(request, work, env, python, timeout, kernel, t0, spare, cancel)
        if result is not None:
            return result
    ncu = find_ncu() if device != "cpu" else None
    if ncu is None:
        why = _no_ncu(device)
        return _degraded(request, work, env, python, timeout, _and(fallback, why), t0, cancel=cancel)
    req = request.write(work / "request.json")
    report = work / "profile.ncu-rep"
    cmd = ncu_command(ncu, report, [python, "-m", "forge_lsp.profiler.target", str(req)], kernel=kernel, full=full)
    code, log, timed_out = _run(cmd, env, timeout, work, cancel)
    if timed_out:
        return ProfileResult(
            mode="degraded",
            reason=f"ncu did not finish within {timeout:g} s; nothing was profiled",
            seconds=time.perf_counter() - t0,
            log_excerpt=log,
        )
    if "ERR_NVGPUCTRPERM" in log:
        return _degraded(request, work, env, python, timeout, PERMISSION_HELP, t0, log, cancel=cancel)
    if code != 0 or not report.exists():
        return ProfileResult(
            mode="degraded",
            reason=f"ncu exited with code {code}; see the log excerpt",
            seconds=time.perf_counter() - t0,
            log_excerpt=log,
        )
    read = _read(report, ncu)
    kernels = read.kernels
    result_file = req.with_suffix(".result.json")
    data = json.loads(result_file.read_text()) if result_file.exists() else {}
    device_name, stages = read.device_name or data.get("device_name", ""), data.get("stages_s", {})
    if not kernels:
        return ProfileResult(
            mode="degraded",
            device_name=device_name,
            report_path=str(report),
            reason=f"no kernel ran inside the '{NVTX_RANGE}' range" + (f" matching {kernel!r}" if kernel else ""),
            seconds=time.perf_counter() - t0,
            log_excerpt=log,
            stages_s=stages,
        )
    return ProfileResult(
        mode="ncu",
        reason=f"profiled under Nsight Compute: {fallback}" if fallback else "",
        device_name=device_name,
        kernels=kernels,
        report_path=str(report),
        seconds=time.perf_counter() - t0,
        log_excerpt=log if code else "",
        stages_s=stages,
        sources=read.sources | (data.get("sources") or {}),
    )


def _read(report: Path, ncu: str) -> Report:
    """The report ncu wrote (`report.Report`): its kernels, the device they ran on and the sources it imported (the
    hot lines are read from those, whether or not the build's files are still there)."""
    from .report import load_report

    return load_report(report, ncu=ncu)


def _no_ncu(device: str) -> str:
    """Why there are no hardware counters from ncu on `device`."""
    if device == "cpu":
        return "profiling on the CPU: no GPU counters"
    return "Nsight Compute (ncu) was not found: install it (it ships with the CUDA toolkit) or set NCU=/path/to/ncu"


def _and(first: str, second: str) -> str:
    return f"{first}; {second}" if first else second


def _in_process(
    request: ProfileCall,
    work: Path,
    env: dict[str, str],
    python: str,
    timeout: float,
    kernel: str | None,
    t0: float,
    spare: Spare | None = None,
    cancel: threading.Event | None = None,
) -> tuple[ProfileResult | None, str]:
    """The call profiled by CUPTI inside its own process (`target`'s ``cupti`` mode): (the result, "") when it
    ran, or when the user's code failed (ncu would fail the same way); else (None, why the in-process path is
    unavailable), and the caller goes on to ncu."""
    req = request.model_copy(update={"mode": "cupti", "kernel": kernel or ""}).write(work / "cupti-request.json")
    if spare is not None:
        ran = spare.run(req, timeout, cancel)
        if ran.cancelled:
            raise ProfileCancelled
        code, log, timed_out = ran.returncode, ran.output, ran.timed_out
    else:
        code, log, timed_out = _run([python, "-m", "forge_lsp.profiler.target", str(req)], env, timeout, work, cancel)
    result_file = req.with_suffix(".result.json")
    data = json.loads(result_file.read_text()) if result_file.exists() else {}
    seconds = time.perf_counter() - t0
    if timed_out:
        reason = f"the profiled call did not finish within {timeout:g} s; nothing was profiled"
        return ProfileResult(mode="degraded", reason=reason, seconds=seconds, log_excerpt=log), ""
    if data.get("cupti_error"):
        return None, f"the in-process profile (CUPTI) was unavailable: {data['cupti_error']}"
    if code is not None and code < 0:
        return None, f"the in-process profile (CUPTI) ended with signal {-code}"
    if code != 0 or "kernels" not in data:
        reason = f"the profiled process exited with code {code}; see the log excerpt"
        return ProfileResult(mode="degraded", reason=reason, seconds=seconds, log_excerpt=log), ""
    kernels = [KernelProfile.model_validate(k) for k in data["kernels"]]
    notes = "; ".join(data.get("cupti_notes") or [])
    if not kernels:
        reason = "no kernel ran in the profiled call" + (f" matching {kernel!r}" if kernel else "")
        return ProfileResult(
            mode="degraded", reason=reason, device_name=data.get("device_name", ""), seconds=seconds, log_excerpt=log
        ), ""
    return ProfileResult(
        mode="cupti",
        reason=f"profiled in the process by CUPTI ({notes})" if notes else "",
        device_name=data.get("device_name", ""),
        kernels=kernels,
        seconds=seconds,
        stages_s=data.get("stages_s", {}),
        sources=data.get("sources") or {},
    ), ""


def _mkdir(p: Path) -> Path:
    p.mkdir(parents=True, exist_ok=True)
    return p


def _degraded(
    request: ProfileCall | ProfileScript,
    work: Path,
    env: dict[str, str],
    python: str,
    timeout: float,
    why: str,
    t0: float,
    log: str = "",
    cwd: Path | None = None,
    cancel: threading.Event | None = None,
) -> ProfileResult:
    req = request.model_copy(update={"mode": "degraded"}).write(work / "request.json")
    code, out, timed_out = _run(
        [python, "-m", "forge_lsp.profiler.target", str(req)], env, timeout, cwd or work, cancel
    )
    result_file = req.with_suffix(".result.json")
    if timed_out or code != 0 or not result_file.exists():
        failure = "timed out" if timed_out else f"exited with code {code}"
        return ProfileResult(
            mode="degraded",
            reason=f"{why}; the timing fallback also failed ({failure})",
            seconds=time.perf_counter() - t0,
            log_excerpt=(log + out)[-_EXCERPT:],
        )
    data = json.loads(result_file.read_text())
    times = data.get("times_ms") or []
    return ProfileResult(
        mode="degraded",
        reason=why,
        device_name=data.get("device_name", ""),
        wall_ms=times[len(times) // 2] if times else None,
        ops=[OpTime(**row) for row in data.get("ops", [])],
        seconds=time.perf_counter() - t0,
        log_excerpt=log[-_EXCERPT:],
    )


def device_peaks(
    device: str, device_name: str, *, cache_dir: Path | None = None, timeout: float = 300.0, python: str | None = None
) -> tuple[DevicePeaks | None, str]:
    """Roofline ceilings for `device`: (peaks, note).

    Cached measurement first; else measured now in a child process with the worker environment
    (the caller never touches the GPU) and cached; else the datasheet row. The note says which,
    and why measuring failed.
    """
    from .peaks import PeaksRequest, cached_peaks, datasheet_peaks

    cache = Path(cache_dir or default_cache_dir())
    found = cached_peaks(cache, device_name) if device_name else None
    if found is not None:
        return found, "measured earlier on this device"
    why = ""
    if device != "cpu":
        with tempfile.TemporaryDirectory() as tmp:
            request = PeaksRequest(device=device, cache_dir=cache).write(Path(tmp) / "request.json")
            code, out, timed_out = _run(
                [python or sys.executable, "-m", "forge_lsp.profiler.peaks", str(request)],
                child_env(device, cache),
                timeout,
                Path(tmp),
            )
        if code == 0:
            try:
                return DevicePeaks.model_validate_json(out.strip().splitlines()[-1]), "measured now"
            except (ValueError, IndexError):
                why = "the measurement printed no result"
        else:
            why = f"measuring timed out after {timeout:g} s" if timed_out else out.strip()[-500:]
    sheet = datasheet_peaks(device_name) if device_name else None
    return sheet, (f"datasheet ({why})" if why else "datasheet") if sheet else (why or "unknown device")


@_cancellable
def profile_script(
    entry: Path,
    kernel: str,
    *,
    device: str = "cuda:0",
    args: list[str] | None = None,
    launch_skip: int = 0,
    launch_count: int = 1,
    full: bool = False,
    timeout: float = 300.0,
    cache_dir: Path | None = None,
    python: str | None = None,
    cancel: threading.Event | None = None,
) -> ProfileResult:
    """Profile kernels named like `kernel` (regex) that a user's script launches.

    For a kernel in a `.cu` file: the entry script (which loads and launches it) runs under ncu
    in its own folder with the worker environment; ncu keeps `launch_count` launches after skipping
    `launch_skip` (skip warm-up launches). Without ncu or counters: the script runs under
    torch.profiler and the matching kernels' device times are reported, with the reason. Setting `cancel` kills
    the script: the result is degraded, its reason "cancelled".
    """
    cache = Path(cache_dir or default_cache_dir())
    work = Path(tempfile.mkdtemp(prefix="profile-", dir=_mkdir(cache / "profiles")))
    entry = Path(entry).resolve()
    env = child_env(device, cache)
    env["CUDA_VISIBLE_DEVICES"] = env.get("CUDA_VISIBLE_DEVICES", device.split(":")[-1] if ":" in device else "0")
    python = python or sys.executable
    t0 = time.perf_counter()
    request = ProfileScript(device=device, script=entry, args=list(args or []), kernel=kernel)
    ncu = find_ncu() if device != "cpu" else None
    if ncu is None:
        why = _no_ncu(device)
        return _degraded(request, work, env, python, timeout, why, t0, cwd=entry.parent, cancel=cancel)
    report = work / "profile.ncu-rep"
    cmd = [
        ncu,
        "--clock-control",
        "none",
        "--target-processes",
        "all",
        "--import-source",
        "yes",
        "-f",
        "-o",
        str(report),
        "-k",
        f"regex:{kernel}",
        "--launch-skip",
        str(launch_skip),
        "--launch-count",
        str(launch_count),
    ]
    cmd += (
        ["--set", "full"]
        if full
        else [
            "--section",
            "SourceCounters",
            "--section",
            "LaunchStats",
            "--section",
            "Occupancy",
            "--metrics",
            ",".join(METRICS),
        ]
    )
    req = request.write(work / "request.json")
    code, log, timed_out = _run(
        cmd + [python, "-m", "forge_lsp.profiler.target", str(req)], env, timeout, entry.parent, cancel
    )
    if timed_out:
        return ProfileResult(
            mode="degraded",
            reason=f"ncu did not finish within {timeout:g} s; nothing was profiled",
            seconds=time.perf_counter() - t0,
            log_excerpt=log,
        )
    if "ERR_NVGPUCTRPERM" in log:
        return _degraded(request, work, env, python, timeout, PERMISSION_HELP, t0, log, cwd=entry.parent, cancel=cancel)
    if not report.exists():
        return ProfileResult(
            mode="degraded",
            seconds=time.perf_counter() - t0,
            log_excerpt=log,
            reason=f"no kernel matching {kernel!r} ran in {entry.name}"
            if code == 0
            else f"{entry.name} under ncu exited with code {code}; see the log excerpt",
        )
    read = _read(report, ncu)
    kernels = read.kernels
    result_file = req.with_suffix(".result.json")
    data = json.loads(result_file.read_text()) if result_file.exists() else {}
    device_name = read.device_name or data.get("device_name", "")
    if not kernels:
        return ProfileResult(
            mode="degraded",
            device_name=device_name,
            report_path=str(report),
            reason=f"no kernel matching {kernel!r} ran in {entry.name}",
            seconds=time.perf_counter() - t0,
            log_excerpt=log,
        )
    return ProfileResult(
        mode="ncu",
        device_name=device_name,
        kernels=kernels,
        report_path=str(report),
        seconds=time.perf_counter() - t0,
        log_excerpt=log if code else "",
        sources=read.sources | (data.get("sources") or {}),
    )


def profile_cu_kernel(cu_file: Path, kernel: str, entry: Path, **kwargs) -> ProfileResult:
    """Profile the `__global__` kernel `kernel` of `cu_file` as `entry` launches it (`profile_script`'s
    keywords pass through). Line info names the source as it was compiled, often a bare file name:
    hot lines in a file of that name are pointed at `cu_file` itself."""
    import re

    result = profile_script(entry, rf"\b{re.escape(kernel)}\b", **kwargs)
    full = str(Path(cu_file).resolve())
    for k in result.kernels:
        for h in k.hot_lines:
            if Path(h.file).name == Path(cu_file).name:
                h.file = full
    return result
