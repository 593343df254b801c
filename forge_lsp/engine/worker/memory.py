"""The device's memory as a CUDA worker started (`DeviceMemory`), given back after each evaluation or the worker is
replaced."""

from __future__ import annotations

import gc
import sys
from typing import Any

from ..verdict import MemoryUse
from .state import WorkerState, exception_line


class DeviceMemory:
    """The device's memory as the worker started, given back after each evaluation, or the worker is unusable.

    After an evaluation the candidate's objects are dropped, the garbage collected, the device synchronized,
    the caches emptied (torch's caching allocator, cuBLAS workspaces, CuPy's pool if a candidate used it);
    then the allocator may hold at most the task's kept inputs (`WorkerState.drawn_bytes`) more than at the
    start, and the device's free memory may be at most what the allocator reserves plus the slack below its
    starting level. A worker that cannot get back is replaced before the next candidate, so each candidate
    starts from the free memory the first one had."""

    def __init__(self, torch: Any, device: Any) -> None:
        from ..harness.nvml import own_memory_reader

        self.torch, self.device = torch, device
        self.release()
        self.free0, self.total = torch.cuda.mem_get_info(device)
        self.allocated0 = torch.cuda.memory_allocated(device)
        #: this process's own bytes on the device (NVML), where the driver tells them apart: then what it holds
        #: outside torch's allocator is its own, whatever other processes (device lanes, judges) do beside it
        self.own = own_memory_reader(str(torch.cuda.get_device_properties(device).uuid))
        self.outside0 = self._outside_own() if self.own is not None else None

    def _outside_own(self) -> int | None:
        """This process's device bytes outside torch's allocator (its context, CuPy, raw allocations), or None."""
        used = self.own() if self.own is not None else None
        return None if used is None else used - int(self.torch.cuda.memory_reserved(self.device))

    def release(self, collect: bool = True) -> None:
        torch = self.torch
        dynamo = sys.modules.get("torch._dynamo")
        if dynamo is not None:  # compiled frames of a torch.compile candidate hold its module and tensors
            try:
                dynamo.reset()
            except Exception:  # noqa: BLE001
                pass
        if collect:
            gc.collect()
        torch.cuda.synchronize(self.device)
        cupy = sys.modules.get("cupy")
        if cupy is not None:
            try:
                cupy.get_default_memory_pool().free_all_blocks()
                cupy.get_default_pinned_memory_pool().free_all_blocks()
            except Exception:  # noqa: BLE001 - a candidate may have broken it; the measurement says the rest
                pass
        clear_cublas = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
        if clear_cublas is not None:
            clear_cublas()
        torch.cuda.empty_cache()

    def free(self) -> int:
        return int(self.torch.cuda.mem_get_info(self.device)[0])

    def rebase(self) -> None:
        """Take the device's memory as it is now, between evaluations, as the level to get back to: another process
        on the device (this worker's judge) took or gave back memory since. What this worker's allocator reserves
        now (its kept inputs, recovered after the last evaluation) counts as free, as it did at the start."""
        self.release(collect=False)
        self.free0 = self.free() + int(self.torch.cuda.memory_reserved(self.device))

    def after(self, state: WorkerState, slack: int, free_before: int, kept_before: int) -> MemoryUse:
        """Release what the evaluation left and measure; `recovered` False when the worker cannot go on."""
        torch = self.torch
        use = MemoryUse(
            gpu_total_bytes=int(self.total),
            gpu_free_at_start_bytes=int(self.free0),
            gpu_free_before_bytes=free_before,
            gpu_kept_before_bytes=kept_before,
            gpu_kept_bytes=state.drawn_bytes,
        )
        for collect in (False, True):
            # first without a garbage collection (about 0.1 s with torch loaded): most candidates leave no cycle that
            # holds device memory; a full collection only when the memory is not back without one
            try:
                self.release(collect=collect)
                use.gpu_free_after_bytes = free = self.free()
                use.gpu_allocated_after_bytes = allocated = int(torch.cuda.memory_allocated(self.device))
                use.gpu_reserved_after_bytes = reserved = int(torch.cuda.memory_reserved(self.device))
            except Exception as exc:  # noqa: BLE001 - a device that cannot even say: the worker is done
                print(
                    f"forge worker: device memory cannot be measured: {exception_line(exc)}",
                    file=sys.stderr,
                    flush=True,
                )
                use.recovered = False
                return use
            held = allocated - self.allocated0 - state.drawn_bytes  # live tensors nobody should hold any more
            own = self._outside_own() if self.outside0 is not None else None
            if own is not None and self.outside0 is not None:  # this process's own, as the driver counts it
                outside = own - self.outside0
                use.gpu_outside_bytes = outside
            else:  # device memory outside torch's allocator (CuPy, cudaMalloc...), from the device's free memory
                outside = self.free0 - free - reserved
            use.recovered = held <= slack // 8 and outside <= slack
            if use.recovered:
                break
        if not use.recovered:
            print(
                f"forge worker: device memory not given back ({held / 2**20:.0f} MiB still allocated beyond the kept "
                f"inputs, {outside / 2**20:.0f} MiB used outside the allocator); this worker is replaced",
                file=sys.stderr,
                flush=True,
            )
        return use
