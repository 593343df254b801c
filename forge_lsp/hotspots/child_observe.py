"""Every module call observed while the model runs (child process only: the hot-spot child).

`Observer` wraps ``nn.Module.__call__`` for the run: each call opens a ``torch.profiler`` range named for its
instance (`RANGE`, the instance's id, and ``#N`` for a model's Nth forward), calls are counted, and each
instance's first calls have their inputs copied to the host while capturing is on, with the call written as
the task's ``forward`` (`forward_source`). `name_arguments` names a call's arguments as `patching` matches
them; `output_spec` and `flat_tensors` read a forward's output, tensors in the order the extracted task lists
them.
"""

from __future__ import annotations

import inspect
import threading
from collections import defaultdict
from typing import Any, NamedTuple

from .child_source import SourceError, constant, importable
from .report import CallArg, TensorSpec

#: The name of the profiler range each module call opens, followed by the instance's id (and ``#N`` for a model's
#: Nth forward).
RANGE = "forge::m"


class FirstCall(NamedTuple):
    """A root's first forward as the script made it: its inputs (cloned) and the state it ran under."""

    args: tuple
    kwargs: dict
    grad: bool
    inference: bool
    device_type: str
    autocast: bool
    autocast_dtype: Any


class Observer:
    """Wraps ``nn.Module.__call__`` for the run: names a profiler range per instance call, counts calls, and
    copies the inputs of each instance's first calls to the host while capturing is on."""

    def __init__(self, torch: Any, capture_calls: int, call_limit: int, total_limit: int) -> None:
        self.torch = torch
        self.local = threading.local()
        self.calls: dict[int, int] = defaultdict(int)
        self.modules: dict[int, Any] = {}
        self.roots: dict[int, int] = defaultdict(int)  # root instance -> forwards
        self.specs: dict[int, list[TensorSpec]] = {}
        self.captured: dict[int, list[tuple[list[Any], str, list[CallArg]]]] = defaultdict(list)
        self.outputs: dict[int, str] = {}  # what each captured instance's call returned
        self.output_specs: dict[int, Any] = {}
        self.capture_skips: dict[int, str] = {}
        self.replay_skips: dict[int, str] = {}  # why a root's first forward was not kept to be run again
        self.capture_calls, self.call_limit, self.total_limit = capture_calls, call_limit, total_limit
        self.captured_bytes = 0
        self.capturing = True
        self.profiling = False
        self.warmup_roots: set[tuple[int, int]] = set()
        #: a script's run: each root's first forward is kept (its inputs cloned where they fit `call_limit`, with
        #: the grad, inference and autocast state it ran under) so that a model the script runs once can be run
        #: again after it (`replay`)
        self.keep_first = False
        self.first_calls: dict[int, FirstCall] = {}
        self._original = None

    def install(self) -> None:
        Module = self.torch.nn.Module
        original = Module.__call__
        self._original = original
        observer = self

        def __call__(mod: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N807
            return observer.call(original, mod, args, kwargs)

        Module.__call__ = __call__

    def uninstall(self) -> None:
        if self._original is not None:
            self.torch.nn.Module.__call__ = self._original

    def call(self, original: Any, mod: Any, args: tuple, kwargs: dict) -> Any:
        stack = getattr(self.local, "stack", None)
        if stack is None:
            stack = self.local.stack = []
        key = id(mod)
        self.modules[key] = mod
        self.calls[key] += 1
        name = f"{RANGE}{key}"
        if not stack:
            self.roots[key] += 1
            name += f"#{self.roots[key]}"
            if self.keep_first and self.roots[key] == 1:
                self._keep_first(mod, key, args, kwargs)
        if self.calls[key] == 1 or (self.capturing and len(self.captured[key]) < self.capture_calls):
            self._inputs(mod, key, args, kwargs)
        rf = self.torch.autograd.profiler.record_function(name) if self.profiling else None
        if rf is not None:
            rf.__enter__()
        stack.append(key)
        try:
            out = original(mod, *args, **kwargs)
            if key in self.captured and key not in self.outputs:
                self.outputs[key] = "tensor" if type(out) is self.torch.Tensor else type(out).__qualname__
                self.output_specs[key] = output_spec(self.torch, out)
            return out
        finally:
            stack.pop()
            if rf is not None:
                rf.__exit__(None, None, None)

    def _keep_first(self, mod: Any, key: int, args: tuple, kwargs: dict) -> None:
        torch = self.torch
        from torch.utils._pytree import tree_flatten, tree_map

        leaves = [x for x in tree_flatten((args, kwargs))[0] if isinstance(x, torch.Tensor)]
        size = sum(t.numel() * t.element_size() for t in leaves)
        if size > self.call_limit:
            self.replay_skips[key] = (
                f"its inputs take {size / 2**20:.0f} MiB, over the {self.call_limit / 2**20:.0f} MiB kept to run it again"
            )
            return

        def clone(x: Any) -> Any:
            if not isinstance(x, torch.Tensor):
                return x
            c = x.detach().clone()
            return c.requires_grad_() if x.requires_grad and c.is_floating_point() else c

        device_type = next((t.device.type for t in leaves), "cpu")
        try:
            autocast = (torch.is_autocast_enabled(device_type), torch.get_autocast_dtype(device_type))
        except (AttributeError, RuntimeError, TypeError):  # a device type autocast does not know
            autocast = (False, None)
        self.first_calls[key] = FirstCall(
            tree_map(clone, args),
            tree_map(clone, kwargs),
            torch.is_grad_enabled(),
            torch.is_inference_mode_enabled(),
            device_type,
            *autocast,
        )

    def replay(self, key: int, times: int) -> None:
        """Run root `key`'s first forward again `times` times, as it first ran (grad, inference and autocast
        state), each call a forward of its own (``#2``, ``#3``, ...). Its buffers (a norm's running statistics
        in training mode) are put back as they were; raises what the forward raises."""
        torch = self.torch
        mod, first = self.modules[key], self.first_calls[key]
        buffers = [(b, b.detach().clone()) for b in mod.buffers()]
        try:
            with (
                torch.inference_mode(first.inference),
                torch.set_grad_enabled(first.grad),
                torch.autocast(first.device_type, dtype=first.autocast_dtype, enabled=first.autocast),
            ):
                for _ in range(times):
                    mod(*first.args, **first.kwargs)
        finally:
            with torch.no_grad():
                for b, saved in buffers:
                    b.copy_(saved)

    def _inputs(self, mod: Any, key: int, args: tuple, kwargs: dict) -> None:
        torch = self.torch
        try:
            named = name_arguments(mod, args, kwargs)
        except Exception as exc:  # noqa: BLE001 - a signature forge cannot read: no capture, say why
            self.capture_skips.setdefault(key, f"its forward() arguments cannot be read: {exc}")
            return
        tensors = [(n, v) for n, v, _ in named if isinstance(v, torch.Tensor)]
        if key not in self.specs:
            self.specs[key] = [tensor_spec(torch, n, v) for n, v in tensors]
        if not self.capturing or key in self.capture_skips:
            return
        size = sum(v.numel() * v.element_size() for _, v in tensors)
        if size > self.call_limit:
            self.capture_skips[key] = (
                f"its inputs take {size / 2**20:.0f} MiB, over the {self.call_limit / 2**20:.0f} MiB of one call"
            )
            return
        if self.captured_bytes + size > self.total_limit:
            self.capture_skips[key] = f"the capture budget of {self.total_limit / 2**20:.0f} MiB was spent"
            return
        try:
            source, call = forward_source(named, torch)
        except SourceError as exc:
            self.capture_skips[key] = str(exc)
            return
        copies = [v.detach().to("cpu", copy=True) for _, v in tensors]
        self.captured_bytes += size
        self.captured[key].append((copies, source, call))


def name_arguments(mod: Any, args: tuple, kwargs: dict) -> list[tuple[str, Any, str]]:
    """(name, value, how it is passed: "pos" or "kw") for each argument of a forward call."""
    forward = type(mod).forward
    try:
        params = list(inspect.signature(forward).parameters.values())[1:]
    except (TypeError, ValueError):
        params = []
    out: list[tuple[str, Any, str]] = []
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    var = next((p for p in params if p.kind == p.VAR_POSITIONAL), None)
    for i, value in enumerate(args):
        if i < len(positional):
            name = positional[i].name
        elif var is not None:
            name = f"{var.name}_{i - len(positional)}"
        else:
            name = f"arg{i}"
        out.append((name, value, "pos"))
    for k, value in kwargs.items():
        out.append((k, value, "kw"))
    return out


def tensor_spec(torch: Any, name: str, t: Any) -> TensorSpec:
    dtype = str(t.dtype).removeprefix("torch.")
    low = high = None
    if not t.is_floating_point() and not t.is_complex() and t.numel() and t.dtype != torch.bool:
        low, high = float(t.min().item()), float(t.max().item())
    return TensorSpec(name=name, shape=list(t.shape), dtype=dtype, low=low, high=high)


def forward_source(named: list[tuple[str, Any, str]], torch: Any) -> tuple[str, list[CallArg]]:
    """The task's ``forward`` over the captured tensors, and the call argument by argument: tensors are its
    parameters, every other argument a constant written as source (a call whose other arguments cannot be
    written cannot be replayed)."""
    params, call, args = [], [], []
    for name, value, how in named:
        if isinstance(value, torch.Tensor):
            params.append(name)
            text = name
            args.append(CallArg(name=name, how=how, tensor=True))
        else:
            try:
                text = constant(value, torch)
            except SourceError as exc:
                raise SourceError(f"argument {name} of its forward() cannot be replayed: {exc}") from None
            args.append(CallArg(name=name, how=how, tensor=False, source=text))
        call.append(text if how == "pos" else f"{name}={text}")
    source = (
        f"    def forward(self{''.join(', ' + p for p in params)}):\n"
        f"        return _tensors(super().forward({', '.join(call)}))\n"
    )
    return source, args


def output_spec(torch: Any, out: Any, depth: int = 0) -> Any:
    """The structure of a forward's output, JSON-able, tensors as "tensor" in the order the extracted task's
    `_tensors` lists them; None where it cannot be rebuilt (an object of no importable class, deep nesting)."""
    if depth > 8:
        return None
    if isinstance(out, torch.Tensor):
        return "tensor"
    if out is None or isinstance(out, (bool, int, float, str)):
        return {"const": out}
    if isinstance(out, (list, tuple)) and type(out) in (list, tuple):
        items = [output_spec(torch, x, depth + 1) for x in out]
        return None if any(i is None for i in items) else {"seq": type(out).__name__, "items": items}
    if hasattr(out, "items") and hasattr(out, "keys"):
        cls = type(out)
        if cls is not dict and not importable(cls.__module__):
            return None
        keys = list(out.keys())
        items = [output_spec(torch, out[k], depth + 1) for k in keys]
        if any(i is None for i in items) or not all(isinstance(k, str) for k in keys):
            return None
        return {"map": f"{cls.__module__}:{cls.__qualname__}", "keys": keys, "items": items}
    return None


def flat_tensors(torch: Any, out: Any) -> list[Any]:
    flat: list[Any] = []

    def walk(x: Any) -> None:
        if isinstance(x, torch.Tensor):
            flat.append(x)
        elif isinstance(x, (list, tuple)):
            for v in x:
                walk(v)
        elif hasattr(x, "items"):
            for _, v in x.items():
                walk(v)

    walk(out)
    return flat
