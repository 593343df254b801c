"""Tensors between processes, as bytes: what a candidate's worker sends the judge and the judge sends it.

A packed value is an 8-byte big-endian length, the JSON of its structure (lists, tuples, dicts, Python scalars,
and tensors as dtype, shape and a span of the data), then the tensors' bytes. Nothing is pickled: `unpack`
runs in the judge on bytes a candidate's process wrote, so it builds only what the JSON names, each span checked
against the data. A tensor travels as its values (dense, on the host); its layout, device and subclass stay behind.
"""

from __future__ import annotations

import json
import math
import mmap
import struct
import warnings
from typing import Any

import torch

_LEN = struct.Struct(">Q")
_MAX_DEPTH = 32


class WireError(ValueError):
    """A value that cannot be sent, or bytes that are not a packed value."""


def _dtype(name: Any) -> torch.dtype:
    dtype = getattr(torch, name, None) if isinstance(name, str) and name.isidentifier() else None
    if not isinstance(dtype, torch.dtype):
        raise WireError(f"not a dtype: {name!r}")
    return dtype


def _dense(v: torch.Tensor) -> tuple[torch.Tensor, list[int]]:
    """A sendable tensor's values on the host, dense in its memory order: (them, flat, in that order; the order).
    A dense permuted layout keeps its memory order (a strided view does not). May share memory with `v`."""
    if v.layout is not torch.strided or v.is_quantized or v.device.type == "meta":
        raise WireError(f"a {v.layout} tensor on {v.device}")
    t = v.detach().resolve_conj().resolve_neg().to("cpu")
    order = list(range(t.dim()))
    if not t.is_contiguous():
        strides = t.stride()
        dense = sorted(order, key=lambda d: (-strides[d], d))
        if t.permute(dense).is_contiguous():
            order = dense
    return t.permute(order).contiguous().reshape(-1), order


def host_copy(value: Any) -> Any:
    """What `unpack(pack(value))` gives, without the bytes between: the same structure, each tensor copied to the
    host in its dense layout (never sharing memory with `value`); `WireError` for what `pack` refuses."""

    def tree(v: Any, depth: int) -> Any:
        if depth > _MAX_DEPTH:
            raise WireError("nested too deeply")
        if isinstance(v, torch.Tensor):
            flat, order = _dense(v)
            if v.device.type == "cpu":  # (from another device, `to("cpu")` made it a copy already)
                flat = flat.clone()
            dense = flat.reshape([v.shape[d] for d in order])
            return dense.permute([order.index(d) for d in range(v.dim())])
        if v is None:
            return v
        for kind in (bool, int, float, str):  # as `unpack` builds them: the plain type, not a subclass
            if isinstance(v, kind):
                return kind(v)
        if isinstance(v, list | tuple):
            items = [tree(x, depth + 1) for x in v]
            return items if isinstance(v, list) else tuple(items)
        if isinstance(v, dict):
            if not all(isinstance(k, str | int) and not isinstance(k, bool) for k in v):
                raise WireError("a dict with keys other than strings and integers")
            return {k: tree(x, depth + 1) for k, x in v.items()}
        raise WireError(f"a {type(v).__name__}, which forge does not send between processes")

    return tree(value, 0)


def pack(value: Any) -> bytes:
    """`value` (tensors, Python scalars, strings, None, and lists, tuples and dicts of them) as bytes."""
    return b"".join(pack_parts(value))


