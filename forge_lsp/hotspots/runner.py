"""The child that runs a whole model and finds where its time goes (started by `hotspots.run`).

    python -m forge_lsp.hotspots.runner REQUEST.json

Reads the request (entry, device, warm-up and profiled iterations, capture budget, output folder), runs the
entry with every module call observed — ``nn.Module.__call__`` wrapped for the run, so that each call opens a
``torch.profiler`` range named for its instance, and each instance's first calls have their inputs copied
to the host — and writes ``report.json`` (a `HotspotReport`) plus one capture folder per hot instance.
Progress goes to the request's progress file, one JSON line per step. The user's code is never edited.

Time is each op's *self* time (device time of its kernels on CUDA, host time on the CPU) given to the
innermost module instance whose range encloses it, and to every enclosing instance as its total. A script
entry's first forward of each model is its warm-up (excluded whenever the model ran more than once); a
function entry is warmed up by forge before the profiled forwards. Constructors are recorded as the
instances are made (``nn.Module.__new__`` wrapped for the run) and written back as Python source, which is
checked by building the module again and comparing its parameters' names and shapes.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import inspect
import json
import os
import sys
import threading
import time
import traceback
import weakref
from collections import defaultdict
from pathlib import Path
from typing import Any

from ..child import run_script_as_main
from ..parsing import parse
from .entry import Entry
from .report import CallArg, Capture, HotspotReport, Instance, ModuleClass, Op, TensorSpec, rank_targets
from .requests import HotspotRequest

_RANGE = "forge::m"
#: The script a script entry ran as ``__main__``: where its classes are defined.
_SCRIPT: dict[str, Path] = {}
#: A function entry's module: an extracted task imports it first, so that what it sets up for its model
#: (paths, registrations, workarounds) is there again.
_ENTRY: dict[str, Any] = {}


class Progress:
    def __init__(self, path: str | Path | None) -> None:
        self.path = path

    def __call__(self, step: str, done: int | None = None, of: int | None = None) -> None:
        if not self.path:
            return
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"step": step, "done": done, "of": of, "t": time.time()}) + "\n")


# ----------------------------------------------------------------------------- constructors
class CtorRecorder:
    """Records every module's constructor arguments as it is made (``nn.Module.__new__`` wrapped)."""

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self.args: weakref.WeakKeyDictionary[Any, tuple[tuple, dict]] = weakref.WeakKeyDictionary()

    def install(self) -> None:
        Module = self.torch.nn.Module
        recorder = self

        def __new__(cls, *args: Any, **kwargs: Any) -> Any:  # noqa: N807
            obj = object.__new__(cls)
            try:
                recorder.args[obj] = (args, kwargs)
            except TypeError:
                pass
            return obj

        Module.__new__ = __new__


class SourceError(Exception):
    pass


