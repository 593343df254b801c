"""Edits of source text at the positions ``ast`` reports (UTF-8 byte columns): applying them,
finding a def/class name, renaming module-level names scope-aware, and renaming a class."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from .result import RewriteError
from .scopes import GlobalRefs, alias_binding
from .source import end_column, end_line, stmt_span


@dataclass
class Edit:
    line: int  # 0-based
    start: int  # byte offsets in the line's UTF-8 encoding, as ast reports them
    end: int
    text: str


def apply_edits(lines: list[str], edits: list[Edit]) -> list[str]:
    """`lines` with the edits made (right to left on each line); overlapping edits are an internal error."""
    by_line: dict[int, list[Edit]] = {}
    for e in edits:
        by_line.setdefault(e.line, []).append(e)
    out = []
    for i, line in enumerate(lines):
        es = sorted(by_line.get(i, []), key=lambda e: e.start, reverse=True)
        if es:
            b = line.encode("utf-8")
            last = len(b) + 1
            for e in es:
                if e.end > last:
                    raise RewriteError(f"internal error: overlapping renames on line {i + 1}")
                b = b[: e.start] + e.text.encode("utf-8") + b[e.end :]
                last = e.start
            line = b.decode("utf-8")
        out.append(line)
    return out


def name_token(lines: list[str], lineno: int, col: int, keyword: str, name: str) -> Edit:
    """The edit position of `name` after `keyword` (def/class/global...) from (lineno, col)."""
    b = lines[lineno - 1].encode("utf-8")
    m = re.compile(rb"(?:async\s+)?" + keyword.encode() + rb"\s+(" + re.escape(name.encode()) + rb")\b").search(b, col)
    if not m:
        raise RewriteError(f"internal error: cannot find {keyword} {name} on line {lineno}")
    return Edit(lineno - 1, m.start(1), m.end(1), "")


def rename_edits(tree: ast.Module, lines: list[str], renames: dict[str, str]) -> list[Edit]:
    """The edits that rename every module-level use and binding of the names in `renames`."""
    refs = GlobalRefs(set(renames)).run(tree)
    if refs.unsupported:
        name, line = refs.unsupported[0]
        raise RewriteError(
            f"the candidate binds {name!r} (line {line}) in a way forge cannot rename, and the name "
            "is taken in your file; rename it in the candidate"
        )
    edits = [Edit(n.lineno - 1, n.col_offset, end_column(n), renames[name]) for n, name in refs.names_at]
    for d in refs.defs:
        e = name_token(lines, d.lineno, d.col_offset, "class" if isinstance(d, ast.ClassDef) else "def", d.name)
        e.text = renames[d.name]
        edits.append(e)
    edits += [_alias_edit(a, renames) for a in refs.aliases]
    for g in refs.global_stmts:
        edits += _global_stmt_edits(g, lines, renames)
    return edits


def _alias_edit(a: ast.alias, renames: dict[str, str]) -> Edit:
    bound = alias_binding(a)
    if a.lineno is None or a.lineno != a.end_lineno:
        raise RewriteError(f"cannot rename the import of {bound!r} in the candidate (line {a.lineno})")
    if not a.asname and "." in a.name:
        raise RewriteError(
            f"the candidate's `import {a.name}` binds {bound!r}, which is taken in your file; "
            f"write `import {a.name} as ...` in the candidate"
        )
    return Edit(a.lineno - 1, a.col_offset, end_column(a), f"{a.name} as {renames[bound]}")


def _global_stmt_edits(g: ast.Global, lines: list[str], renames: dict[str, str]) -> list[Edit]:
    edits = []
    for ln in range(g.lineno, end_line(g) + 1):
        b = lines[ln - 1].encode("utf-8")
        lo = g.col_offset if ln == g.lineno else 0
        hi = end_column(g) if ln == end_line(g) else len(b)
        for name in set(g.names) & set(renames):
            for m in re.finditer(rb"\b" + re.escape(name.encode()) + rb"\b", b[lo:hi]):
                edits.append(Edit(ln - 1, lo + m.start(), lo + m.end(), renames[name]))
    return edits


def renamed_class(lines: list[str], cls: ast.ClassDef, new_name: str) -> str:
    """The text of the top-level class `cls` (decorators included) named `new_name`, its explicit
    ``super(Name, ...)`` calls with it."""
    start, stop = stmt_span(cls)
    head = name_token(lines, cls.lineno, cls.col_offset, "class", cls.name)
    edits = [Edit(head.line - start, head.start, head.end, new_name)]
    for n in ast.walk(cls):
        if (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Name)
            and n.func.id == "super"
            and n.args
            and isinstance(n.args[0], ast.Name)
            and n.args[0].id == cls.name
        ):
            a = n.args[0]
            edits.append(Edit(a.lineno - 1 - start, a.col_offset, end_column(a), new_name))
    return "".join(apply_edits(lines[start:stop], edits))
