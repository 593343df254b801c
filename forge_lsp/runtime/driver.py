"""CUDA driver calls: a ``cuda.bindings.driver`` result checked into a :class:`CudaLaunchError` that names the
CUresult, and the primary context of torch's device made current on the calling thread (retained once per
device, checked once per thread). ``cuda.bindings`` is imported only inside the functions that call it.
"""

from __future__ import annotations

import threading
from typing import Any

from forge_lsp.runtime.errors import CudaLaunchError

__all__ = ["check", "driver_error", "ensure_context"]


def check(result: tuple[Any, ...], call: str) -> Any:
    """Unpack a ``cuda.bindings.driver`` result tuple, raising CudaLaunchError unless CUDA_SUCCESS."""
    err, *values = result
    if int(err) != 0:
        raise driver_error(err, call)
    return values[0] if len(values) == 1 else tuple(values)


def driver_error(err: Any, what: str) -> CudaLaunchError:
    """The CudaLaunchError of a failed driver call: ``what`` failed with the CUresult's name and number."""
    name = getattr(err, "name", str(err))
    return CudaLaunchError(f"{what} failed with {name} ({int(err)})", result=name)


_context_lock = threading.Lock()
_primary_contexts: dict[int, Any] = {}


_thread_state = threading.local()


def ensure_context(device: int) -> None:
    """Make the primary context of torch device ``device`` current on this thread (torch's context).

    Checked once per thread and device: torch keeps that context current afterwards.
    """
    from cuda.bindings import driver

    done = getattr(_thread_state, "devices", None)
    if done is None:
        done = _thread_state.devices = set()
    if device in done:
        return
    context = _primary_contexts.get(device)
    if context is None:
        with _context_lock:
            context = _primary_contexts.get(device)
            if context is None:
                check(driver.cuInit(0), "cuInit")
                handle = check(driver.cuDeviceGet(device), "cuDeviceGet")
                context = check(driver.cuDevicePrimaryCtxRetain(handle), "cuDevicePrimaryCtxRetain")
                _primary_contexts[device] = context
    if int(check(driver.cuCtxGetCurrent(), "cuCtxGetCurrent")) != int(context):
        check(driver.cuCtxSetCurrent(context), "cuCtxSetCurrent")
    done.add(device)
