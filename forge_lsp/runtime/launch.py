"""Launching a compiled kernel on torch tensors: :class:`Kernel` loads its cubin into a device's primary
context at the first launch there (opting in to dynamic shared memory above 48 KiB), marshals each argument by
its parameter (a CUDA tensor or device address for a pointer, a Python number as the parameter's scalar type,
ctypes objects and ``cuda.bindings`` structs as their bytes) and launches on torch's current stream or the
one given. torch and ``cuda.bindings`` are imported only inside the launch.
"""

from __future__ import annotations

import ctypes
import math
import numbers
import struct
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from forge_lsp.runtime.driver import check, driver_error, ensure_context
from forge_lsp.runtime.errors import CudaLaunchError, KernelArgumentError
from forge_lsp.runtime.params import KernelParam

__all__ = ["STATIC_SHARED_MEM_LIMIT", "Kernel"]

STATIC_SHARED_MEM_LIMIT = 48 * 1024
"""Dynamic shared memory a kernel may use without opting in through a function attribute."""


_CTYPES: dict[str, type[ctypes._SimpleCData]] = {
    "bool": ctypes.c_bool,
    "i8": ctypes.c_int8,
    "u8": ctypes.c_uint8,
    "i16": ctypes.c_int16,
    "u16": ctypes.c_uint16,
    "i32": ctypes.c_int32,
    "u32": ctypes.c_uint32,
    "i64": ctypes.c_int64,
    "u64": ctypes.c_uint64,
    "f32": ctypes.c_float,
    "f64": ctypes.c_double,
}
_FLOAT_DTYPES = {"f32": "float32", "f64": "float64", "f16": "float16", "bf16": "bfloat16"}


def _half_bits(value: float) -> int:
    """IEEE binary16 bits of ``value`` (round to nearest even; overflow gives infinity)."""
    try:
        return struct.unpack("<H", struct.pack("<e", value))[0]
    except OverflowError:
        return 0xFC00 if value < 0 else 0x7C00


def _bfloat16_bits(value: float) -> int:
    """bfloat16 bits of ``value`` (round to nearest even, like ``__float2bfloat16``)."""
    if math.isnan(value):
        return 0x7FC0
    bits = struct.unpack("<I", struct.pack("<f", value))[0]
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF


def _dim3(value: int | Sequence[int], what: str) -> tuple[int, int, int]:
    """A grid or block size as three positive ints; an int or 1-3 ints, padded with 1."""
    dims = (value,) if isinstance(value, numbers.Integral) else value
    if (
        not isinstance(dims, Sequence)
        or not 1 <= len(dims) <= 3
        or not all(isinstance(d, numbers.Integral) and not isinstance(d, bool) and int(d) >= 1 for d in dims)
    ):
        raise ValueError(f"{what} must be a positive int or a tuple of 1 to 3 positive ints, got {value!r}")
    x, y, z = (*(int(d) for d in dims), 1, 1, 1)[:3]
    return x, y, z


def _stream_handle(stream: Any, device: int) -> int:
    """The CUstream handle to launch on: ``stream`` (int or torch stream) or torch's current stream."""
    import torch

    if stream is None:
        return int(torch.cuda.current_stream(device).cuda_stream)
    if isinstance(stream, numbers.Integral) and not isinstance(stream, bool):
        return int(stream)
    handle = getattr(stream, "cuda_stream", None)
    if handle is None:
        raise TypeError(
            f"stream must be None, an int CUstream handle or a torch.cuda.Stream, got {type(stream).__name__}"
        )
    stream_device = getattr(stream, "device", None)
    if isinstance(stream_device, torch.device) and stream_device.index not in (None, device):
        raise ValueError(f"stream is on {stream_device} but the current device is cuda:{device}")
    return int(handle)


@dataclass
class _Loaded:
    """A kernel's module and function in one device's context."""

    module: Any
    function: Any
    max_dynamic_shared: int = STATIC_SHARED_MEM_LIMIT


