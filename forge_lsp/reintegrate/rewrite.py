"""Turn an accepted candidate into an edit of the user's source file.

Used by the language server's Accept and by ``forge optimize --apply``. Pure text in, text out:
nothing here imports torch or executes user or candidate code; both are read with ``ast``.

What a rewrite of ``class Model`` produces, in place of the class (one contiguous line range)::

    class _ModelReference(nn.Module):      # the original class, unchanged but for its name
        ...                                 # (and super(Model, self) -> super(_ModelReference, self))

    # --- forge: begin optimized Model (run r1, candidate c3, 1.42×) ---
    <the candidate's code: its imports, kernels, module-level calls; ModelNew renamed _ModelForge>
    class Model(_ModelReference):           # same name, constructor and state_dict keys
        def __init__(self, <the original's parameters>): ...   # records the arguments
        def forward(self, *args, **kwargs): ...                 # the guard
    # --- forge: end optimized Model ---

The guard runs ``_ModelForge`` only for calls like the verified ones: positional arguments whose
tensors have a verified device type, dtype, rank and sizes (in order), are contiguous (unless
verified on any layout) and non-empty, the module's weights dense as verified, and no autograd (the engine
verifies under ``torch.no_grad()``; the kernels may have no backward). A candidate verified on the device's
default stream only (kernels on the legacy default stream) also needs a CUDA call made on that stream, with no CUDA graph being
captured. Anything else, or ``FORGE_DISABLE=1`` in the environment, runs the original forward. When the module holds dropout, batch norm or similar layers (or the original class
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

The steps live in sibling modules: `source` (the file's lines, statements and forge's markers),
`user_file` and `scopes` (what the file and the candidate bind and read), `block` (the candidate's
code as it goes into the block), `wrapper` (the generated class), `edits` (renaming on text).
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import re

from .block import CandidateBlock, ClassNames, candidate_block
from .domain import VerifiedDomain
from .edits import renamed_class
from .result import Rewrite, RewriteError
from .scopes import global_loads, module_bindings, stmts_global_loads
from .source import (
    BEGIN,
    END,
    find_class,
    forge_block_lines,
    is_rewritten,
    newline_of,
    parse_source,
    source_lines,
    stmt_span,
    stmt_text,
)
from .user_file import UserFile
from .wrapper import init_source, module_name, wrapper_class


def source_fingerprint(file_text: str, class_name: str) -> str:
    """sha256 of what a run of `class_name` depends on in the file: the class's source (decorators
    included) and the top-level statements binding names the class reads (imports, constants,
    helpers). Unrelated edits elsewhere in the file leave it unchanged."""
    tree = parse_source(file_text, "the file")
    cls = find_class(tree, class_name)
    lines = source_lines(file_text)
    used = stmts_global_loads([cls])
    parts = [stmt_text(lines, cls)]
    for s in tree.body:
        if s is not cls and module_bindings(s) & used:
            parts.append(stmt_text(lines, s))
    text = "\0".join(p.replace("\r\n", "\n").replace("\r", "\n") for p in parts)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# ----------------------------------------------------------------------------- rewrite
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
    tree = parse_source(file_text, "the file")
    cls = find_class(tree, class_name)
    if is_rewritten(file_text, cls):
        raise RewriteError(
            f"{class_name} is already optimized by forge; reject/revert that rewrite first "
            "(forge's block starts at the line '" + BEGIN.format(name=class_name) + " ...')"
        )
    cand_tree = parse_source(candidate_source, "the candidate")
    lines = source_lines(file_text)
    names = _class_names(cls, reference_name or class_name, candidate_class)
    user = UserFile(tree, cls, forge_block_lines(lines))
    reserved = _reserved_names(tree, user, names, class_name)
    block = candidate_block(candidate_source, cand_tree, cls, names, reserved, user)
    ref_text = renamed_class(lines, cls, names.reference_as)
    init, needs_inspect = init_source(cls, lines)
    modules, imports = _wrapper_modules(needs_inspect, reserved, user, block)
    public = wrapper_class(cls, names.reference_as, names.candidate_as, domain, init, modules)
    facts = _facts(run_id, candidate_id, speedup)
    forge_block = _forge_block(class_name, names.reference_as, facts, imports, block.text, public)
    start, end = stmt_span(cls)
    replacement, new_text = _splice(lines, start, end, ref_text, forge_block, newline_of(file_text))
    _check_compiles(new_text)
    return Rewrite(
        new_text=new_text,
        start_line=start,
        end_line=end,
        replacement=replacement,
        summary=_summary(class_name, names.reference_as, domain, candidate_id, speedup, block.renamed),
        class_name=class_name,
        reference_class=names.reference_as,
        optimized_class=names.candidate_as,
        renamed=block.renamed,
        dropped=block.dropped,
    )


def _class_names(cls: ast.ClassDef, reference_name: str, candidate_class: str) -> ClassNames:
    # private names (self.__x) are mangled with the class name: keep the mangling prefix
    private_store = any(
        isinstance(n, ast.Attribute)
        and isinstance(n.ctx, ast.Store)
        and n.attr.startswith("__")
        and not n.attr.endswith("__")
        for n in ast.walk(cls)
    )
    return ClassNames(
        reference=reference_name,
        candidate=candidate_class,
        reference_as=f"_{cls.name}" if private_store else f"_{cls.name}Reference",
        candidate_as=f"_{cls.name.lstrip('_')}Forge",
    )


def _reserved_names(tree: ast.Module, user: UserFile, names: ClassNames, class_name: str) -> set[str]:
    """Names the candidate's code must not bind in the file: the file's, builtins, star imports',
    and the rewrite's own (which must be free)."""
    for taken in (names.reference_as, names.candidate_as):
        if taken in user.bound:
            raise RewriteError(
                f"the file already defines {taken!r} (a previous forge rewrite?); forge needs that "
                f"name for {class_name}: rename it or revert the previous rewrite first"
            )
    unbound_loads = global_loads(tree) - user.bound  # builtins, star imports: the candidate must not shadow them
    return user.bound | unbound_loads | set(dir(builtins)) | {class_name, names.reference_as, names.candidate_as}


