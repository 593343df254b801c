"""The user's entry, loaded and run inside a hot-spot child (child process only: `runner` and `model_check`).

`build_entry` calls a function entry for its ``(model, args[, kwargs])``, on the device; `build_script_entry` runs
a script entry as ``__main__`` up to its model's first forward and takes that model and call. `SCRIPT` and `ENTRY`
keep what was loaded (the script, the function entry's module) for what is written about it afterwards: its
classes' files and lines, the constructors' source. `sync` waits for the device; `user_traceback` says where the
user's code failed, in its own frames.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
import threading
import traceback
from pathlib import Path
from typing import Any

from ..child import run_script_as_main
from .entry import Entry

#: The script a script entry ran as ``__main__``: where its classes are defined.
SCRIPT: dict[str, Path] = {}
#: A function entry's module: an extracted task imports it first, so that what it sets up for its model
#: (paths, registrations, workarounds) is there again.
ENTRY: dict[str, Any] = {}


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
    ENTRY["module"] = module
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

    script = entry_script(entry)
    SCRIPT["path"] = script.resolve()
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


def entry_script(entry: Entry) -> Path:
    if entry.path is None:
        raise SystemExit(f"the entry {entry.text} is a script without a path")
    return entry.path


def sync(torch: Any, device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)


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