@dataclass(eq=False)
class Kernel:
    """A compiled kernel; call it to launch on torch tensors.

    ``kernel(grid, block, args, shared_mem=0, stream=None)``: ``grid``/``block`` are an int or
    1-3 ints; ``args`` match the parameters in order (tensors or device addresses for pointers,
    Python numbers for scalars, ctypes objects passed as raw bytes); ``shared_mem`` is dynamic
    shared memory in bytes (above 48 KiB the kernel is opted in first); ``stream`` is a
    ``torch.cuda.Stream`` or CUstream handle, default torch's current stream. The module is loaded
    into the current device's primary context at its first launch there.
    """

    name: str
    lowered_name: str
    arch: str
    cubin: bytes = field(repr=False)
    params: tuple[KernelParam, ...]
    log: str = field(default="", repr=False)
    _loaded: dict[int, _Loaded] = field(default_factory=dict, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __call__(
        self,
        grid: int | Sequence[int],
        block: int | Sequence[int],
        args: Sequence[Any] = (),
        *,
        shared_mem: int = 0,
        stream: Any = None,
    ) -> None:
        import torch
        from cuda.bindings import driver

        grid3, block3 = _dim3(grid, "grid"), _dim3(block, "block")
        if not isinstance(shared_mem, numbers.Integral) or shared_mem < 0:
            raise ValueError(f"shared_mem must be a non-negative int (bytes), got {shared_mem!r}")
        if len(args) != len(self.params):
            signature = ", ".join(f"{p.ctype} {p.name}" for p in self.params)
            raise KernelArgumentError(
                f"kernel '{self.name}' takes {len(self.params)} arguments ({signature}), got {len(args)}"
            )
        if not self._loaded and not torch.cuda.is_available():
            raise CudaLaunchError(f"cannot launch kernel '{self.name}': torch sees no CUDA device")
        device = torch.cuda.current_device()
        marshalled = [self._marshal(p, a, device) for p, a in zip(self.params, args, strict=True)]
        handle = _stream_handle(stream, device)
        ensure_context(device)
        function = self._function(device, int(shared_mem))
        addresses = (ctypes.c_void_p * len(marshalled))(*(address for _, address in marshalled))
        err, *_ = driver.cuLaunchKernel(
            function,
            *grid3,
            *block3,
            int(shared_mem),
            handle,
            ctypes.addressof(addresses) if marshalled else None,
            0,
        )
        if int(err) != 0:
            raise driver_error(
                err, f"cuLaunchKernel of '{self.name}' (grid={grid3}, block={block3}, shared_mem={shared_mem})"
            )

    def _function(self, device: int, shared_mem: int) -> Any:
        """The CUfunction in ``device``'s context, loading the module and opting in to shared memory."""
        import torch
        from cuda.bindings import driver

        with self._lock:
            loaded = self._loaded.get(device)
            if loaded is None:
                err, module = driver.cuModuleLoadData(self.cubin)
                if int(err) != 0:
                    major, minor = torch.cuda.get_device_capability(device)
                    raise driver_error(
                        err,
                        f"cuModuleLoadData of kernel '{self.name}' compiled for {self.arch} on cuda:{device} "
                        f"(sm_{major}{minor}; set arch= or FORGE_CUDA_ARCH to match)",
                    )
                function = check(
                    driver.cuModuleGetFunction(module, self.lowered_name.encode()),
                    f"cuModuleGetFunction('{self.lowered_name}')",
                )
                loaded = self._loaded[device] = _Loaded(module=module, function=function)
            if shared_mem > loaded.max_dynamic_shared:
                attribute = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
                check(
                    driver.cuFuncSetAttribute(loaded.function, attribute, shared_mem),
                    f"allowing {shared_mem} bytes of dynamic shared memory for kernel '{self.name}' "
                    "(cuFuncSetAttribute MAX_DYNAMIC_SHARED_SIZE_BYTES)",
                )
                loaded.max_dynamic_shared = shared_mem
            return loaded.function

    def _marshal(self, param: KernelParam, value: Any, device: int) -> tuple[Any, int]:
        """Convert one argument: returns (object to keep alive, address of the parameter's bytes)."""
        import torch

        where = f"parameter '{param.name}' ({param.ctype}) of kernel '{self.name}'"
        if isinstance(value, ctypes._SimpleCData | ctypes.Structure | ctypes.Union | ctypes.Array):
            return value, ctypes.addressof(value)
        if param.pointer:
            if isinstance(value, torch.Tensor):
                if value.device.type != "cuda" or value.device.index != device:
                    raise KernelArgumentError(f"{where} got a tensor on {value.device}; it must be on cuda:{device}")
                expected = _FLOAT_DTYPES.get(param.kind or "")
                if expected is not None and value.dtype != getattr(torch, expected):
                    raise KernelArgumentError(
                        f"{where} expects a torch.{expected} tensor, got {value.dtype} "
                        "(pass tensor.data_ptr() to reinterpret the memory)"
                    )
                pointer = ctypes.c_void_p(value.data_ptr())
            elif value is None:
                pointer = ctypes.c_void_p(None)
            elif isinstance(value, numbers.Integral) and not isinstance(value, bool) and 0 <= int(value) < 2**64:
                pointer = ctypes.c_void_p(int(value))
            else:
                raise KernelArgumentError(
                    f"{where} needs a CUDA tensor, a device address (int) or None, got {type(value).__name__}"
                )
            return pointer, ctypes.addressof(pointer)
        if callable(getattr(value, "getPtr", None)):  # cuda.bindings structs, e.g. CUtensorMap
            return value, int(value.getPtr())
        if isinstance(value, torch.Tensor):
            raise KernelArgumentError(f"{where} is a scalar; pass a Python number (e.g. tensor.item()), not a tensor")
        if param.kind is None:
            raise KernelArgumentError(
                f"{where} has a type the launcher cannot build from {type(value).__name__}; "
                "pass a ctypes object (or a cuda.bindings struct) holding its bytes"
            )
        scalar = self._scalar(param, value, where)
        return scalar, ctypes.addressof(scalar)

    @staticmethod
    def _scalar(param: KernelParam, value: Any, where: str) -> ctypes._SimpleCData:
        """A by-value scalar argument as the ctypes object of the parameter's kind."""
        kind = param.kind or ""
        if kind == "bool" or kind[0] in "iu":
            if not isinstance(value, numbers.Integral):
                raise KernelArgumentError(f"{where} needs an int, got {type(value).__name__}")
            if kind != "bool":
                bits = int(kind[1:])
                low, high = (0, 2**bits) if kind[0] == "u" else (-(2 ** (bits - 1)), 2 ** (bits - 1))
                if not low <= int(value) < high:
                    raise KernelArgumentError(f"{where}: {value} is out of range [{low}, {high - 1}]")
            return _CTYPES[kind](int(value))
        if not isinstance(value, numbers.Real):
            raise KernelArgumentError(f"{where} needs a float, got {type(value).__name__}")
        if kind == "f16":
            return ctypes.c_uint16(_half_bits(float(value)))
        if kind == "bf16":
            return ctypes.c_uint16(_bfloat16_bits(float(value)))
        return _CTYPES[kind](float(value))
