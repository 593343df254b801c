"""The profiled run's time, attributed to module instances, classes and ops (child process only: the hot-spot child).

`attribute` reads the profiler's events: each op's self time (device time of its kernels on CUDA, host time on
the CPU) goes to the innermost instance whose range encloses it, and to every enclosing instance as its total,
per profiled forward. It fills the report's instances, classes (with the file and line of their ``class``
statement) and ops, and notes the time outside any module.
"""

from __future__ import annotations

import inspect
import os
from collections import defaultdict
from pathlib import Path
from typing import Any

from ..parsing import parse
from .child_entry import SCRIPT
from .child_observe import RANGE, Observer
from .child_source import importable, module_file
from .report import HotspotReport, Instance, ModuleClass, Op


def _ranges(node: Any, cache: dict[int, list[str]]) -> list[str]:
    """The module ranges enclosing `node` and `node` itself, innermost first (memoized along the way)."""
    path = []
    n = node
    while n is not None and n.id not in cache:
        path.append(n)
        n = n.cpu_parent
    tail = cache[n.id] if n is not None else []
    for m in reversed(path):
        if m.name.startswith(RANGE):
            tail = [m.name, *tail]
        cache[m.id] = tail
    return cache[node.id] if node is not None else []


def attribute(
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
        if e.name.startswith(RANGE) or getattr(e, "device_type", None) != torch.autograd.DeviceType.CPU:
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
            k = int(name[len(RANGE) :].split("#")[0])
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
        report.warmup = sum(1 for r in excluded if r.startswith(f"{RANGE}{main_root}#"))
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
    if cls.__module__ == "__main__" and "path" in SCRIPT:
        import ast

        path = SCRIPT["path"]
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
    if importable(cls.__module__):
        return f"{cls.__module__}.{cls.__qualname__}", cls.__module__
    file = module_file(cls.__module__)
    if not file:
        return f"{cls.__module__}.{cls.__qualname__}", cls.__module__
    try:
        rel = os.path.relpath(Path(file).resolve(), workspace)
    except ValueError:
        rel = str(file)
    return f"{rel}:{cls.__qualname__}", rel
