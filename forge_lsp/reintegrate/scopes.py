"""Scope and binding analysis with ``ast``: what statements bind, which uses of a name mean its
module-level binding (Python's scoping rules), what a statement reads, what an import binds, and
fresh names that take nothing."""

from __future__ import annotations

import ast
from collections.abc import Sequence
from dataclasses import dataclass, field

_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_Comprehension = ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp


def alias_binding(alias: ast.alias) -> str:
    """The name an ``import`` alias binds (``import a.b`` binds ``a``)."""
    return alias.asname or alias.name.split(".")[0]


def bindings(nodes: Sequence[ast.AST]) -> tuple[set[str], set[str], set[str]]:
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
        if isinstance(n, (ast.Lambda, *_COMPREHENSIONS)):
            continue
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            bound.add(n.id)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            bound.update(alias_binding(a) for a in n.names if a.name != "*")
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


def module_bindings(stmt: ast.stmt) -> set[str]:
    """Names a top-level statement binds in the module namespace."""
    return bindings([stmt])[0]


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


def _scope_of(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda | _Comprehension) -> _Scope:
    if isinstance(node, ast.ClassDef):
        b, g, nl = bindings(node.body)
        return _Scope("class", b, g, nl)
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        b, g, nl = bindings(node.body)
        return _Scope("function", (b | _args_names(node.args)) - g - nl, g, nl)
    if isinstance(node, ast.Lambda):
        b, _, _ = bindings([node.body])
        return _Scope("function", b | _args_names(node.args))
    # comprehension: its targets are its own
    b, _, _ = bindings([g.target for g in node.generators])
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


class GlobalRefs:
    """Positions of every occurrence of given module-level names, scope-aware.

    Collects Name nodes that resolve to the module-level binding, the names of defs/classes and
    import aliases bound at module level (or declared global), and names in ``global`` statements.
    """

    def __init__(self, names: set[str]):
        self.names = names
        self.names_at: list[tuple[ast.Name, str]] = []  # (node, name)
        self.defs: list[ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef] = []  # whose name is rebound
        self.aliases: list[ast.alias] = []
        self.global_stmts: list[ast.Global] = []
        self.unsupported: list[tuple[str, int]] = []

    def run(self, tree: ast.Module) -> GlobalRefs:
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
            self._visit_function(n, chain)
        elif isinstance(n, ast.ClassDef):
            self._visit_class(n, chain)
        elif isinstance(n, ast.Lambda):
            self._visit_list(n.args.defaults + [d for d in n.args.kw_defaults if d is not None], chain)
            self._visit(n.body, [_scope_of(n)] + chain)
        elif isinstance(n, _COMPREHENSIONS):
            self._visit_comprehension(n, chain)
        elif isinstance(n, ast.Name):
            if n.id in self.names and _resolves_global(n.id, chain):
                self.names_at.append((n, n.id))
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            for a in n.names:
                if a.name != "*" and self._binds_global(alias_binding(a), chain):
                    self.aliases.append(a)
        elif isinstance(n, ast.Global):
            if self.names.intersection(n.names):
                self.global_stmts.append(n)
        elif not isinstance(n, ast.Nonlocal):
            self._visit_other(n, chain)

    def _visit_function(self, n: ast.FunctionDef | ast.AsyncFunctionDef, chain: list[_Scope]) -> None:
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

    def _visit_class(self, n: ast.ClassDef, chain: list[_Scope]) -> None:
        if self._binds_global(n.name, chain):
            self.defs.append(n)
        self._visit_list(n.decorator_list + n.bases + [k.value for k in n.keywords], chain)
        self._visit_list(n.body, [_scope_of(n)] + chain)

    def _visit_comprehension(self, n: _Comprehension, chain: list[_Scope]) -> None:
        inner = [_scope_of(n)] + chain
        self._visit(n.generators[0].iter, chain)
        for i, g in enumerate(n.generators):
            self._visit(g.target, inner)
            if i:
                self._visit(g.iter, inner)
            self._visit_list(g.ifs, inner)
        elts = [n.key, n.value] if isinstance(n, ast.DictComp) else [n.elt]
        self._visit_list(elts, inner)

    def _visit_other(self, n: ast.AST, chain: list[_Scope]) -> None:
        """Any other node: its children, noting the module-level names bound where forge cannot rename."""
        if (
            isinstance(n, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar))
            and n.name
            and self._binds_global(n.name, chain)
        ):
            self.unsupported.append((n.name, n.lineno))
        for c in ast.iter_child_nodes(n):
            self._visit(c, chain)


def import_descriptors(stmt: ast.stmt) -> dict[str, tuple] | None:
    """For an import statement: bound name -> what it is bound to; None for other statements."""
    if isinstance(stmt, ast.Import):
        return {alias_binding(a): ("module", a.name if a.asname else a.name.split(".")[0]) for a in stmt.names}
    if isinstance(stmt, ast.ImportFrom) and stmt.module != "__future__":
        if any(a.name == "*" for a in stmt.names):
            return None
        return {alias_binding(a): ("from", stmt.level, stmt.module, a.name) for a in stmt.names}
    return None


def equivalent_import(desc: tuple, other: tuple) -> bool:
    """`import torch.nn as nn` and `from torch import nn` bind the same module."""

    def key(d):
        if d[0] == "from" and d[1] == 0:
            return ("module", f"{d[2]}.{d[3]}")
        return d

    return key(desc) == key(other)


def definition_time_loads(stmt: ast.stmt) -> set[str]:
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


def all_loads(tree: ast.AST) -> set[str]:
    """Every name read anywhere in `tree`, whatever it resolves to."""
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def global_loads(tree: ast.Module) -> set[str]:
    """Names read anywhere in the module that resolve to module-level (or builtin) names."""
    refs = GlobalRefs({n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}).run(tree)
    return {name for n, name in refs.names_at if isinstance(n.ctx, ast.Load)}


def stmts_global_loads(stmts: list[ast.stmt]) -> set[str]:
    """`global_loads` of these top-level statements as a module of their own."""
    return global_loads(ast.Module(body=stmts, type_ignores=[]))


def unique_name(base: str, taken: set[str]) -> str:
    """`base`, or `base_2`, `base_3`... whichever `taken` does not hold yet; added to `taken`."""
    name, i = base, 2
    while name in taken:
        name, i = f"{base}_{i}", i + 1
    taken.add(name)
    return name