class SourceWriter:
    """Python source for values: literals, dtypes, devices, importable classes and functions, modules with a
    recorded constructor, and objects with ``to_dict()`` whose class has ``from_dict`` (configs)."""

    def __init__(self, torch: Any, ctors: CtorRecorder, workspace: Path) -> None:
        self.torch, self.ctors, self.workspace = torch, ctors, workspace
        self.imports: set[str] = set()

    def value(self, v: Any, where: str, depth: int = 0) -> str:
        torch = self.torch
        if depth > 12:
            raise SourceError(f"{where} nests too deep")
        if v is None or isinstance(v, (bool, int, str)):
            return repr(v)
        if isinstance(v, float):
            return repr(v) if v == v and abs(v) != float("inf") else f"float({str(v)!r})"
        if isinstance(v, torch.dtype):
            self.imports.add("import torch")
            return str(v)
        if isinstance(v, torch.device):
            self.imports.add("import torch")
            return f"torch.device({str(v)!r})"
        if isinstance(v, (list, tuple)):
            items = [self.value(x, f"{where}[{i}]", depth + 1) for i, x in enumerate(v)]
            if isinstance(v, list):
                return "[" + ", ".join(items) + "]"
            return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
        if isinstance(v, dict):
            if not all(isinstance(k, (str, int)) for k in v):
                raise SourceError(f"{where} is a dict with keys that are not strings")
            body = ", ".join(f"{k!r}: {self.value(x, f'{where}[{k!r}]', depth + 1)}" for k, x in v.items())
            return "{" + body + "}"
        if isinstance(v, torch.Tensor):
            raise SourceError(f"{where} is a tensor")
        if isinstance(v, torch.nn.Module):
            return self.module(v, where, depth + 1)
        if isinstance(v, type) or inspect.isfunction(v) or inspect.isbuiltin(v):
            return self.reference(v, where)
        if isinstance(v, functools.partial):  # norm_layer=partial(nn.LayerNorm, eps=1e-6)
            self.imports.add("import functools")
            parts = [self.value(v.func, f"{where} (its function)", depth + 1)]
            parts += [self.value(a, f"{where}[{i}]", depth + 1) for i, a in enumerate(v.args)]
            parts += [f"{k}={self.value(a, f'{where}[{k!r}]', depth + 1)}" for k, a in v.keywords.items()]
            return f"functools.partial({', '.join(parts)})"
        if hasattr(v, "to_dict") and hasattr(type(v), "from_dict"):
            cls = self.reference(type(v), where)
            text = f"{cls}.from_dict({self.value(v.to_dict(), where, depth + 1)})"
            private = {
                k: x
                for k, x in vars(v).items()
                if k.startswith("_")
                and not k.startswith("__")
                and (x is None or isinstance(x, (bool, int, float, str)))
            }
            if private:  # what to_dict() leaves out (a Hugging Face config's attention implementation)
                self.imports.add("from forge_lsp.hotspots.support import with_attributes")
                text = f"with_attributes({text}, {self.value(private, where, depth + 1)})"
            return text
        raise SourceError(f"{where} is a {type(v).__module__}.{type(v).__qualname__}")

    def module(self, mod: Any, where: str, depth: int = 0) -> str:
        recorded = self.ctors.args.get(mod)
        if recorded is None:
            raise SourceError(f"{where}: the constructor of {type(mod).__qualname__} was not seen")
        args, kwargs = recorded
        cls = self.reference(type(mod), where)
        parts = [self.value(a, f"{where}: argument {i + 1}", depth) for i, a in enumerate(args)]
        parts += [f"{k}={self.value(a, f'{where}: argument {k}', depth)}" for k, a in kwargs.items()]
        return f"{cls}({', '.join(parts)})"

    def reference(self, obj: Any, where: str) -> str:
        module, qual = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
        if not module or not qual or "<" in qual:
            raise SourceError(f"{where}: {obj!r} has no importable name")
        if module == "builtins":
            return qual
        top = qual.split(".")[0]
        if _importable(module):
            alias = "_" + module.replace(".", "_") + "_" + top
            self.imports.add(f"from {module} import {top} as {alias}")
            return alias + qual[len(top) :]
        path = _module_file(module)
        if not path:
            raise SourceError(f"{where}: module {module} cannot be imported")
        try:
            rel = os.path.relpath(Path(path).resolve(), self.workspace)
        except ValueError:
            rel = str(Path(path).resolve())
        alias = "_" + Path(path).stem + "_" + top
        self.imports.add(f"{alias} = _load({rel!r}).{top}")
        return alias + qual[len(top) :]


def _module_file(module: str) -> str | None:
    if module == "__main__" and "path" in _SCRIPT:
        return str(_SCRIPT["path"])
    return getattr(sys.modules.get(module), "__file__", None)


def _importable(module: str) -> bool:
    if module == "__main__" or module.startswith("forge_entry_"):
        return False
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return False
    loaded = sys.modules.get(module)
    if spec is None or loaded is None:
        return False
    origin, file = spec.origin, getattr(loaded, "__file__", None)
    return origin is None or file is None or Path(origin).resolve() == Path(file).resolve()


