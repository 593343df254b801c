"""KernelBench-compatible task files, read into a typed `Task` without executing them.

A task file defines ``class Model(nn.Module)``, ``get_inputs()`` and ``get_init_inputs()``.
It may also carry a literal ``FORGE = {...}`` dict with verification settings::

    FORGE = {
        "vary": {"batch_size": [7, 33]},          # module constants verified at other sizes
                                                  # (default: the int constants only get_inputs() uses,
                                                  # at a smaller odd size and a larger one; {} opts out)
        "tolerances": {"float32": [1e-4, 1e-4]},  # dtype -> [atol, rtol]
        "input_sets": ["captured/batch0.pt"],     # torch.save'd lists of input tensors
        "trials": 3,
    }

Only the AST is read here: the engine process never imports user code or torch for this.
"""

from __future__ import annotations

import ast
import hashlib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from ..parsing import parse


class TaskError(ValueError):
    """The task file cannot be used; the message says what to change."""


class Tolerance(BaseModel):
    atol: float
    rtol: float


#: Default tolerances per output dtype. ``atol`` is scaled by max(1, rms(reference)) so that
#: large-magnitude outputs (sums, matmuls) are judged relative to their scale; below an rms of 1, the output's
#: error as a whole is also held relative to its size (`harness.compare.small_output_bound`).
DEFAULT_TOLERANCES: dict[str, Tolerance] = {
    "float64": Tolerance(atol=1e-7, rtol=1e-7),
    "float32": Tolerance(atol=1e-4, rtol=1e-4),
    "complex64": Tolerance(atol=1e-4, rtol=1e-4),
    "float16": Tolerance(atol=1e-2, rtol=1e-2),
    "bfloat16": Tolerance(atol=1e-2, rtol=1e-2),
    "float8_e4m3fn": Tolerance(atol=1e-1, rtol=1e-1),
    "float8_e5m2": Tolerance(atol=1e-1, rtol=1e-1),
}


class InputSet(BaseModel):
    """Captured real inputs: a file written with ``torch.save(list_of_tensors, path)``."""

    name: str
    path: Path


class Task(BaseModel):
    """A reference module to optimize, with everything needed to verify candidates for it."""

    path: Path
    source: str
    model_class: str = "Model"
    inputs_fn: str = "get_inputs"
    init_inputs_fn: str = "get_init_inputs"
    tolerances: dict[str, Tolerance] = Field(default_factory=lambda: dict(DEFAULT_TOLERANCES))
    input_sets: list[InputSet] = []
    vary: dict[str, list[int]] = Field(
        default_factory=dict,
        description="module-level size constants and the other values to verify them at",
    )
    vary_default: bool = Field(False, description="`vary` was chosen by forge (the task did not say)")
    inline_sizes: dict[str, int] = Field(
        default_factory=dict,
        description="sizes written as literals in get_inputs() (no module constant), lifted into module globals of "
        "these names so that `vary` can name them (`lift_inline_sizes`)",
    )
    input_kinds: list[InputKind] | None = Field(
        None,
        description="how get_inputs() draws each input it returns, read from its code (`input_kinds`); None when "
        "its return value is not a literal list or tuple",
    )
    trials: int = 3
    seed: int = 42

    @property
    def name(self) -> str:
        return self.path.stem

    @property
    def sha(self) -> str:
        settings = self.model_dump_json(exclude={"source", "path"})
        return hashlib.sha256((self.source + "\0" + settings).encode()).hexdigest()[:16]

    def tolerance_for(self, dtype: str) -> Tolerance | None:
        return self.tolerances.get(dtype.removeprefix("torch."))


