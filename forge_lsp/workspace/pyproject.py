"""``[tool.forge]`` of the workspace's ``pyproject.toml``: which KernelBench-style task file holds
the example inputs of a module (`parse_pyproject_forge`, `read_pyproject_forge`)."""

from __future__ import annotations

import os
import posixpath
import tomllib
from pathlib import Path

from pydantic import BaseModel, Field


class ForgeModuleEntry(BaseModel):
    """One ``[tool.forge.modules]`` entry: the task file that holds a module's example inputs."""

    key: str = Field(description='as written: "pkg/layers.py::Attention"')
    file: str = Field(description="the module's file, POSIX path relative to the workspace root")
    class_name: str
    task: str = Field(description="absolute path of the KernelBench-style task file")
    model_class: str = Field(default="Model", description="the class in the task file that wraps/copies the module")


class PyProjectForge(BaseModel):
    """What the index uses from ``[tool.forge]`` in ``pyproject.toml``; problems are reported, never raised."""

    root: str
    path: str | None = None
    modules: list[ForgeModuleEntry] = []
    error: str | None = Field(default=None, description="the file could not be used at all (unreadable, bad TOML...)")
    warnings: list[str] = Field(default_factory=list, description="entries that were skipped or look wrong")

    def entry(self, file: str, class_name: str) -> ForgeModuleEntry | None:
        for e in self.modules:
            if e.file == file and e.class_name == class_name:
                return e
        return None


def parse_pyproject_forge(text: str, root: str | Path, *, path: str | None = None) -> PyProjectForge:
    """Read the module entries of ``[tool.forge.modules]``; never raises.

    Three spellings are accepted (paths relative to the workspace root)::

        [[tool.forge.modules]]                      # preferred: an array of tables
        module = "pkg/layers.py::Attention"
        task = "bench/attention_task.py"
        model_class = "Model"                       # optional: the class in the task file

        [tool.forge.modules."pkg/layers.py::Attention"]
        task = "bench/attention_task.py"

        [tool.forge.modules]
        "pkg/mlp.py::MLP" = "bench/mlp_task.py"     # shorthand

    The keyed spellings put the module path in a TOML key, and the agent configuration
    (`forge_lsp.agent.config.load_config`) rejects any ``[tool.forge]`` key containing "key", "token",
    "secret" or "password" (so ``"nlp/tokenizer.py::Tok"`` would be refused there); the array form
    does not have that problem.
    """
    root_s = os.path.abspath(str(root))
    out = PyProjectForge(root=root_s, path=path)
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        out.error = f"invalid TOML: {exc}"
        return out
    except Exception as exc:  # noqa: BLE001 - never raise on user files
        out.error = f"cannot read: {exc}"
        return out
    for key, value in _raw_entries(doc, out):
        entry = _module_entry(key, value, root_s, out.warnings)
        if entry is not None:
            if out.entry(entry.file, entry.class_name) is not None:
                out.warnings.append(f'"{key}" is configured twice; the first entry is used')
                continue
            out.modules.append(entry)
    return out


def _raw_entries(doc: dict, out: PyProjectForge) -> list[tuple[str, object]]:
    """The ``[tool.forge.modules]`` entries as written: (module key, value); sets ``out.error`` when
    the configuration cannot be used at all."""
    tool = doc.get("tool")
    forge = tool.get("forge") if isinstance(tool, dict) else None
    if forge is None:
        return []
    if not isinstance(forge, dict):
        out.error = "[tool.forge] must be a table"
        return []
    modules = forge.get("modules")
    if modules is None:
        return []
    if isinstance(modules, list):
        return _array_entries(modules, out.warnings)
    if isinstance(modules, dict):
        return list(modules.items())
    out.error = "[tool.forge.modules] must be a table or an array of tables"
    return []


def _array_entries(modules: list, warnings: list[str]) -> list[tuple[str, object]]:
    """The entries of the ``[[tool.forge.modules]]`` array: (its module = "...", the table)."""
    raw: list[tuple[str, object]] = []
    for i, item in enumerate(modules):
        if not isinstance(item, dict):
            warnings.append(f"[[tool.forge.modules]] entry {i + 1} is not a table")
            continue
        key = item.get("module")
        if not isinstance(key, str):
            warnings.append(f'[[tool.forge.modules]] entry {i + 1} needs module = "path/to/file.py::ClassName"')
            continue
        raw.append((key, item))
    return raw


def _module_entry(key: str, value: object, root: str, warnings: list[str]) -> ForgeModuleEntry | None:
    file, sep, cls = key.partition("::")
    if not sep or not file.strip() or not cls.strip().isidentifier():
        warnings.append(f'"{key}": the module must be written "path/to/file.py::ClassName"')
        return None
    task: object
    model_class: object
    if isinstance(value, str):
        task, model_class = value, "Model"
    elif isinstance(value, dict):
        task, model_class = value.get("task"), value.get("model_class", "Model")
        if not isinstance(task, str) or not task.strip():
            warnings.append(f'"{key}": needs task = "path/to/task_file.py"')
            return None
        if not isinstance(model_class, str) or not model_class.isidentifier():
            warnings.append(f'"{key}": model_class must be a class name')
            return None
    else:
        warnings.append(f'"{key}": expected a table with task = "..." or a task path string')
        return None
    rel = posixpath.normpath(file.strip().replace("\\", "/"))
    task_path = os.path.normpath(os.path.join(root, task.strip()))
    if not os.path.isfile(task_path):
        warnings.append(f'"{key}": task file {task.strip()} does not exist')
    return ForgeModuleEntry(key=key, file=rel, class_name=cls.strip(), task=task_path, model_class=model_class)


def read_pyproject_forge(root: str | Path) -> PyProjectForge:
    """`parse_pyproject_forge` of ``root/pyproject.toml``; an empty result when there is none."""
    path = os.path.join(os.path.abspath(str(root)), "pyproject.toml")
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        return PyProjectForge(root=os.path.abspath(str(root)))
    except OSError as exc:
        return PyProjectForge(root=os.path.abspath(str(root)), path=path, error=f"cannot read: {exc}")
    text = data.decode("utf-8", errors="replace")
    return parse_pyproject_forge(text, root, path=path)