# ----------------------------------------------------------------------------- observing calls
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
        self.capture_calls, self.call_limit, self.total_limit = capture_calls, call_limit, total_limit
        self.captured_bytes = 0
        self.capturing = True
        self.profiling = False
        self.warmup_roots: set[tuple[int, int]] = set()
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
        name = f"{_RANGE}{key}"
        if not stack:
            self.roots[key] += 1
            name += f"#{self.roots[key]}"
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

    def _inputs(self, mod: Any, key: int, args: tuple, kwargs: dict) -> None:
        torch = self.torch
        try:
            named = _name_arguments(mod, args, kwargs)
        except Exception as exc:  # noqa: BLE001 - a signature forge cannot read: no capture, say why
            self.capture_skips.setdefault(key, f"its forward() arguments cannot be read: {exc}")
            return
        tensors = [(n, v) for n, v, _ in named if isinstance(v, torch.Tensor)]
        if key not in self.specs:
            self.specs[key] = [_spec(torch, n, v) for n, v in tensors]
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
            source, call = _forward_source(named, torch)
        except SourceError as exc:
            self.capture_skips[key] = str(exc)
            return
        copies = [v.detach().to("cpu", copy=True) for _, v in tensors]
        self.captured_bytes += size
        self.captured[key].append((copies, source, call))


def _name_arguments(mod: Any, args: tuple, kwargs: dict) -> list[tuple[str, Any, str]]:
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


def _spec(torch: Any, name: str, t: Any) -> TensorSpec:
    dtype = str(t.dtype).removeprefix("torch.")
    low = high = None
    if not t.is_floating_point() and not t.is_complex() and t.numel() and t.dtype != torch.bool:
        low, high = float(t.min().item()), float(t.max().item())
    return TensorSpec(name=name, shape=list(t.shape), dtype=dtype, low=low, high=high)


def _forward_source(named: list[tuple[str, Any, str]], torch: Any) -> tuple[str, list[CallArg]]:
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
                text = _constant(value, torch)
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
        if cls is not dict and not _importable(cls.__module__):
            return None
        keys = list(out.keys())
        items = [output_spec(torch, out[k], depth + 1) for k in keys]
        if any(i is None for i in items) or not all(isinstance(k, str) for k in keys):
            return None
        return {"map": f"{cls.__module__}:{cls.__qualname__}", "keys": keys, "items": items}
    return None


def _constant(v: Any, torch: Any) -> str:
    if v is None or isinstance(v, (bool, int, str)):
        return repr(v)
    if isinstance(v, float):
        return repr(v) if v == v and abs(v) != float("inf") else f"float({str(v)!r})"
    if isinstance(v, torch.dtype):
        return str(v)
    if isinstance(v, (tuple, list)) and all(not isinstance(x, torch.Tensor) for x in v):
        items = [_constant(x, torch) for x in v]
        return ("[" + ", ".join(items) + "]") if isinstance(v, list) else ("(" + ", ".join(items) + ",)")
    raise SourceError(f"it is a {type(v).__qualname__}")


# ----------------------------------------------------------------------------- running the entry
def _load_file(path: str, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    sys.path.insert(0, str(Path(path).parent))
    spec.loader.exec_module(module)
    return module


def _import_path(path: Path, workspace: Path) -> Any:
    """A file of the workspace as the module its path names (``examples/models/gpt2.py`` ->
    ``examples.models.gpt2``, the workspace first on ``sys.path``), so that its classes are importable by that
    name from an extracted task; any other file under a name of its own."""
    try:
        parts = path.resolve().relative_to(workspace.resolve()).with_suffix("").parts
    except ValueError:
        parts = ()
    if parts and all(p.isidentifier() for p in parts):
        sys.path.insert(0, str(workspace))
        try:
            return importlib.import_module(".".join(parts))
        except ImportError:
            sys.path.remove(str(workspace))
    return _load_file(str(path), "forge_entry_" + path.stem)


def _to(torch: Any, value: Any, device: str) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, (list, tuple)):
        return type(value)(_to(torch, v, device) for v in value)
    if isinstance(value, dict):
        return {k: _to(torch, v, device) for k, v in value.items()}
    return value


