"""`parse`: `ast.parse` that is safe to call from several threads at once — the one way forge parses Python.

CPython 3.11 keeps the depth counter of its AST object constructor in interpreter-wide state. When a garbage
collection inside one thread's `ast.parse` runs a finalizer that lets another thread parse, the counter is left off
and `ast.parse` raises ``SystemError: AST constructor recursion depth mismatch`` (python/cpython#106905). The
language server parses on its request thread and on each job's thread, so two runs started together could fail
that way. Every parse here takes one process-wide lock; a parse takes milliseconds.
"""

from __future__ import annotations

import ast
import threading
from typing import Literal, overload

_LOCK = threading.RLock()  # re-entrant: a finalizer run inside a parse may parse too


@overload
def parse(source: str | bytes, filename: str = ..., mode: Literal["exec"] = ...) -> ast.Module: ...
@overload
def parse(source: str | bytes, filename: str = ..., *, mode: Literal["eval"]) -> ast.Expression: ...


def parse(source: str | bytes, filename: str = "<unknown>", mode: str = "exec") -> ast.AST:
    """`ast.parse(source, filename, mode)`, one at a time in this process."""
    with _LOCK:
        return ast.parse(source, filename=filename, mode=mode)