#: How `get_inputs()` draws one input, as far as its code shows:
#: - "normal": independent draws of ``torch.randn`` (or ``randn_like``, ``normal_``), possibly times or plus a
#:   constant: any permutation of the elements, and any positive scale, keeps it in the task's distribution's family;
#: - "iid": independent identically distributed elements of another kind (``torch.rand``, ``randint``, an
#:   elementwise function of such a draw): any permutation of the elements keeps its distribution;
#: - "structured": anything else (``torch.triu(...)``, a softmax, a sort, an input computed from another): only new
#:   draws of ``get_inputs()`` keep it in its distribution;
#: - "value": not drawn from torch (a literal, a module constant).
InputKind = Literal["normal", "iid", "structured", "value"]

_NORMAL_DRAWS = {"randn", "randn_like"}
_IID_DRAWS = {"rand", "rand_like", "randint", "randint_like", "bernoulli"}
_NORMAL_METHODS = {"normal_"}
_IID_METHODS = {"uniform_", "random_", "exponential_", "geometric_", "log_normal_", "cauchy_", "bernoulli_"}
#: tensor methods that keep each element's value (or map it on its own): what they are applied to keeps its kind
_KIND_KEEPING = {"cuda", "to", "float", "half", "double", "bfloat16", "contiguous", "requires_grad_", "clone", "detach"}
#: elementwise functions: of an iid draw, an iid draw (but no longer a normal one)
_ELEMENTWISE = {"abs", "exp", "log", "sqrt", "sigmoid", "tanh", "relu", "clamp", "clip", "sin", "cos", "sign", "round"}


def _is_scalar(node: ast.expr, consts: dict[str, object], local: set[str]) -> bool:
    """A number: a literal, a negated one, or a module constant that is a number (not a name of get_inputs')."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return _is_scalar(node.operand, consts, local)
    if isinstance(node, ast.Name):
        value = consts.get(node.id)
        return node.id not in local and isinstance(value, (int, float)) and not isinstance(value, bool)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow)):
        return _is_scalar(node.left, consts, local) and _is_scalar(node.right, consts, local)
    return False


def _sizes_only(args: list[ast.expr], local: set[str]) -> bool:
    """Arguments of a draw that read no tensor of get_inputs' own (sizes, dtypes, devices, bounds)."""
    return not any(isinstance(n, ast.Name) and n.id in local for a in args for n in ast.walk(a))