def build_entry(torch: Any, entry: Entry, device: str, workspace: Path) -> tuple[Any, tuple, dict]:
    """A function entry's (model, args, kwargs), on `device`; `SystemExit` with a message for a wrong entry."""
    if entry.path:
        module = _import_path(entry.path, workspace)
    elif entry.module:
        sys.path.insert(0, str(workspace))
        module = importlib.import_module(entry.module)
    else:
        raise SystemExit(f"the entry {entry.text} names neither a file nor a module")
    _ENTRY["module"] = module
    fn = getattr(module, entry.function or "", None)
    if fn is None:
        raise SystemExit(f"the entry's module has no function {entry.function!r}")
    kwargs = dict(entry.arguments)
    takes_device = "device" in inspect.signature(fn).parameters
    if takes_device:
        kwargs.setdefault("device", device)
    built = fn(**kwargs)
    if not isinstance(built, (tuple, list)) or len(built) not in (2, 3):
        raise SystemExit(
            f"the entry {entry.text} must return (model, args) or (model, args, kwargs), not {type(built).__name__}"
        )
    model, args = built[0], built[1]
    call_kwargs = built[2] if len(built) == 3 else {}
    if not isinstance(model, torch.nn.Module):
        raise SystemExit(f"the entry returned {type(model).__name__} as its model, not an nn.Module")
    args = tuple(args) if isinstance(args, (list, tuple)) else (args,)
    if not takes_device:
        model = model.to(device)
        args, call_kwargs = _to(torch, args, device), _to(torch, call_kwargs, device)
    return model, args, call_kwargs


class _FirstForward(BaseException):
    """Ends a script at its model's first forward (not an Exception: the script's own handlers let it through)."""


def build_script_entry(torch: Any, entry: Entry, root: str | None) -> tuple[Any, tuple, dict]:
    """A script entry's (model, args, kwargs): the script runs as ``__main__`` until the first forward of an
    outermost module of class `root` (the model of its hot-spot report), and ends there. The model and the
    call are on the device and in the mode the script gave them. `SystemExit` with a message when the
    script ends without such a forward."""
    nn = torch.nn
    original = nn.Module.__call__
    depth = threading.local()
    seen: dict[str, Any] = {}

    def call(mod: Any, *args: Any, **kwargs: Any) -> Any:
        if getattr(depth, "n", 0) == 0 and type(mod).__name__ == root:
            seen.update(model=mod, args=args, kwargs=kwargs)
            raise _FirstForward
        depth.n = getattr(depth, "n", 0) + 1
        try:
            return original(mod, *args, **kwargs)
        finally:
            depth.n -= 1

    script = _script(entry)
    _SCRIPT["path"] = script.resolve()
    nn.Module.__call__ = call
    try:
        run_script_as_main(script, entry.argv)
    except _FirstForward:
        pass
    finally:
        nn.Module.__call__ = original
    if "model" not in seen:
        raise SystemExit(f"the script {entry.text} ended without a forward of its model {root}")
    return seen["model"], tuple(seen["args"]), dict(seen["kwargs"])


def _script(entry: Entry) -> Path:
    if entry.path is None:
        raise SystemExit(f"the entry {entry.text} is a script without a path")
    return entry.path


