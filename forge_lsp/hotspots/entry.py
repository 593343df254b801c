"""Where a whole model is reached: an *entry* that builds it and runs it. Pure parsing, no imports of user code.

Three forms, all strings (the command line's ENTRY, or ``[tool.forge] entry = ...``):

* ``path/to/train.py`` — a script: forge runs it as ``__main__`` and observes every forward of every module
  it runs (the user's code is not edited to be profiled); arguments may follow, as on a command line
  (``train.py --steps 3``);
* ``path/to/file.py:build`` or ``package.module:build`` — a function that returns ``(model, args)`` or
  ``(model, args, kwargs)``: forge calls the model itself, a few times to warm up, then under the profiler;
* the same with literal keyword arguments: ``examples/models/gpt2.py:build(size="full", dtype="bfloat16")``.

A function with a ``device`` parameter is given forge's device; otherwise forge moves the model and the
tensors among the arguments there itself.
"""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from ..parsing import parse

_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


class EntryError(ValueError):
    """The entry cannot be used; the message says what to change."""


class Entry(BaseModel):
    """A parsed entry. Exactly one of `path` and `module` is set; `function` is None for a script."""

    text: str
    kind: Literal["script", "function"]
    path: Path | None = None
    module: str | None = None
    function: str | None = None
    arguments: dict[str, Any] = {}  # the function's keyword arguments
    argv: list[str] = []  # a script's arguments

    @property
    def label(self) -> str:
        return self.text


def parse_entry(text: str, root: Path) -> Entry:
    """Parse an entry string; relative paths are taken from `root` (the workspace, or the current folder).

    Raises `EntryError` for a file that does not exist, a function name that is not an identifier, or
    keyword arguments that are not Python literals.
    """
    spec = text.strip()
    if not spec:
        raise EntryError("an entry is empty: give a script (train.py) or a function (models.py:build)")
    first, _, rest = spec.partition(" ")
    if rest and first.endswith(".py") and ":" not in first:  # a script and its arguments
        try:
            argv = shlex.split(rest)
        except ValueError as exc:
            raise EntryError(f"entry {text!r}: cannot read the script's arguments: {exc}") from None
        return Entry(text=spec, kind="script", path=_resolve_file(first, root, text), argv=argv)
    target, call = spec, None
    if spec.endswith(")") and "(" in spec:
        open_at = spec.index("(")
        target, call = spec[:open_at], spec[open_at:]
    where, sep, function = target.rpartition(":")
    if not sep or (len(where) == 1 and where.isalpha()) or "/" in function or function.endswith(".py"):
        where, function = target, ""  # no ':', or a Windows drive letter: a script
    if not function:
        if call is not None:
            raise EntryError(f"entry {text!r}: arguments need a function (file.py:function(...))")
        path = _resolve_file(where, root, text)
        return Entry(text=spec, kind="script", path=path)
    if not function.isidentifier():
        raise EntryError(f"entry {text!r}: {function!r} is not a function name")
    kwargs = _literal_kwargs(call, text) if call is not None else {}
    if where.endswith(".py") or "/" in where or (root / where).is_file():
        path = _resolve_file(where, root, text)
        _check_signature(path, function, kwargs, text)
        return Entry(text=spec, kind="function", path=path, function=function, arguments=kwargs)
    if not _DOTTED.fullmatch(where):
        raise EntryError(f"entry {text!r}: {where!r} is neither a .py file nor a dotted module name")
    return Entry(text=spec, kind="function", module=where, function=function, arguments=kwargs)


def _resolve_file(where: str, root: Path, text: str) -> Path:
    path = Path(where).expanduser()
    path = path if path.is_absolute() else root / path
    if not path.is_file():
        raise EntryError(f"entry {text!r}: {path} does not exist")
    if path.suffix != ".py":
        raise EntryError(f"entry {text!r}: {path.name} is not a Python file")
    return path.resolve()


def _check_signature(path: Path, function: str, kwargs: dict[str, Any], text: str) -> None:
    """The keyword arguments against the function's own parameters, read from the file's AST before anything runs:
    a name it does not take is the user's typo, said at once. A function the file does not define at module level
    (made by a decorator, imported) is left to the run."""
    try:
        tree = parse(path.read_text(encoding="utf-8", errors="replace"))
    except (SyntaxError, ValueError, OSError):
        return  # the run says what is wrong with the file, in its own words
    node = next(
        (n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == function), None
    )
    if node is None:
        if not any(_binds(n, function) for n in tree.body):
            raise EntryError(f"entry {text!r}: {path.name} defines no function {function!r} at module level")
        return
    a = node.args
    if a.kwarg is not None:
        return
    takes = [x.arg for x in (*a.args, *a.kwonlyargs)]
    unknown = [k for k in kwargs if k not in takes or k in {x.arg for x in a.posonlyargs}]
    if unknown:
        params = ", ".join(takes) if takes else "none"
        raise EntryError(f"entry {text!r}: {function}() takes no argument {unknown[0]!r} (its parameters: {params})")


def _binds(node: ast.stmt, name: str) -> bool:
    """Whether a module-level statement may bind `name` (an import, an assignment, a class, a conditional def)."""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return any((a.asname or a.name.split(".")[0]) == name or a.name == "*" for a in node.names)
    if isinstance(node, (ast.If, ast.Try, ast.With)):
        return True
    return any(isinstance(t, ast.Name) and t.id == name for t in ast.walk(node) if isinstance(t, ast.Name))


def _literal_kwargs(call: str, text: str) -> dict[str, Any]:
    try:
        node = parse(f"f{call}", mode="eval").body
    except SyntaxError:
        raise EntryError(f"entry {text!r}: cannot read the arguments {call}") from None
    if not isinstance(node, ast.Call) or node.args:
        raise EntryError(f"entry {text!r}: give keyword arguments only, e.g. build(size='full')")
    out: dict[str, Any] = {}
    for kw in node.keywords:
        if kw.arg is None:
            raise EntryError(f"entry {text!r}: **kwargs cannot be given here")
        try:
            out[kw.arg] = ast.literal_eval(kw.value)
        except ValueError:
            raise EntryError(
                f"entry {text!r}: the value of {kw.arg} is not a Python literal (a number, string, "
                "bool, None, or a list/tuple/dict of those)"
            ) from None
    return out


def defined_entry_functions(source: str) -> list[tuple[str, int]]:
    """Module-level functions of a file named like entries (``build``, ``build_*``, ``make_model``,
    ``get_model``), by its AST, each as (name, 0-based line): where the editor offers "Find hot spots"."""
    try:
        tree = parse(source)
    except SyntaxError:
        return []
    out = []
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        name = node.name
        if name in ("build", "make_model", "get_model") or name.startswith("build_"):
            out.append((name, node.lineno - 1))
    return out
