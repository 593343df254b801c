"""The language server's workspace model: nn.Modules, their example inputs, and CUDA kernels.

Everything here reads source text only (``ast`` for Python, regexes for CUDA): no user code is
executed and neither torch nor any editor library is imported, so the server process stays light.

What is indexed
---------------
* ``.py`` files: module-level ``nn.Module`` subclasses (`ModuleInfo`) and where their example inputs
  come from (`InputsSource`). A class is a module when a base is ``torch.nn.Module`` or another
  ``torch.nn`` class however it was imported (``import torch``, ``import torch.nn as nn``,
  ``from torch import nn``, ``from torch.nn import Module as M``...), a bare ``nn.X`` even without
  an import (files being edited), a Lightning ``LightningModule``, or a class of the same file that
  is itself a module (transitively). Classes inside top-level ``if``/``try`` blocks count; classes
  nested in functions or classes do not. Bases imported from other workspace files are not
  followed.
* ``.cu`` / ``.cuh`` files: ``__global__`` kernels (`KernelInfo`, via
  `forge_lsp.workspace.cuda_source.global_kernels`).

Positions are 0-based lines and 0-based columns counted in Python ``str`` indices (code points) of
the text as given; the server converts to the client's encoding with pygls' position codec. Lines
are separated by ``\\n``, ``\\r\\n`` or ``\\r`` (as in LSP and in Python's tokenizer). Every ``end_line``
is inclusive.

Example inputs
--------------
Explicit configuration wins over convention:

1. ``pyproject`` (kind ``"pyproject"``): an entry under ``[tool.forge.modules]`` of the workspace's
   ``pyproject.toml`` names the KernelBench task file for a class (see `parse_pyproject_forge`).
2. ``kernelbench``: the file defines both ``get_inputs()`` and ``get_init_inputs()`` at module level.
   They are attributed to the class named ``Model``, to the only module of the file, and to every
   module whose constructor and ``forward`` accept as many positional arguments as the two
   functions' literal return lists hold (so a ``ModelNew`` next to its ``Model`` gets them too,
   while a helper ``Block`` with another constructor does not). When none of these apply (several
   modules, non-literal return values), every module whose arity cannot be checked gets them.
   The engine's ``load_task(path, model_class=...)`` takes the class name from
   `InputsSource.model_class`.

Speed: a ``.py`` file is cut into chunks of top-level statements that are parsed separately and
cached by their text, so an edit re-parses only the chunk it touches (see `_python_facts` for why the
result equals a whole-file parse).

Robustness: nothing here raises on bad input. A ``.py`` file with a syntax error is indexed piecewise
(the chunks that parse give their classes exactly; a broken chunk keeps its class header, constructor
parameters and ``forward`` via regexes) and the first error is reported in `FileIndex.syntax_error` /
``syntax_error_line``. `scan` skips oversized and binary files with a `FileIndex.skipped` reason and
decodes non-UTF-8 files with replacement characters (noted in `FileIndex.notes`).
"""

from __future__ import annotations

import ast
import bisect
import functools
import hashlib
import os
import posixpath
import re
import threading
import tokenize
import tomllib
import warnings
from collections.abc import Iterator
from io import BytesIO
from pathlib import Path
from typing import Literal, NamedTuple

from pydantic import BaseModel, Field

from forge_lsp.workspace.cuda_source import global_kernels

PYTHON_SUFFIXES = (".py",)
CUDA_SUFFIXES = (".cu", ".cuh")

#: Folders never scanned (besides every hidden folder and every virtualenv, found by its pyvenv.cfg).
SKIP_DIRS = frozenset({".git", ".venv", "venv", "node_modules", "__pycache__", "build", "site-packages", ".tox"})

KERNELBENCH_FUNCTIONS = ("get_inputs", "get_init_inputs")


# --------------------------------------------------------------------------------------------------
# Result types


class InputsSource(BaseModel):
    """Where a module's example inputs come from."""

    kind: Literal["kernelbench", "pyproject"]
    detail: str = Field(description="for people, e.g. 'get_inputs() / get_init_inputs() in this file'")
    task_file: str | None = Field(description="the file to hand to the engine as the task")
    model_class: str | None = Field(
        default=None, description="the class in task_file to optimize (load_task's model_class)"
    )


class ModuleInfo(BaseModel):
    """A module-level ``nn.Module`` subclass."""

    name: str
    line: int = Field(description="line of the `class` keyword")
    column: int = Field(description="column of the `class` keyword")
    name_column: int = Field(description="column of the class name on `line`")
    start_line: int = Field(description="first line of the statement, decorators included")
    end_line: int = Field(description="last line of the class body (inclusive)")
    bases: list[str] = Field(description='as written, e.g. ["nn.Module"], ["torch.nn.Module"], ["MyBase"]')
    init_params: list[str] = Field(
        description="constructor parameters without self; '*args' / '**kwargs' keep their stars. Followed "
        "through same-file bases when the class defines no __init__; [] when unknown"
    )
    forward_params: list[str] = Field(default_factory=list, description="forward() parameters without self, same rules")
    has_forward: bool = Field(description="defines forward, or inherits it from a same-file module or a torch.nn layer")
    inputs: InputsSource | None = None


