"""The candidate's code as it goes into forge's block in the user's file: task plumbing and what
the file already has dropped, names that clash with the file's renamed, the candidate's class
(KernelBench's ``ModelNew``) renamed."""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass

from .edits import apply_edits, rename_edits
from .result import RewriteError
from .scopes import definition_time_loads, import_descriptors, module_bindings, stmts_global_loads, unique_name
from .source import source_lines, stmt_span
from .user_file import UserFile

#: candidate top-level functions and constants that belong to the task, not to the kernels.
TASK_PLUMBING = frozenset({"get_inputs", "get_init_inputs", "FORGE"})


@dataclass(frozen=True)
class ClassNames:
    """The classes of a rewrite: as the candidate names them, and as the rewritten file does."""

    reference: str  # the candidate's copy of the user's class (when it carries one)
    candidate: str  # the candidate's optimized class (``ModelNew``)
    reference_as: str  # the user's original class, renamed (``_ModelReference``)
    candidate_as: str  # the candidate's class in the block (``_ModelForge``)


@dataclass
class CandidateBlock:
    text: str
    renamed: dict[str, str]
    dropped: list[str]
    binds: dict[str, tuple | None]  # names the kept code binds -> import descriptor (None: not an import)


@dataclass
class _CandidateStatements:
    """The candidate's top-level statements, sorted out against the user's file."""

    body: list[ast.stmt]
    dropped: list[str]  # what never goes into the block (docstring, task plumbing...), as labels
    same: dict[int, str]  # id(stmt) -> what your file already has: "copy" | "before" | "after" | "forge"
    own: list[ast.stmt]  # the rest: the candidate's own code, always kept

    def kept(self, ids: set[int]) -> list[ast.stmt]:
        """The candidate's own statements and those of `ids`, in order."""
        own = {id(s) for s in self.own}
        return [s for s in self.body if id(s) in ids or id(s) in own]

    def ids_where(self, where: str) -> set[int]:
        return {id(s) for s in self.body if self.same.get(id(s)) == where}


@dataclass
class _Selection:
    """The statements the block keeps, and the names they take there."""

    keep: list[ast.stmt]
    renames: dict[str, str]
    binds: dict[str, tuple | None]


def candidate_block(
    cand_text: str,
    cand_tree: ast.Module,
    user_cls: ast.ClassDef,
    names: ClassNames,
    reserved: set[str],
    user: UserFile,
) -> CandidateBlock:
    """The candidate's code as it goes into the user's file: task plumbing and what the file
    already has dropped, clashing names renamed, the candidate's class renamed to names.candidate_as."""
    cand = _sort_out(cand_tree.body, user, names.reference, _class_dump(user_cls, names.reference))
    if not any(isinstance(s, ast.ClassDef) and s.name == names.candidate for s in cand.own):
        raise RewriteError(f"the candidate defines no top-level class {names.candidate!r}")
    chosen = _select(cand, user, names, reserved)
    kept_ids = {id(s) for s in chosen.keep}
    dropped = cand.dropped + [
        _stmt_label(s, copy=cand.same[id(s)] == "copy")
        for s in cand.body
        if id(s) in cand.same and id(s) not in kept_ids
    ]
    # a name bound only by a dropped statement keeps its meaning; a rename covers every global use
    lines = source_lines(cand_text)
    edits = rename_edits(ast.Module(body=chosen.keep, type_ignores=[]), lines, chosen.renames)
    text = _block_text(apply_edits(lines, edits), _dropped_lines(lines, cand.body, kept_ids), chosen.keep)
    shown = {k: v for k, v in chosen.renames.items() if k not in (names.candidate, names.reference)}
    return CandidateBlock(text, shown, dropped, chosen.binds)


# ----------------------------------------------------------------------------- sorting statements out
def _sort_out(body: list[ast.stmt], user: UserFile, reference_name: str, ref_dump: str) -> _CandidateStatements:
    cand = _CandidateStatements(body, [], {}, [])
    for i, s in enumerate(body):
        if (label := _never_kept(i, s)) is not None:
            cand.dropped.append(label)
        elif (where := _already_there(s, user, reference_name, ref_dump)) is not None:
            cand.same[id(s)] = where
        else:
            cand.own.append(s)
    return cand


def _never_kept(i: int, s: ast.stmt) -> str | None:
    """Why the candidate's `i`-th statement never goes into the block (a label), else None."""
    if i == 0 and isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and isinstance(s.value.value, str):
        return "module docstring"
    if isinstance(s, ast.ImportFrom) and s.module == "__future__":
        return ast.unparse(s)
    if _is_main_guard(s):
        return "if __name__ == '__main__' block"
    if (isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name in TASK_PLUMBING) or (
        isinstance(s, ast.Assign) and module_bindings(s) and module_bindings(s) <= TASK_PLUMBING
    ):
        return _stmt_label(s)
    return None


def _already_there(s: ast.stmt, user: UserFile, reference_name: str, ref_dump: str) -> str | None:
    """Where the user's file already has the statement `s`: "copy" (of the class), "before" or "after"
    the class, in another "forge" block; None when it does not."""
    if isinstance(s, ast.ClassDef) and s.name == reference_name and _class_dump(s, reference_name) == ref_dump:
        return "copy"
    d = ast.dump(s)
    if d in user.dumps_before:
        return "before"
    if (desc := import_descriptors(s)) and all(user.same_import_before(n, v) for n, v in desc.items()):
        return "before"
    if d in user.dumps_after:
        return "after"
    if d in user.dumps_in_forge:
        return "forge"
    return None


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