def pack_parts(value: Any) -> list[bytes | memoryview]:
    """`pack(value)` in the parts it joins (the header, then each tensor's bytes), for a writer that needs no joined
    copy (`engine.sealed.seal`)."""
    chunks: list[memoryview] = []
    offset = 0

    def tree(v: Any, depth: int) -> Any:
        nonlocal offset
        if depth > _MAX_DEPTH:
            raise WireError("nested too deeply")
        if isinstance(v, torch.Tensor):
            t, order = _dense(v)
            data = t.view(torch.uint8) if t.numel() else torch.empty(0, dtype=torch.uint8)
            view = memoryview(data.numpy().data).cast("B")
            chunks.append(view)
            node = {
                "t": "tensor",
                "dtype": str(v.dtype).removeprefix("torch."),
                "shape": list(v.shape),
                "order": order,
                "at": offset,
                "n": len(view),
            }
            offset += len(view)
            return node
        if v is None or isinstance(v, bool):
            return {"t": "const", "v": v}
        if isinstance(v, int):
            return {"t": "int", "v": str(v)}  # any size: JSON readers differ on big integers
        if isinstance(v, float):
            return {"t": "float", "v": repr(v)}  # inf and nan included
        if isinstance(v, str):
            return {"t": "str", "v": v}
        if isinstance(v, list | tuple):
            return {"t": "list" if isinstance(v, list) else "tuple", "items": [tree(x, depth + 1) for x in v]}
        if isinstance(v, dict):
            if not all(isinstance(k, str | int) and not isinstance(k, bool) for k in v):
                raise WireError("a dict with keys other than strings and integers")
            return {"t": "dict", "items": [[k, tree(x, depth + 1)] for k, x in v.items()]}
        raise WireError(f"a {type(v).__name__}, which forge does not send between processes")

    head = json.dumps(tree(value, 0)).encode()
    return [_LEN.pack(len(head)), head, *chunks]


def unpack(data: bytes | bytearray | mmap.mmap) -> Any:
    """The value `pack` made; `WireError` for anything else. Tensors are views of `data` where it is a `bytearray` or
    a mapping (`engine.sealed`: read-only memory, which the caller copies before any write), copies otherwise."""
    if len(data) < _LEN.size:
        raise WireError("shorter than its header")
    (n,) = _LEN.unpack_from(data, 0)
    if n > len(data) - _LEN.size:
        raise WireError("its structure runs past the end")
    try:
        head = json.loads(bytes(data[_LEN.size : _LEN.size + n]))
    except (ValueError, UnicodeDecodeError) as exc:
        raise WireError(f"its structure is not JSON: {exc}") from None
    base = _LEN.size + n
    size = len(data) - base
    buf = data if isinstance(data, bytearray | mmap.mmap) else bytearray(data)

    def build(node: Any, depth: int) -> Any:
        if depth > _MAX_DEPTH or not isinstance(node, dict):
            raise WireError("malformed structure")
        kind = node.get("t")
        if kind == "tensor":
            dtype = _dtype(node.get("dtype"))
            shape, at, count = node.get("shape"), node.get("at"), node.get("n")
            if not (
                isinstance(shape, list)
                and all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape)
            ):
                raise WireError("a tensor's shape is not a list of sizes")
            if not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in (at, count)):
                raise WireError("a tensor's span is not two offsets")
            itemsize = torch.empty((), dtype=dtype).element_size()
            if count != math.prod(shape) * itemsize or at + count > size:
                raise WireError("a tensor's span does not fit its shape or the data")
            if count == 0:
                return torch.empty(shape, dtype=dtype)

            order = node.get("order", list(range(len(shape))))
            if not isinstance(order, list) or sorted(order) != list(range(len(shape))):
                raise WireError("a tensor's dimension order is not a permutation")
            with warnings.catch_warnings():  # a read-only mapping: its tensors are read, and copied to be written
                warnings.simplefilter("ignore", UserWarning)
                raw = torch.frombuffer(buf, dtype=torch.uint8, count=count, offset=base + at)
            dense = raw.view(dtype).reshape([shape[d] for d in order])
            return dense.permute([order.index(d) for d in range(len(shape))])
        if kind == "const":
            if node.get("v") not in (None, True, False):
                raise WireError("malformed constant")
            return node["v"]
        if kind == "int":
            return int(str(node.get("v")))
        if kind == "float":
            return float(str(node.get("v")))
        if kind == "str":
            if not isinstance(node.get("v"), str):
                raise WireError("malformed string")
            return node["v"]
        if kind in ("list", "tuple", "dict"):
            items = node.get("items")
            if not isinstance(items, list):
                raise WireError("malformed container")
            if kind == "dict":
                if not all(isinstance(i, list) and len(i) == 2 and isinstance(i[0], str | int) for i in items):
                    raise WireError("malformed dict")
                return {k: build(v, depth + 1) for k, v in items}
            built = [build(v, depth + 1) for v in items]
            return built if kind == "list" else tuple(built)
        raise WireError(f"unknown node {kind!r}")

    try:
        return build(head, 0)
    except (ValueError, TypeError, RuntimeError, RecursionError) as exc:
        if isinstance(exc, WireError):
            raise
        raise WireError(f"malformed value: {exc}") from None
