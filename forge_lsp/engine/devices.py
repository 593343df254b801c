"""The devices of this machine, read without torch: which GPUs a process may use, how many lanes each runs, and how
many build workers the cores and memory hold."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from .evaluate import resolve_device


def visible_gpu_count() -> int | None:
    """How many NVIDIA GPUs this process may use, read without torch: ``CUDA_VISIBLE_DEVICES`` when set, else
    the driver's list (0: none; None: there is a driver but the count cannot be read)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return 0
    gpus = Path("/proc/driver/nvidia/gpus")
    driver = Path("/proc/driver/nvidia/version").exists() or gpus.exists() or shutil.which("nvidia-smi") is not None
    if not driver:
        return 0
    try:
        count = sum(1 for _ in gpus.iterdir())
    except OSError:
        count = 0
    if not count:  # a container may show the driver's tool but not its /proc folder
        count = _gpus_listed_by_nvidia_smi()
    if visible is not None:
        listed = len([d for d in visible.split(",") if d.strip()])
        return min(listed, count) if count else listed
    return count or None


def _gpus_listed_by_nvidia_smi() -> int:
    """The GPUs ``nvidia-smi -L`` lists (0 where it is missing or fails)."""
    from ..sandbox import run_sandboxed, scrubbed_env

    exe = shutil.which("nvidia-smi")
    if exe is None:
        return 0
    env = {k: v for k, v in scrubbed_env().items() if k != "CUDA_VISIBLE_DEVICES"}  # every GPU of the machine
    try:
        result = run_sandboxed([exe, "-L"], env=env, cwd=Path.cwd(), timeout=15.0)
    except OSError:
        return 0
    if result.returncode != 0:
        return 0
    return sum(1 for line in result.output.splitlines() if line.startswith("GPU "))


def visible_gpus() -> int:
    """`visible_gpu_count`, at least one where a driver is present."""
    count = visible_gpu_count()
    return 1 if count is None else count


def local_devices(device: str = "auto") -> list[str]:
    """The devices a local pool gets one worker each for: ``auto`` or ``cuda`` mean every visible GPU (the CPU
    when there is none), ``cuda:N`` and ``cpu`` that one device."""
    name = device.strip().lower()
    if name in ("auto", "cuda"):
        n = visible_gpus()
        if n == 0:
            return [resolve_device("auto") if name == "auto" else "cuda:0"]
        return [f"cuda:{i}" for i in range(n)]
    return [name]


#: Lanes a GPU runs by default (`LocalPool`): each a worker and its judge, two CUDA contexts of about 0.5 GiB.
GPU_LANES = 3


def device_lanes(device: str, lanes: int | None = None) -> int:
    """How many lanes `device` runs: `lanes`, else ``$FORGE_DEVICE_LANES``, else `GPU_LANES` for a GPU. The CPU runs
    one: its timings run on the host's cores, which no gate can keep to themselves."""
    if not device.startswith("cuda"):
        return 1
    if lanes is None:
        env = os.environ.get("FORGE_DEVICE_LANES", "").strip()
        lanes = int(env) if env.isdigit() else GPU_LANES
    return max(1, lanes)


#: A load_inline build's peak resident memory: nvcc on a slim-prelude .cu peaked at 0.87 GB (`/usr/bin/time -v`, nvcc
#: 13.0, the CPU host, 2026-12-03), beside g++ on main.cpp at the same time (ninja builds both), plus the build
#: worker's own interpreter with torch imported (~0.4 GB): 2 GiB a build worker, with room to spare.
BUILD_PEAK_BYTES = 2 << 30
#: The share of the machine's available memory the build workers may take together.
BUILD_MEMORY_SHARE = 0.5


def available_memory() -> int | None:
    """MemAvailable from /proc/meminfo, in bytes (None where it cannot be read)."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


#: the niceness of build workers and their compilers
BUILD_NICE = 10


def default_build_workers(cores: int | None = None, memory: int | None = None) -> int:
    """How many build workers this machine runs: ``$FORGE_BUILD_WORKERS`` when set (a cap the user chose), else one
    per core but the device worker's, as many as `BUILD_MEMORY_SHARE` of the available memory holds at
    `BUILD_PEAK_BYTES` each; at least one."""
    env = os.environ.get("FORGE_BUILD_WORKERS", "").strip()
    if env.isdigit():
        return max(0, int(env))
    cores = cores if cores is not None else (os.cpu_count() or 2)
    memory = memory if memory is not None else available_memory()
    n = max(1, cores - 1)
    if memory is not None:
        n = min(n, int(memory * BUILD_MEMORY_SHARE // BUILD_PEAK_BYTES))
    return max(1, n)
