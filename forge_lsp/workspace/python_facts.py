"""What a Python file says, read with ``ast`` (regexes where it does not parse): its top-level
classes with their bases and constructor/``forward`` parameters, its import aliases and its
KernelBench functions. The file is parsed in chunks of top-level statements cached by their text,
so that an edit re-parses only the chunk it touches (see `_python_facts`)."""

from __future__ import annotations

import ast
import bisect
import functools
import re
import warnings
from collections.abc import Iterator
from typing import NamedTuple

from ..parsing import parse as _parse

KERNELBENCH_FUNCTIONS = ("get_inputs", "get_init_inputs")

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


#: Parses are labelled with this file name so that their SyntaxWarnings/DeprecationWarnings (``1if x``,
#: ``"\\d"``) are silenced without touching anyone else's warnings.
_PARSE_FILENAME = "<forge-workspace-index>"
for _category in (SyntaxWarning, DeprecationWarning):
    warnings.filterwarnings("ignore", category=_category, module=re.escape(_PARSE_FILENAME))


def parse(text: str) -> ast.Module:
    """``ast.parse`` without warnings on stderr (the user's code is not ours to lint)."""
    return _parse(text, filename=_PARSE_FILENAME)


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
    init, init_arity, forward, forward_arity, has_forward = _init_and_forward(node)
    return _Class(
        node.name,
        line,
        column,
        name_column,
        start_line,
        (node.end_lineno or node.lineno) - 1,
        [_base_text(b) for b in node.bases],
        init,
        forward,
        has_forward,
        init_arity,
        forward_arity,
    )


def _base_text(base: ast.expr) -> str:
    try:
        return ast.unparse(base)
    except Exception:  # noqa: BLE001
        return "?"


def _init_and_forward(
    node: ast.ClassDef,
) -> tuple[list[str] | None, tuple[int, float, bool] | None, list[str] | None, tuple[int, float, bool] | None, bool]:
    """(__init__ parameters, its arity, forward parameters, its arity, defines forward?) of a class body."""
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
    return init, init_arity, forward, forward_arity, has_forward


def _split_top_level_commas(s: str) -> list[str]:
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
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
            cls, i = _class_from_header(lines, m, i, start, end)
            classes.append(cls)
            continue
        fm = re.match(r"(?:async\s+)?def\s+(get_inputs|get_init_inputs)\b", text)
        if fm:
            functions.add(fm.group(1))
        elif re.match(r"(?:import|from)\s", text):
            imports.append(text)
        i += 1
    return classes, functions, imports


def _class_from_header(lines: list[str], header: re.Match, i: int, start: int, end: int) -> tuple[_Class, int]:
    """The class whose header is line `i` of the broken chunk [start, end), and the line after its body."""
    j = i + 1
    while j < end and (not lines[j].strip() or lines[j][:1] in (" ", "\t", "#")):
        j += 1
    last = j - 1
    while last > i and not lines[last].strip():
        last -= 1
    body = "\n".join(lines[i + 1 : last + 1])
    bases = [b for b in _split_top_level_commas(header.group(2) or "") if "=" not in b and not b.startswith("*")]
    init_m = re.search(r"^[ \t]+(?:async[ \t]+)?def[ \t]+__init__[ \t]*\(([^)]*)\)", body, re.M)
    fwd_m = re.search(r"^[ \t]+(?:async[ \t]+)?def[ \t]+forward[ \t]*\(([^)]*)\)", body, re.M)
    start_line = i
    while start_line > start and lines[start_line - 1].startswith("@"):
        start_line -= 1
    cls = _Class(
        header.group(1),
        i,
        0,
        header.start(1),
        start_line,
        last,
        bases,
        _regex_params(init_m.group(1)) if init_m else None,
        _regex_params(fwd_m.group(1)) if fwd_m else None,
        fwd_m is not None,
        None,
        None,
    )
    return cls, j


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
    regions = _Regions(lines)
    regions.parse_region(0, len(lines))
    regions.stmts.sort(key=lambda n: n.lineno)
    return regions.stmts, first, sorted(regions.broken)


