"""The user's file as lines and statements: splitting and parsing, statement spans, the class to
rewrite, and the comment lines that mark forge's blocks."""

from __future__ import annotations

import ast
import re

from ..parsing import parse
from .result import RewriteError

BEGIN = "# --- forge: begin optimized {name}"
END = "# --- forge: end optimized {name} ---"

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


def source_lines(text: str) -> list[str]:
    """Lines with their endings, split the way ``ast`` and editors count them (\\n, \\r\\n, \\r)."""
    return _LINE.findall(text)


def newline_of(text: str) -> str:
    m = re.search(r"\r\n|\r|\n", text)
    return m.group(0) if m else "\n"


def parse_source(text: str, what: str) -> ast.Module:
    try:
        return parse(text)
    except SyntaxError as exc:
        raise RewriteError(f"{what} does not parse: line {exc.lineno}: {exc.msg}") from exc


def stmt_span(node: ast.stmt) -> tuple[int, int]:
    """0-based [start, end) line range of a top-level statement, decorators included."""
    start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    return start - 1, end_line(node)


def end_line(node: ast.stmt | ast.expr | ast.alias) -> int:
    """The 1-based last line of `node` (set on every node `ast.parse` gives)."""
    assert node.end_lineno is not None
    return node.end_lineno


def end_column(node: ast.stmt | ast.expr | ast.alias) -> int:
    """Where `node` ends on its last line, as a UTF-8 byte offset (set on every node `ast.parse` gives)."""
    assert node.end_col_offset is not None
    return node.end_col_offset


def stmt_text(lines: list[str], node: ast.stmt) -> str:
    a, b = stmt_span(node)
    return "".join(lines[a:b])


def find_class(tree: ast.Module, class_name: str) -> ast.ClassDef:
    """The one top-level class called `class_name`."""
    found = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name]
    if not found:
        names = sorted({n.name for n in tree.body if isinstance(n, ast.ClassDef)})
        raise RewriteError(
            f"no top-level class {class_name!r} in the file"
            + (f" (classes found: {', '.join(names)})" if names else "")
        )
    if len(found) > 1:
        where = ", ".join(str(n.lineno) for n in found)
        raise RewriteError(
            f"class {class_name!r} is defined {len(found)} times at top level (lines {where}); "
            "keep one definition to rewrite it"
        )
    return found[0]


def forge_block_lines(lines: list[str]) -> set[int]:
    """0-based indices of the lines inside forge blocks (begin and end lines included)."""
    inside: set[int] = set()
    open_name, start = None, 0
    for i, line in enumerate(lines):
        if open_name is None:
            m = re.match(r"# --- forge: begin optimized (\w+)[ (]", line)
            if m:
                open_name, start = m.group(1), i
        elif line.rstrip("\r\n") == END.format(name=open_name):
            inside.update(range(start, i + 1))
            open_name = None
    return inside


def is_rewritten(text: str, cls: ast.ClassDef) -> bool:
    """Whether `cls` is already forge's rewrite (its block, or the generated class's own members)."""
    if re.search(rf"^{re.escape(BEGIN.format(name=cls.name))}\b", text, re.MULTILINE):
        return True
    body_names = {n.name for n in cls.body if isinstance(n, ast.FunctionDef)}
    assigned = {t.id for n in cls.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    return "_forge_impl" in body_names or "_forge_calls" in assigned
