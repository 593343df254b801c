"""This process's own device memory, as the driver counts it (NVML, through `nvidia-ml-py`).

The device's free memory (`cudaMemGetInfo`) is the whole device's: with other processes at work on it (a batch's
other device lanes, their judges) it moves for reasons that are not this process's. NVML counts each process's
memory apart, context and every allocation included, whoever made it (torch's allocator, CuPy, a `cudaMalloc` in a
candidate's extension). Where this process does not appear in NVML's list (a container with its own PID namespace
shows the host's PIDs) or NVML is missing, there is no per-process figure and the caller falls back to the device's.
"""

from __future__ import annotations

import os
from collections.abc import Callable


def own_memory_reader(uuid: str) -> Callable[[], int | None] | None:
    """A function that returns this process's bytes on the device of `uuid` (torch's `get_device_properties().uuid`,
    with or without NVML's "GPU-" prefix), or None when NVML cannot tell this process's memory apart."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        key = uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"
        handle = pynvml.nvmlDeviceGetHandleByUUID(key)
    except Exception:  # noqa: BLE001 - no driver library, an unknown device: no figure
        return None
    pid = os.getpid()

    def used() -> int | None:
        try:
            procs = pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
        except Exception:  # noqa: BLE001
            return None
        for p in procs:
            if p.pid == pid:
                value = p.usedGpuMemory
                return int(value) if isinstance(value, int) and value >= 0 else None
        return None

    return used if used() is not None else None