class KernelInfo(BaseModel):
    """A ``__global__`` function in a CUDA file; line/column point at its name."""

    name: str
    line: int
    column: int
    extern_c: bool
    end_line: int = Field(description="last line of its body (inclusive); its own line for a declaration")


class FileIndex(BaseModel):
    path: str
    version: int | None = None
    content_hash: str = ""
    modules: list[ModuleInfo] = []
    kernels: list[KernelInfo] = []
    has_get_inputs: bool = False
    has_get_init_inputs: bool = False
    syntax_error: str | None = Field(default=None, description="first syntax error: 'line N: message' (N 1-based)")
    syntax_error_line: int | None = Field(default=None, description="0-based line of syntax_error")
    skipped: str | None = Field(
        default=None, description="why the file was not indexed (too large, binary, unreadable)"
    )
    notes: list[str] = []


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


# --------------------------------------------------------------------------------------------------
# pyproject.toml


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
    tool = doc.get("tool")
    forge = tool.get("forge") if isinstance(tool, dict) else None
    if forge is None:
        return out
    if not isinstance(forge, dict):
        out.error = "[tool.forge] must be a table"
        return out
    modules = forge.get("modules")
    if modules is None:
        return out
    raw: list[tuple[str, object]] = []
    if isinstance(modules, list):
        for i, item in enumerate(modules):
            if not isinstance(item, dict):
                out.warnings.append(f"[[tool.forge.modules]] entry {i + 1} is not a table")
                continue
            key = item.get("module")
            if not isinstance(key, str):
                out.warnings.append(f'[[tool.forge.modules]] entry {i + 1} needs module = "path/to/file.py::ClassName"')
                continue
            raw.append((key, item))
    elif isinstance(modules, dict):
        raw.extend(modules.items())
    else:
        out.error = "[tool.forge.modules] must be a table or an array of tables"
        return out
    for key, value in raw:
        entry = _module_entry(key, value, root_s, out.warnings)
        if entry is not None:
            if out.entry(entry.file, entry.class_name) is not None:
                out.warnings.append(f'"{key}" is configured twice; the first entry is used')
                continue
            out.modules.append(entry)
    return out


def _module_entry(key: str, value: object, root: str, warnings: list[str]) -> ForgeModuleEntry | None:
    file, sep, cls = key.partition("::")
    if not sep or not file.strip() or not cls.strip().isidentifier():
        warnings.append(f'"{key}": the module must be written "path/to/file.py::ClassName"')
        return None
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


# --------------------------------------------------------------------------------------------------
# Python files

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_CHUNK_START = re.compile(r"(?!(?:else|elif|except|finally)\b)[A-Za-z_@]")
_CONTINUATION = re.compile(r"(?:else|elif|except|finally)\b")
_START_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_@")
_CLASS_HEADER = re.compile(r"class\s+([A-Za-z_]\w*)\s*(?:\((.*)\))?\s*:")
_CLASS_KEYWORD = re.compile(r"class\s+")
_MAX_PARSES = 48
_MAX_MERGE = 4
_TRIPLE_QUOTE = re.compile(r'"""|\'\'\'')

_TORCH_NN_CLASS = re.compile(r"torch\.nn\.(?:modules(?:\.[a-z_]\w*)*\.)?([A-Z]\w*)")
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


#: Parses are labelled with this file name so that their SyntaxWarnings/DeprecationWarnings (``1if x``,
#: ``"\\d"``) are silenced without touching anyone else's warnings.
_PARSE_FILENAME = "<forge-workspace-index>"
for _category in (SyntaxWarning, DeprecationWarning):
    warnings.filterwarnings("ignore", category=_category, module=re.escape(_PARSE_FILENAME))


def parse(text: str) -> ast.Module:
    """``ast.parse`` without warnings on stderr (the user's code is not ours to lint)."""
    return ast.parse(text, filename=_PARSE_FILENAME)