class _Regions:
    """A file that does not parse, parsed by regions: a region that fails is cut into the chunks
    before, around and after its error (at lines where a statement may start), within a budget."""

    def __init__(self, lines: list[str]):
        self.lines = lines
        self.starts = [i for i, s in enumerate(lines) if _CHUNK_START.match(s)]
        self.stmts: list[ast.stmt] = []
        self.broken: list[tuple[int, int]] = []
        self.budget = _MAX_PARSES

    def parse_region(self, start: int, end: int) -> None:
        if start >= end:
            return
        if self.budget <= 0:
            self.broken.append((start, end))
            return
        self.budget -= 1
        try:
            self.stmts.extend(parse("\n" * start + "\n".join(self.lines[start:end])).body)
            return
        except SyntaxError as exc:
            err = (exc.lineno or start + 1) - 1
        except (ValueError, RecursionError, MemoryError):
            err = start
        s, e = self._around(min(max(err, start), end - 1), start, end)
        if (s, e) == (start, end):
            self.broken.append((start, end))
            return
        self.parse_region(start, s)
        self.parse_region(s, e)
        self.parse_region(e, end)

    def _around(self, err: int, start: int, end: int) -> tuple[int, int]:
        """The chunk of [start, end) that holds line `err`: from the statement start at or before it
        to the next one."""
        k = bisect.bisect_right(self.starts, err) - 1
        s = self.starts[k] if k >= 0 and self.starts[k] >= start else start
        k2 = bisect.bisect_right(self.starts, err)
        e = self.starts[k2] if k2 < len(self.starts) and self.starts[k2] < end else end
        return s, e


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
    parts, failing = _parse_chunks(lines, shift0)
    error = None
    if failing:
        parts, failing, error = _parse_from_first_failing(lines, shift0, parts, failing)
    classes, aliases, functions = _merge_facts(lines, parts, failing)
    return classes, aliases, functions, error, bool(failing)


def _parse_chunks(lines: list[str], shift0: int) -> tuple[list[tuple[int, _Facts]], list[tuple[int, int]]]:
    """(first line, facts) of the chunks that parse (on their own or merged with the next few), and
    the [start, end) line ranges of those that do not."""
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
    return parts, failing


def _parse_from_first_failing(
    lines: list[str], shift0: int, parts: list[tuple[int, _Facts]], failing: list[tuple[int, int]]
) -> tuple[list[tuple[int, _Facts]], list[tuple[int, int]], tuple[int, str] | None]:
    """(parts, failing chunks, first syntax error) once the file from the first failing chunk on is parsed.

    Every chunk before the first failing one parsed on its own, so it ended cleanly (no open bracket,
    string, decorator or continuation): the rest of the file parses as if the whole file did, and a
    parse stops at its first error, which is near this chunk (cheap even in a large file).
    """
    first = failing[0][0]
    bom = first == 0 and shift0 > 0
    rest = "\n".join(lines[first:])
    try:
        tail = _facts_from_stmts(parse(rest[1:] if bom else rest).body, lines[first:], 1 if bom else 0)
    except SyntaxError as exc:
        return parts, failing, (min(len(lines) - 1, first + max(0, (exc.lineno or 1) - 1)), exc.msg or "invalid syntax")
    except (ValueError, RecursionError, MemoryError) as exc:
        return parts, failing, (first, str(exc) or type(exc).__name__)
    return [(start, f) for start, f in parts if start < first] + [(first, tail)], [], None


def _merge_facts(
    lines: list[str], parts: list[tuple[int, _Facts]], failing: list[tuple[int, int]]
) -> tuple[list[_Class], dict[str, str], dict[str, int | None]]:
    """The file's classes (in order), import aliases and kernelbench functions, from the chunks that
    parsed and, by regexes, those that did not."""
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
    return classes, aliases, functions