def _wrapper_modules(
    needs_inspect: bool, reserved: set[str], user: UserFile, block: CandidateBlock
) -> tuple[dict[str, str], list[str]]:
    """How the generated class names torch and os (and inspect), and the import lines they need."""

    def named(module: str, also_taken: frozenset[str] = frozenset()) -> tuple[str, str | None]:
        taken = _import_taken(module, reserved, user, block) | also_taken
        return module_name(module, user.binds, block.binds, taken)

    torch_name, torch_import = named("torch")
    os_name, os_import = named("os")
    modules = {"torch": torch_name, "os": os_name}
    imports = [i for i in (os_import, torch_import) if i]
    if needs_inspect:
        modules["inspect"], inspect_import = named("inspect", frozenset({torch_name, os_name}))
        if inspect_import:
            imports.append(inspect_import)
    return modules, imports


def _import_taken(module: str, reserved: set[str], user: UserFile, block: CandidateBlock) -> set[str]:
    """Names a generated import of `module` must not take: a name that other forge blocks
    bind to that same module can be bound again (the block stays self-contained)."""
    plain = (reserved - user.forge_binds.keys()) | set(block.binds)
    return plain | {
        n for n, ds in user.forge_binds.items() if n in user.binds or any(d != ("module", module) for d in ds)
    }


def _facts(run_id: str, candidate_id: str, speedup: float | None) -> list[str]:
    facts = (
        f"run {run_id}" if run_id else "",
        f"candidate {candidate_id}" if candidate_id else "",
        f"{speedup:.2f}×" if speedup is not None else "",
    )
    return [x for x in facts if x]


def _forge_block(
    class_name: str, ref_name: str, facts: list[str], imports: list[str], block_text: str, public: str
) -> str:
    """Forge's block (\\n line endings), from its begin line to its end line, after two blank lines."""
    header = BEGIN.format(name=class_name) + (f" ({', '.join(facts)})" if facts else "") + " ---"
    note = (
        f"# {class_name} keeps the constructor and state_dict keys of the original class, kept above as\n"
        f"# {ref_name}, and runs the kernels below for calls like the verified ones; other calls,\n"
        f"# and all calls with FORGE_DISABLE=1, run the original forward. To undo: delete this block\n"
        f"# and rename {ref_name} back to {class_name} (in its super() calls too).\n"
    )
    added = "".join(i + "\n" for i in imports)
    if added and not re.match(r"(import|from)\s", block_text):
        added += "\n"
    parts = [
        header + "\n" + note + added + block_text.rstrip("\n"),
        "",
        "",
        public.rstrip("\n"),
        END.format(name=class_name),
    ]
    return "\n" + "\n" + "\n".join(parts) + "\n"


