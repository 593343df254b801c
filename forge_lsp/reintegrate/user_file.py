"""The user's file around the class being rewritten: what its other top-level statements bind
(and how: imports are described), before or after the class, and which of them lie in other
forge blocks, which a new block does not rely on (each block stays self-contained, so that it can
be reverted or deleted on its own)."""

from __future__ import annotations

import ast

from .scopes import equivalent_import, import_descriptors, module_bindings
from .source import stmt_span

#: how a name is bound at top level: (import descriptor, or None when not an import; bound before the class?)
Binding = tuple[tuple | None, bool]


class UserFile:
    """The top-level statements of the user's file other than the class `cls`."""

    def __init__(self, tree: ast.Module, cls: ast.ClassDef, forge_lines: set[int]):
        cls_start, cls_end = stmt_span(cls)
        self.bound: set[str] = set()
        self.binds: dict[str, list[Binding]] = {}  # outside other forge blocks
        self.forge_binds: dict[str, list[tuple | None]] = {}  # inside other forge blocks: import descriptors
        for s in tree.body:
            if s is not cls:
                self._add_bindings(s, cls_start, stmt_span(s)[0] in forge_lines)
        own = [s for s in tree.body if s is not cls and stmt_span(s)[0] not in forge_lines]
        self.dumps_before = {ast.dump(s) for s in own if stmt_span(s)[1] <= cls_start}
        self.dumps_after = {ast.dump(s) for s in own if stmt_span(s)[0] >= cls_end}
        self.dumps_in_forge = {ast.dump(s) for s in tree.body if stmt_span(s)[0] in forge_lines}

    def _add_bindings(self, s: ast.stmt, cls_start: int, in_forge_block: bool) -> None:
        desc = import_descriptors(s) or {}
        for n in module_bindings(s):
            self.bound.add(n)
            if in_forge_block:
                self.forge_binds.setdefault(n, []).append(desc.get(n))
            else:
                self.binds.setdefault(n, []).append((desc.get(n), stmt_span(s)[1] <= cls_start))

    def same_import_before(self, name: str, desc: tuple) -> bool:
        """Whether the file binds `name` only to that same import, at least once before the class."""
        seen = self.binds.get(name, [])
        return (
            bool(seen)
            and all(d is not None and equivalent_import(desc, d) for d, _ in seen)
            and any(b for _, b in seen)
        )
