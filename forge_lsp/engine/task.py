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

from pydantic import BaseModel, Field

from ..parsing import parse


class TaskError(ValueError):
    """The task file cannot be used; the message says what to change."""


class Tolerance(BaseModel):
    atol: float
    rtol: float


#: Default tolerances per output dtype. ``atol`` is scaled by max(1, rms(reference)) so that
#: large-magnitude outputs (sums, matmuls) are judged relative to their scale.
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
    try:
        tree = parse(source, filename=str(path))
    except SyntaxError as exc:
        raise TaskError(f"{path}:{exc.lineno}: syntax error in task file: {exc.msg}") from exc

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
    for name, values in task_vary.items():
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
        trials=n_trials,
    )