def _splice(lines: list[str], start: int, end: int, ref_text: str, forge_block: str, nl: str) -> tuple[str, str]:
    """(replacement of lines [start, end), the new file text): the renamed original class, then
    forge's block, in the file's line endings."""
    if not ref_text.endswith(("\n", "\r")):
        ref_text += nl
    if nl != "\n":
        forge_block = forge_block.replace("\n", nl)
    replacement = ref_text + forge_block
    if not lines[end - 1].endswith(("\n", "\r")):
        replacement = replacement[: -len(nl)]
    return replacement, "".join(lines[:start]) + replacement + "".join(lines[end:])


def _check_compiles(new_text: str) -> None:
    try:
        compile(new_text, "<forge rewrite>", "exec", dont_inherit=True)
    except SyntaxError as exc:
        raise RewriteError(
            f"internal error: the rewritten file does not compile: line {exc.lineno}: {exc.msg}"
        ) from exc


def _summary(
    class_name: str,
    ref_name: str,
    domain: VerifiedDomain,
    candidate_id: str,
    speedup: float | None,
    renamed: dict[str, str],
) -> str:
    renamed_text = ", ".join(f"{a} -> {b}" for a, b in renamed.items())
    return (
        f"{class_name} now runs "
        + (f"candidate {candidate_id}" if candidate_id else "the candidate")
        + (f" ({speedup:.2f}×)" if speedup is not None else "")
        + f" for calls like the verified ones ({domain.describe()}); other calls and FORGE_DISABLE=1 "
        + f"run the original forward, kept as {ref_name}. Constructor and state_dict keys unchanged."
        + (f" Renamed in the candidate to avoid clashes: {renamed_text}." if renamed_text else "")
    )


# ----------------------------------------------------------------------------- revert
def revert_module(file_text: str, class_name: str) -> Rewrite:
    """Undo `rewrite_module`: remove forge's block and give the original class its name back."""
    tree = parse_source(file_text, "the file")
    public = find_class(tree, class_name)
    if not is_rewritten(file_text, public):
        raise RewriteError(f"{class_name} is not a forge rewrite: nothing to revert")
    lines = source_lines(file_text)
    b, e = _block_range(lines, class_name)
    ref = _original_class(tree, public)
    start, stop = stmt_span(ref)
    if not stop <= b or any(line.strip() and not line.lstrip().startswith("#") for line in lines[stop:b]):
        raise RewriteError(f"code was added between {ref.name} and forge's block; revert by hand")
    replacement = renamed_class(lines, ref, class_name)
    if not lines[e].endswith(("\n", "\r")):
        replacement = replacement.rstrip("\r\n")
    new_text = "".join(lines[:start]) + replacement + "".join(lines[e + 1 :])
    _require_block_unused(tree, new_text, b, e, class_name)
    return Rewrite(
        new_text=new_text,
        start_line=start,
        end_line=e + 1,
        replacement=replacement,
        summary=f"{class_name} is the original class again; forge's kernels were removed.",
        class_name=class_name,
        reference_class=ref.name,
    )


def _block_range(lines: list[str], class_name: str) -> tuple[int, int]:
    """0-based lines of the begin and end markers of forge's block for `class_name`."""
    begin = BEGIN.format(name=class_name)
    end = END.format(name=class_name)
    try:
        b = next(i for i, line in enumerate(lines) if re.match(rf"{re.escape(begin)}[ (]", line))
        e = next(i for i in range(b, len(lines)) if lines[i].rstrip("\r\n") == end)
    except StopIteration:
        raise RewriteError(
            f"forge's block for {class_name} is incomplete (its begin or end line was edited); revert by hand"
        ) from None
    return b, e


def _original_class(tree: ast.Module, public: ast.ClassDef) -> ast.ClassDef:
    """The original class the generated one derives from."""
    if not public.bases or not isinstance(public.bases[0], ast.Name):
        raise RewriteError(f"{public.name} no longer derives from its original class; revert by hand")
    return find_class(tree, public.bases[0].id)


def _require_block_unused(tree: ast.Module, new_text: str, b: int, e: int, class_name: str) -> None:
    """Raise when the reverted file still reads names that only forge's block (lines b..e) bound."""
    after = parse_source(new_text, "the reverted file")
    gone = set().union(*(module_bindings(s) for s in tree.body if b <= s.lineno - 1 <= e))
    still = set().union(*(module_bindings(s) for s in after.body))
    missing = sorted((global_loads(after) & gone) - still - set(dir(builtins)))
    if missing:
        raise RewriteError(
            f"other code in the file uses {', '.join(missing)} from forge's block for {class_name}; "
            "revert that code first"
        )
