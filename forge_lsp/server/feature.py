"""What a feature of the language server is (`Feature`), and `Unit`, the one each feature module builds from its own
functions and exposes as ``FEATURE``. The composition root (`app.py`) registers every feature, asks each for its code
lenses and code actions, and opens and closes each with the workspace and the session: no central handler knows any
feature.

A feature registers its own handlers and commands (`register`), and answers, for a document, the lenses it puts on
it (`code_lenses`) and, for a range, its code actions (`code_actions`); `workspace_opened` runs on a thread once the
workspace is indexed, `close` when the session ends. The editor sees each line's lenses, and a range's actions, in the
order of `app.FEATURES`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from lsprotocol import types as t

from .server import ForgeServer

if TYPE_CHECKING:
    from ..workspace.results import FileIndex, ModuleInfo


@runtime_checkable
class Feature(Protocol):
    @property
    def name(self) -> str: ...

    def register(self, ls: ForgeServer) -> None: ...

    def code_lenses(self, ls: ForgeServer, uri: str) -> list[t.CodeLens]: ...

    def code_actions(self, ls: ForgeServer, params: t.CodeActionParams) -> list[t.CodeAction]: ...

    def workspace_opened(self, ls: ForgeServer) -> None: ...

    def close(self, ls: ForgeServer) -> None: ...


def _no_lenses(ls: ForgeServer, uri: str) -> list[t.CodeLens]:
    return []


def _no_actions(ls: ForgeServer, params: t.CodeActionParams) -> list[t.CodeAction]:
    return []


def _nothing(ls: ForgeServer) -> None:
    return None


@dataclass(frozen=True)
class Unit:
    """A `Feature` made of a feature module's functions; what it leaves out it does not do (no lenses, no actions,
    nothing to open or to close)."""

    name: str
    register: Callable[[ForgeServer], None]
    code_lenses: Callable[[ForgeServer, str], list[t.CodeLens]] = _no_lenses
    code_actions: Callable[[ForgeServer, t.CodeActionParams], list[t.CodeAction]] = _no_actions
    workspace_opened: Callable[[ForgeServer], None] = _nothing
    close: Callable[[ForgeServer], None] = _nothing


# ------------------------------------------------------------------------------ what the features share
def lens(line: int, title: str, command: str, args: list[Any]) -> t.CodeLens:
    """A lens at the start of a line (a `command` of "" is a label)."""
    at = t.Position(line=line, character=0)
    return t.CodeLens(range=t.Range(start=at, end=at), command=t.Command(title=title, command=command, arguments=args))


def command_action(title: str, command: str, args: list[Any]) -> t.CodeAction:
    """A code action that runs a `forge.*` command."""
    return t.CodeAction(
        title=title, kind=t.CodeActionKind.Refactor, command=t.Command(title=title, command=command, arguments=args)
    )


def file_entry(ls: ForgeServer, uri: str) -> FileIndex | None:
    """The index's entry of a document (its modules and kernels), or None."""
    if ls.index is None:
        return None
    path = ls.path_of(uri)
    return ls.index.get(path) if path else None


def module_at(entry: FileIndex, line: int) -> ModuleInfo | None:
    """The module of an index entry whose class spans `line`, or None."""
    return next((m for m in entry.modules if m.line <= line <= m.end_line), None)
