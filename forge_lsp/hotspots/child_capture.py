"""The hot instances' captures, written to disk (child process only: the hot-spot child).

`save_captures` writes, for each instance of a hot class, one folder: its captured calls' inputs, its
``state_dict``, its call and output structure, and its constructor as Python source with the imports it needs.
The source is checked by building the module again: the same state names and shapes, and, loaded with the
instance's state, the same outputs on its first captured call; one that fails is left out with the reason.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .child_entry import ENTRY
from .child_observe import Observer, flat_tensors
from .child_source import CtorRecorder, SourceError, SourceWriter, importable
from .report import Capture, HotspotReport
from .requests import HotspotRequest


def save_captures(
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
    module = ENTRY.get("module")
    if module is None:
        return []
    name = module.__name__
    if importable(name):
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
        want_out = flat_tensors(torch, mod(*args, **kwargs))
        torch.manual_seed(0)
        got_out = flat_tensors(torch, rebuilt(*args, **kwargs))
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