def _sync(torch: Any, device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


def run(req: HotspotRequest) -> HotspotReport:
    t_start = time.time()
    progress = Progress(req.progress)
    entry = req.entry
    device = req.device
    workspace = req.workspace
    progress("importing torch")
    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    ctors = CtorRecorder(torch)
    ctors.install()
    observer = Observer(
        torch,
        capture_calls=req.capture_calls,
        call_limit=req.capture_call_mb << 20,
        total_limit=req.capture_total_mb << 20,
    )
    observer.install()
    report = HotspotReport(entry=entry.text, device=device)
    if device.startswith("cuda"):
        report.device_name = torch.cuda.get_device_name(torch.device(device))
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.startswith("cuda") else [])
    report.timer = "device" if device.startswith("cuda") else "cpu"
    warmup, iters = req.warmup, req.iterations

    if entry.kind == "function":
        progress("building the model")
        model, args, call_kwargs = build_entry(torch, entry, device, workspace)
        report.model = type(model).__name__
        with torch.no_grad():
            for i in range(warmup):
                progress("warming up", i + 1, warmup)
                model(*args, **call_kwargs)
            _sync(torch, device)
            observer.capturing = False
            t0 = time.perf_counter()
            for _ in range(3):  # the forward's own wall time, for the share the device was busy
                model(*args, **call_kwargs)
            _sync(torch, device)
            report.eager_ms = (time.perf_counter() - t0) / 3 * 1000
            observer.profiling = True
            t0 = time.perf_counter()
            with profile(activities=activities) as prof:
                for i in range(iters):
                    progress("profiling", i + 1, iters)
                    model(*args, **call_kwargs)
                _sync(torch, device)
            report.wall_ms = (time.perf_counter() - t0) * 1000
        report.warmup, report.iterations = warmup, iters
        roots = {id(model): model}
        counted = {id(model): iters}
        excluded: set[str] = set()
    else:
        progress("running the script")
        observer.profiling = True
        script = _script(entry)
        _SCRIPT["path"] = script.resolve()
        t0 = time.perf_counter()
        with profile(activities=activities) as prof:
            run_script_as_main(script, entry.argv)
            _sync(torch, device)
        report.wall_ms = (time.perf_counter() - t0) * 1000
        if not observer.roots:
            raise SystemExit(f"the script {entry.text} ran no nn.Module")
        roots = {k: observer.modules[k] for k in observer.roots}
        excluded = {f"{_RANGE}{k}#1" for k, n in observer.roots.items() if n > 1}  # each model's first forward
        counted = {k: n - 1 if n > 1 else n for k, n in observer.roots.items()}
        if any(n == 1 for n in observer.roots.values()):
            report.notes.append("a model ran only once: its one forward is profiled with no warm-up, capture included")
    observer.uninstall()
    progress("attributing time")
    keys = _attribute(torch, prof, report, observer, roots, counted, excluded, workspace)
    if report.timer == "device" and report.eager_ms and report.model_ms < 0.7 * report.eager_ms:
        report.notes.append(
            f"the GPU ran kernels for {report.model_ms:.2f} of the {report.eager_ms:.2f} ms a forward takes: the rest "
            "it waited for the host to launch them (launch-bound); fewer, larger kernels or a CUDA graph help there"
        )
    report.targets = rank_targets(report, req.top)
    progress("saving captures")
    _save_captures(torch, req, report, observer, ctors, workspace, keys)
    report.seconds = time.time() - t_start
    return report


def _ranges(node: Any, cache: dict[int, list[str]]) -> list[str]:
    """The module ranges enclosing `node` and `node` itself, innermost first (memoized along the way)."""
    path = []
    n = node
    while n is not None and n.id not in cache:
        path.append(n)
        n = n.cpu_parent
    tail = cache[n.id] if n is not None else []
    for m in reversed(path):
        if m.name.startswith(_RANGE):
            tail = [m.name, *tail]
        cache[m.id] = tail
    return cache[node.id] if node is not None else []


