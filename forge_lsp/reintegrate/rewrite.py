"""Turn an accepted candidate into an edit of the user's source file.

Used by the language server's Accept and by ``forge optimize --apply``. Pure text in, text out:
nothing here imports torch or executes user or candidate code; both are read with ``ast``.

What a rewrite of ``class Model`` produces, in place of the class (one contiguous line range)::

    class _ModelReference(nn.Module):      # the original class, unchanged but for its name
        ...                                 # (and super(Model, self) -> super(_ModelReference, self))

    # --- forge: begin optimized Model (run r1, candidate c3, 1.42x) ---
    <the candidate's code: its imports, kernels, module-level calls; ModelNew renamed _ModelForge>
    class Model(_ModelReference):           # same name, constructor and state_dict keys
        def __init__(self, <the original's parameters>): ...   # records the arguments
        def forward(self, *args, **kwargs): ...                 # the guard
    # --- forge: end optimized Model ---

The guard runs ``_ModelForge`` only for calls like the verified ones: positional arguments whose
tensors have a verified device type, dtype and rank (in order), are contiguous (if so verified)
and non-empty, and no autograd (the engine verifies under ``torch.no_grad()``; the kernels may
have no backward). Anything else, or ``FORGE_DISABLE=1`` in the environment, runs the original
forward. When the module holds dropout, batch norm or similar layers (or the original class
mentions them or ``training``), the module mode must also be the verified one.

Weights: the ``_ModelForge`` instance is built lazily from the recorded constructor arguments
and kept in a plain instance attribute (``__dict__``, not registered: ``state_dict``,
``modules()``, ``.to()`` and hooks never see it). Each state_dict entry of the module (every
parameter and persistent buffer) is then put into it in place of its own, as the *same tensor
object*, so in-place changes (``load_state_dict``, optimizer steps, ``.data`` swaps of ``.to()``
on parameters) are seen by both. Every call checks, by identity, that no parameter, buffer or
submodule of the module was replaced (``.to()`` replaces buffers, ``load_state_dict(assign=True)``
parameters) nor changed dtype, and shares again when one was. Sharing by name is sound because
the engine accepts a candidate only when ``ModelNew.load_state_dict(reference.state_dict(),
strict=True)`` works, i.e. the candidate holds the same names. Calling ``ModelNew.forward``
with the user's module as ``self`` would not be: candidates keep their own attributes (built in
their ``__init__``) and call ``super()``.
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import io
import re
import tokenize
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, field_validator

BEGIN = "# --- forge: begin optimized {name}"
END = "# --- forge: end optimized {name} ---"

#: dtype names accepted in a VerifiedDomain (torch attribute names).
DTYPES = frozenset(
    {
        "float32",
        "float64",
        "float16",
        "bfloat16",
        "complex32",
        "complex64",
        "complex128",
        "float8_e4m3fn",
        "float8_e5m2",
        "float8_e4m3fnuz",
        "float8_e5m2fnuz",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "bool",
    }
)
_DTYPE_ALIASES = {"float": "float32", "double": "float64", "half": "float16", "long": "int64", "int": "int32"}

#: candidate top-level functions and constants that belong to the task, not to the kernels.
TASK_PLUMBING = frozenset({"get_inputs", "get_init_inputs", "FORGE"})

#: names in the original class that make its result depend on train()/eval().
_MODE_WORDS = re.compile(
    r"training|dropout\w*|\w*Dropout\w*|batch_norm|\w*BatchNorm\w*|instance_norm|\w*InstanceNorm\w*|"
    r"RNN\w*|LSTM\w*|GRU\w*|MultiheadAttention|Transformer\w*"
)


def _mode_sensitive(cls: ast.ClassDef) -> bool:
    """Whether the class's code names dropout, batch norm, RNNs... or reads `training`."""
    idents = {n.id for n in ast.walk(cls) if isinstance(n, ast.Name)}
    idents |= {n.attr for n in ast.walk(cls) if isinstance(n, ast.Attribute)}
    return any(_MODE_WORDS.fullmatch(i) for i in idents)


class RewriteError(ValueError):
    """The rewrite cannot be made; the message says why and what to do."""


class VerifiedDomain(BaseModel):
    """The inputs a candidate was verified on, as the guard checks them ("shape class": rank)."""

    device_types: list[str]
    dtypes: list[str]
    ranks: list[int]
    contiguous: bool = True
    training: bool | None = True
    """Module mode during verification (the engine verifies modules as constructed: training).
    Checked only for modules whose output depends on it; None: never checked."""

    @field_validator("device_types")
    @classmethod
    def _devices(cls, v: list[str]) -> list[str]:
        out = []
        for d in v:
            t = d.split(":", 1)[0].strip()
            if not re.fullmatch(r"[a-z_]+", t):
                raise ValueError(f"not a device type: {d!r}")
            if t not in out:
                out.append(t)
        if not out:
            raise ValueError("device_types must name at least one device type")
        return out

    @field_validator("dtypes")
    @classmethod
    def _dtypes(cls, v: list[str]) -> list[str]:
        out = []
        for d in v:
            name = d.removeprefix("torch.")
            name = _DTYPE_ALIASES.get(name, name)
            if name not in DTYPES:
                raise ValueError(f"unknown dtype {d!r} (expected torch dtype names such as float32)")
            if name not in out:
                out.append(name)
        if not out:
            raise ValueError("dtypes must name at least one dtype")
        return out

    @field_validator("ranks")
    @classmethod
    def _ranks(cls, v: list[int]) -> list[int]:
        if any(r < 0 for r in v):
            raise ValueError("ranks are tensor dimensions counts (>= 0)")
        return v

    @classmethod
    def for_device(
        cls,
        device_type: str,
        dtypes: list[str] | str,
        ranks: list[int],
        *,
        contiguous: bool = True,
        training: bool | None = True,
    ) -> VerifiedDomain:
        """E.g. ``VerifiedDomain.for_device("cuda:0", "float32", [2])``."""
        dts = [dtypes] if isinstance(dtypes, str) else list(dtypes)
        return cls(device_types=[device_type], dtypes=dts, ranks=list(ranks), contiguous=contiguous, training=training)

    def describe(self) -> str:
        ranks = ", ".join(map(str, self.ranks))
        parts = ["/".join(self.device_types), "/".join(self.dtypes), f"ranks [{ranks}]"]
        if self.contiguous:
            parts.append("contiguous")
        parts.append("no autograd")
        return ", ".join(parts)


