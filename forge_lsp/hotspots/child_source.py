"""Constructors recorded, and values written back as Python source (child side: the hot-spot child, `patching`).

`CtorRecorder` wraps ``nn.Module.__new__`` for the run and keeps each module's constructor arguments;
`SourceWriter` writes a module's constructor call, with the imports it needs, from them (literals, dtypes,
devices, importable classes and functions, enum members, modules, configs with ``from_dict``, dataclass and
NamedTuple configs, namespaces of parsed arguments), or says why it cannot
(`SourceError`). `constant` writes a call's non-tensor argument; `patching` compares calls with it, wherever
patches are installed. `importable` and `module_file` say how a class can be reached from an extracted task: by
its module's name, or by its file.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import functools
import importlib.util
import inspect
import os
import sys
import types
import weakref
from pathlib import Path
from typing import Any

from .child_entry import SCRIPT


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
    """Python source for values: literals, dtypes, devices, importable classes and functions, enum members, modules
    with a recorded constructor, objects with ``to_dict()`` whose class has ``from_dict`` (configs), dataclass and
    NamedTuple instances (``GPTConfig(n_embd=768, ...)``), and ``SimpleNamespace``/``argparse.Namespace``."""

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
        if isinstance(v, enum.Enum):  # Activation.GELU
            return f"{self.reference(type(v), where)}.{v.name}"
        if isinstance(v, tuple) and hasattr(type(v), "_fields"):  # a NamedTuple config, not a bare tuple
            fields = {f: getattr(v, f) for f in type(v)._fields}  # type: ignore[attr-defined]
            return f"{self.reference(type(v), where)}({self.keywords(fields, where, depth)})"
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
        if dataclasses.is_dataclass(v) and not isinstance(v, type):  # GPTConfig(n_embd=768, ...)
            init = {f.name for f in dataclasses.fields(v) if f.init}
            state = self.attributes(v, where)
            cls = self.reference(type(v), where)
            text = f"{cls}({self.keywords({k: x for k, x in state.items() if k in init}, where, depth)})"
            rest = {k: x for k, x in state.items() if k not in init}  # set after its constructor: set again
            if rest:
                self.imports.add("from forge_lsp.hotspots.support import with_attributes")
                text = f"with_attributes({text}, {self.value(rest, where, depth + 1)})"
            return text
        if type(v) in (types.SimpleNamespace, argparse.Namespace):  # a script's parsed arguments as its config
            module = "types" if isinstance(v, types.SimpleNamespace) else "argparse"
            self.imports.add(f"import {module}")
            return f"{module}.{type(v).__name__}({self.keywords(self.attributes(v, where), where, depth)})"
        raise SourceError(f"{where} is a {type(v).__module__}.{type(v).__qualname__}")

    @staticmethod
    def attributes(v: Any, where: str) -> dict[str, Any]:
        """An object's instance attributes (its fields and what was set on it since)."""
        try:
            return dict(vars(v))
        except TypeError:  # __slots__
            names = [n for c in type(v).__mro__ for n in getattr(c, "__slots__", ()) if hasattr(v, n)]
            if not names:
                raise SourceError(f"{where} is a {type(v).__qualname__} whose attributes cannot be read") from None
            return {n: getattr(v, n) for n in names}

    def keywords(self, values: dict[str, Any], where: str, depth: int) -> str:
        """``name=value, ...`` for a constructor call; a name that is not an identifier cannot be written so."""
        for k in values:
            if not (isinstance(k, str) and k.isidentifier()):
                raise SourceError(f"{where} has an attribute {k!r} that is not a name")
        return ", ".join(f"{k}={self.value(x, f'{where}.{k}', depth + 1)}" for k, x in values.items())

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
        if importable(module):
            alias = "_" + module.replace(".", "_") + "_" + top
            self.imports.add(f"from {module} import {top} as {alias}")
            return alias + qual[len(top) :]
        path = module_file(module)
        if not path:
            raise SourceError(f"{where}: module {module} cannot be imported")
        try:
            rel = os.path.relpath(Path(path).resolve(), self.workspace)
        except ValueError:
            rel = str(Path(path).resolve())
        alias = "_" + Path(path).stem + "_" + top
        self.imports.add(f"{alias} = _load({rel!r}).{top}")
        return alias + qual[len(top) :]


def module_file(module: str) -> str | None:
    if module == "__main__" and "path" in SCRIPT:
        return str(SCRIPT["path"])
    return getattr(sys.modules.get(module), "__file__", None)


def importable(module: str) -> bool:
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


def constant(v: Any, torch: Any) -> str:
    if v is None or isinstance(v, (bool, int, str)):
        return repr(v)
    if isinstance(v, float):
        return repr(v) if v == v and abs(v) != float("inf") else f"float({str(v)!r})"
    if isinstance(v, torch.dtype):
        return str(v)
    if isinstance(v, (tuple, list)) and all(not isinstance(x, torch.Tensor) for x in v):
        items = [constant(x, torch) for x in v]
        return ("[" + ", ".join(items) + "]") if isinstance(v, list) else ("(" + ", ".join(items) + ",)")
    raise SourceError(f"it is a {type(v).__qualname__}")