def _class_dump(cls: ast.ClassDef, as_name: str) -> str:
    """`ast.dump` of the class as if it were called `as_name`."""
    renamed = copy.copy(cls)
    renamed.name = as_name
    return ast.dump(renamed)


def _stmt_label(stmt: ast.stmt, *, copy: bool = False) -> str:
    """How a dropped statement is listed; `copy`: the candidate's copy of your class."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return f"def {stmt.name}"
    if isinstance(stmt, ast.ClassDef):
        return f"class {stmt.name} (a copy of your class)" if copy else f"class {stmt.name}"
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return ast.unparse(stmt)
    names = sorted(module_bindings(stmt))
    return ", ".join(names) if names else ast.unparse(stmt).splitlines()[0][:60]


# ----------------------------------------------------------------------------- what is kept, and its names
def _select(cand: _CandidateStatements, user: UserFile, names: ClassNames, reserved: set[str]) -> _Selection:
    """The candidate's own statements, and those your file already has where needed.

    A statement your file already has is dropped, unless
    - the kept code needs it while the block executes and your copy comes after the class
      (kept as is: it binds the same thing), or
    - it reads a name the candidate binds differently from your file (renamed in the block):
      then it means something else in the candidate, and is kept, renamed like any clash.
    The copy of your class is dropped only in the first case; the candidate's class then
    derives from your original class.
    """
    forced: set[int] = set()  # same-as-yours statements kept and treated as the candidate's own
    verbatim: set[int] = set()  # same-as-yours statements kept as they are (another block's, or needed early)
    reads = {id(s): stmts_global_loads([s]) for s in cand.body if id(s) in cand.same}
    while True:
        verbatim |= cand.ids_where("forge") - forced
        needed = set().union(*(definition_time_loads(s) for s in cand.kept(forced | verbatim)))
        verbatim |= {
            id(s)
            for s in cand.body
            if cand.same.get(id(s)) == "after" and id(s) not in forced and module_bindings(s) & needed
        }
        keep = cand.kept(forced | verbatim)
        renames = _class_renames(cand, forced, names)
        binds = _bind(keep, renames, reserved, verbatim, user)
        more = _reading_renamed(cand, keep, forced, reads, renames, names)
        if not more:
            return _Selection(keep, renames, binds)
        forced |= more
        verbatim -= more


def _class_renames(cand: _CandidateStatements, forced: set[int], names: ClassNames) -> dict[str, str]:
    renames: dict[str, str] = {}
    if any(cand.same.get(id(s)) == "copy" for s in cand.body if id(s) not in forced):
        renames[names.reference] = names.reference_as
    renames[names.candidate] = names.candidate_as
    return renames


def _bind(
    keep: list[ast.stmt], renames: dict[str, str], reserved: set[str], verbatim: set[int], user: UserFile
) -> dict[str, tuple | None]:
    """Names the kept statements bind -> import descriptor (None: not an import); a name taken in
    your file gets a fresh one in `renames` (unless kept verbatim, or the same import as yours)."""
    taken = set(reserved)
    binds: dict[str, tuple | None] = {}
    for s in keep:
        desc = import_descriptors(s) or {}
        for n in sorted(module_bindings(s)):
            clash = n in reserved and id(s) not in verbatim and not (n in desc and user.same_import_before(n, desc[n]))
            if n not in renames and clash:
                renames[n] = unique_name(f"_forge_{n.lstrip('_')}", taken)
            binds[renames.get(n, n)] = desc.get(n)
    return binds


def _reading_renamed(
    cand: _CandidateStatements,
    keep: list[ast.stmt],
    forced: set[int],
    reads: dict[int, set[str]],
    renames: dict[str, str],
    names: ClassNames,
) -> set[int]:
    """Same-as-yours statements that read a name the block renames while the kept code reads what
    they bind (and no later kept statement binds that name again): the candidate's own after all."""
    changed = {n for n in renames if n not in (names.reference, names.candidate)}
    used = set().union(*(stmts_global_loads([t]) for t in keep))
    kept_ids = {id(t) for t in keep}
    more = set()
    for idx, s in enumerate(cand.body):
        if id(s) not in cand.same or id(s) in forced or not (reads[id(s)] & changed):
            continue
        rebound_later = set().union(*(module_bindings(t) for t in cand.body[idx + 1 :] if id(t) in kept_ids))
        if (module_bindings(s) - rebound_later) & used:
            more.add(id(s))
    return more


# ----------------------------------------------------------------------------- the block's text
def _dropped_lines(lines: list[str], body: list[ast.stmt], kept_ids: set[int]) -> set[int]:
    """Lines of the statements not kept, with the comments directly above them; a line shared with a
    kept statement (`a; b`) stays."""
    drop_lines: set[int] = set()
    keep_lines: set[int] = set()
    for s in body:
        a, b = stmt_span(s)
        (keep_lines if id(s) in kept_ids else drop_lines).update(range(a, b))
    drop_lines -= keep_lines
    for s in body:
        if id(s) in kept_ids:
            continue
        j = stmt_span(s)[0] - 1
        while j >= 0 and lines[j].lstrip().startswith("#") and j not in keep_lines:
            drop_lines.add(j)
            j -= 1
    return drop_lines


def _block_text(lines: list[str], drop_lines: set[int], keep: list[ast.stmt]) -> str:
    """The lines not dropped, with \\n endings and at most two blank lines in a row (none first) outside
    the kept statements (their blank lines, in strings say, stay as they are)."""
    inside: set[int] = set()
    for s in keep:
        a, b = stmt_span(s)
        inside.update(range(a, b))
    out: list[str] = []
    blank_run = 0
    for i, line in enumerate(lines):
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
    return "".join(out).rstrip("\n") + "\n"