class Rewrite(BaseModel):
    """The edit: ``replacement`` replaces lines [start_line, end_line) of the old text."""

    new_text: str
    start_line: int
    end_line: int
    replacement: str
    summary: str
    class_name: str = ""
    reference_class: str = ""
    optimized_class: str = ""
    renamed: dict[str, str] = {}
    dropped: list[str] = []


# ----------------------------------------------------------------------------- text helpers
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


def _lines(text: str) -> list[str]:
    """Lines with their endings, split the way ``ast`` and editors count them (\\n, \\r\\n, \\r)."""
    return _LINE.findall(text)


def _newline(text: str) -> str:
    m = re.search(r"\r\n|\r|\n", text)
    return m.group(0) if m else "\n"


def _parse(text: str, what: str) -> ast.Module:
    try:
        return ast.parse(text)
    except SyntaxError as exc:
        raise RewriteError(f"{what} does not parse: line {exc.lineno}: {exc.msg}") from exc


def _span(node: ast.stmt) -> tuple[int, int]:
    """0-based [start, end) line range of a top-level statement, decorators included."""
    start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    return start - 1, node.end_lineno


def _segment(lines: list[str], node: ast.stmt) -> str:
    a, b = _span(node)
    return "".join(lines[a:b])


def _top_classes(tree: ast.Module, name: str) -> list[ast.ClassDef]:
    return [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name]


def _find_class(tree: ast.Module, class_name: str) -> ast.ClassDef:
    found = _top_classes(tree, class_name)
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


def _forge_regions(lines: list[str]) -> set[int]:
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