def _attribute(
    torch: Any,
    prof: Any,
    report: HotspotReport,
    observer: Observer,
    roots: dict,
    counted: dict,
    excluded: set,
    workspace: Path,
) -> dict[str, int]:
    """Fill the report's instances, classes and ops; returns each reported instance's name -> its key."""
    device = report.timer == "device"
    self_us: dict[int, float] = defaultdict(float)
    total_us: dict[int, float] = defaultdict(float)
    ops: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    cache: dict[int, list[str]] = {}
    outside = 0.0
    for e in prof.events():
        if e.name.startswith(_RANGE) or getattr(e, "device_type", None) != torch.autograd.DeviceType.CPU:
            continue
        t = float(e.self_device_time_total if device else e.self_cpu_time_total)
        if t <= 0:
            continue
        chain = _ranges(e.cpu_parent, cache)
        root = chain[-1] if chain else None
        if root is None:
            outside += t
            continue
        if root in excluded:
            continue
        owners: list[int] = []
        for name in chain:
            k = int(name[len(_RANGE) :].split("#")[0])
            if k not in owners:
                owners.append(k)
        self_us[owners[0]] += t
        for k in owners:
            total_us[k] += t
        op = ops[e.name]
        op[0] += t
        op[1] += 1
    main_root = max(roots, key=lambda k: total_us.get(k, 0.0))
    per = max(1, counted.get(main_root, 1))
    if report.iterations == 0:  # a script: its model's forwards, less the warm-up
        report.iterations = per
        report.warmup = 1 if any(r.startswith(f"{_RANGE}{main_root}#") for r in excluded) else 0
    report.model = type(roots[main_root]).__name__
    model_us = sum(self_us.values())
    report.model_ms = model_us / per / 1000
    if outside > 0.05 * max(model_us, 1e-9):
        report.notes.append(
            f"{outside / 1000:.2f} ms in all, over the {per} profiled forward{'s' if per != 1 else ''}, ran outside any "
            "module (not attributed: work between modules or once, such as moving the inputs)"
        )
    names: dict[int, str] = {}
    for root in roots.values():
        for name, m in root.named_modules():
            names.setdefault(id(m), f"{type(root).__name__}.{name}" if name else type(root).__name__)
    pct = (lambda us: 100.0 * us / model_us) if model_us > 0 else (lambda us: 0.0)
    forwards = max(1, observer.roots.get(main_root, 1))  # the model's forwards, warm-up included
    keys: dict[str, int] = {}
    instances: list[Instance] = []
    classes: dict[str, ModuleClass] = {}
    for k, mod in observer.modules.items():
        if k not in total_us:
            continue
        cls = type(mod)
        key, module_label = _class_key(cls, workspace)
        inst = Instance(
            name=names.get(k, f"<{cls.__qualname__} at {k:#x}>"),
            cls=key,
            calls=max(1, round(observer.calls[k] / forwards)),  # per forward of the model
            self_ms=self_us.get(k, 0.0) / per / 1000,
            total_ms=total_us[k] / per / 1000,
            self_pct=pct(self_us.get(k, 0.0)),
            total_pct=pct(total_us[k]),
            inputs=observer.specs.get(k, []),
        )
        instances.append(inst)
        keys[inst.name] = k
        c = classes.get(key)
        if c is None:
            file, line = _where(cls)
            c = classes[key] = ModuleClass(
                key=key,
                name=cls.__qualname__,
                module=module_label,
                file=file,
                line=line,
                library=cls.__module__.startswith("torch.nn.") or cls.__module__ == "torch.nn",
                instances=0,
                calls=0,
                self_ms=0.0,
                total_ms=0.0,
                self_pct=0.0,
                total_pct=0.0,
            )
        c.instances += 1
        c.calls += inst.calls
        c.self_ms += inst.self_ms
        c.total_ms += inst.total_ms
        c.self_pct += inst.self_pct
        c.total_pct += inst.total_pct
        if not c.inputs or inst.total_ms > max(i.total_ms for i in instances if i.cls == key and i is not inst):
            c.inputs = inst.inputs
    for c in classes.values():
        c.total_pct = min(c.total_pct, 100.0)  # nested instances of one class (a block inside a block)
    report.instances = sorted(instances, key=lambda i: -i.self_ms)
    report.classes = sorted(classes.values(), key=lambda c: -c.self_ms)
    report.ops = sorted(
        (Op(name=n, calls=int(v[1] / per), self_ms=v[0] / per / 1000, pct=pct(v[0])) for n, v in ops.items()),
        key=lambda o: -o.self_ms,
    )
    return keys


def _where(cls: type) -> tuple[str | None, int | None]:
    """The file and 1-based line of a class statement (a script's classes: found in the script's AST)."""
    if cls.__module__ == "__main__" and "path" in _SCRIPT:
        import ast

        path = _SCRIPT["path"]
        try:
            tree = parse(path.read_text())
        except (OSError, SyntaxError):
            return str(path), None
        line = next((n.lineno for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls.__name__), None)
        return str(path), line
    try:
        file = inspect.getsourcefile(cls)
        line = inspect.getsourcelines(cls)[1]
    except (OSError, TypeError):
        return None, None
    return (str(Path(file).resolve()) if file else None), line


def _class_key(cls: type, workspace: Path) -> tuple[str, str]:
    """(key, module label) of a class: ``module.QualName`` for an importable module, else the workspace-relative
    file and the name (``train.py:Block``) for classes of a script or a file loaded by path."""
    if _importable(cls.__module__):
        return f"{cls.__module__}.{cls.__qualname__}", cls.__module__
    file = _module_file(cls.__module__)
    if not file:
        return f"{cls.__module__}.{cls.__qualname__}", cls.__module__
    try:
        rel = os.path.relpath(Path(file).resolve(), workspace)
    except ValueError:
        rel = str(file)
    return f"{rel}:{cls.__qualname__}", rel