def content_hash(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


class _Class:
    """What the resolver needs of one top-level class (from the AST, or from a regex when it did not parse)."""

    __slots__ = (
        "name",
        "line",
        "column",
        "name_column",
        "start_line",
        "end_line",
        "bases",
        "init",
        "forward",
        "has_own_forward",
        "init_arity",
        "forward_arity",
    )

    def __init__(
        self,
        name: str,
        line: int,
        column: int,
        name_column: int,
        start_line: int,
        end_line: int,
        bases: list[str],
        init: list[str] | None,
        forward: list[str] | None,
        has_own_forward: bool,
        init_arity: tuple[int, float, bool] | None,
        forward_arity: tuple[int, float, bool] | None,
    ):
        self.name, self.line, self.column, self.name_column = name, line, column, name_column
        self.start_line, self.end_line, self.bases = start_line, end_line, bases
        self.init, self.forward, self.has_own_forward = init, forward, has_own_forward
        self.init_arity, self.forward_arity = init_arity, forward_arity

    def shifted(self, lines: int) -> _Class:
        if not lines:
            return self
        return _Class(
            self.name,
            self.line + lines,
            self.column,
            self.name_column,
            self.start_line + lines,
            self.end_line + lines,
            self.bases,
            self.init,
            self.forward,
            self.has_own_forward,
            self.init_arity,
            self.forward_arity,
        )


class _Facts(NamedTuple):
    """What one parsed piece of a file contributes; lines relative to the piece's first line."""

    classes: tuple[_Class, ...]
    aliases: tuple[tuple[str, str], ...]
    functions: tuple[tuple[str, int | None], ...]  # kernelbench function -> length of its literal return list


def split_lines(text: str) -> list[str]:
    """Lines as LSP and Python's tokenizer count them (``\\n``, ``\\r\\n``, ``\\r``)."""
    return _LINE_BREAK.split(text)


def _str_col(lines: list[str], line: int, byte_col: int, shift0: int) -> int:
    """ast's UTF-8 byte column -> str index on that line."""
    if line >= len(lines):
        return byte_col
    s = lines[line]
    if line == 0 and shift0:
        s = s[shift0:]
    col = byte_col if s.isascii() else len(s.encode("utf-8", "surrogatepass")[:byte_col].decode("utf-8", "replace"))
    return col + (shift0 if line == 0 else 0)


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[list[str], tuple[int, float, bool]]:
    """Parameter names without the first (self) and (required positional, max positional, kw-only required?)."""
    a = fn.args
    positional = [*a.posonlyargs, *a.args][1:]
    n_defaults = len(a.defaults)
    n_all = len(a.posonlyargs) + len(a.args)
    # defaults align with the tail of posonlyargs + args (self included in n_all)
    required = max(0, n_all - n_defaults - 1)
    required = min(required, len(positional))
    names = [p.arg for p in positional]
    if a.vararg:
        names.append("*" + a.vararg.arg)
    names += [p.arg for p in a.kwonlyargs]
    if a.kwarg:
        names.append("**" + a.kwarg.arg)
    kw_required = any(d is None for d in a.kw_defaults)
    return names, (required, float("inf") if a.vararg else float(len(positional)), kw_required)


def _class_from_ast(node: ast.ClassDef, lines: list[str], shift0: int) -> _Class:
    line = node.lineno - 1
    column = _str_col(lines, line, node.col_offset, shift0)
    m = _CLASS_KEYWORD.match(lines[line], column) if line < len(lines) else None
    name_column = m.end() if m and lines[line].startswith(node.name, m.end()) else column
    start_line = min([line] + [d.lineno - 1 for d in node.decorator_list])
    bases = []
    for b in node.bases:
        try:
            bases.append(ast.unparse(b))
        except Exception:  # noqa: BLE001
            bases.append("?")
    init = forward = None
    init_arity = forward_arity = None
    has_forward = False
    for item in node.body:
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
            if item.name == "__init__" and init is None:
                init, init_arity = _params(item)
            elif item.name == "forward":
                has_forward = True
                forward, forward_arity = _params(item)
        elif isinstance(item, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "forward" for t in item.targets):
            has_forward = True
    return _Class(
        node.name,
        line,
        column,
        name_column,
        start_line,
        (node.end_lineno or node.lineno) - 1,
        bases,
        init,
        forward,
        has_forward,
        init_arity,
        forward_arity,
    )


def _split_top_level_commas(s: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in s:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def _regex_params(sig: str) -> list[str]:
    names = []
    for p in _split_top_level_commas(sig):
        if p in ("/", "*"):
            continue
        name = re.split(r"[:=]", p, maxsplit=1)[0].strip()
        if name.lstrip("*").isidentifier():
            names.append(name)
    return names[1:] if names and not names[0].startswith("*") else names


def _classes_from_broken_chunk(lines: list[str], start: int, end: int) -> tuple[list[_Class], set[str], list[str]]:
    """Best effort for a chunk that does not parse: class headers, kernelbench functions, import lines."""
    classes: list[_Class] = []
    functions: set[str] = set()
    imports: list[str] = []
    i = start
    while i < end:
        text = lines[i]
        m = _CLASS_HEADER.match(text)
        if m:
            j = i + 1
            while j < end and (not lines[j].strip() or lines[j][:1] in (" ", "\t", "#")):
                j += 1
            last = j - 1
            while last > i and not lines[last].strip():
                last -= 1
            body = "\n".join(lines[i + 1 : last + 1])
            bases = [b for b in _split_top_level_commas(m.group(2) or "") if "=" not in b and not b.startswith("*")]
            init_m = re.search(r"^[ \t]+(?:async[ \t]+)?def[ \t]+__init__[ \t]*\(([^)]*)\)", body, re.M)
            fwd_m = re.search(r"^[ \t]+(?:async[ \t]+)?def[ \t]+forward[ \t]*\(([^)]*)\)", body, re.M)
            start_line = i
            while start_line > start and lines[start_line - 1].startswith("@"):
                start_line -= 1
            classes.append(
                _Class(
                    m.group(1),
                    i,
                    0,
                    m.start(1),
                    start_line,
                    last,
                    bases,
                    _regex_params(init_m.group(1)) if init_m else None,
                    _regex_params(fwd_m.group(1)) if fwd_m else None,
                    fwd_m is not None,
                    None,
                    None,
                )
            )
            i = j
            continue
        fm = re.match(r"(?:async\s+)?def\s+(get_inputs|get_init_inputs)\b", text)
        if fm:
            functions.add(fm.group(1))
        elif re.match(r"(?:import|from)\s", text):
            imports.append(text)
        i += 1
    return classes, functions, imports


def _parse_tolerant(
    text: str, lines: list[str]
) -> tuple[list[ast.stmt], tuple[int, str] | None, list[tuple[int, int]]]:
    """Top-level statements of ``text``; on a syntax error, those of the chunks that parse.

    Returns (statements, first error as (0-based line, message) or None, broken line ranges).
    """
    try:
        return parse(text).body, None, []
    except SyntaxError as exc:
        first: tuple[int, str] = (max(0, (exc.lineno or 1) - 1), exc.msg or "invalid syntax")
    except (ValueError, RecursionError, MemoryError) as exc:
        first = (0, str(exc) or type(exc).__name__)
    starts = [i for i, s in enumerate(lines) if _CHUNK_START.match(s)]
    stmts: list[ast.stmt] = []
    broken: list[tuple[int, int]] = []
    budget = [_MAX_PARSES]

    def region(start: int, end: int) -> None:
        if start >= end:
            return
        if budget[0] <= 0:
            broken.append((start, end))
            return
        budget[0] -= 1
        try:
            stmts.extend(parse("\n" * start + "\n".join(lines[start:end])).body)
            return
        except SyntaxError as exc:
            err = (exc.lineno or start + 1) - 1
        except (ValueError, RecursionError, MemoryError):
            err = start
        err = min(max(err, start), end - 1)
        k = bisect.bisect_right(starts, err) - 1
        s = starts[k] if k >= 0 and starts[k] >= start else start
        k2 = bisect.bisect_right(starts, err)
        e = starts[k2] if k2 < len(starts) and starts[k2] < end else end
        if (s, e) == (start, end):
            broken.append((start, end))
            return
        region(start, s)
        region(s, e)
        region(e, end)

    region(0, len(lines))
    stmts.sort(key=lambda n: n.lineno)
    return stmts, first, sorted(broken)


def _top_level(stmts: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Module-level statements, descending into top-level if/try/with blocks (not into defs or classes)."""
    for node in stmts:
        yield node
        if isinstance(node, ast.If):
            yield from _top_level(node.body)
            yield from _top_level(node.orelse)
        elif isinstance(node, ast.Try | ast.TryStar):
            yield from _top_level(node.body)
            for h in node.handlers:
                yield from _top_level(h.body)
            yield from _top_level(node.orelse)
            yield from _top_level(node.finalbody)
        elif isinstance(node, ast.With):
            yield from _top_level(node.body)


def import_aliases(stmts: list[ast.stmt]) -> dict[str, str]:
    """Local name -> dotted name it was imported as (``nn`` -> ``torch.nn``), from module-level imports."""
    aliases: dict[str, str] = {}
    for node in _top_level(stmts):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    aliases[a.asname] = a.name
                else:
                    head = a.name.split(".")[0]
                    aliases[head] = head
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                if a.name != "*":
                    aliases[a.asname or a.name] = f"{node.module}.{a.name}"
    return aliases


def qualify(dotted: str, aliases: dict[str, str]) -> str:
    """``nn.Module`` -> ``torch.nn.Module`` given the file's imports (``nn`` means torch.nn when unbound)."""
    head, _, rest = dotted.partition(".")
    if head in aliases:
        base = aliases[head]
    elif head == "nn":
        base = "torch.nn"
    else:
        return dotted
    return f"{base}.{rest}" if rest else base


def torch_nn_class(dotted: str, aliases: dict[str, str]) -> str | None:
    """The torch.nn class a base/callee names (``Linear`` for ``nn.Linear``), else None."""
    m = _TORCH_NN_CLASS.fullmatch(qualify(dotted.split("[", 1)[0], aliases))
    return m.group(1) if m else None


def _is_external_module_base(base: str, aliases: dict[str, str]) -> bool:
    cls = torch_nn_class(base, aliases)
    if cls is not None:
        return cls not in _NOT_MODULES
    return qualify(base.split("[", 1)[0], aliases) in _OTHER_MODULE_BASES


def _returned_list_len(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int | None:
    """Length of the list/tuple literal every `return` of fn gives, or None."""
    lengths = set()
    stack: list[ast.AST] = list(fn.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            continue
        if isinstance(node, ast.Return):
            v = node.value
            if not isinstance(v, ast.List | ast.Tuple) or any(isinstance(e, ast.Starred) for e in v.elts):
                return None
            lengths.add(len(v.elts))
        stack.extend(ast.iter_child_nodes(node))
    return lengths.pop() if len(lengths) == 1 else None


def _fits(arity: tuple[int, float, bool] | None, n: int | None) -> bool | None:
    if arity is None or n is None:
        return None
    required, most, kw_required = arity
    return required <= n <= most and not kw_required


def _empty(path: str, text: str, version: int | None, **extra: object) -> FileIndex:
    return FileIndex(path=path, version=version, content_hash=content_hash(text), **extra)


def index_python(
    path: str, text: str, *, pyproject: PyProjectForge | None = None, version: int | None = None
) -> FileIndex:
    """Index one Python file's text. Never raises."""
    try:
        return _index_python(path, text, pyproject, version)
    except Exception as exc:  # noqa: BLE001 - a bug here must not take the server down
        return _empty(path, text, version, notes=[f"internal error while indexing: {type(exc).__name__}: {exc}"])


def _facts_from_stmts(stmts: list[ast.stmt], lines: list[str], shift0: int) -> _Facts:
    classes = []
    functions: dict[str, int | None] = {}
    for node in _top_level(stmts):
        if isinstance(node, ast.ClassDef):
            classes.append(_class_from_ast(node, lines, shift0))
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in KERNELBENCH_FUNCTIONS:
            functions.setdefault(node.name, _returned_list_len(node))
    return _Facts(tuple(classes), tuple(import_aliases(stmts).items()), tuple(functions.items()))


@functools.lru_cache(maxsize=8192)
def _chunk_facts(text: str, bom: bool) -> _Facts | None:
    """Facts of one chunk of top-level statements, None when it does not parse on its own (cached by text:
    an edit re-parses only the chunk it touches)."""
    try:
        stmts = parse(text[1:] if bom else text).body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return _facts_from_stmts(stmts, split_lines(text), 1 if bom else 0)


def _chunk_starts(lines: list[str]) -> list[int]:
    """Lines where a top-level statement probably starts (column 0, outside triple-quoted strings, not
    after a decorator or a backslash). A wrong guess only costs speed: see `_python_facts`."""
    candidates = [i for i, line in enumerate(lines) if line[:1] in _START_CHARS]
    quote_lines = [i for i, line in enumerate(lines) if '"""' in line or "'''" in line]
    starts = [0]
    quote: str | None = None
    q = 0
    for i in candidates:
        while q < len(quote_lines) and quote_lines[q] < i:  # the string state at the start of line i
            for m in _TRIPLE_QUOTE.finditer(lines[quote_lines[q]]):
                if quote is None:
                    quote = m.group(0)
                elif quote == m.group(0):
                    quote = None
            q += 1
        if i == 0 or quote is not None or _CONTINUATION.match(lines[i]):
            continue
        j = i - 1
        while j >= 0 and (not lines[j] or lines[j].isspace() or lines[j].lstrip().startswith("#")):
            j -= 1
        if j >= 0 and (lines[j].startswith("@") or lines[j].rstrip().endswith("\\")):
            continue
        starts.append(i)
    return starts


def _python_facts(
    text: str, lines: list[str], shift0: int
) -> tuple[list[_Class], dict[str, str], dict[str, int | None], tuple[int, str] | None, bool]:
    """(classes, import aliases, kernelbench functions, first syntax error, indexed around an error?).

    The file is cut into chunks of top-level statements, each parsed on its own and cached. When every
    chunk parses, the chunks are exactly the file's statements (a chunk cut inside a string, a bracket or
    after a decorator cannot parse), so the facts equal those of a whole-file parse. Otherwise a chunk is
    first merged with the next few; if some still fail, the file from the first failing chunk on is
    parsed: valid after all (a misjudged cut), or its first error is reported and the failing chunks
    fall back to regexes.
    """
    starts = _chunk_starts(lines)
    bounds = list(zip(starts, [*starts[1:], len(lines)], strict=True))
    parts: list[tuple[int, _Facts]] = []
    failing: list[tuple[int, int]] = []
    i = 0
    while i < len(bounds):
        start, end = bounds[i]
        facts = _chunk_facts("\n".join(lines[start:end]), start == 0 and shift0 > 0)
        j = i
        while facts is None and j + 1 < len(bounds) and j - i < _MAX_MERGE:
            j += 1
            facts = _chunk_facts("\n".join(lines[start : bounds[j][1]]), start == 0 and shift0 > 0)
        if facts is None:
            failing.append((start, end))
            i += 1
        else:
            parts.append((start, facts))
            i = j + 1
    error = None
    if failing:
        # Every chunk before the first failing one parsed on its own, so it ended cleanly (no open bracket,
        # string, decorator or continuation): the rest of the file parses as if the whole file did, and a
        # parse stops at its first error, which is near this chunk (cheap even in a large file).
        first = failing[0][0]
        bom = first == 0 and shift0 > 0
        rest = "\n".join(lines[first:])
        try:
            tail = _facts_from_stmts(parse(rest[1:] if bom else rest).body, lines[first:], 1 if bom else 0)
            parts = [(start, f) for start, f in parts if start < first] + [(first, tail)]
            failing = []
        except SyntaxError as exc:
            error = (min(len(lines) - 1, first + max(0, (exc.lineno or 1) - 1)), exc.msg or "invalid syntax")
        except (ValueError, RecursionError, MemoryError) as exc:
            error = (first, str(exc) or type(exc).__name__)
    classes = [c.shifted(start) for start, f in parts for c in f.classes]
    aliases: dict[str, str] = {}
    functions: dict[str, int | None] = {}
    for _, f in parts:
        aliases.update(f.aliases)
        for name, n in f.functions:
            functions.setdefault(name, n)
    for start, end in failing:
        found, fns, import_lines = _classes_from_broken_chunk(lines, start, end)
        classes.extend(found)
        for fn in fns:
            functions.setdefault(fn, None)
        for line in import_lines:
            try:
                aliases.update(import_aliases(parse(line.strip()).body))
            except (SyntaxError, ValueError):
                pass
    classes.sort(key=lambda c: c.line)
    return classes, aliases, functions, error, bool(failing)


def _index_python(path: str, text: str, pyproject: PyProjectForge | None, version: int | None) -> FileIndex:
    if "\x00" in text:
        return _empty(path, text, version, skipped="binary file (contains NUL bytes)")
    shift0 = 1 if text.startswith("\ufeff") else 0
    lines = split_lines(text)
    classes, aliases, functions, error, broken = _python_facts(text, lines, shift0)

    by_name = {c.name: c for c in classes}
    modules = {c.name for c in classes if any(_is_external_module_base(b, aliases) for b in c.bases)}
    changed = True
    while changed:
        changed = False
        for c in classes:
            if c.name not in modules and any(b in modules and b != c.name for b in c.bases):
                modules.add(c.name)
                changed = True

    def inherited(c: _Class, attr: str, seen: set[str]) -> object:
        own = getattr(c, attr)
        if own is not None or c.name in seen:
            return own
        seen.add(c.name)
        for b in c.bases:
            if b in by_name and b != c.name:
                got = inherited(by_name[b], attr, seen)
                if got is not None:
                    return got
            elif torch_nn_class(b, aliases) == "Module":
                return [] if attr in ("init", "forward") else (0, 0.0, False)
        return None

    def has_forward(c: _Class, seen: set[str]) -> bool:
        if c.has_own_forward:
            return True
        if c.name in seen:
            return False
        seen.add(c.name)
        for b in c.bases:
            if b in by_name and b != c.name:
                if has_forward(by_name[b], seen):
                    return True
            else:
                cls = torch_nn_class(b, aliases)
                if cls is not None and cls not in _NO_FORWARD and cls not in _NOT_MODULES:
                    return True
        return False

    module_classes = [c for c in classes if c.name in modules]
    has_inputs, has_init = "get_inputs" in functions, "get_init_inputs" in functions

    kernelbench: set[str] = set()
    if has_inputs and has_init and module_classes:
        n_init, n_inputs = functions["get_init_inputs"], functions["get_inputs"]
        fit: dict[str, bool | None] = {}
        for c in module_classes:
            a = _fits(inherited(c, "init_arity", set()), n_init)  # type: ignore[arg-type]
            b = _fits(inherited(c, "forward_arity", set()), n_inputs)  # type: ignore[arg-type]
            fit[c.name] = False if False in (a, b) else (True if (a, b) == (True, True) else None)
        kernelbench = {c.name for c in module_classes if c.name == "Model" or fit[c.name]}
        if len(module_classes) == 1:
            kernelbench.add(module_classes[0].name)
        if not kernelbench:
            kernelbench = {c.name for c in module_classes if fit[c.name] is None}

    rel = None
    if pyproject is not None and pyproject.modules:
        rel = os.path.relpath(os.path.abspath(path), pyproject.root).replace(os.sep, "/")

    infos = []
    for c in module_classes:
        inputs = None
        entry = pyproject.entry(rel, c.name) if pyproject is not None and rel is not None else None
        if entry is not None:
            shown = os.path.relpath(entry.task, pyproject.root).replace(os.sep, "/")  # type: ignore[union-attr]
            inputs = InputsSource(
                kind="pyproject",
                task_file=entry.task,
                model_class=entry.model_class,
                detail=f'pyproject.toml [tool.forge.modules] "{entry.key}" -> {shown}',
            )
        elif c.name in kernelbench:
            inputs = InputsSource(
                kind="kernelbench",
                task_file=path,
                model_class=c.name,
                detail="get_inputs() / get_init_inputs() in this file",
            )
        infos.append(
            ModuleInfo(
                name=c.name,
                line=c.line,
                column=c.column,
                name_column=c.name_column,
                start_line=c.start_line,
                end_line=c.end_line,
                bases=list(c.bases),
                init_params=list(inherited(c, "init", set()) or []),  # type: ignore[arg-type]
                forward_params=list(inherited(c, "forward", set()) or []),  # type: ignore[arg-type]
                has_forward=has_forward(c, set()),
                inputs=inputs,
            )
        )

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


# --------------------------------------------------------------------------------------------------
# CUDA files

_CUDA_BLANK = re.compile(r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'", re.DOTALL)


def _kernel_end(clean: str, offset: int) -> int:
    """Offset of the last character of the kernel whose name starts at `offset` (its `}` or `;`)."""
    i = clean.find("(", offset)
    if i < 0:
        return offset
    depth = 0
    n = len(clean)
    while i < n:
        ch = clean[i]
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                break
        i += 1
    m = re.compile(r"[{;]").search(clean, i)
    if m is None:
        return n - 1
    if m.group(0) == ";":
        return m.start()
    depth = 0
    for j in range(m.start(), n):
        if clean[j] == "{":
            depth += 1
        elif clean[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return n - 1


def index_cuda(path: str, text: str, *, version: int | None = None) -> FileIndex:
    """Index one CUDA file's text (``__global__`` kernels). Never raises."""
    if "\x00" in text:
        return _empty(path, text, version, skipped="binary file (contains NUL bytes)")
    try:
        found = global_kernels(text)
        clean = _CUDA_BLANK.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
        starts = [0] + [m.end() for m in re.finditer("\n", text)]
        kernels = []
        for k in found:
            offset = starts[k.line] + k.column if k.line < len(starts) else 0
            end = _kernel_end(clean, offset)
            kernels.append(
                KernelInfo(
                    name=k.name,
                    line=k.line,
                    column=k.column,
                    extern_c=k.extern_c,
                    end_line=max(k.line, text.count("\n", 0, end)),
                )
            )
    except Exception as exc:  # noqa: BLE001
        return _empty(path, text, version, notes=[f"internal error while indexing: {type(exc).__name__}: {exc}"])
    return FileIndex(path=path, version=version, content_hash=content_hash(text), kernels=kernels)


def index_file(
    path: str, text: str, *, pyproject: PyProjectForge | None = None, version: int | None = None
) -> FileIndex:
    """`index_python` for .py, `index_cuda` for .cu/.cuh, an empty index for anything else."""
    low = path.lower()
    if low.endswith(PYTHON_SUFFIXES):
        return index_python(path, text, pyproject=pyproject, version=version)
    if low.endswith(CUDA_SUFFIXES):
        return index_cuda(path, text, version=version)
    return _empty(path, text, version)


def is_indexed_path(path: str) -> bool:
    return path.lower().endswith(PYTHON_SUFFIXES + CUDA_SUFFIXES)


# --------------------------------------------------------------------------------------------------
# Reading files from disk


def decode_source(data: bytes) -> tuple[str, list[str]]:
    """Bytes -> text the way an editor would show them, with notes about anything lossy."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return data.decode("utf-8"), []
    except UnicodeDecodeError as exc:
        first = f"not valid UTF-8 (byte {exc.start})"
    try:  # a PEP 263 coding declaration (latin-1 sources...)
        encoding, _ = tokenize.detect_encoding(BytesIO(data).readline)
        if encoding not in ("utf-8", "utf-8-sig"):
            return data.decode(encoding), [f"decoded as {encoding} (its coding declaration)"]
    except (SyntaxError, LookupError, UnicodeDecodeError):
        pass
    return data.decode("utf-8", errors="replace"), [f"{first}: decoded with replacement characters"]


def read_source(path: str, max_file_bytes: int) -> tuple[str | None, str | None, list[str]]:
    """(text, skipped reason, notes) for a file on disk."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(max_file_bytes + 1)
    except OSError as exc:
        return None, f"cannot read: {exc.strerror or exc}", []
    if len(data) > max_file_bytes:
        return None, f"larger than the index limit of {max_file_bytes} bytes", []
    if b"\x00" in data:
        return None, "binary file (contains NUL bytes)", []
    text, notes = decode_source(data)
    return text, None, notes


def _norm(path: str | Path) -> str:
    return os.path.normpath(os.path.abspath(os.fspath(path)))


# --------------------------------------------------------------------------------------------------
# The workspace


class WorkspaceIndex:
    """Index of one workspace folder; thread-safe, updated file by file.

    Keys are normalized absolute paths. Files the editor has sent (`update`) are owned by the editor
    until `refresh` or `remove`: a `scan` does not replace them with what is on disk. Editing the
    root ``pyproject.toml`` (through `update` or `refresh`) re-attaches the inputs of the modules its
    old and new entries name.
    """

    def __init__(self, root: str | Path, *, max_file_bytes: int = 1_000_000):
        self.root = _norm(root)
        self.max_file_bytes = max_file_bytes
        self._lock = threading.RLock()
        self._files: dict[str, FileIndex] = {}
        self._open: dict[str, tuple[str, int | None]] = {}
        self._pyproject = PyProjectForge(root=self.root)
        self._pyproject_path = os.path.join(self.root, "pyproject.toml")
        self._generation = 0

    # -- reading ---------------------------------------------------------------------------------

    @property
    def pyproject(self) -> PyProjectForge:
        with self._lock:
            return self._pyproject

    def get(self, path: str | Path) -> FileIndex | None:
        with self._lock:
            return self._files.get(_norm(path))

    def files(self) -> list[str]:
        with self._lock:
            return sorted(self._files)

    def __len__(self) -> int:
        with self._lock:
            return len(self._files)

    def module_at(self, path: str | Path, line: int) -> ModuleInfo | None:
        """The module whose span (decorators to last body line) contains ``line``."""
        idx = self.get(path)
        if idx is None:
            return None
        for m in idx.modules:
            if m.start_line <= line <= m.end_line:
                return m
        return None

    def kernel_at(self, path: str | Path, line: int) -> KernelInfo | None:
        """The kernel whose name line to closing brace contains ``line``."""
        idx = self.get(path)
        if idx is None:
            return None
        for k in idx.kernels:
            if k.line <= line <= k.end_line:
                return k
        return None

    def modules(self) -> list[tuple[str, ModuleInfo]]:
        with self._lock:
            items = sorted(self._files.items())
        return [(p, m) for p, idx in items for m in idx.modules]

    def kernels(self) -> list[tuple[str, KernelInfo]]:
        with self._lock:
            items = sorted(self._files.items())
        return [(p, k) for p, idx in items for k in idx.kernels]

    # -- writing ---------------------------------------------------------------------------------

    def scan(self) -> None:
        """(Re)index every .py/.cu/.cuh file under the root, reading ``pyproject.toml`` first."""
        pyproject = read_pyproject_forge(self.root)
        with self._lock:
            self._pyproject = pyproject
            self._generation += 1
            generation = self._generation
        found: dict[str, FileIndex] = {}
        for path in self._walk():
            found[path] = self._index_disk(path, pyproject)
        with self._lock:
            for path in self._open:  # the editor's text wins over the disk's
                if path in self._files:
                    found[path] = self._files[path]
            self._files = found
            open_items = list(self._open.items()) if generation == self._generation else []
        for path, (text, version) in open_items:  # their inputs may come from the pyproject just read
            self._store(path, lambda pp, p=path, t=text, v=version: self._index_text(p, t, v, pp), expect_text=text)

    def update(self, path: str | Path, text: str, version: int | None = None) -> FileIndex:
        """Index the editor's text of ``path`` (didOpen/didChange); returns the (stored) index.

        An update carrying an older version than the stored one is ignored (the stored index is
        returned). Files other than .py/.cu/.cuh are not stored; the root pyproject.toml is re-read.
        """
        key = _norm(path)
        if key == self._pyproject_path:
            self._set_pyproject(parse_pyproject_forge(text, self.root, path=key))
            pp = self.pyproject
            return _empty(key, text, version, notes=[n for n in [pp.error, *pp.warnings] if n])
        if not is_indexed_path(key):
            return _empty(key, text, version)
        with self._lock:
            current = self._files.get(key)
            if (
                current is not None
                and version is not None
                and current.version is not None
                and version < current.version
            ):
                return current
            self._open[key] = (text, version)
            if current is not None and current.content_hash == content_hash(text) and not current.skipped:
                fresh = current.model_copy(update={"version": version})
                self._files[key] = fresh
                return fresh
        return self._store(key, lambda pp: self._index_text(key, text, version, pp), expect_text=text)

    def refresh(self, path: str | Path) -> FileIndex | None:
        """Re-read ``path`` from disk (file watcher, didClose); drops it when it no longer exists."""
        key = _norm(path)
        with self._lock:
            self._open.pop(key, None)
        if key == self._pyproject_path:
            self._set_pyproject(read_pyproject_forge(self.root))
            return None
        if not is_indexed_path(key) or not os.path.isfile(key):
            self.remove(key)
            return None
        return self._store(key, lambda pp: self._index_disk(key, pp))

    def remove(self, path: str | Path) -> None:
        key = _norm(path)
        with self._lock:
            self._files.pop(key, None)
            self._open.pop(key, None)
        if key == self._pyproject_path:
            self._set_pyproject(PyProjectForge(root=self.root))

    # -- internals -------------------------------------------------------------------------------

    def _index_text(self, key: str, text: str, version: int | None, pp: PyProjectForge) -> FileIndex:
        if len(text) > self.max_file_bytes or (
            len(text) * 4 > self.max_file_bytes and len(text.encode("utf-8", "surrogatepass")) > self.max_file_bytes
        ):
            return _empty(key, text, version, skipped=f"larger than the index limit of {self.max_file_bytes} bytes")
        return index_file(key, text, pyproject=pp, version=version)

    def _index_disk(self, path: str, pp: PyProjectForge) -> FileIndex:
        text, skipped, notes = read_source(path, self.max_file_bytes)
        if text is None:
            return FileIndex(path=path, skipped=skipped)
        idx = index_file(path, text, pyproject=pp)
        if notes:
            idx.notes = notes + idx.notes
        return idx

    def _store(self, key: str, make, *, expect_text: str | None = None) -> FileIndex:
        """Run ``make(pyproject)`` outside the lock, then store its result.

        Retried when the pyproject changed meanwhile. With ``expect_text`` (editor text), the result is
        stored only while that text is still the editor's latest for ``key``.
        """
        idx: FileIndex | None = None
        for _ in range(5):
            with self._lock:
                pp, generation = self._pyproject, self._generation
            idx = make(pp)
            with self._lock:
                if generation != self._generation:
                    continue
                if expect_text is not None:
                    current = self._open.get(key)
                    if current is None or current[0] is not expect_text:
                        return self._files.get(key, idx)
                self._files[key] = idx
                return idx
        assert idx is not None
        return idx

    def _set_pyproject(self, pp: PyProjectForge) -> None:
        with self._lock:
            old = self._pyproject
            self._pyproject = pp
            self._generation += 1
            if [e.model_dump() for e in old.modules] == [e.model_dump() for e in pp.modules]:
                return
            affected = {_norm(os.path.join(self.root, e.file)) for e in [*old.modules, *pp.modules]}
            affected &= set(self._files) | set(self._open)
            opened = {k: self._open[k] for k in affected if k in self._open}
        for key in sorted(affected):
            if key in opened:
                text, version = opened[key]
                self._store(key, lambda p, k=key, t=text, v=version: self._index_text(k, t, v, p), expect_text=text)
            elif os.path.isfile(key):
                self._store(key, lambda p, k=key: self._index_disk(k, p))

    def _walk(self) -> Iterator[str]:
        suffixes = PYTHON_SUFFIXES + CUDA_SUFFIXES
        stack = [self.root]
        while stack:
            folder = stack.pop()
            try:
                with os.scandir(folder) as it:
                    entries = list(it)
            except OSError:
                continue
            if folder != self.root and any(e.name == "pyvenv.cfg" for e in entries):
                continue  # a virtualenv, whatever its name
            subdirs = []
            for e in entries:
                name = e.name
                try:
                    if e.is_dir(follow_symlinks=False):
                        if name not in SKIP_DIRS and not name.startswith("."):
                            subdirs.append(e.path)
                    elif name.lower().endswith(suffixes) and e.is_file():
                        yield _norm(e.path)
                except OSError:
                    continue
            stack.extend(sorted(subdirs, reverse=True))