def _is_rewritten(text: str, cls: ast.ClassDef) -> bool:
    if re.search(rf"^{re.escape(BEGIN.format(name=cls.name))}\b", text, re.MULTILINE):
        return True
    body_names = {n.name for n in cls.body if isinstance(n, ast.FunctionDef)}
    assigned = {t.id for n in cls.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    return "_forge_impl" in body_names or "_forge_calls" in assigned


# ----------------------------------------------------------------------------- scopes and names
_SCOPES = (
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.Lambda,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
)


def _alias_binding(alias: ast.alias) -> str:
    return alias.asname or alias.name.split(".")[0]


def _bindings(nodes: list[ast.AST]) -> tuple[set[str], set[str], set[str]]:
    """(bound, declared global, declared nonlocal) by these statements, nested scopes excluded
    (their own names excepted: a def or class binds its name where it stands)."""
    bound: set[str] = set()
    glob: set[str] = set()
    nonloc: set[str] = set()
    stack = list(nodes)
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(n.name)
            continue
        if isinstance(n, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            continue
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            bound.add(n.id)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            bound.update(_alias_binding(a) for a in n.names if a.name != "*")
        elif isinstance(n, ast.ExceptHandler) and n.name:
            bound.add(n.name)
        elif isinstance(n, ast.Global):
            glob.update(n.names)
        elif isinstance(n, ast.Nonlocal):
            nonloc.update(n.names)
        elif isinstance(n, (ast.MatchAs, ast.MatchStar)) and n.name:
            bound.add(n.name)
        elif isinstance(n, ast.MatchMapping) and n.rest:
            bound.add(n.rest)
        stack.extend(ast.iter_child_nodes(n))
    return bound, glob, nonloc


def _args_names(a: ast.arguments) -> set[str]:
    names = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs}
    names.update(x.arg for x in (a.vararg, a.kwarg) if x is not None)
    return names


@dataclass
class _Scope:
    kind: str  # "function" | "class"
    bound: set[str]
    glob: set[str] = field(default_factory=set)
    nonloc: set[str] = field(default_factory=set)


def _scope_of(node: ast.AST) -> _Scope:
    if isinstance(node, ast.ClassDef):
        b, g, nl = _bindings(node.body)
        return _Scope("class", b, g, nl)
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        b, g, nl = _bindings(node.body)
        return _Scope("function", (b | _args_names(node.args)) - g - nl, g, nl)
    if isinstance(node, ast.Lambda):
        b, _, _ = _bindings([node.body])
        return _Scope("function", b | _args_names(node.args))
    # comprehension: its targets are its own
    b, _, _ = _bindings([g.target for g in node.generators])
    return _Scope("function", b)


def _resolves_global(name: str, chain: list[_Scope]) -> bool:
    """Whether `name`, used in the innermost scope of `chain`, means the module-level name."""
    for i, s in enumerate(chain):
        if name in s.glob:
            return True
        if s.kind == "class":
            if i == 0 and name in s.bound:
                return False
            continue  # a class body does not enclose the functions defined in it
        if name in s.nonloc:
            continue
        if name in s.bound:
            return False
    return True


class _GlobalRefs:
    """Positions of every occurrence of given module-level names, scope-aware.

    Collects Name nodes that resolve to the module-level binding, the names of defs/classes and
    import aliases bound at module level (or declared global), and names in ``global`` statements.
    """

    def __init__(self, names: set[str]):
        self.names = names
        self.names_at: list[tuple[ast.Name, str]] = []  # (node, name)
        self.defs: list[ast.AST] = []  # FunctionDef/ClassDef whose name is rebound
        self.aliases: list[ast.alias] = []
        self.global_stmts: list[ast.AST] = []
        self.unsupported: list[tuple[str, int]] = []

    def run(self, tree: ast.Module) -> _GlobalRefs:
        self._visit_list(tree.body, [])
        return self

    def _visit_list(self, nodes, chain):
        for n in nodes:
            self._visit(n, chain)

    def _binds_global(self, name: str, chain: list[_Scope]) -> bool:
        if name not in self.names:
            return False
        if not chain:
            return True
        return name in chain[0].glob

    def _visit(self, n: ast.AST, chain: list[_Scope]) -> None:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if self._binds_global(n.name, chain):
                self.defs.append(n)
            self._visit_list(n.decorator_list, chain)
            a = n.args
            self._visit_list(a.defaults + [d for d in a.kw_defaults if d is not None], chain)
            for arg in a.posonlyargs + a.args + a.kwonlyargs + [x for x in (a.vararg, a.kwarg) if x]:
                if arg.annotation is not None:
                    self._visit(arg.annotation, chain)
            if n.returns is not None:
                self._visit(n.returns, chain)
            self._visit_list(n.body, [_scope_of(n)] + chain)
            return
        if isinstance(n, ast.ClassDef):
            if self._binds_global(n.name, chain):
                self.defs.append(n)
            self._visit_list(n.decorator_list + n.bases + [k.value for k in n.keywords], chain)
            self._visit_list(n.body, [_scope_of(n)] + chain)
            return
        if isinstance(n, ast.Lambda):
            self._visit_list(n.args.defaults + [d for d in n.args.kw_defaults if d is not None], chain)
            self._visit(n.body, [_scope_of(n)] + chain)
            return
        if isinstance(n, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            inner = [_scope_of(n)] + chain
            self._visit(n.generators[0].iter, chain)
            for i, g in enumerate(n.generators):
                self._visit(g.target, inner)
                if i:
                    self._visit(g.iter, inner)
                self._visit_list(g.ifs, inner)
            elts = [n.key, n.value] if isinstance(n, ast.DictComp) else [n.elt]
            self._visit_list(elts, inner)
            return
        if isinstance(n, ast.Name):
            if n.id in self.names and _resolves_global(n.id, chain):
                self.names_at.append((n, n.id))
            return
        if isinstance(n, (ast.Import, ast.ImportFrom)):
            for a in n.names:
                if a.name != "*" and self._binds_global(_alias_binding(a), chain):
                    self.aliases.append(a)
            return
        if isinstance(n, (ast.Global, ast.Nonlocal)):
            if isinstance(n, ast.Global) and self.names.intersection(n.names):
                self.global_stmts.append(n)
            return
        if isinstance(n, ast.ExceptHandler) and n.name and self._binds_global(n.name, chain):
            self.unsupported.append((n.name, n.lineno))
        if isinstance(n, (ast.MatchAs, ast.MatchStar)) and n.name and self._binds_global(n.name, chain):
            self.unsupported.append((n.name, n.lineno))
        for c in ast.iter_child_nodes(n):
            self._visit(c, chain)


def _module_bindings(stmt: ast.stmt) -> set[str]:
    """Names a top-level statement binds in the module namespace."""
    return _bindings([stmt])[0]


def _import_descriptors(stmt: ast.stmt) -> dict[str, tuple] | None:
    """For an import statement: bound name -> what it is bound to; None for other statements."""
    if isinstance(stmt, ast.Import):
        return {_alias_binding(a): ("module", a.name if a.asname else a.name.split(".")[0]) for a in stmt.names}
    if isinstance(stmt, ast.ImportFrom) and stmt.module != "__future__":
        if any(a.name == "*" for a in stmt.names):
            return None
        return {_alias_binding(a): ("from", stmt.level, stmt.module, a.name) for a in stmt.names}
    return None


def _equivalent_import(desc: tuple, other: tuple) -> bool:
    """`import torch.nn as nn` and `from torch import nn` bind the same module."""

    def key(d):
        if d[0] == "from" and d[1] == 0:
            return ("module", f"{d[2]}.{d[3]}")
        return d

    return key(desc) == key(other)


def _definition_time_loads(stmt: ast.stmt) -> set[str]:
    """Names read while a top-level statement executes (function bodies excluded)."""
    loads: set[str] = set()
    stack: list[ast.AST] = [stmt]
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = n.args
            stack.extend(n.decorator_list + a.defaults + [d for d in a.kw_defaults if d is not None])
            stack.extend(x.annotation for x in a.posonlyargs + a.args + a.kwonlyargs if x.annotation)
            if n.returns is not None:
                stack.append(n.returns)
            continue
        if isinstance(n, ast.Lambda):
            stack.extend(n.args.defaults)
            continue
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            loads.add(n.id)
        stack.extend(ast.iter_child_nodes(n))
    return loads


def _all_loads(tree: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _global_loads(tree: ast.Module) -> set[str]:
    """Names read anywhere in the module that resolve to module-level (or builtin) names."""
    refs = _GlobalRefs({n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}).run(tree)
    return {name for n, name in refs.names_at if isinstance(n.ctx, ast.Load)}


def _is_main_guard(stmt: ast.stmt) -> bool:
    if not isinstance(stmt, ast.If):
        return False
    t = stmt.test
    return (
        isinstance(t, ast.Compare)
        and isinstance(t.left, ast.Name)
        and t.left.id == "__name__"
        and len(t.comparators) == 1
        and isinstance(t.comparators[0], ast.Constant)
        and t.comparators[0].value == "__main__"
    )


def _dump(node: ast.AST) -> str:
    return ast.dump(node)


def _class_dump(cls: ast.ClassDef, as_name: str) -> str:
    copy = ast.ClassDef(
        name=as_name,
        bases=cls.bases,
        keywords=cls.keywords,
        body=cls.body,
        decorator_list=cls.decorator_list,
        type_params=getattr(cls, "type_params", []),
    )
    return ast.dump(copy)


# ----------------------------------------------------------------------------- edits on text
@dataclass
class _Edit:
    line: int  # 0-based
    start: int  # byte offsets in the line's UTF-8 encoding, as ast reports them
    end: int
    text: str


def _apply(lines: list[str], edits: list[_Edit], drop: set[int] = frozenset()) -> list[str]:
    by_line: dict[int, list[_Edit]] = {}
    for e in edits:
        by_line.setdefault(e.line, []).append(e)
    out = []
    for i, line in enumerate(lines):
        if i in drop:
            continue
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


def _name_token(lines: list[str], lineno: int, col: int, keyword: str, name: str) -> _Edit:
    """The edit position of `name` after `keyword` (def/class/global...) from (lineno, col)."""
    b = lines[lineno - 1].encode("utf-8")
    m = re.compile(rb"(?:async\s+)?" + keyword.encode() + rb"\s+(" + re.escape(name.encode()) + rb")\b").search(b, col)
    if not m:
        raise RewriteError(f"internal error: cannot find {keyword} {name} on line {lineno}")
    return _Edit(lineno - 1, m.start(1), m.end(1), "")


def _rename_edits(tree: ast.Module, lines: list[str], renames: dict[str, str]) -> list[_Edit]:
    refs = _GlobalRefs(set(renames)).run(tree)
    if refs.unsupported:
        name, line = refs.unsupported[0]
        raise RewriteError(
            f"the candidate binds {name!r} (line {line}) in a way forge cannot rename, and the name "
            "is taken in your file; rename it in the candidate"
        )
    edits = [_Edit(n.lineno - 1, n.col_offset, n.end_col_offset, renames[name]) for n, name in refs.names_at]
    for d in refs.defs:
        e = _name_token(lines, d.lineno, d.col_offset, "class" if isinstance(d, ast.ClassDef) else "def", d.name)
        e.text = renames[d.name]
        edits.append(e)
    for a in refs.aliases:
        bound = _alias_binding(a)
        if a.lineno is None or a.lineno != a.end_lineno:
            raise RewriteError(f"cannot rename the import of {bound!r} in the candidate (line {a.lineno})")
        if not a.asname and "." in a.name:
            raise RewriteError(
                f"the candidate's `import {a.name}` binds {bound!r}, which is taken in your file; "
                f"write `import {a.name} as ...` in the candidate"
            )
        edits.append(_Edit(a.lineno - 1, a.col_offset, a.end_col_offset, f"{a.name} as {renames[bound]}"))
    for g in refs.global_stmts:
        for ln in range(g.lineno, g.end_lineno + 1):
            b = lines[ln - 1].encode("utf-8")
            lo = g.col_offset if ln == g.lineno else 0
            hi = g.end_col_offset if ln == g.end_lineno else len(b)
            for name in set(g.names) & set(renames):
                for m in re.finditer(rb"\b" + re.escape(name.encode()) + rb"\b", b[lo:hi]):
                    edits.append(_Edit(ln - 1, lo + m.start(), lo + m.end(), renames[name]))
    return edits


# ----------------------------------------------------------------------------- the candidate block
@dataclass
class _Block:
    text: str
    renamed: dict[str, str]
    dropped: list[str]
    binds: dict[str, tuple | None]  # names the kept code binds -> import descriptor (None: not an import)


def _stmt_label(stmt: ast.stmt) -> str:
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return f"def {stmt.name}"
    if isinstance(stmt, ast.ClassDef):
        return f"class {stmt.name}"
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return ast.unparse(stmt)
    names = sorted(_module_bindings(stmt))
    return ", ".join(names) if names else ast.unparse(stmt).splitlines()[0][:60]


def _unique(base: str, taken: set[str]) -> str:
    name, i = base, 2
    while name in taken:
        name, i = f"{base}_{i}", i + 1
    taken.add(name)
    return name


def _candidate_block(
    cand_text: str,
    cand_tree: ast.Module,
    user_tree: ast.Module,
    user_cls: ast.ClassDef,
    reference_name: str,
    candidate_class: str,
    names: dict[str, str],
    reserved: set[str],
    forge_lines: set[int],
) -> _Block:
    """The candidate's code as it goes into the user's file: task plumbing and what the file
    already has dropped, clashing names renamed, ModelNew renamed to names['forge']."""
    cls_start = _span(user_cls)[0]
    # Statements of other forge blocks are not relied on: each block stays self-contained, so
    # that it can be reverted (or deleted) on its own. Identical ones are kept as they are.
    own = [s for s in user_tree.body if s is not user_cls and _span(s)[0] not in forge_lines]
    user_before = {_dump(s) for s in own if _span(s)[1] <= cls_start}
    user_after = {_dump(s) for s in own if _span(s)[0] >= _span(user_cls)[1]}
    user_forge = {_dump(s) for s in user_tree.body if _span(s)[0] in forge_lines}
    user_imports: dict[str, list[tuple[tuple | None, bool]]] = {}  # name -> [(descriptor, before the class)]
    for s in own:
        desc = _import_descriptors(s) or {}
        before = _span(s)[1] <= cls_start
        for n in _module_bindings(s):
            user_imports.setdefault(n, []).append((desc.get(n), before))

    def same_import_before(name: str, desc: tuple) -> bool:
        seen = user_imports.get(name, [])
        return (
            bool(seen)
            and all(d is not None and _equivalent_import(desc, d) for d, _ in seen)
            and any(b for _, b in seen)
        )

    ref_dump = _class_dump(user_cls, reference_name)
    body = cand_tree.body
    dropped_for_good: list[str] = []
    same: dict[int, str] = {}  # id(stmt) -> "copy" | "before" | "after": what your file already has
    base_keep: list[ast.stmt] = []
    for i, s in enumerate(body):
        d = _dump(s)
        if i == 0 and isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and isinstance(s.value.value, str):
            dropped_for_good.append("module docstring")
        elif isinstance(s, ast.ImportFrom) and s.module == "__future__":
            dropped_for_good.append(ast.unparse(s))
        elif _is_main_guard(s):
            dropped_for_good.append("if __name__ == '__main__' block")
        elif (isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name in TASK_PLUMBING) or (
            isinstance(s, ast.Assign) and _module_bindings(s) and _module_bindings(s) <= TASK_PLUMBING
        ):
            dropped_for_good.append(_stmt_label(s))
        elif isinstance(s, ast.ClassDef) and s.name == reference_name and _class_dump(s, reference_name) == ref_dump:
            same[id(s)] = "copy"
        elif d in user_before:
            same[id(s)] = "before"
        elif (desc := _import_descriptors(s)) and all(same_import_before(n, v) for n, v in desc.items()):
            same[id(s)] = "before"
        elif d in user_after:
            same[id(s)] = "after"
        elif d in user_forge:
            same[id(s)] = "forge"
        else:
            base_keep.append(s)
    if not any(isinstance(s, ast.ClassDef) and s.name == candidate_class for s in base_keep):
        raise RewriteError(f"the candidate defines no top-level class {candidate_class!r}")

    # A statement your file already has is dropped, unless
    # - the kept code needs it while the block executes and your copy comes after the class
    #   (kept as is: it binds the same thing), or
    # - it reads a name the candidate binds differently from your file (renamed in the block):
    #   then it means something else in the candidate, and is kept, renamed like any clash.
    # The copy of your class is dropped only in the first case; the candidate's class then
    # derives from your original class.
    forced: set[int] = set()  # same-as-yours statements kept and treated as the candidate's own
    verbatim: set[int] = set()  # same-as-yours statements kept as they are (another block's, or needed early)
    reads = {id(s): _global_loads(ast.Module(body=[s], type_ignores=[])) for s in body if id(s) in same}
    while True:
        verbatim |= {id(s) for s in body if same.get(id(s)) == "forge" and id(s) not in forced}
        keep = [s for s in body if id(s) in forced or id(s) in verbatim or s in base_keep]
        needed = set().union(*(_definition_time_loads(s) for s in keep)) if keep else set()
        verbatim |= {
            id(s) for s in body if same.get(id(s)) == "after" and id(s) not in forced and _module_bindings(s) & needed
        }
        keep = [s for s in body if id(s) in forced or id(s) in verbatim or s in base_keep]
        renames: dict[str, str] = {}
        if any(same.get(id(s)) == "copy" for s in body if id(s) not in forced):
            renames[reference_name] = names["reference"]
        renames[candidate_class] = names["forge"]
        taken = set(reserved)
        binds: dict[str, tuple | None] = {}
        for s in keep:
            desc = _import_descriptors(s) or {}
            for n in sorted(_module_bindings(s)):
                if n in renames:
                    binds[renames[n]] = desc.get(n)
                    continue
                clash = n in reserved and id(s) not in verbatim
                if clash and n in desc and same_import_before(n, desc[n]):
                    clash = False
                if clash:
                    renames[n] = _unique(f"_forge_{n.lstrip('_')}", taken)
                    binds[renames[n]] = desc.get(n)
                else:
                    binds[n] = desc.get(n)
        changed = {n for n in renames if n not in (reference_name, candidate_class)}
        used = set().union(*(_global_loads(ast.Module(body=[t], type_ignores=[])) for t in keep)) if keep else set()
        more = set()
        for idx, s in enumerate(body):
            if id(s) not in same or id(s) in forced or not (reads[id(s)] & changed):
                continue
            rebound_later = (
                set().union(*(_module_bindings(t) for t in body[idx + 1 :] if t in keep))
                if idx + 1 < len(body)
                else set()
            )
            # the kept code reads what it binds (and no later kept statement binds that name again)
            if (_module_bindings(s) - rebound_later) & used:
                more.add(id(s))
        if not more:
            break
        forced |= more
        verbatim -= more

    kept_ids = {id(s) for s in keep}
    dropped = dropped_for_good + [
        ("class " + s.name + " (a copy of your class)") if same[id(s)] == "copy" else _stmt_label(s)
        for s in body
        if id(s) in same and id(s) not in kept_ids
    ]
    # a name bound only by a dropped statement keeps its meaning; a rename covers every global use
    lines = _lines(cand_text)
    edits = _rename_edits(ast.Module(body=keep, type_ignores=[]), lines, renames)
    drop_lines: set[int] = set()
    keep_lines: set[int] = set()
    for s in body:
        a, b = _span(s)
        (keep_lines if id(s) in kept_ids else drop_lines).update(range(a, b))
    drop_lines -= keep_lines  # a line shared with a kept statement (`a; b`) stays
    # comments directly above a dropped statement go with it
    for s in body:
        if id(s) in kept_ids:
            continue
        j = _span(s)[0] - 1
        while j >= 0 and lines[j].lstrip().startswith("#") and j not in keep_lines:
            drop_lines.add(j)
            j -= 1
    inside = set()  # lines of kept statements: their blank lines (in strings, say) stay as they are
    for s in keep:
        a, b = _span(s)
        inside.update(range(a, b))
    renamed_lines = _apply(lines, edits)
    out: list[str] = []
    blank_run = 0
    for i, line in enumerate(renamed_lines):
        if i in drop_lines:
            continue
        line = line.rstrip("\r\n") + "\n"
        if i not in inside and not line.strip():
            blank_run += 1
            if blank_run > 2 or not out:
                continue
        else:
            blank_run = 0
        out.append(line)
    text = "".join(out).rstrip("\n") + "\n"
    shown = {k: v for k, v in renames.items() if k not in (candidate_class, reference_name)}
    return _Block(text, shown, dropped, binds)


# ----------------------------------------------------------------------------- the public class
def _params_text(lines: list[str], fn: ast.FunctionDef) -> str:
    """The parameter list of `fn` as written (between its parentheses), else as ast prints it."""
    seg = [line.rstrip("\r\n") + "\n" for line in lines[fn.lineno - 1 : fn.end_lineno]]
    depth, start = 0, None
    try:
        for tok in tokenize.generate_tokens(io.StringIO("".join(seg)).readline):
            if tok.type != tokenize.OP or tok.string not in "()":
                continue
            if tok.string == "(":
                depth += 1
                if depth == 1:
                    start = tok.end
            else:
                depth -= 1
                if depth == 0 and start is not None:
                    (r0, c0), (r1, c1) = start, tok.start
                    if r0 == r1:
                        return seg[r0 - 1][c0:c1]
                    return seg[r0 - 1][c0:] + "".join(seg[r0 : r1 - 1]) + seg[r1 - 1][:c1]
    except (tokenize.TokenError, SyntaxError):
        pass
    return ast.unparse(fn.args)


def _init_source(cls: ast.ClassDef, lines: list[str]) -> tuple[str, bool]:
    """The recording ``__init__`` (text, needs_inspect): the original's parameter list when it
    can be repeated as written, else ``*args, **kwargs`` with the original's signature attached."""
    init = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
    class_names = _bindings(cls.body)[0]
    if init is not None and not init.decorator_list and (init.args.posonlyargs or init.args.args):
        a = init.args
        evaluated = a.defaults + [d for d in a.kw_defaults if d is not None]
        evaluated += [
            x.annotation
            for x in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg]
            if x is not None and x.annotation is not None
        ]
        evaluated += [init.returns] if init.returns is not None else []
        if not any(_all_loads(e) & class_names for e in evaluated):
            params = a.posonlyargs + a.args
            me = params[0].arg
            pos = [p.arg for p in params[1:]] + ([f"*{a.vararg.arg}"] if a.vararg else [])
            kws = [f"{k.arg}={k.arg}" for k in a.kwonlyargs] + ([f"**{a.kwarg.arg}"] if a.kwarg else [])
            sig = _params_text(lines, init)
            ret = (
                f" -> {ast.get_source_segment(''.join(lines), init.returns) or ast.unparse(init.returns)}"
                if init.returns is not None
                else ""
            )
            call = ", ".join(pos + kws)
            tup = "(" + ", ".join(pos) + ("," if len(pos) == 1 else "") + ")"
            kwd = (
                "{"
                + ", ".join([f'"{k.arg}": {k.arg}' for k in a.kwonlyargs] + ([f"**{a.kwarg.arg}"] if a.kwarg else []))
                + "}"
            )
            return (
                f"    def __init__({sig}){ret}:\n"
                f"        super().__init__({call})\n"
                f'        {me}.__dict__["_forge_init"] = ({tup}, {kwd})  # not registered: state_dict unchanged\n'
            ), False
    return (
        "    def __init__(self, *args, **kwargs):\n"
        "        super().__init__(*args, **kwargs)\n"
        '        self.__dict__["_forge_init"] = (args, kwargs)  # not registered: state_dict unchanged\n'
    ), True


_PUBLIC = '''\
class {name}({ref}):
    """{name} running forge's verified kernels ({forge}) on calls like the verified ones.

    Same constructor and state_dict keys as {ref}, the original class: its checkpoints
    load as they are. forward() runs {forge} for positional tensor arguments like those verified:
        {domain}
    and {ref}.forward for anything else, or always with FORGE_DISABLE=1 in the environment.
    {forge} is built on the first such call and uses this module's own parameters and
    buffers (the same tensor objects, shared again whenever one is replaced).
    """

    _forge_devices = {devices}  # verified: device types,
    _forge_dtypes = {dtypes}  # dtypes of the tensor arguments,
    _forge_ranks = {ranks}  # rank of each tensor argument, in order,
    _forge_contiguous = {contiguous}  # contiguous tensor arguments only,
    _forge_training = {training}  # module mode (checked when the output depends on it)
    _forge_mode_sensitive = {mode_sensitive}  # whether {ref} mentions dropout, batch norm, training...
    _forge_calls = {{"optimized": 0, "reference": 0}}  # how calls were routed, all instances

{init}{signature}
    def forward(self, *args, **kwargs):
        impl = self._forge_impl(args, kwargs)
        if impl is None:
            self._forge_calls["reference"] += 1
            return super().forward(*args, **kwargs)
        self._forge_calls["optimized"] += 1
        return impl(*args)

    def _forge_impl(self, args, kwargs):
        """The kernels' module when this call is inside the verified domain, else None."""
        if kwargs or {os}.environ.get("FORGE_DISABLE", "") not in ("", "0") or "_forge_init" not in self.__dict__:
            return None
        grad, ranks, device, n = {torch}.is_grad_enabled(), self._forge_ranks, None, 0
        for a in args:
            if isinstance(a, {torch}.Tensor):
                if (n == len(ranks) or a.dim() != ranks[n] or a.dtype not in self._forge_dtypes
                        or a.device.type not in self._forge_devices or a.numel() == 0
                        or (self._forge_contiguous and not a.is_contiguous()) or (grad and a.requires_grad)):
                    return None
                device, n = a.device, n + 1
        if n != len(ranks):
            return None
        rt = self.__dict__.get("_forge_runtime")
        if rt is None or rt[1] != device or not all(
                h.get(k) is v and (d is None or v.dtype is d) for h, k, v, d in rt[2]):
            rt = self._forge_share(device)
        impl, _, _, usable, params, mode_sensitive = rt
        if not usable or (grad and any(p.requires_grad for p in params)):
            return None
        if mode_sensitive and self._forge_training is not None and self.training != self._forge_training:
            return None
        if impl.training != self.training:
            impl.train(self.training)
        return impl

    def _forge_share(self, device):
        """Build {forge} once, then make it use this module's parameters and buffers."""
        rt = self.__dict__.get("_forge_runtime")
        if rt is not None:
            impl = rt[0]
        else:
            args, kwargs = self.__dict__["_forge_init"]
            impl = {forge}(*args, **kwargs)
        shared, params, usable = set(), [], True
        for key, value in self.state_dict(keep_vars=True).items():
            if not isinstance(value, {torch}.Tensor):
                continue
            prefix, _, leaf = key.rpartition(".")
            try:
                owner = impl.get_submodule(prefix)
            except AttributeError:
                usable = False
                break
            slots = owner._parameters if leaf in owner._parameters else owner._buffers
            if leaf not in slots:
                usable = False
                break
            slots[leaf] = value  # the same tensor object: in-place updates are seen by both
            shared.add(id(value))
            if isinstance(value, {torch}.nn.Parameter):
                params.append(value)
            usable = usable and value.device.type in self._forge_devices and (
                not value.is_floating_point() or value.dtype in self._forge_dtypes)
        for m in impl.modules():  # the kernels' own tensors (not in state_dict) follow the inputs
            for slots in (m._parameters, m._buffers):
                for k, v in slots.items():
                    if v is not None and id(v) not in shared and v.device != device:
                        moved = v.to(device)
                        slots[k] = {torch}.nn.Parameter(moved, v.requires_grad) if isinstance(
                            v, {torch}.nn.Parameter) else moved
        watch = [(slots, k, v, v.dtype if isinstance(v, {torch}.Tensor) else None) for m in self.modules()
                 for slots in (m._modules, m._parameters, m._buffers) for k, v in slots.items()]
        mode_layers = ({torch}.nn.modules.dropout._DropoutNd, {torch}.nn.modules.batchnorm._NormBase,
                       {torch}.nn.RNNBase, {torch}.nn.MultiheadAttention)
        mode_sensitive = self._forge_mode_sensitive or any(isinstance(m, mode_layers) for m in self.modules())
        rt = (impl, device, watch, usable, params, mode_sensitive)
        self.__dict__["_forge_runtime"] = rt
        return rt

    def __getstate__(self):
        # pickles and deep copies hold the module, not the kernels' instance (rebuilt on use)
        state = super().__getstate__()
        if isinstance(state, dict) and "_forge_runtime" in state:
            state = {{k: v for k, v in state.items() if k != "_forge_runtime"}}
        return state
'''


def _module_name(
    want: str,
    module: str,
    user_binds: dict[str, list[tuple[tuple | None, bool]]],
    block_binds: dict[str, tuple | None],
    taken: set[str],
) -> tuple[str, str | None]:
    """(name to use for `module` in the generated class, import line to add or None)."""
    desc = ("module", module)
    seen = user_binds.get(want, [])
    if seen and all(d == desc for d, _ in seen) and any(b for _, b in seen):
        return want, None
    if want in block_binds and block_binds[want] == desc and not seen:
        return want, None
    if not seen and want not in block_binds and want not in taken:
        taken.add(want)
        return want, f"import {module}"
    alias = _unique(f"_forge_{module}", taken)
    return alias, f"import {module} as {alias}"


# ----------------------------------------------------------------------------- the API
def source_fingerprint(file_text: str, class_name: str) -> str:
    """sha256 of what a run of `class_name` depends on in the file: the class's source (decorators
    included) and the top-level statements binding names the class reads (imports, constants,
    helpers). Unrelated edits elsewhere in the file leave it unchanged."""
    tree = _parse(file_text, "the file")
    cls = _find_class(tree, class_name)
    lines = _lines(file_text)
    used = _global_loads(ast.Module(body=[cls], type_ignores=[]))
    parts = [_segment(lines, cls)]
    for s in tree.body:
        if s is not cls and _module_bindings(s) & used:
            parts.append(_segment(lines, s))
    text = "\0".join(p.replace("\r\n", "\n").replace("\r", "\n") for p in parts)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def rewrite_module(
    file_text: str,
    class_name: str,
    candidate_source: str,
    domain: VerifiedDomain,
    *,
    run_id: str = "",
    candidate_id: str = "",
    speedup: float | None = None,
    candidate_class: str = "ModelNew",
    reference_name: str | None = None,
) -> Rewrite:
    """Rewrite `class_name` in `file_text` to run the candidate's kernels inside `domain`.

    `candidate_source` defines `candidate_class` (KernelBench's ``ModelNew``), verified against
    `class_name` (called `reference_name` in the candidate, when it carries a copy). Pure: the
    input text is not changed; raises RewriteError with what to do when the rewrite cannot be made.
    """
    if not re.fullmatch(r"[A-Za-z_]\w*", class_name or ""):
        raise RewriteError(f"not a class name: {class_name!r}")
    reference_name = reference_name or class_name
    tree = _parse(file_text, "the file")
    cls = _find_class(tree, class_name)
    if _is_rewritten(file_text, cls):
        raise RewriteError(
            f"{class_name} is already optimized by forge; reject/revert that rewrite first "
            "(forge's block starts at the line '" + BEGIN.format(name=class_name) + " ...')"
        )
    cand_tree = _parse(candidate_source, "the candidate")
    lines = _lines(file_text)
    nl = _newline(file_text)

    # private names (self.__x) are mangled with the class name: keep the mangling prefix
    private_store = any(
        isinstance(n, ast.Attribute)
        and isinstance(n.ctx, ast.Store)
        and n.attr.startswith("__")
        and not n.attr.endswith("__")
        for n in ast.walk(cls)
    )
    ref_name = f"_{class_name}" if private_store else f"_{class_name}Reference"
    forge_name = f"_{class_name.lstrip('_')}Forge"
    user_bound: set[str] = set()
    user_binds: dict[str, list[tuple[tuple | None, bool]]] = {}
    cls_start, cls_end = _span(cls)
    forge_lines = _forge_regions(lines)
    forge_descs: dict[str, list[tuple | None]] = {}  # names bound inside other forge blocks
    for s in tree.body:
        if s is cls:
            continue
        desc = _import_descriptors(s) or {}
        for n in _module_bindings(s):
            user_bound.add(n)
            if _span(s)[0] not in forge_lines:  # other forge blocks are not relied on
                user_binds.setdefault(n, []).append((desc.get(n), _span(s)[1] <= cls_start))
            else:
                forge_descs.setdefault(n, []).append(desc.get(n))
    for taken in (ref_name, forge_name):
        if taken in user_bound:
            raise RewriteError(
                f"the file already defines {taken!r} (a previous forge rewrite?); forge needs that "
                f"name for {class_name}: rename it or revert the previous rewrite first"
            )
    unbound_loads = _global_loads(tree) - user_bound  # builtins, star imports: the candidate must not shadow them
    reserved = user_bound | unbound_loads | set(dir(builtins)) | {class_name, ref_name, forge_name}

    block = _candidate_block(
        candidate_source,
        cand_tree,
        tree,
        cls,
        reference_name,
        candidate_class,
        {"reference": ref_name, "forge": forge_name},
        reserved,
        forge_lines,
    )
    plain = (reserved - forge_descs.keys()) | set(block.binds)

    def taken_for(module: str) -> set[str]:
        """Names a generated import of `module` must not take: a name that other forge blocks
        bind to that same module can be bound again (the block stays self-contained)."""
        return plain | {
            n for n, ds in forge_descs.items() if n in user_binds or any(d != ("module", module) for d in ds)
        }

    torch_name, torch_import = _module_name("torch", "torch", user_binds, block.binds, taken_for("torch"))
    os_name, os_import = _module_name("os", "os", user_binds, block.binds, taken_for("os"))

    # the original class, renamed (and its explicit super(Name, ...) calls with it)
    ref_lines = lines[cls_start:cls_end]
    head = _name_token(lines, cls.lineno, cls.col_offset, "class", class_name)
    edits = [_Edit(head.line - cls_start, head.start, head.end, ref_name)]
    for n in ast.walk(cls):
        if (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Name)
            and n.func.id == "super"
            and n.args
            and isinstance(n.args[0], ast.Name)
            and n.args[0].id == class_name
        ):
            a = n.args[0]
            edits.append(_Edit(a.lineno - 1 - cls_start, a.col_offset, a.end_col_offset, ref_name))
    ref_text = "".join(_apply(ref_lines, edits))
    if not ref_text.endswith(("\n", "\r")):
        ref_text += nl

    init_src, needs_inspect = _init_source(cls, lines)
    signature = ""
    imports = [i for i in (os_import, torch_import) if i]
    if needs_inspect:
        inspect_name, inspect_import = _module_name(
            "inspect", "inspect", user_binds, block.binds, taken_for("inspect") | {torch_name, os_name}
        )
        if inspect_import:
            imports.append(inspect_import)
        signature = f"    __init__.__signature__ = {inspect_name}.signature({ref_name}.__init__)\n"
    tup = lambda xs: "(" + ", ".join(xs) + ("," if len(xs) == 1 else "") + ")"  # noqa: E731
    public = _PUBLIC.format(
        name=class_name,
        ref=ref_name,
        forge=forge_name,
        domain=domain.describe(),
        devices=tup([repr(d) for d in domain.device_types]),
        dtypes=tup([f"{torch_name}.{d}" for d in domain.dtypes]),
        ranks=tup([str(r) for r in domain.ranks]),
        contiguous=domain.contiguous,
        training=domain.training,
        mode_sensitive=_mode_sensitive(cls),
        init=init_src,
        signature=signature,
        torch=torch_name,
        os=os_name,
    )

    facts = [
        x
        for x in (
            f"run {run_id}" if run_id else "",
            f"candidate {candidate_id}" if candidate_id else "",
            f"{speedup:.2f}x" if speedup is not None else "",
        )
        if x
    ]
    header = BEGIN.format(name=class_name) + (f" ({', '.join(facts)})" if facts else "") + " ---"
    note = (
        f"# {class_name} keeps the constructor and state_dict keys of the original class, kept above as\n"
        f"# {ref_name}, and runs the kernels below for calls like the verified ones; other calls,\n"
        f"# and all calls with FORGE_DISABLE=1, run the original forward. To undo: delete this block\n"
        f"# and rename {ref_name} back to {class_name} (in its super() calls too).\n"
    )
    added = "".join(i + "\n" for i in imports)
    if added and not re.match(r"(import|from)\s", block.text):
        added += "\n"
    block_text = (
        "\n".join(
            [
                header + "\n" + note + added + block.text.rstrip("\n"),
                "",
                "",
                public.rstrip("\n"),
                END.format(name=class_name),
            ]
        )
        + "\n"
    )
    block_text = "\n" + "\n" + block_text
    if nl != "\n":
        block_text = block_text.replace("\n", nl)
    replacement = ref_text + block_text
    if not lines[cls_end - 1].endswith(("\n", "\r")):
        replacement = replacement[: -len(nl)]
    new_text = "".join(lines[:cls_start]) + replacement + "".join(lines[cls_end:])
    try:
        compile(new_text, "<forge rewrite>", "exec", dont_inherit=True)
    except SyntaxError as exc:
        raise RewriteError(
            f"internal error: the rewritten file does not compile: line {exc.lineno}: {exc.msg}"
        ) from exc

    renamed = ", ".join(f"{a} -> {b}" for a, b in block.renamed.items())
    summary = (
        f"{class_name} now runs "
        + (f"candidate {candidate_id}" if candidate_id else "the candidate")
        + (f" ({speedup:.2f}x)" if speedup is not None else "")
        + f" for calls like the verified ones ({domain.describe()}); other calls and FORGE_DISABLE=1 "
        + f"run the original forward, kept as {ref_name}. Constructor and state_dict keys unchanged."
        + (f" Renamed in the candidate to avoid clashes: {renamed}." if renamed else "")
    )
    return Rewrite(
        new_text=new_text,
        start_line=cls_start,
        end_line=cls_end,
        replacement=replacement,
        summary=summary,
        class_name=class_name,
        reference_class=ref_name,
        optimized_class=forge_name,
        renamed=block.renamed,
        dropped=block.dropped,
    )


def revert_module(file_text: str, class_name: str) -> Rewrite:
    """Undo `rewrite_module`: remove forge's block and give the original class its name back."""
    tree = _parse(file_text, "the file")
    public = _find_class(tree, class_name)
    if not _is_rewritten(file_text, public):
        raise RewriteError(f"{class_name} is not a forge rewrite: nothing to revert")
    lines = _lines(file_text)
    begin = BEGIN.format(name=class_name)
    end = END.format(name=class_name)
    try:
        b = next(i for i, line in enumerate(lines) if re.match(rf"{re.escape(begin)}[ (]", line))
        e = next(i for i in range(b, len(lines)) if lines[i].rstrip("\r\n") == end)
    except StopIteration:
        raise RewriteError(
            f"forge's block for {class_name} is incomplete (its begin or end line was edited); revert by hand"
        ) from None
    if not public.bases or not isinstance(public.bases[0], ast.Name):
        raise RewriteError(f"{class_name} no longer derives from its original class; revert by hand")
    ref_name = public.bases[0].id
    ref = _find_class(tree, ref_name)
    start, stop = _span(ref)
    if not stop <= b or any(line.strip() and not line.lstrip().startswith("#") for line in lines[stop:b]):
        raise RewriteError(f"code was added between {ref_name} and forge's block; revert by hand")
    edits = []
    head = _name_token(lines, ref.lineno, ref.col_offset, "class", ref_name)
    edits.append(_Edit(head.line - start, head.start, head.end, class_name))
    for n in ast.walk(ref):
        if (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Name)
            and n.func.id == "super"
            and n.args
            and isinstance(n.args[0], ast.Name)
            and n.args[0].id == ref_name
        ):
            a = n.args[0]
            edits.append(_Edit(a.lineno - 1 - start, a.col_offset, a.end_col_offset, class_name))
    replacement = "".join(_apply(lines[start:stop], edits))
    if not lines[e].endswith(("\n", "\r")):
        replacement = replacement.rstrip("\r\n")
    new_text = "".join(lines[:start]) + replacement + "".join(lines[e + 1 :])
    after = _parse(new_text, "the reverted file")
    gone = set().union(*(_module_bindings(s) for s in tree.body if b <= s.lineno - 1 <= e))
    still = set().union(*(_module_bindings(s) for s in after.body)) if after.body else set()
    missing = sorted((_global_loads(after) & gone) - still - set(dir(builtins)))
    if missing:
        raise RewriteError(
            f"other code in the file uses {', '.join(missing)} from forge's block for {class_name}; "
            "revert that code first"
        )
    return Rewrite(
        new_text=new_text,
        start_line=start,
        end_line=e + 1,
        replacement=replacement,
        summary=f"{class_name} is the original class again; forge's kernels were removed.",
        class_name=class_name,
        reference_class=ref_name,
    )


def domain_from_verdict(verdict: dict[str, Any]) -> VerifiedDomain:
    """What a verdict covered: its device type, the dtypes of its tensor inputs, each input's rank (first
    input set), and whether all inputs were contiguous. The guard of a rewrite admits exactly this."""
    specs = verdict.get("inputs") or []
    first = specs[0]["case"] if specs else None
    return VerifiedDomain(
        device_types=[str(verdict.get("device") or "cpu").split(":")[0]],
        dtypes=sorted({s["dtype"] for s in specs if s.get("dtype")}),
        ranks=[len(s["shape"]) for s in specs if s["case"] == first and s.get("shape") is not None],
        contiguous=all(s.get("contiguous", True) for s in specs if s.get("dtype")),
    )