def _save_captures(
    torch: Any,
    req: HotspotRequest,
    report: HotspotReport,
    observer: Observer,
    ctors: CtorRecorder,
    workspace: Path,
    keys: dict[str, int],
) -> None:
    folder = req.out / "captures"
    report.capture_folder = os.path.relpath(folder, workspace)
    hot = set(report.targets) | set(req.classes)
    for inst in report.instances:
        if inst.cls not in hot and inst.cls.replace(":", ".").rsplit(".", 1)[-1] not in hot:  # by key or by name
            continue
        k = keys.get(inst.name)
        if k is None:
            continue
        mod = observer.modules[k]
        cap = Capture(
            folder=os.path.relpath(folder / _slug(inst.name), workspace),
            inputs=inst.inputs,
            training=bool(mod.training),
            dtype=_state_dtype(mod),
        )
        inst.capture = cap
        calls = observer.captured.get(k, [])
        if not calls:
            cap.skipped = observer.capture_skips.get(k, "no call was captured")
            continue
        where = folder / _slug(inst.name)
        where.mkdir(parents=True, exist_ok=True)
        for j, (tensors, _, _) in enumerate(calls):
            name = f"{_slug(inst.name)}.call{j}.pt"  # its stem names the input set in verdicts
            torch.save(tensors, where / name)
            cap.calls.append(name)
        cap.forward, cap.call = calls[0][1], calls[0][2]
        cap.output = observer.outputs.get(k, "")
        cap.output_spec = observer.output_specs.get(k)
        torch.save({n: t.detach().cpu() for n, t in mod.state_dict().items()}, where / "state_dict.pt")
        cap.state_dict = "state_dict.pt"
        writer = SourceWriter(torch, ctors, workspace)
        try:
            source = writer.module(mod, "its constructor")
            imports = _entry_import(writer, workspace) + sorted(writer.imports)
            _check_rebuild(torch, mod, source, imports, workspace, calls[0])
            cap.init_source, cap.init_imports = source, imports
        except SourceError as exc:
            cap.init_missing = str(exc)
        except Exception as exc:  # noqa: BLE001 - rebuilding ran the user's constructor: anything can happen
            cap.init_missing = f"rebuilt from the recorded arguments, it failed: {type(exc).__name__}: {exc}"


def _state_dtype(mod: Any) -> str | None:
    """The one dtype of a module's floating parameters and buffers (None: none, or several)."""
    kinds = {str(t.dtype).removeprefix("torch.") for t in [*mod.parameters(), *mod.buffers()] if t.is_floating_point()}
    return kinds.pop() if len(kinds) == 1 else None


def _slug(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in name)[:120]


LOADER = """
def _load(rel):
    import importlib.util, pathlib, sys
    path = (pathlib.Path(__file__).resolve().parent / _WORKSPACE / rel).resolve()
    name = "forge_captured_" + path.stem
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        sys.path.insert(0, str(path.parent))
        spec.loader.exec_module(module)
    return sys.modules[name]
"""


def _entry_import(writer: SourceWriter, workspace: Path) -> list[str]:
    """The line that imports a function entry's module (none for a script: importing it would run it)."""
    module = _ENTRY.get("module")
    if module is None:
        return []
    name = module.__name__
    if _importable(name):
        return [f"import {name}  # the entry's module, first: what it sets up for its model is there again"]
    file = getattr(module, "__file__", None)
    if not file:
        return []
    try:
        rel = os.path.relpath(Path(file).resolve(), workspace)
    except ValueError:
        rel = str(Path(file).resolve())
    line = f"_load({rel!r})  # the entry's module, first: what it sets up for its model is there again"
    writer.imports.discard(line)
    return [line]