def _torch_call(node: ast.expr) -> str | None:
    """`torch.NAME(...)` -> NAME."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        owner = node.func.value
        if isinstance(owner, ast.Name) and owner.id == "torch":
            return node.func.attr
    return None


def _kind_of(node: ast.expr, consts: dict[str, object], local: set[str]) -> InputKind:
    """The kind of one expression get_inputs() returns (see `InputKind`)."""
    if _is_scalar(node, consts, local) or (isinstance(node, ast.Constant) and isinstance(node.value, (bool, str))):
        return "value"
    name = _torch_call(node)
    if name is not None and isinstance(node, ast.Call):
        args = list(node.args) + [k.value for k in node.keywords]
        if name in _NORMAL_DRAWS and _sizes_only(args, local):
            return "normal"
        if name in _IID_DRAWS and _sizes_only(args, local):
            return "iid"
        if name in _ELEMENTWISE and node.args:
            inner = _kind_of(node.args[0], consts, local)
            rest = list(node.args[1:]) + [k.value for k in node.keywords]
            if inner in ("normal", "iid") and all(_is_scalar(a, consts, local) for a in rest):
                return "iid"
        return "structured"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        method, owner = node.func.attr, node.func.value
        args = list(node.args) + [k.value for k in node.keywords]
        # torch.empty(...).normal_() and the like: a fresh tensor filled by a draw
        if method in _NORMAL_METHODS | _IID_METHODS and _torch_call(owner) in ("empty", "zeros", "ones"):
            if _sizes_only(list(owner.args) + [k.value for k in owner.keywords] + args, local):  # type: ignore[attr-defined]
                return "normal" if method in _NORMAL_METHODS else "iid"
        if method in _KIND_KEEPING and _sizes_only(args, local):
            return _kind_of(owner, consts, local)
        if method in _ELEMENTWISE and all(_is_scalar(a, consts, local) for a in args):
            inner = _kind_of(owner, consts, local)
            return "iid" if inner in ("normal", "iid") else "structured"
        return "structured"
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Div, ast.Add, ast.Sub)):
        for draw, other in ((node.left, node.right), (node.right, node.left)):
            if _is_scalar(other, consts, local):
                if isinstance(node.op, ast.Div) and draw is node.right:
                    break  # c / x: not an affine map of x
                inner = _kind_of(draw, consts, local)
                if inner in ("normal", "iid"):
                    return inner
        return "structured"
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return _kind_of(node.operand, consts, local)
    return "structured"


def input_kinds(tree: ast.Module, consts: dict[str, object], function: str = "get_inputs") -> list[InputKind] | None:
    """How `function` draws each input it returns (`InputKind`), from its code; None when it does not end in a
    literal list or tuple. A name returned is followed to its one assignment in the function; a name assigned more
    than once, inside a loop or a branch, or read by another returned expression, is "structured": its elements are
    tied to something else, and only a new draw keeps that tie."""
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function), None)
    if fn is None or not fn.body or not isinstance(fn.body[-1], ast.Return):
        return None
    ret = fn.body[-1].value
    if not isinstance(ret, (ast.List, ast.Tuple)):
        return None
    assigned: dict[str, list[ast.expr]] = {}
    nested: set[str] = set()
    for stmt in fn.body[:-1]:
        top = False
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            top = True
            assigned.setdefault(stmt.targets[0].id, []).append(stmt.value)
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and not top:
                nested.add(node.id)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and isinstance(node.target, ast.Name):
                nested.add(node.target.id)
    local = set(assigned) | nested
    readers: dict[str, int] = {}  # how many expressions (assignments and returned items) read each local name
    for exprs in [*assigned.values(), [e for e in ret.elts]]:
        for expr in exprs:
            for n in {m.id for m in ast.walk(expr) if isinstance(m, ast.Name) and m.id in local}:
                readers[n] = readers.get(n, 0) + 1
    kinds: list[InputKind] = []
    for elt in ret.elts:
        if isinstance(elt, ast.Starred):
            return None
        if isinstance(elt, ast.Name) and elt.id in local:
            values = assigned.get(elt.id, [])
            if elt.id in nested or len(values) != 1 or readers.get(elt.id, 0) > 1:
                kinds.append("structured")
                continue
            elt = values[0]
        kinds.append(_kind_of(elt, consts, local))
    return kinds


def _module_constants(tree: ast.Module) -> dict[str, object]:
    consts: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                consts[node.targets[0].id] = ast.literal_eval(node.value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                consts[node.targets[0].id] = None
    return consts


#: At most this many constants are varied by default (each at two other sizes).
MAX_DEFAULT_VARY = 3


def default_sizes(value: int) -> list[int]:
    """Two other sizes for a size constant: a smaller odd one and a larger odd one (odd sizes break
    hard-coded tile and vector-width assumptions; the larger one breaks hard-coded buffers)."""
    smaller = max(1, value // 2)
    smaller += 1 if smaller % 2 == 0 and smaller + 1 < value else 0
    larger = value + max(1, value // 4)
    larger += 1 if larger % 2 == 0 else 0
    return [v for v in (smaller, larger) if v != value]


def _names_used_by(tree: ast.Module, function: str) -> list[str]:
    """Module-level names read inside a top-level function, in order of first use."""
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function), None)
    if fn is None:
        return []
    seen: dict[str, None] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            seen.setdefault(node.id, None)
    return list(seen)


def _names_read_outside(tree: ast.Module, function: str) -> set[str]:
    """Names read anywhere in the module except inside the top-level function `function`."""
    names: set[str] = set()
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name == function:
            continue
        names.update(n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load))
    return names


def default_vary(tree: ast.Module, consts: dict[str, object]) -> dict[str, list[int]]:
    """The input-only size constants, each at `default_sizes`: module-level ints (not bools) that
    `get_inputs()` reads and nothing else does — not the constructor's arguments, not the Model's code.
    Those are the sizes a module is called at (a batch, a sequence length); the others shape the module
    itself, so a module at another value is another module."""
    elsewhere = _names_read_outside(tree, "get_inputs")
    out: dict[str, list[int]] = {}
    for name in _names_used_by(tree, "get_inputs"):
        value = consts.get(name)
        if name in elsewhere or not isinstance(value, int) or isinstance(value, bool) or value < 2:
            continue
        if len(out) < MAX_DEFAULT_VARY:
            out[name] = default_sizes(value)
    return out


#: tensor factories whose positional int arguments (or the ints of a tuple or list given first) are sizes
_SIZE_FACTORIES = frozenset({"randn", "rand", "zeros", "ones", "empty"})
#: ...and those that take the size as a `size=` keyword or their third positional argument
_SIZED_BY_KEYWORD = frozenset({"randint", "normal", "full"})


def _size_literals(fn: ast.FunctionDef) -> list[ast.Constant]:
    """The int literals (2 or more) that give a tensor's size in `torch.randn(16, 100)`, `torch.rand((8, 64))`,
    `torch.randint(0, 10, (16,))`..., in source order."""
    found: list[ast.Constant] = []

    def ints(node: ast.expr) -> None:
        elts = node.elts if isinstance(node, ast.Tuple | ast.List) else [node]
        found.extend(e for e in elts if isinstance(e, ast.Constant) and type(e.value) is int and e.value >= 2)

    for call in ast.walk(fn):
        if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Attribute):
            continue
        base, attr = call.func.value, call.func.attr
        if not (isinstance(base, ast.Name) and base.id == "torch"):
            continue
        if attr in _SIZE_FACTORIES:
            for arg in call.args:
                ints(arg)
        elif attr in _SIZED_BY_KEYWORD:
            if attr == "randint" and len(call.args) >= 3:
                ints(call.args[2])
            elif attr == "randint" and len(call.args) == 2 and isinstance(call.args[1], ast.Tuple | ast.List):
                ints(call.args[1])
            elif attr == "full" and call.args:
                ints(call.args[0])
        for kw in call.keywords:
            if kw.arg == "size" and (attr in _SIZE_FACTORIES or attr in _SIZED_BY_KEYWORD):
                ints(kw.value)
    return sorted(found, key=lambda c: (c.lineno, c.col_offset))


def inline_sizes(tree: ast.Module, consts: dict[str, object]) -> dict[str, int]:
    """The sizes get_inputs() writes as literals, one global name per distinct value (`inline_<value>`: every
    `16` of the function is one size, as a constant read twice would be), in order of first use. Names a module
    constant already has are left out."""
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "get_inputs"), None)
    if fn is None:
        return {}
    out: dict[str, int] = {}
    for c in _size_literals(fn):
        value = c.value
        assert isinstance(value, int)  # `_size_literals` keeps int constants only
        name = f"inline_{value}"
        if name not in consts:
            out.setdefault(name, value)
    return out


def lift_inline_sizes(source: str, sizes: dict[str, int]) -> ast.Module | None:
    """get_inputs() with each size literal of `sizes` read from the global of its name instead: a module of that
    one function, to execute in the task module's namespace (line numbers kept). None when there is nothing to
    lift."""
    if not sizes:
        return None
    tree = parse(source)
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "get_inputs"), None)
    if fn is None:
        return None
    by_value = {v: k for k, v in sizes.items()}
    targets = {id(c): by_value[c.value] for c in _size_literals(fn) if isinstance(c.value, int) and c.value in by_value}

    class Lift(ast.NodeTransformer):
        def visit_Constant(self, node: ast.Constant) -> ast.AST:  # noqa: N802 - ast's visitor naming
            name = targets.get(id(node))
            return ast.copy_location(ast.Name(id=name, ctx=ast.Load()), node) if name else node

    lifted = Lift().visit(fn)
    return ast.fix_missing_locations(ast.Module(body=[lifted], type_ignores=[]))


def load_task(
    path: str | Path,
    *,
    model_class: str | None = None,
    vary: dict[str, list[int]] | None = None,
    trials: int | None = None,
    input_sets: list[str | Path] | None = None,
    tolerances: dict[str, tuple[float, float]] | None = None,
) -> Task:
    """Read a KernelBench-style task file; keyword arguments override its ``FORGE`` settings."""
    path = Path(path).resolve()
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TaskError(f"cannot read task file {path}: {exc}") from exc
    if "\x00" in source:
        line = source.count("\n", 0, source.index("\x00")) + 1
        raise TaskError(f"{path}:{line}: not a Python source file: it holds a NUL byte (a binary file?)")
    try:
        tree = parse(source, filename=str(path))
    except SyntaxError as exc:
        where = f"{path}:{exc.lineno}" if exc.lineno else str(path)
        raise TaskError(f"{where}: syntax error in task file: {exc.msg}") from exc

    classes = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    cls = model_class or "Model"
    if cls not in classes:
        raise TaskError(
            f"{path}: no class {cls!r} at module level"
            + (f" (classes found: {', '.join(sorted(classes))})" if classes else "")
        )
    missing = [fn for fn in ("get_inputs", "get_init_inputs") if fn not in functions]
    if missing:
        raise TaskError(
            f"{path}: missing {' and '.join(f'{m}()' for m in missing)}; a task needs "
            "get_inputs() returning the forward arguments and get_init_inputs() returning "
            "the constructor arguments"
        )

    consts = _module_constants(tree)
    settings = consts.get("FORGE") or {}
    if not isinstance(settings, dict):
        raise TaskError(f"{path}: FORGE must be a literal dict")

    explicit = vary if vary is not None else settings.get("vary")
    if explicit is False:  # FORGE = {"vary": False}: verify at the task's own sizes only
        explicit = {}
    task_vary: dict[str, list[int]] = (
        {k: list(v) for k, v in explicit.items()} if explicit is not None else default_vary(tree, consts)
    )
    inline: dict[str, int] = {}
    if explicit is None and not task_vary:
        # no size constant to vary: the sizes written inline in get_inputs(), where the reference allows others
        inline = dict(list(inline_sizes(tree, consts).items())[:MAX_DEFAULT_VARY])
        task_vary = {name: default_sizes(value) for name, value in inline.items()}
    for name, values in task_vary.items():
        if name in inline:
            continue
        if name not in consts:
            raise TaskError(f"{path}: vary names {name!r}, which is not a module-level constant")
        if not isinstance(consts[name], int) or not all(isinstance(v, int) and v > 0 for v in values):
            raise TaskError(f"{path}: vary[{name!r}] needs an int constant and positive int values")

    tol = dict(DEFAULT_TOLERANCES)
    for dtype, pair in (tolerances or settings.get("tolerances") or {}).items():
        atol, rtol = pair
        tol[dtype.removeprefix("torch.")] = Tolerance(atol=float(atol), rtol=float(rtol))

    sets: list[InputSet] = []
    for p in input_sets if input_sets is not None else settings.get("input_sets", []):
        p = Path(p)
        p = p if p.is_absolute() else (path.parent / p)
        if not p.is_file():
            raise TaskError(f"{path}: captured input set {p} does not exist")
        sets.append(InputSet(name=p.stem, path=p.resolve()))

    n_trials = trials if trials is not None else int(settings.get("trials", 3))
    if n_trials < 1:
        raise TaskError("trials must be at least 1")
    return Task(
        path=path,
        source=source,
        model_class=cls,
        tolerances=tol,
        input_sets=sets,
        vary=task_vary,
        vary_default=explicit is None,
        inline_sizes=inline,
        trials=n_trials,
        input_kinds=input_kinds(tree, consts),
    )
