"""Indexing of one Python file: which of its classes are ``nn.Module`` subclasses (through
``torch.nn``, Lightning, or same-file bases), their constructor and ``forward`` parameters (inherited
through same-file bases), and where their example inputs come from (``[tool.forge.modules]`` or the
file's KernelBench functions); rules in `forge_lsp.workspace.index`."""

from __future__ import annotations

import os
from typing import Any

from .pyproject import PyProjectForge
from .python_facts import _Class, _python_facts, qualify, split_lines, torch_nn_class
from .results import FileIndex, InputsSource, ModuleInfo, content_hash, empty_index

_NOT_MODULES = frozenset({"Parameter", "Buffer", "UninitializedParameter", "UninitializedBuffer"})
_NO_FORWARD = frozenset({"Module", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict"})
_OTHER_MODULE_BASES = frozenset(
    {
        "torch.jit.ScriptModule",
        "pytorch_lightning.LightningModule",
        "pytorch_lightning.core.LightningModule",
        "pytorch_lightning.core.module.LightningModule",
        "lightning.LightningModule",
        "lightning.pytorch.LightningModule",
        "lightning.pytorch.core.LightningModule",
        "lightning.pytorch.core.module.LightningModule",
    }
)


def index_python(
    path: str, text: str, *, pyproject: PyProjectForge | None = None, version: int | None = None
) -> FileIndex:
    """Index one Python file's text. Never raises."""
    try:
        return _index_python(path, text, pyproject, version)
    except Exception as exc:  # noqa: BLE001 - a bug here must not take the server down
        return empty_index(path, text, version, notes=[f"internal error while indexing: {type(exc).__name__}: {exc}"])


def _index_python(path: str, text: str, pyproject: PyProjectForge | None, version: int | None) -> FileIndex:
    if "\x00" in text:
        return empty_index(path, text, version, skipped="binary file (contains NUL bytes)")
    shift0 = 1 if text.startswith("\ufeff") else 0
    lines = split_lines(text)
    classes, aliases, functions, error, broken = _python_facts(text, lines, shift0)
    bases = _Bases(classes, aliases)
    module_classes = [c for c in classes if c.name in bases.modules]
    has_inputs, has_init = "get_inputs" in functions, "get_init_inputs" in functions
    kernelbench: set[str] = set()
    if has_inputs and has_init and module_classes:
        kernelbench = _kernelbench_modules(module_classes, functions, bases)
    rel = None
    if pyproject is not None and pyproject.modules:
        rel = os.path.relpath(os.path.abspath(path), pyproject.root).replace(os.sep, "/")
    infos = [_module_info(c, bases, _inputs(c, path, rel, pyproject, kernelbench)) for c in module_classes]
    notes = []
    if broken:
        notes.append("indexed around a syntax error: classes in the broken part come from their header line only")
    return FileIndex(
        path=path,
        version=version,
        content_hash=content_hash(text),
        modules=infos,
        has_get_inputs=has_inputs,
        has_get_init_inputs=has_init,
        syntax_error=f"line {error[0] + 1}: {error[1]}" if error else None,
        syntax_error_line=error[0] if error else None,
        notes=notes,
    )


def _is_external_module_base(base: str, aliases: dict[str, str]) -> bool:
    cls = torch_nn_class(base, aliases)
    if cls is not None:
        return cls not in _NOT_MODULES
    return qualify(base.split("[", 1)[0], aliases) in _OTHER_MODULE_BASES


class _Bases:
    """The file's classes as seen through their bases: which are modules, what they inherit."""

    def __init__(self, classes: list[_Class], aliases: dict[str, str]):
        self.by_name = {c.name: c for c in classes}
        self.aliases = aliases
        self.modules = {c.name for c in classes if any(_is_external_module_base(b, aliases) for b in c.bases)}
        changed = True
        while changed:
            changed = False
            for c in classes:
                if c.name not in self.modules and any(b in self.modules and b != c.name for b in c.bases):
                    self.modules.add(c.name)
                    changed = True

    def inherited(self, c: _Class, attr: str, seen: set[str]) -> Any:
        """`c`'s own `attr` (init, forward or their arities), else the first a base gives."""
        own = getattr(c, attr)
        if own is not None or c.name in seen:
            return own
        seen.add(c.name)
        for b in c.bases:
            if b in self.by_name and b != c.name:
                got = self.inherited(self.by_name[b], attr, seen)
                if got is not None:
                    return got
            elif torch_nn_class(b, self.aliases) == "Module":
                return [] if attr in ("init", "forward") else (0, 0.0, False)
        return None

    def has_forward(self, c: _Class, seen: set[str]) -> bool:
        """Whether `c` defines forward or inherits it from a same-file class or a torch.nn layer."""
        if c.has_own_forward:
            return True
        if c.name in seen:
            return False
        seen.add(c.name)
        for b in c.bases:
            if b in self.by_name and b != c.name:
                if self.has_forward(self.by_name[b], seen):
                    return True
            else:
                cls = torch_nn_class(b, self.aliases)
                if cls is not None and cls not in _NO_FORWARD and cls not in _NOT_MODULES:
                    return True
        return False


def _fits(arity: tuple[int, float, bool] | None, n: int | None) -> bool | None:
    if arity is None or n is None:
        return None
    required, most, kw_required = arity
    return required <= n <= most and not kw_required


def _kernelbench_modules(module_classes: list[_Class], functions: dict[str, int | None], bases: _Bases) -> set[str]:
    """The modules the file's get_inputs() / get_init_inputs() are attributed to."""
    n_init, n_inputs = functions["get_init_inputs"], functions["get_inputs"]
    fit: dict[str, bool | None] = {}
    for c in module_classes:
        a = _fits(bases.inherited(c, "init_arity", set()), n_init)
        b = _fits(bases.inherited(c, "forward_arity", set()), n_inputs)
        fit[c.name] = False if False in (a, b) else (True if (a, b) == (True, True) else None)
    kernelbench = {c.name for c in module_classes if c.name == "Model" or fit[c.name]}
    if len(module_classes) == 1:
        kernelbench.add(module_classes[0].name)
    if not kernelbench:
        kernelbench = {c.name for c in module_classes if fit[c.name] is None}
    return kernelbench


def _inputs(
    c: _Class, path: str, rel: str | None, pyproject: PyProjectForge | None, kernelbench: set[str]
) -> InputsSource | None:
    """Where the example inputs of module `c` come from: its pyproject entry, else the file's functions."""
    entry = pyproject.entry(rel, c.name) if pyproject is not None and rel is not None else None
    if entry is not None:
        shown = os.path.relpath(entry.task, pyproject.root).replace(os.sep, "/")  # type: ignore[union-attr]
        return InputsSource(
            kind="pyproject",
            task_file=entry.task,
            model_class=entry.model_class,
            detail=f'pyproject.toml [tool.forge.modules] "{entry.key}" -> {shown}',
        )
    if c.name in kernelbench:
        return InputsSource(
            kind="kernelbench",
            task_file=path,
            model_class=c.name,
            detail="get_inputs() / get_init_inputs() in this file",
        )
    return None


def _module_info(c: _Class, bases: _Bases, inputs: InputsSource | None) -> ModuleInfo:
    return ModuleInfo(
        name=c.name,
        line=c.line,
        column=c.column,
        name_column=c.name_column,
        start_line=c.start_line,
        end_line=c.end_line,
        bases=list(c.bases),
        init_params=list(bases.inherited(c, "init", set()) or []),
        forward_params=list(bases.inherited(c, "forward", set()) or []),
        has_forward=bases.has_forward(c, set()),
        inputs=inputs,
    )