def _check_rebuild(
    torch: Any, mod: Any, source: str, imports: list[str], workspace: Path, captured: tuple[list[Any], str, list[Any]]
) -> None:
    """Build the module again from `source`; compare parameter and buffer names and shapes, then, loaded with the
    instance's state, what it computes on the instance's first captured call (with the same random seed)."""
    ns: dict[str, Any] = {"__file__": str(workspace / "_forge_check.py"), "_WORKSPACE": "."}
    exec(LOADER, ns)  # noqa: S102 - our own loader
    for line in imports:
        exec(line, ns)  # noqa: S102 - import lines written above
    rebuilt = eval(source, ns)  # noqa: S307 - the constructor call written above
    want = {n: tuple(t.shape) for n, t in mod.state_dict().items()}
    got = {n: tuple(t.shape) for n, t in rebuilt.state_dict().items()}
    if want != got:
        missing = sorted(set(want) ^ set(got)) or [n for n in want if want[n] != got.get(n)]
        raise SourceError(f"rebuilt from the recorded arguments, its state differs ({', '.join(missing[:3])})")
    rebuilt.load_state_dict(mod.state_dict())
    ref = next(iter(mod.parameters()), None)
    ref = ref if ref is not None else next(iter(mod.buffers()), None)
    device = ref.device if ref is not None else torch.device("cpu")
    dtype = _state_dtype(mod)
    rebuilt = rebuilt.to(device=device, dtype=getattr(torch, dtype) if dtype else None).train(mod.training)
    tensors, _, call = captured
    feed = iter([t.to(device) for t in tensors])
    args, kwargs = [], {}
    for a in call:
        value = next(feed) if a.tensor else eval(a.source, {"torch": torch, "float": float})  # noqa: S307 - written above
        if a.how == "pos":
            args.append(value)
        else:
            kwargs[a.name] = value
    with torch.no_grad():
        torch.manual_seed(0)
        want_out = _flat_tensors(torch, mod(*args, **kwargs))
        torch.manual_seed(0)
        got_out = _flat_tensors(torch, rebuilt(*args, **kwargs))
    worst = 0.0
    for w, g in zip(want_out, got_out, strict=False):
        if w.shape != g.shape:
            worst = float("inf")
            break
        if w.is_floating_point():
            wf, gf = w.double(), g.double()
            scale = max(1.0, float(wf.pow(2).mean().sqrt())) if wf.numel() else 1.0
            tol = 1e-2 if w.dtype in (torch.float16, torch.bfloat16) else 1e-4
            excess = ((wf - gf).abs() - (tol * scale + tol * wf.abs())).max() if wf.numel() else wf.new_zeros(())
            if float(excess) > 0:
                worst = max(worst, float((wf - gf).abs().max()))
        elif not torch.equal(w, g):
            worst = float("inf")
    if len(want_out) != len(got_out) or worst > 0:
        raise SourceError(
            f"rebuilt from the recorded arguments, it computes differently on its captured call (worst error "
            f"{worst:.3g}): its constructor's arguments do not carry everything it was built with"
        )


def _flat_tensors(torch: Any, out: Any) -> list[Any]:
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


def user_traceback(exc: BaseException) -> str:
    """The traceback of `exc` with forge's own frames left out (the runner that called the user's code, the
    wrappers around it): the user's frames and those of the libraries they called, then the exception. When every
    frame is forge's (forge itself failed), the whole traceback."""
    ours = str(Path(__file__).resolve().parents[1]) + os.sep  # forge_lsp/
    frames = traceback.extract_tb(exc.__traceback__)
    theirs = [f for f in frames if not str(Path(f.filename).resolve()).startswith(ours)]
    if not theirs:
        return traceback.format_exc()
    return (
        "Traceback (most recent call last):\n"
        + "".join(traceback.format_list(theirs))
        + "".join(traceback.format_exception_only(type(exc), exc))
    )


def main(argv: list[str]) -> int:
    req = HotspotRequest.read(argv[1])
    out = req.out
    out.mkdir(parents=True, exist_ok=True)
    try:
        report = run(req)
    except SystemExit as exc:
        if isinstance(exc.code, str):
            (out / "error.txt").write_text(exc.code)
            return 3
        raise
    except BaseException as exc:  # noqa: BLE001 - the user's model failed: say where, in its own words
        (out / "error.txt").write_text(f"{type(exc).__name__}: {exc}\n\n{user_traceback(exc)}")
        return 3
    (out / "report.json").write_text(report.model_dump_json(indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
